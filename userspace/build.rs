//! Compiles the eBPF programs of `bpf/` with clang and generates their Rust skeletons.

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

/// Each BPF object: its source, and the skeleton generated for it.
const OBJECTS: [(&str, &str); 2] = [
    ("../bpf/sampler.bpf.c", "sampler.skel.rs"),
    ("../bpf/processes.bpf.c", "processes.skel.rs"),
];

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for (source, skeleton) in OBJECTS {
        SkeletonBuilder::new()
            .source(source)
            .clang_args(["-I../bpf", "-Wall", "-Werror"])
            .build_and_generate(out.join(skeleton))
            .unwrap_or_else(|e| {
                panic!("cannot build {source} with clang (apt-get install clang libelf-dev): {e:#}")
            });
    }
    println!("cargo:rerun-if-changed=../bpf");
}
