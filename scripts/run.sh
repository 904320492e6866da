#!/usr/bin/env bash
# The main job. Builds joularcode-bpf (after installing what it needs, scripts/setup.sh), then:
#
#   sudo scripts/run.sh                 profiles a demo Java program for 10 s and shows where its
#                                       energy went (the power source is `auto`: RAPL, the perf
#                                       power PMU, PowerJoular's ring buffer, else an estimate)
#   sudo scripts/run.sh ARGS...         runs `joularcode-bpf ARGS...`, e.g. `record --pid 1234`
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$JOULAR_ROOT"
build_profiler
profiler="$JOULAR_ROOT/target/release/joularcode-bpf"
if [ $# -gt 0 ]; then
    exec "$profiler" "$@"
fi

demo="$JOULAR_ROOT/target/demo"
rm -rf "$demo/results"
mkdir -p "$demo/classes"
"$JOULAR_JDK17/bin/javac" --release 17 -d "$demo/classes" testkit/java/DemoShop.java
echo "== joularcode-bpf record -- java DemoShop 10 (results in $demo/results)"
"$profiler" record --results-path "$demo/results" --methods-filtering-prefix DemoShop \
    -- "$JOULAR_JDK17/bin/java" -cp "$demo/classes" DemoShop 10
echo
echo "== joularcode-bpf report $demo/results"
"$profiler" report "$demo/results"
