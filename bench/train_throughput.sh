#!/usr/bin/env bash
# Single-thread training tokens/s of configs/tiny-single.toml: swarmrt (C++) against the same model in
# Python PyTorch on the same libtorch (Debian's python3-torch). Runs alternate, ROUNDS times
# each, and the median is reported, because a shared VM's speed drifts between runs.
# Usage: bench/train_throughput.sh [ROUNDS] [STEPS]   -> table + bench/results/train_throughput.json
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
install_deps python3-torch
build
scripts/fetch_data.sh
rounds=${1:-3} steps=${2:-30}
export OPENBLAS_NUM_THREADS=1
cpp=() py=()
for r in $(seq "$rounds"); do
  cpp+=("$(build/bin/bench_train_throughput configs/tiny-single.toml "$steps" 5 1)")
  py+=("$(/usr/bin/python3 bench/py_train_throughput.py data/brown.txt "$steps" 5 1 4 4 128 128 16)")
done
machine=$(bench/machine.sh)
/usr/bin/python3 - "$machine" "${#cpp[@]}" "${cpp[@]}" "${py[@]}" <<'PY'
import json, statistics, sys
machine = json.loads(sys.argv[1]); n = int(sys.argv[2])
cpp = [json.loads(x) for x in sys.argv[3:3 + n]]; py = [json.loads(x) for x in sys.argv[3 + n:]]
med = lambda runs: statistics.median(r["tokens_per_s"] for r in runs)
c, p = med(cpp), med(py)
print(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB")
print(f"{'implementation':<26}{'threads':>8}{'tokens/s (median)':>20}{'runs':>30}")
runs = lambda rs: " ".join("%.0f" % r["tokens_per_s"] for r in rs)
print(f"{'swarmrt (C++ libtorch)':<26}{1:>8}{c:>20.0f}{runs(cpp):>30}")
print(f"{'Python PyTorch':<26}{1:>8}{p:>20.0f}{runs(py):>30}")
print(f"ratio swarmrt / Python: {c / p:.3f}")
json.dump({"benchmark": "train_throughput", "config": "configs/tiny-single.toml", "machine": machine,
           "swarmrt_tokens_per_s": c, "python_tokens_per_s": p, "ratio": c / p,
           "runs": {"swarmrt": cpp, "python": py}}, open("bench/results/train_throughput.json", "w"), indent=1)
print("wrote bench/results/train_throughput.json")
PY
