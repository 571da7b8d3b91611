#!/usr/bin/env bash
# Sparse DiLoCo against per-step sync over long runs of the tiny model (docs/streaming.md,
# "Sparse rounds"). For each step count and seed it trains, on the same tokens:
#   sync      configs/long-sync.toml: gradients averaged every step
#   frontier  configs/long-frontier.toml: top-k rounds with error feedback, no dense warm-up
# and reports the final validation loss's gap to sync with its 95% interval (Student's t over
# seeds), and the sync bytes of the whole run against sync's (the tracker's `sync_bytes`,
# warm-up and last step included). Runs whose directory holds a final evaluation are kept.
# About 3.7 minutes per 1,600-step run on a 2-core VM, one run at a time.
# Usage: bench/frontier.sh [FIRST] [LAST] [STEPS ...]
#   seeds FIRST..LAST (default 2..11) below 3,200 steps, the first 3 of them at 3,200 and more;
#   STEPS: default 1600 3200.
#   SWARMRT_BIN: the binary (default build/bin/swarmrt).
#   FRONTIER_SET: more --set KEY=VALUE overrides for the frontier runs, space-separated (for
#     trying settings; recorded in the JSON).
#   SYNC_FROM=FILE: take sync's loss and bytes of a (steps, seed) from FILE (a
#     bench/results/long_runs.json of the same configs/long-sync.toml) instead of training it.
#   -> table + bench/results/frontier.json
set -euo pipefail
cd "$(dirname "$0")/.."
first=${1:-2} last=${2:-11}
[[ $first =~ ^[0-9]+$ && $last =~ ^[0-9]+$ && $first -le $last ]] ||
  { echo "bench/frontier.sh: FIRST and LAST must be seeds with FIRST <= LAST (got '$first' '$last')" >&2; exit 2; }
shift $(($# < 2 ? $# : 2))
steps_list=("$@")
[ ${#steps_list[@]} -gt 0 ] || steps_list=(1600 3200)
for n in "${steps_list[@]}"; do
  [[ $n =~ ^[0-9]+$ && $n -ge 8 ]] || { echo "bench/frontier.sh: STEPS must be numbers >= 8 (got '$n')" >&2; exit 2; }
done
sync_from=${SYNC_FROM:-}
[ -z "$sync_from" ] || [ -f "$sync_from" ] || { echo "bench/frontier.sh: SYNC_FROM=$sync_from is no file" >&2; exit 2; }
read -r -a extra <<<"${FRONTIER_SET:-}"
sets=()
for kv in "${extra[@]}"; do sets+=(--set "$kv"); done
source scripts/common.sh
prepare_bench
bin=${SWARMRT_BIN:-build/bin/swarmrt}
runs=runs/frontier
mkdir -p "$runs"
seeds_for() {
  local n=$1
  if [ "$n" -ge 3200 ]; then seq "$first" $((first + 2 < last ? first + 2 : last)); else seq "$first" "$last"; fi
}
tag=$(printf '%s' "${FRONTIER_SET:-}" | tr -c 'A-Za-z0-9.=_,-' '_')
for n in "${steps_list[@]}"; do
  for seed in $(seeds_for "$n"); do
    for mode in sync frontier; do
      [ "$mode" = sync ] && [ -n "$sync_from" ] && continue
      dir="$runs/$n-$seed-$mode${tag:+-$tag}"
      [ "$mode" = sync ] && dir="$runs/$n-$seed-sync"
      if [ -f "$dir/metrics.jsonl" ] && grep -q '"event":"eval"' "$dir/metrics.jsonl"; then continue; fi
      case $mode in
        sync) args=(-c configs/long-sync.toml) ;;
        frontier) args=(-c configs/long-frontier.toml "${sets[@]}") ;;
      esac
      echo "$n steps, seed $seed: $mode ${FRONTIER_SET:-}" >&2
      OPENBLAS_NUM_THREADS=1 "$bin" train "${args[@]}" --set train.steps="$n" --set train.seed="$seed" \
        --sample-tokens 0 --out "$dir" --overwrite >"$dir.log" 2>&1 ||
        { echo "$n steps seed $seed $mode failed; its log: $dir.log" >&2; exit 1; }
    done
  done
done
python3 - "$(bench/machine.sh)" "$runs" "$first" "$last" "$tag" "${FRONTIER_SET:-}" "$sync_from" "${steps_list[@]}" <<'PY'
import json, statistics, sys
sys.path.insert(0, "bench")
from stats import mean_ci95
machine, runs = json.loads(sys.argv[1]), sys.argv[2]
first, last, tag, overrides, sync_from = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7]
steps_list = [int(s) for s in sys.argv[8:]]
stored = {}
if sync_from:
    for r in json.load(open(sync_from))["runs"]:
        stored[(r["steps"], r["seed"])] = (r["sync"], r["sync_bytes"])

def measured(n, seed, mode):
    if mode == "sync" and stored:
        return stored[(n, seed)]
    d = f"{runs}/{n}-{seed}-{mode}" + (f"-{tag}" if tag and mode != "sync" else "")
    recs = [json.loads(l) for l in open(f"{d}/metrics.jsonl") if l.strip()]
    loss = [x["val_loss"] for x in recs if x.get("event") == "eval"][-1]
    return loss, sum(x.get("sync_bytes", 0) for x in recs if x.get("event") == "step")

print(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB")
print(f"frontier overrides: {overrides or '(none)'}; sync {'from ' + sync_from if sync_from else 'trained here'}")
print(f"{'steps':>6}{'seeds':>6}{'sync':>8}{'frontier':>10}{'gap (95% CI)':>28}{'bytes ÷':>10}  per seed")
rows, summary = [], []
for n in steps_list:
    seeds = list(range(first, min(first + 2, last) + 1)) if n >= 3200 else list(range(first, last + 1))
    per = []
    for seed in seeds:
        (s_loss, s_bytes), (f_loss, f_bytes) = measured(n, seed, "sync"), measured(n, seed, "frontier")
        r = {"steps": n, "seed": seed, "sync": s_loss, "sync_bytes": s_bytes, "frontier": f_loss,
             "frontier_bytes": f_bytes, "gap": f_loss / s_loss - 1, "bytes_ratio": s_bytes / f_bytes}
        per.append(r)
        rows.append(r)
    m, half = mean_ci95([r["gap"] for r in per])
    if len(per) < 2:
        half = float("nan")
    s = {"steps": n, "seeds": len(per), "sync": statistics.mean(r["sync"] for r in per),
         "frontier": statistics.mean(r["frontier"] for r in per), "gap": [m, m - half, m + half],
         "bytes_ratio": statistics.mean(r["sync_bytes"] for r in per) / statistics.mean(r["frontier_bytes"] for r in per)}
    summary.append(s)
    seeds_text = "; ".join(f"{r['seed']}: {100 * r['gap']:+.2f}%" for r in per)
    print(f"{n:>6}{len(per):>6}{s['sync']:>8.4f}{s['frontier']:>10.4f}"
          f"{f'{100 * m:+.2f}% ({100 * (m - half):+.2f} .. {100 * (m + half):+.2f})':>28}{s['bytes_ratio']:>9.0f}x  {seeds_text}")
out = "bench/results/frontier.json" if not tag else f"{runs}/frontier-{tag}.json"
json.dump({"benchmark": "frontier", "configs": ["configs/long-sync.toml", "configs/long-frontier.toml"],
           "frontier_overrides": overrides, "sync_from": sync_from or None, "machine": machine,
           "runs": rows, "summary": summary}, open(out, "w"), indent=1)
print(f"wrote {out}")
PY
