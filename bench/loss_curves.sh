#!/usr/bin/env bash
# The README's two charts, and the final validation losses behind them:
#   docs/img/modes.png  configs/tiny.toml (300 steps, 2048 tokens a step) trained as `single`
#                       (one process, no actors), `pp` 2x1, `diloco-swarm` 2x2 (H = 25) and
#                       Streaming DiLoCo (the same swarm, 2 fragments per stage, overlap 1 step,
#                       fp4 pseudo-gradients), loss against tokens
#   docs/img/chaos.png  the diloco-swarm run again with a random actor of the swarm killed every
#                       CHAOS_S seconds: the kills and recoveries marked on the curve
# `single` gets both cores (train.threads = 2); the swarms run one thread per worker.
# Usage: bench/loss_curves.sh [STEPS] [CHAOS_S] [CHART_DIR]
#   -> CHART_DIR/modes.png, CHART_DIR/chaos.png (default docs/img) + bench/results/loss_curves.json
source "$(dirname "$0")/lib.sh"
prepare_bench
steps=${1:-300} chaos_s=${2:-2} charts=${3:-docs/img}
bin=build/bin/swarmrt
runs=runs/loss_curves
mkdir -p "$runs" "$charts"
common=(--config configs/tiny.toml --set train.steps="$steps" --set train.log_every=10
  --set checkpoint.every_steps=0 --sample-tokens 0 --overwrite)
declare -A sets=(
  [single]="swarm.mode=single swarm.stages=1 swarm.workers_per_stage=1 train.threads=2"
  [pp]="swarm.mode=pp swarm.workers_per_stage=1"
  [diloco-swarm]=""
  [streaming]="diloco.fragments=2 diloco.overlap_steps=1 diloco.quantize=fp4"
  [chaos]="chaos.kill=any chaos.kill_every_s=$chaos_s"
)
for run in single pp diloco-swarm streaming chaos; do
  extra=()
  for s in ${sets[$run]}; do extra+=(--set "$s"); done
  echo "training $run ($steps steps)" >&2
  "$bin" train "${common[@]}" "${extra[@]}" --out "$runs/$run" > "$runs/$run.log" 2>&1 ||
    { echo "$run failed; its log: $runs/$run.log" >&2; tail -5 "$runs/$run.log" >&2; exit 1; }
done
"$bin" plot "$runs/single" "$runs/pp" "$runs/diloco-swarm" "$runs/streaming" \
  --out "$charts/modes.png" --smooth 10 --width 1100 --height 900 \
  --title "configs/tiny.toml: single vs pp vs diloco-swarm vs Streaming DiLoCo"
"$bin" plot "$runs/diloco-swarm" "$runs/chaos" --out "$charts/chaos.png" --smooth 10 \
  --width 1100 --height 900 --title "diloco-swarm 2x2, a random actor killed every ${chaos_s} s"
machine=$(bench/machine.sh)
python3 - "$machine" "$runs" "$steps" "$chaos_s" "$charts" <<'PY'
import json, sys
machine, runs, steps, chaos_s = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
charts = sys.argv[5]
rows = []
print(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB")
print(f"{'run':<14}{'final val loss':>16}{'vs single':>11}{'tokens/s':>10}{'faults':>8}{'recovered':>11}")
base = None
for run in ["single", "pp", "diloco-swarm", "streaming", "chaos"]:
    recs = [json.loads(l) for l in open(f"{runs}/{run}/metrics.jsonl") if l.strip()]
    val = [r["val_loss"] for r in recs if r.get("event") == "eval"][-1]
    stepr = [r for r in recs if r.get("event") == "step"]
    tps = stepr[-1]["tokens"] / stepr[-1]["time_s"]
    faults = sum(r.get("event") == "fault" for r in recs)
    recovered = sum(r.get("event") == "recovered" for r in recs)
    base = base or val
    rows.append({"run": run, "val_loss": val, "ratio_to_single": val / base, "tokens_per_s": tps,
                 "faults": faults, "recovered": recovered})
    print(f"{run:<14}{val:>16.4f}{val / base:>11.3f}{tps:>10.0f}{faults:>8}{recovered:>11}")
json.dump({"benchmark": "loss_curves", "config": "configs/tiny.toml", "steps": steps,
           "chaos_kill_every_s": float(chaos_s), "machine": machine, "rows": rows,
           "charts": [f"{charts}/modes.png", f"{charts}/chaos.png"]},
          open("bench/results/loss_curves.json", "w"), indent=1)
print(f"wrote {charts}/modes.png, {charts}/chaos.png and bench/results/loss_curves.json")
PY
