#!/usr/bin/env bash
# A worker that lies (#61): configs/byzantine.toml (diloco-swarm 2x4 on the tiny model, 600
# steps) where the first worker of each stage sends its pseudo-gradient sign-flipped x10 from
# step 100, four ways, one process each:
#   honest-mean   chaos.malicious = none, diloco.aggregate = mean (the baseline)
#   honest-clip   chaos.malicious = none, centered_clip + clip_drop (what the defence costs
#                 when no one lies)
#   attack-mean   the attacker, mean (no defence)
#   attack-clip   the attacker, centered_clip + clip_drop (the config as shipped)
# with VARIANTS = 1 also the attacker under CenteredClip alone (clip_drop = 0) and under the
# trimmed mean, and with MANY = 1 two of the 4 workers of each stage malicious (4 of 8: as many
# liars as honest workers, past what any of these can outvote). Per run: final validation loss,
# its gap to honest-mean, tokens/s and the mean apply phase of the round steps (the round).
# MODE=swarm runs the same config as `swarm` (2x4, every step's gradients averaged per stage):
# the liar sends its gradient sign-flipped x10 to the stage's averager, which aggregates under
# swarm.grad_aggregate instead (the round column is then every step's reduce phase, where the
# averager waits and aggregates). NOISE=1 adds two runs where the liar instead adds noise of
# 1x their RMS to the activations and input gradients it sends (chaos.hop_noise), which no
# aggregate sees: honest-clip's settings with the noise, and the same at 0.3x.
# Usage: [MODE=swarm] [NOISE=1] [LIARS=0,1,1000] bench/byzantine.sh [STEPS (600)] [MANY 0|1 (0)] [VARIANTS 0|1 (0)]
#   -> table + bench/results/byzantine.json (byzantine_swarm.json with MODE=swarm)
source "$(dirname "$0")/lib.sh"
prepare_bench
bin=${SWARMRT_BIN:-build/bin/swarmrt}
steps=${1:-600} many=${2:-0} variants=${3:-0}
[[ $steps =~ ^[1-9][0-9]*$ && $many =~ ^[01]$ && $variants =~ ^[01]$ ]] ||
  { echo "usage: bench/byzantine.sh [STEPS] [MANY 0|1] [VARIANTS 0|1]" >&2; exit 2; }
mode=${MODE:-diloco-swarm} noise=${NOISE:-0}
case $mode in
  diloco-swarm) key=diloco.aggregate result=bench/results/byzantine.json phase=apply every=25 ;;
  swarm) key=swarm.grad_aggregate result=bench/results/byzantine_swarm.json phase=reduce every=1 ;;
  *) echo "MODE must be diloco-swarm or swarm" >&2; exit 2 ;;
esac
export OPENBLAS_NUM_THREADS=1 PHASE=$phase EVERY=$every MODE=$mode RESULT=$result
unset SWARMRT_SECRET SWARMRT_SECRET_FILE
out=runs/bench_byzantine
[ "$mode" = swarm ] && out=runs/bench_byzantine_swarm
mkdir -p "$out"
rows=$out/rows.jsonl
: >"$rows"

run() {  # NAME SETTINGS...
  local name=$1
  shift
  echo "$name" >&2
  "$bin" train -c configs/byzantine.toml --set train.steps="$steps" --set swarm.mode="$mode" \
    --set "$key"=centered_clip --sample-tokens 0 "$@" \
    -o "$out/$name" --overwrite >"$out/$name.log" 2>&1 ||
    { echo "$name failed; its log: $out/$name.log" >&2; return 1; }
  python3 - "$out/$name" "$name" >>"$rows" <<'PY'
import json, os, sys
run, name = sys.argv[1:3]
phase, every = os.environ["PHASE"], int(os.environ["EVERY"])
recs = [json.loads(l) for l in open(f"{run}/metrics.jsonl") if l.strip()]
steps = [r for r in recs if r.get("event") == "step"]
evals = [r for r in recs if "val_loss" in r]
# Steps 1 and 2 (allocation) left out of tokens/s; a round's apply phase holds its round.
tokens = steps[-1]["tokens"] - steps[1]["tokens"]
secs = steps[-1]["time_s"] - steps[1]["time_s"]
rounds = [r["phases_s"].get(phase, 0) for r in steps if r["step"] % every == 0 and r.get("phases_s")]
print(json.dumps({"name": name, "steps": len(steps), "val_loss": evals[-1]["val_loss"],
                  "val_losses": {str(r["step"]): r["val_loss"] for r in evals},
                  "tokens_per_s": tokens / secs,
                  "round_apply_s": sum(rounds) / max(1, len(rounds)),
                  "duplicates": sum(r["duplicates"] for r in steps),
                  "extra_samples": sum(r["extra_samples"] for r in steps),
                  "missing_samples": sum(r["missing_samples"] for r in steps)}))
PY
}

run honest-mean --set chaos.malicious=none --set "$key"=mean
run honest-clip --set chaos.malicious=none
run attack-mean --set "$key"=mean
run attack-clip
if [ "$variants" = 1 ]; then
  run attack-clip-alone --set diloco.clip_drop=0
  run attack-trim --set "$key"=trimmed_mean
fi
if [ "$many" = 1 ]; then run attack2of4-clip --set chaos.malicious_workers=2; fi
# LIARS=0,1,1000: the attacker is exactly those workers (chaos.malicious_ids), e.g. 3 of 8.
if [ -n "${LIARS:-}" ]; then run "attack-ids-clip" --set chaos.malicious_ids="$LIARS"; fi
if [ "$noise" = 1 ]; then
  run noise1-clip --set chaos.malicious=none --set chaos.hop_noise=1.0
  run noise0.3-clip --set chaos.malicious=none --set chaos.hop_noise=0.3
fi

summarize "$rows" <<'PY'
import os
by = {r["name"]: r for r in runs}
base = by["honest-mean"]["val_loss"]
print(f"machine: {machine['cpu']}, {machine['cores']} cores")
print(f"{'run':<18} {'val loss':>9} {'vs honest-mean':>15} {'tokens/s':>9} {'round s':>8}")
for r in runs:
    r["gap_to_honest_mean"] = r["val_loss"] / base - 1
    print(f"{r['name']:<18} {r['val_loss']:>9.4f} {100 * r['gap_to_honest_mean']:>+14.2f}% "
          f"{r['tokens_per_s']:>9.0f} {r['round_apply_s']:>8.3f}")
json.dump({"machine": machine, "config": "configs/byzantine.toml", "mode": os.environ["MODE"],
           "runs": runs}, open(os.environ["RESULT"], "w"), indent=1)
print("-> " + os.environ["RESULT"])
PY
