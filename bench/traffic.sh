#!/usr/bin/env bash
# Bytes every actor sends, by kind, for swarm 2x2 (gradient all-reduce every step) against
# diloco-swarm 2x2 (an outer round every H steps), same model, data and steps.
# Usage: bench/traffic.sh [STEPS] [H]  -> table + bench/results/traffic.json
source "$(dirname "$0")/lib.sh"
prepare_bench
steps=${1:-100} h=${2:-25}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for mode in swarm diloco-swarm; do
  build/bin/swarmrt train -c configs/tiny.toml -o "$tmp/$mode" --sample-tokens 0 \
    --set swarm.mode="$mode" --set train.steps="$steps" --set diloco.inner_steps="$h" \
    --set train.eval_every=0 --set train.eval_batches=4 >"$tmp/$mode.log" 2>&1
done
python3 - "$(bench/machine.sh)" "$tmp" "$steps" "$h" <<'PY'
import json, sys
machine, tmp, steps, h = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rows = {}
for mode in ("swarm", "diloco-swarm"):
    recs = [json.loads(l) for l in open(f"{tmp}/{mode}/metrics.jsonl")]
    last = [r for r in recs if r["event"] == "step"][-1]
    val = [r for r in recs if r["event"] == "eval"][-1]["val_loss"]
    rows[mode] = dict(last["bytes"], val_loss=val)
kinds = ["activations", "gradients", "pseudo_gradients", "parameters", "control"]
print(f"machine: {machine['cpu']}, {machine['cores']} cores; tiny model, 2x2, {steps} steps, H={h}")
print(f"{'mode':<14}" + "".join(f"{k:>20}" for k in kinds) + f"{'val loss':>10}")
for mode, r in rows.items():
    print(f"{mode:<14}" + "".join(f"{r[k] / 1e6:>17.1f} MB" for k in kinds) + f"{r['val_loss']:>10.4f}")
# Backward hops between stages carry the same bytes in both modes, so the all-reduce traffic of
# swarm is its gradient bytes beyond diloco-swarm's; DiLoCo's sync is pseudo-gradients + theta.
allreduce = rows["swarm"]["gradients"] - rows["diloco-swarm"]["gradients"]
outer = rows["diloco-swarm"]["pseudo_gradients"] + rows["diloco-swarm"]["parameters"]
print(f"stage sync traffic: swarm all-reduce {allreduce / 1e6:.1f} MB, DiLoCo rounds {outer / 1e6:.1f} MB"
      f" ({allreduce / outer:.1f}x less with H={h})")
rows["sync"] = {"swarm_allreduce": allreduce, "diloco_rounds": outer, "ratio": allreduce / outer}
json.dump({"benchmark": "traffic", "steps": steps, "inner_steps": h, "machine": machine, "bytes": rows},
          open("bench/results/traffic.json", "w"), indent=1)
print("wrote bench/results/traffic.json")
PY
