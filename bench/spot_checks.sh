#!/usr/bin/env bash
# Spot checks of stage work (#61, docs/security.md): configs/byzantine.toml as `swarm` (2 stages
# x 4 workers, tiny model, 8 micro-batches a step, uniform wiring so every worker takes work),
# one process a run:
#   off      verify.fraction = 0
#   on       verify.fraction = FRACTION (0.05), nobody lies: what the checks cost in tokens/s
#   attack   the same with the first worker of each stage adding noise of 1x their RMS to the
#            hops it sends from step 50 (chaos.hop_noise; stage 0's are activations, which the
#            checks cover; stage 1's are input gradients, which they do not): when the liar is
#            banned, and the final validation loss
# off and on alternate ROUNDS times (3); tokens/s leaves out the first 2 steps. Checks drawn
# from verify.seed = 1.
# Usage: bench/spot_checks.sh [STEPS (200)] [ROUNDS (3)] [FRACTION (0.05)]
#   -> table + bench/results/spot_checks.json
source "$(dirname "$0")/lib.sh"
prepare_bench
bin=${SWARMRT_BIN:-build/bin/swarmrt}
steps=${1:-200} rounds=${2:-3} fraction=${3:-0.05}
[[ $steps =~ ^[1-9][0-9]*$ && $steps -gt 60 && $rounds =~ ^[1-9][0-9]*$ ]] ||
  { echo "usage: bench/spot_checks.sh [STEPS > 60] [ROUNDS] [FRACTION]" >&2; exit 2; }
export OPENBLAS_NUM_THREADS=1 FRACTION=$fraction
unset SWARMRT_SECRET SWARMRT_SECRET_FILE
out=runs/bench_spot_checks
mkdir -p "$out"
rows=$out/rows.jsonl
: >"$rows"

run() {  # NAME SETTINGS...
  local name=$1
  shift
  echo "$name" >&2
  "$bin" train -c configs/byzantine.toml --set train.steps="$steps" --set swarm.mode=swarm \
    --set swarm.wiring=uniform --set swarm.grad_aggregate=mean --set chaos.malicious=none \
    --set verify.seed=1 --set train.eval_every="$steps" --sample-tokens 0 "$@" \
    -o "$out/$name" --overwrite >"$out/$name.log" 2>&1 ||
    { echo "$name failed; its log: $out/$name.log" >&2; return 1; }
  python3 - "$out/$name" "$name" >>"$rows" <<'PY'
import json, sys
run, name = sys.argv[1:3]
recs = [json.loads(l) for l in open(f"{run}/metrics.jsonl") if l.strip()]
steps = [r for r in recs if r.get("event") == "step"]
evals = [r for r in recs if "val_loss" in r]
bans = [r for r in recs if r.get("kind") == "banned"]
tally = steps[-1].get("spot_checks", {})
print(json.dumps({"name": name.split("#")[0], "steps": len(steps),
                  "val_loss": evals[-1]["val_loss"],
                  "tokens_per_s": (steps[-1]["tokens"] - steps[1]["tokens"]) /
                                  (steps[-1]["time_s"] - steps[1]["time_s"]),
                  "checks": tally.get("checks", 0), "mismatches": tally.get("mismatches", 0),
                  "expired": tally.get("expired", 0),
                  "bans": [{"worker": b["worker"], "step": b["step"]} for b in bans],
                  "extra_samples": sum(r["extra_samples"] for r in steps),
                  "missing_samples": sum(r["missing_samples"] for r in steps)}))
PY
}

for i in $(seq 1 "$rounds"); do
  run "off#$i" --set verify.fraction=0
  run "on#$i" --set verify.fraction="$fraction"
done
run attack --set verify.fraction="$fraction" --set chaos.hop_noise=1.0 \
  --set chaos.malicious_from_step=50

summarize "$rows" <<'PY'
import os, statistics
print(f"machine: {machine['cpu']}, {machine['cores']} cores")
print(f"{'run':<8} {'tokens/s':>9} {'checks':>7} {'mismatch':>8} {'bans':<22} {'val loss':>9}")
for r in runs:
    bans = ", ".join(f"worker {b['worker']} at step {b['step']}" for b in r["bans"]) or "-"
    print(f"{r['name']:<8} {r['tokens_per_s']:>9.0f} {r['checks']:>7} {r['mismatches']:>8} "
          f"{bans:<22} {r['val_loss']:>9.4f}")
off = [r["tokens_per_s"] for r in runs if r["name"] == "off"]
on = [r["tokens_per_s"] for r in runs if r["name"] == "on"]
ratio = statistics.mean(on) / statistics.mean(off)
print(f"tokens/s with checks at fraction {os.environ['FRACTION']}: {ratio:.3f}x of checks off "
      f"(means of {len(on)} alternated runs)")
json.dump({"machine": machine, "config": "configs/byzantine.toml as swarm",
           "fraction": float(os.environ["FRACTION"]), "tokens_per_s_ratio": ratio, "runs": runs},
          open("bench/results/spot_checks.json", "w"), indent=1)
print("-> bench/results/spot_checks.json")
PY
