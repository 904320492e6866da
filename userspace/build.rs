//! Builds what the binary carries inside it:
//!
//! - the eBPF programs of `bpf/`, compiled with clang, and their Rust skeletons (which embed the
//!   BPF objects);
//! - the symbolizer agent (`jvm-symbolizer-agent`, a cdylib), built by a Cargo of its own into
//!   `OUT_DIR` and embedded by `agent_library` (`include_bytes!`): a build script cannot depend
//!   on another crate's cdylib on stable Cargo, so it runs `cargo build` for it, with the same
//!   compiler, profile, target and jobserver (not the same RUSTFLAGS), in a target folder of its
//!   own (the outer build holds the lock of the workspace's), without its debug information;
//! - the git commit of the source, for `--version` (`unknown` outside a git checkout of this
//!   workspace, such as an unpacked source package).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

use libbpf_cargo::SkeletonBuilder;

/// Each BPF object: its source, and the skeleton generated for it.
const OBJECTS: [(&str, &str); 2] = [
    ("../bpf/sampler.bpf.c", "sampler.skel.rs"),
    ("../bpf/processes.bpf.c", "processes.skel.rs"),
];

/// The agent's file name, as Cargo builds it and as `agent_library` includes it from `OUT_DIR`.
const AGENT: &str = "libjvm_symbolizer_agent.so";

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
    build_agent(&out);
    println!("cargo:rustc-env=JOULARCODE_BPF_COMMIT={}", commit());
}

/// Builds the agent with the Cargo that runs this script, and copies it to `out`.
fn build_agent(out: &Path) {
    let manifest = Path::new("../jvm-symbolizer-agent/Cargo.toml");
    let target = env::var("TARGET").expect("cargo sets TARGET");
    let profile = env::var("PROFILE").expect("cargo sets PROFILE");
    let target_dir = out.join("agent");
    let mut cargo = Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo
        .args(["build", "--quiet", "--lib", "--manifest-path"])
        .arg(manifest)
        .args(["--target", &target, "--target-dir"])
        .arg(&target_dir)
        // clippy's driver lints the workspace's own build, not this one; the flags given to the
        // build that embeds it (a fuzzer's sanitizers) are not for a library loaded into JVMs
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET")
        // Its symbols are kept, its debug information (most of its size) left out
        .env("CARGO_PROFILE_RELEASE_STRIP", "debuginfo")
        .env("CARGO_PROFILE_DEV_STRIP", "debuginfo");
    if profile == "release" {
        cargo.arg("--release");
    }
    let status = cargo
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build the symbolizer agent: {e}"));
    assert!(
        status.success(),
        "cargo build --manifest-path {} failed: the binary embeds the agent, which must build",
        manifest.display()
    );
    let built = target_dir.join(&target).join(&profile).join(AGENT);
    std::fs::copy(&built, out.join(AGENT))
        .unwrap_or_else(|e| panic!("cannot copy the agent {}: {e}", built.display()));
    for path in [
        "../jvm-symbolizer-agent/src",
        "../jvm-symbolizer-agent/Cargo.toml",
        "../core/src",
        "../core/Cargo.toml",
        "../Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={path}");
    }
}

/// The commit of the source (12 hex digits), or `unknown` when the source is not a git checkout
/// of this workspace (a folder of another repository's checkout, or no git at all).
fn commit() -> String {
    let workspace = Path::new("..").canonicalize().ok();
    let git = |args: &[&str]| -> Option<String> {
        let output = Command::new("git")
            .arg("-C")
            .arg("..")
            .args(args)
            .output()
            .ok()?;
        let text = String::from_utf8(output.stdout).ok()?;
        output.status.success().then(|| text.trim().to_string())
    };
    let ours = git(&["rev-parse", "--show-toplevel"])
        .and_then(|top| Path::new(&top).canonicalize().ok())
        .is_some_and(|top| Some(top) == workspace);
    let commit = ours
        .then(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .flatten()
        .filter(|hash| hash.len() == 12 && hash.bytes().all(|b| b.is_ascii_hexdigit()));
    // A new commit moves HEAD, or the branch HEAD names (a loose or a packed ref)
    let branch = ours
        .then(|| git(&["rev-parse", "--symbolic-full-name", "HEAD"]))
        .flatten();
    for file in ["HEAD", "packed-refs"].into_iter().chain(branch.as_deref()) {
        let path = ours
            .then(|| git(&["rev-parse", "--git-path", file]))
            .flatten();
        if let Some(path) = path.map(|path| Path::new("..").join(path)) {
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
    commit.unwrap_or_else(|| "unknown".into())
}
