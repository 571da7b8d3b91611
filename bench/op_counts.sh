#!/usr/bin/env bash
# ATen operations per micro-batch: the model library's own loop against one worker of the actor
# runtime (`swarm` 1x1 in one process), on configs/tiny.toml in fp32 and bf16 and at
# gpt2-small's depth (12 layers, narrow). On a GPU every operation is a launch the host queues,
# and at small micro-batches the host is what limits a step: what the runtime adds here is host
# time a GPU waits for. The runtime's count includes its final validation batch.
# Usage: bench/op_counts.sh [STEPS]  -> table + bench/results/op_counts.json
source "$(dirname "$0")/lib.sh"
prepare_bench
steps=${1:-4}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run() {
  local name=$1
  shift
  build/bin/bench_op_counts "$@" | sed "s/^{/{\"case\":\"$name\",/" >>"$out"
}
run "tiny fp32" configs/tiny.toml "$steps"
run "tiny bf16" configs/tiny.toml "$steps" 'train.precision="bf16"'
run "12 layers bf16" configs/tiny.toml "$steps" 'train.precision="bf16"' model.n_layer=12
summarize "$out" <<'PY'
print(f"machine: {machine['cpu']}, {machine['cores']} cores; OpenBLAS kernels {machine.get('blas', '?')}")
print(f"{'case':<16}{'model loop':>12}{'runtime':>10}{'ratio':>8}   runtime's largest additions per micro-batch")
for r in runs:
    loop, rt = r["loop_ops_per_micro_batch"], r["runtime_ops_per_micro_batch"]
    added = sorted(r["differ"].items(), key=lambda kv: -(kv[1][1] - kv[1][0]))[:4]
    print(f"{r['case']:<16}{loop:>12.0f}{rt:>10.0f}{rt / loop:>8.3f}   "
          + ", ".join(f"{k} {v[1] - v[0]:+.1f}" for k, v in added))
json.dump({"benchmark": "op_counts", "machine": machine, "runs": runs},
          open("bench/results/op_counts.json", "w"), indent=1)
print("wrote bench/results/op_counts.json")
PY
