//! Compiles `bpf/stack_copy.bpf.c`, the stack-copy sampler that `walk_cost` measures against the
//! BPF stack walker, and generates its Rust skeleton.

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const SOURCE: &str = "bpf/stack_copy.bpf.c";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    SkeletonBuilder::new()
        .source(SOURCE)
        .clang_args(["-I../bpf", "-Wall", "-Werror"])
        .build_and_generate(out.join("stack_copy.skel.rs"))
        .unwrap_or_else(|e| {
            panic!("cannot build {SOURCE} with clang (apt-get install clang libelf-dev): {e:#}")
        });
    println!("cargo:rerun-if-changed=bpf");
}
