#!/usr/bin/env bash
# Two builds side by side, for a change that must not cost speed (a refactoring): tokens/s of
# swarm 1x1 and pp 2x1 in one process (bench_runtime_throughput) and of pp 2x1 across two
# processes (`swarmrt launch --local 2`, frame links), on configs/bench_tiny.toml. Each round
# runs every case with both builds, alternating which goes first; medians of the rounds and
# the per-round new/old ratios are reported, because a shared VM's speed drifts.
# Usage: bench/compare_builds.sh OLD_BIN_DIR NEW_BIN_DIR [ROUNDS] [STEPS]
#   (each BIN_DIR holds swarmrt and bench_runtime_throughput, e.g. a copy of build/bin)
#   -> table + bench/results/compare_builds.json
source "$(dirname "$0")/lib.sh"
[ $# -ge 2 ] || { sed -n 2,9p "$0"; exit 2; }
old=$(realpath "$1") new=$(realpath "$2") rounds=${3:-5} steps=${4:-12}
for d in "$old" "$new"; do
  for b in swarmrt bench_runtime_throughput; do
    [ -x "$d/$b" ] || { echo "missing $d/$b" >&2; exit 2; }
  done
done
scripts/fetch_data.sh >/dev/null
export OPENBLAS_NUM_THREADS=1
bench_scratch
in_process() {  # build-name bin-dir round
  "$2/bench_runtime_throughput" configs/bench_tiny.toml "$steps" 3 swarm:1x1 pp:2x1 \
    | sed "s/^{/{\"build\":\"$1\",\"round\":$3,\"where\":\"in-process\",/" >>"$out"
}
multi_process() {  # build-name bin-dir round
  "$2/swarmrt" launch --local 2 -c configs/bench_tiny.toml -o "$tmp/run" --overwrite \
    --set swarm.mode=pp --set swarm.stages=2 --set swarm.workers_per_stage=1 \
    --set train.steps=$((steps + 3)) --set train.eval_every=0 --set train.eval_batches=1 \
    >"$tmp/launch.log" 2>&1 || { tail -20 "$tmp/launch.log"; exit 1; }
  python3 - "$tmp/run/metrics.jsonl" "$1" "$3" <<'PY' >>"$out"
import json, statistics, sys
steps = [json.loads(l) for l in open(sys.argv[1])]
steps = [s for s in steps if s.get("event") == "step"][3:]
print(json.dumps({"build": sys.argv[2], "round": int(sys.argv[3]), "where": "multi-process",
                  "mode": "pp", "stages": 2, "workers_per_stage": 1,
                  "tokens_per_s": statistics.median(s["tokens_per_s"] for s in steps)}))
PY
}
for r in $(seq "$rounds"); do
  echo "round $r/$rounds" >&2
  if [ $((r % 2)) -eq 1 ]; then order=(old new); else order=(new old); fi
  for b in "${order[@]}"; do
    if [ "$b" = old ]; then in_process old "$old" "$r"; else in_process new "$new" "$r"; fi
  done
  for b in "${order[@]}"; do
    if [ "$b" = old ]; then multi_process old "$old" "$r"; else multi_process new "$new" "$r"; fi
  done
done
summarize "$out" <<'PY'
case = lambda r: f"{r['where']} {r['mode']} {r['stages']}x{r['workers_per_stage']}"
cases = sorted({case(r) for r in runs})
rounds = sorted({r["round"] for r in runs})
tps = lambda c, b, n: next(r["tokens_per_s"] for r in runs if case(r) == c and r["build"] == b and r["round"] == n)
print(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB; {len(rounds)} rounds")
print(f"{'case':<28}{'old tok/s':>12}{'new tok/s':>12}{'new/old':>9}   per round")
summary = {}
for c in cases:
    o = statistics.median(tps(c, "old", n) for n in rounds)
    w = statistics.median(tps(c, "new", n) for n in rounds)
    ratios = [tps(c, "new", n) / tps(c, "old", n) for n in rounds]
    summary[c] = {"old": o, "new": w, "ratio_median": statistics.median(ratios), "ratios": ratios}
    print(f"{c:<28}{o:>12.0f}{w:>12.0f}{statistics.median(ratios):>9.2f}   {' '.join(f'{x:.2f}' for x in ratios)}")
json.dump({"benchmark": "compare_builds", "config": "configs/bench_tiny.toml", "machine": machine,
           "summary": summary, "runs": runs}, open("bench/results/compare_builds.json", "w"), indent=1)
print("wrote bench/results/compare_builds.json")
PY
