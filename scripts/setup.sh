#!/usr/bin/env bash
# Installs what building and running joularcode-bpf need, when it is missing, and exports where
# the JDK is. Sourced by scripts/run.sh, and by scripts/test-setup.sh (which adds what the tests
# need); safe to run again.
#
#   apt: clang, libelf-dev, zlib1g-dev, pkg-config, make, gcc (the BPF programs and libbpf),
#        OpenJDK 17 with javac (the demo)
#   Rust: cargo must be there (https://rustup.rs)
set -euo pipefail

JOULAR_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export JOULAR_ROOT

setup_fail() {
    echo "setup: $*" >&2
    exit 1
}

# Installs the Debian packages among "$@" that are missing, with the apt-get options in
# $apt_options; `extra` adds packages to install whatever.
apt_install() {
    local missing=() pkg
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    missing+=(${extra[@]+"${extra[@]}"})
    [ ${#missing[@]} -gt 0 ] || return 0
    if [ "$(id -u)" -ne 0 ]; then
        setup_fail "missing packages: ${missing[*]}. Run as root, or: sudo apt-get install -y $apt_options ${missing[*]}"
    fi
    echo "setup: installing ${missing[*]}" >&2
    apt-get update -qq >&2 || setup_fail "apt-get update failed"
    # shellcheck disable=SC2086 # the options are words
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $apt_options "${missing[@]}" >&2 \
        || setup_fail "apt-get install ${missing[*]} failed"
}

apt_options=""
extra=()
apt_install clang libelf-dev zlib1g-dev pkg-config make gcc openjdk-17-jdk-headless

command -v cargo >/dev/null 2>&1 || [ -x "$HOME/.cargo/bin/cargo" ] \
    || setup_fail "cargo is missing: install Rust (https://rustup.rs), then run this again"
export PATH="$HOME/.cargo/bin:$PATH"

# The version of Cargo.toml, which the binary, the package and the image carry
JOULAR_VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$JOULAR_ROOT/Cargo.toml" | head -n 1)
[ -n "$JOULAR_VERSION" ] || setup_fail "no version in $JOULAR_ROOT/Cargo.toml"
export JOULAR_VERSION

# Builds target/release/joularcode-bpf, one file that carries the agent and the BPF programs
build_profiler() {
    (cd "$JOULAR_ROOT" && cargo build --release --quiet -p joularcode-bpf) \
        || setup_fail "cargo build --release -p joularcode-bpf failed"
}

JOULAR_JDK17="${JOULAR_JDK17:-/usr/lib/jvm/java-17-openjdk-amd64}"
[ -x "$JOULAR_JDK17/bin/javac" ] || setup_fail "no javac 17 at $JOULAR_JDK17: install openjdk-17-jdk-headless or set JOULAR_JDK17"
export JOULAR_JDK17

