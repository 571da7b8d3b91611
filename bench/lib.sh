# A benchmark script's start, sourced first: strict mode, the checkout's root as the working
# directory, and scripts/common.sh (install_deps, prepare_build, prepare_bench, ...).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh

# summarize RUNS [ARGS...] <<'PY' ... PY: runs the Python on stdin with json, statistics and sys
# imported, `machine` (bench/machine.sh's JSON) and `runs` (RUNS: a JSON object a line); ARGS
# follow in sys.argv[3:].
summarize() {
  local code
  code=$(cat)
  python3 -c "import json, statistics, sys
machine = json.loads(sys.argv[1])
runs = [json.loads(l) for l in open(sys.argv[2])]
$code" "$(bench/machine.sh)" "$@"
}

# bench_scratch: $out (a file for the runs' JSON lines) and $tmp (a directory), removed at
# exit with every process whose pid is in $pids, killed first.
bench_scratch() {
  out=$(mktemp) tmp=$(mktemp -d)
  pids=()
  trap 'for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; rm -rf "$tmp" "$out"' EXIT
}
