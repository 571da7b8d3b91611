#!/usr/bin/env bash
# Prints the per-step training losses (full precision) and the final validation loss of a
# 20-step run of each pipeline mode (single, pp, dp, swarm) on the tiny model, one line per
# step. A refactoring that must not change behaviour diffs this output before and after:
#   ./scripts/mode_losses.sh > before.txt; (change); ./scripts/mode_losses.sh > after.txt
#   diff before.txt after.txt
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${SWARMRT_BIN:-build/bin/swarmrt}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for mode in single pp dp swarm; do
  stages=2 workers=2
  case $mode in
    single) stages=1 workers=1 ;;
    pp) workers=1 ;;
    dp) stages=1 ;;
  esac
  "$bin" train -c configs/tiny.toml --set train.steps=20 --set swarm.mode=$mode \
    --set swarm.stages=$stages --set swarm.workers_per_stage=$workers \
    --set train.eval_every=10 --set checkpoint.every_steps=0 --sample-tokens 0 \
    -o "$out/$mode" --overwrite > "$out/$mode.log" 2>&1
  python3 - "$mode" "$out/$mode/metrics.jsonl" <<'PY'
import json, sys
mode, path = sys.argv[1], sys.argv[2]
for line in open(path):
    r = json.loads(line)
    if r.get("event") == "step":
        print(f"{mode} step {r['step']} loss {r['loss']!r}")
    elif "val_loss" in r:
        print(f"{mode} step {r.get('step')} val_loss {r['val_loss']!r}")
PY
done
