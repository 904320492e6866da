//! Compiles the eBPF programs of `bpf/` with clang and generates their Rust skeleton.

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const SOURCE: &str = "../bpf/sampler.bpf.c";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    SkeletonBuilder::new()
        .source(SOURCE)
        .clang_args(["-I../bpf", "-Wall", "-Werror"])
        .build_and_generate(out.join("sampler.skel.rs"))
        .unwrap_or_else(|e| {
            panic!("cannot build {SOURCE} with clang (apt-get install clang libelf-dev): {e:#}")
        });
    println!("cargo:rerun-if-changed=../bpf");
}
