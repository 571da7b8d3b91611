#!/usr/bin/env bash
# Streaming DiLoCo against per-step sync over long runs of the tiny model (docs/streaming.md,
# "Over long runs"). For each step count and seed it trains four runs on the same tokens:
#   sync       configs/long-sync.toml: gradients averaged every step
#   streaming  configs/long-streaming.toml without its warm-up or H schedule: H = 64 throughout
#   warm       the same after a synced first quarter of the run (diloco.warmup_sync_steps)
#   sched      configs/long-streaming.toml: the synced first quarter, then H = 16 and H = 32 for
#              4/25 of the run each (diloco.inner_steps_schedule), then H = 64 (the config's
#              400 + 256 + 256 of 1,600 steps; the same shares at other step counts)
# and reports the final validation loss's gap to sync with its 95% interval (Student's t over
# seeds), the sync bytes of the whole run against sync's, and the warm-up's share of them.
# Runs whose directory already holds a final evaluation are kept, so an interrupted bench goes on
# where it stopped. About 3.7 minutes per 1,600-step run on a 2-core VM, one run at a time.
# Usage: bench/long_runs.sh [FIRST] [LAST] [STEPS ...]
#   SWARMRT_BIN: the binary to run (default build/bin/swarmrt).
#   seeds FIRST..LAST (default 2..11) for every step count below 3,200; the first 3 of them for
#   3,200 steps and more. STEPS: default 400 1600 3200.
#   -> table + bench/results/long_runs.json + docs/img/long_runs.png (gap against steps) and
#      docs/img/long_runs_curves.png (the four losses of seed FIRST at 1,600 steps)
set -euo pipefail
cd "$(dirname "$0")/.."
first=${1:-2} last=${2:-11}
[[ $first =~ ^[0-9]+$ && $last =~ ^[0-9]+$ && $first -le $last ]] ||
  { echo "bench/long_runs.sh: FIRST and LAST must be seeds with FIRST <= LAST (got '$first' '$last')" >&2; exit 2; }
shift $(($# < 2 ? $# : 2))
steps_list=("$@")
[ ${#steps_list[@]} -gt 0 ] || steps_list=(400 1600 3200)
for n in "${steps_list[@]}"; do
  [[ $n =~ ^[0-9]+$ && $n -ge 8 ]] || { echo "bench/long_runs.sh: STEPS must be numbers >= 8 (got '$n')" >&2; exit 2; }
done
source scripts/common.sh
prepare_bench
bin=${SWARMRT_BIN:-build/bin/swarmrt}  # a copy keeps a long bench apart from rebuilds
runs=runs/long_runs
mkdir -p "$runs" docs/img
seeds_for() {  # the seeds of a step count
  local n=$1
  if [ "$n" -ge 3200 ]; then seq "$first" $((first + 2 < last ? first + 2 : last)); else seq "$first" "$last"; fi
}
for n in "${steps_list[@]}"; do
  for seed in $(seeds_for "$n"); do
    p=$((n * 4 / 25 / 32 * 32))  # the H = 16 and H = 32 phases: whole rounds of 32
    for mode in sync streaming warm sched; do
      dir="$runs/$n-$seed-$mode"
      if [ -f "$dir/metrics.jsonl" ] && grep -q '"event":"eval"' "$dir/metrics.jsonl"; then continue; fi
      case $mode in
        sync) args=(-c configs/long-sync.toml) ;;
        streaming) args=(-c configs/long-streaming.toml --set diloco.warmup_sync_steps=0
                         --set 'diloco.inner_steps_schedule=""') ;;
        warm) args=(-c configs/long-streaming.toml --set diloco.warmup_sync_steps=$((n / 4))
                    --set 'diloco.inner_steps_schedule=""') ;;
        sched)
          sched=""
          [ "$p" -gt 0 ] && sched="16:$p,32:$p"
          args=(-c configs/long-streaming.toml --set diloco.warmup_sync_steps=$((n / 4))
                --set "diloco.inner_steps_schedule=\"$sched\"") ;;
      esac
      echo "$n steps, seed $seed: $mode" >&2
      OPENBLAS_NUM_THREADS=1 "$bin" train "${args[@]}" --set train.steps="$n" --set train.seed="$seed" \
        --sample-tokens 0 --out "$dir" --overwrite > "$dir.log" 2>&1 ||
        { echo "$n steps seed $seed $mode failed; its log: $dir.log" >&2; exit 1; }
    done
  done
done
python3 - "$(bench/machine.sh)" "$runs" "$first" "$last" "${steps_list[@]}" <<'PY'
import json, statistics, sys
sys.path.insert(0, "bench")  # the scripts run from the repository's root
from stats import mean_ci95
machine, runs, first, last = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
steps_list = [int(s) for s in sys.argv[5:]]

def records(n, seed, mode):
    return [json.loads(l) for l in open(f"{runs}/{n}-{seed}-{mode}/metrics.jsonl") if l.strip()]

