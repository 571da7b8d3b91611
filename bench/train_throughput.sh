#!/usr/bin/env bash
# Training tokens/s of the tiny model in one process, three contenders on the same libtorch and
# the same bytes, 16 x 128 tokens per step as 2 micro-batches of 8:
#   swarmrt              configs/tiny-single.toml (its trainer's step: forward, backward, clip, AdamW)
#   Python replica       the same model and optimizer in Python PyTorch (bench/py_train_throughput.py)
#   reference loop       the DiLoCo-SWARM reference's choices (tied weights, torch's AdamW defaults,
#                        lr 1e-3; bench/ref_train_throughput.py)
# at 1 and 2 threads, each contender's threads given to OpenBLAS with torch's pool at one (the
# layout model/threads.cpp chose). Runs alternate, ROUNDS times each, and the median is
# reported, because a shared VM's speed drifts between runs.
# Usage: bench/train_throughput.sh [ROUNDS] [STEPS]   -> table + bench/results/train_throughput.json
source "$(dirname "$0")/lib.sh"
prepare_bench python3-torch
# The Python contenders load the same OpenBLAS, which on a CPU model it does not know falls back
# to its SSE3 kernels; swarmrt's processes replace those (model/threads.hpp). Every contender
# gets the kernels swarmrt chose, so that all of them run the same GEMMs.
blas=$(bench/machine.sh | python3 -c 'import json, sys; print(json.load(sys.stdin)["blas"])')
[ "$blas" = unknown ] || export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$blas}
rounds=${1:-3} steps=${2:-30}
shape=(train.micro_batch=8 train.micro_batches=2 train.lr=1e-3)
runs=()
for threads in 1 2; do
  for r in $(seq "$rounds"); do
    echo "threads $threads, round $r/$rounds" >&2
    runs+=("$(OPENBLAS_NUM_THREADS=$threads build/bin/bench_train_throughput \
      configs/tiny-single.toml "$steps" 5 "$threads" "${shape[@]}")")
    runs+=("$(OPENBLAS_NUM_THREADS=$threads /usr/bin/python3 bench/py_train_throughput.py \
      data/brown.txt "$steps" 5 "$threads" 4 4 128 128 8 2 1e-3)")
    runs+=("$(OPENBLAS_NUM_THREADS=$threads /usr/bin/python3 bench/ref_train_throughput.py \
      data/brown.txt "$steps" 5 "$threads")")
  done
done
machine=$(bench/machine.sh)
/usr/bin/python3 - "$machine" "${runs[@]}" <<'PY'
import json, statistics, sys
machine = json.loads(sys.argv[1]); runs = [json.loads(x) for x in sys.argv[2:]]
names = {"swarmrt-cpp": "swarmrt (C++ libtorch)", "python-pytorch": "Python replica",
         "reference-loop": "reference loop (Python)"}
print(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB")
print(f"{'implementation':<26}{'threads':>8}{'tokens/s (median)':>19}{'vs swarmrt':>12}   runs")
rows = []
for threads in (1, 2):
    ours = None
    for impl, label in names.items():
        rs = [r for r in runs if r["impl"] == impl and r["threads"] == threads]
        med = statistics.median(r["tokens_per_s"] for r in rs)
        ours = ours or med
        rows.append({"implementation": impl, "threads": threads, "tokens_per_s": med,
                     "ratio_to_swarmrt": med / ours, "runs": [r["tokens_per_s"] for r in rs]})
        print(f"{label:<26}{threads:>8}{med:>19.0f}{med / ours:>12.3f}   "
              + " ".join("%.0f" % r["tokens_per_s"] for r in rs))
json.dump({"benchmark": "train_throughput", "config": "configs/tiny-single.toml",
           "shape": "16 x 128 tokens per step, 2 micro-batches of 8", "machine": machine,
           "rows": rows, "runs": runs}, open("bench/results/train_throughput.json", "w"), indent=1)
print("wrote bench/results/train_throughput.json")
PY
