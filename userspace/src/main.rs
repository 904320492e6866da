//! The `joularcode-bpf` command.

fn main() {
    println!("joularcode-bpf {}", env!("CARGO_PKG_VERSION"));
}