def interval(xs):
    m, half = mean_ci95(xs)
    if len(xs) < 2:
        half = float("nan")
    return m, m - half, m + half

print(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB")
modes = ["streaming", "warm", "sched"]  # against sync
print(f"{'steps':>6}{'seeds':>6}{'sync':>8}" + "".join(f"{m:>10}{'gap (95% CI)':>26}" for m in modes)
      + "".join(f"{m + ' ÷':>12}" for m in modes) + f"{'warm-up share':>15}")
rows, summary = [], []
for n in steps_list:
    seeds = list(range(first, min(first + 2, last) + 1)) if n >= 3200 else list(range(first, last + 1))
    per = []
    for seed in seeds:
        r = {"seed": seed}
        for mode in ["sync"] + modes:
            recs = records(n, seed, mode)
            steps = [x for x in recs if x.get("event") == "step"]
            r[mode] = [x["val_loss"] for x in recs if x.get("event") == "eval"][-1]
            r[mode + "_bytes"] = sum(x.get("sync_bytes", 0) for x in steps)
            if mode in ("warm", "sched"):
                r[mode + "_warmup_bytes"] = sum(x.get("sync_bytes", 0) for x in steps if x["step"] <= n // 4)
        for mode in modes:
            r["gap_" + mode] = r[mode] / r["sync"] - 1
        per.append(r)
        rows.append({"steps": n, **r})
    sync_b = statistics.mean(r["sync_bytes"] for r in per)
    s = {"steps": n, "seeds": len(seeds), "warmup_sync_steps": n // 4,
         "inner_steps_schedule": f"16:{n * 4 // 25 // 32 * 32},32:{n * 4 // 25 // 32 * 32}",
         "sync": statistics.mean(r["sync"] for r in per)}
    for mode in modes:
        s[mode] = statistics.mean(r[mode] for r in per)
        s["gap_" + mode] = interval([r["gap_" + mode] for r in per])
        s["bytes_ratio_" + mode] = sync_b / statistics.mean(r[mode + "_bytes"] for r in per)
    s["warmup_share_of_bytes"] = statistics.mean(r["sched_warmup_bytes"] / r["sched_bytes"] for r in per)
    summary.append(s)
    fmt = lambda g: f"{100 * g[0]:+.2f}% ({100 * g[1]:+.2f} .. {100 * g[2]:+.2f})"
    print(f"{n:>6}{len(seeds):>6}{s['sync']:>8.4f}" + "".join(f"{s[m]:>10.4f}{fmt(s['gap_' + m]):>26}" for m in modes)
          + "".join(f"{s['bytes_ratio_' + m]:>11.1f}x" for m in modes) + f"{100 * s['warmup_share_of_bytes']:>14.1f}%")
json.dump({"benchmark": "long_runs", "configs": ["configs/long-sync.toml", "configs/long-streaming.toml"],
           "warmup": "a quarter of the run's steps",
           "schedule": "sched: H = 16, then 32, for 4/25 of the run each (whole rounds of 32) after the warm-up",
           "machine": machine, "runs": rows, "summary": summary},
          open("bench/results/long_runs.json", "w"), indent=1)
with open(f"{runs}/gaps.dat", "w") as f:
    for s in summary:
        f.write(f"{s['steps']} " + " ".join(f"{100 * v}" for m in modes for v in s["gap_" + m]) + "\n")
print("wrote bench/results/long_runs.json")
PY
gnuplot <<EOF
set terminal pngcairo size 1000,650 font "sans,11"
set output "docs/img/long_runs.png"
set title "Streaming DiLoCo (P = 4, tau = 1, fp4) against per-step sync, tiny model, 2 workers"
set xlabel "steps of the run (2048 tokens each)"
set ylabel "final validation loss above per-step sync (%)"
set logscale x 2
set xtics (400, 800, 1600, 3200)
set grid
set key top left
plot "$runs/gaps.dat" using 1:2:3:4 with yerrorlines lw 2 title "H = 64 throughout", \
     "$runs/gaps.dat" using 1:5:6:7 with yerrorlines lw 2 title "first quarter synced every step", \
     "$runs/gaps.dat" using 1:8:9:10 with yerrorlines lw 2 title "the same, then H = 16 and 32 (4/25 of the run each)", \
     0 with lines lc rgb "gray" notitle
EOF
if [ -d "$runs/1600-$first-sync" ]; then
  "$bin" plot "$runs/1600-$first-sync" "$runs/1600-$first-streaming" "$runs/1600-$first-warm" \
    "$runs/1600-$first-sched" \
    --out docs/img/long_runs_curves.png --width 1100 --height 900 \
    --title "1,600 steps, seed $first: per-step sync; Streaming DiLoCo; after a 400-step synced warm-up; and then H = 16, 32"
fi
echo "wrote docs/img/long_runs.png"
