#!/usr/bin/env bash
# Tokens/s of the actor runtime against the single-process trainer on configs/bench_tiny.toml
# (tiny model, 4096 tokens a step in 16 micro-batches of 2): swarm 1x1 (runtime overhead) and
# pp 2x1 (pipelining on 2 cores), one torch thread per worker. Modes alternate within each
# round and ROUNDS rounds run; medians and per-round ratios are reported, because a shared
# VM's speed drifts between runs. The order of the modes rotates from round to round.
# Usage: bench/runtime_throughput.sh [ROUNDS] [STEPS]  -> table + bench/results/runtime_throughput.json
source "$(dirname "$0")/lib.sh"
prepare_bench
rounds=${1:-5} steps=${2:-12}
export OPENBLAS_NUM_THREADS=1
out=$(mktemp)
modes=(single swarm:1x1 pp:2x1)
for r in $(seq "$rounds"); do
  # Rotate the order each round so no mode always runs first in its process.
  order=("${modes[@]:$((r % 3))}" "${modes[@]:0:$((r % 3))}")
  build/bin/bench_runtime_throughput configs/bench_tiny.toml "$steps" 3 "${order[@]}" \
    | sed "s/^{/{\"round\":$r,/" >>"$out"
done
summarize "$out" <<'PY'
def key(r): return f"{r['mode']} {r['stages']}x{r['workers_per_stage']}"
modes = {}
for r in runs: modes.setdefault(key(r), []).append(r)
rounds = sorted({r["round"] for r in runs})
def tps(mode, rnd): return next(r["tokens_per_s"] for r in modes[mode] if r["round"] == rnd)
ratios = {m: [tps(m, rnd) / tps("single 1x1", rnd) for rnd in rounds] for m in modes}
print(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB; {len(rounds)} rounds")
print(f"{'mode':<16}{'tokens/s (median)':>20}{'x single (median of rounds)':>30}   per-round ratios")
summary = {}
for m, rs in modes.items():
    med = statistics.median(r["tokens_per_s"] for r in rs)
    ratio = statistics.median(ratios[m])
    summary[m] = {"tokens_per_s_median": med, "ratio_to_single_median": ratio, "ratios": ratios[m]}
    print(f"{m:<16}{med:>20.0f}{ratio:>30.2f}   {' '.join(f'{x:.2f}' for x in ratios[m])}")
json.dump({"benchmark": "runtime_throughput", "config": "configs/bench_tiny.toml", "machine": machine,
           "summary": summary, "runs": runs}, open("bench/results/runtime_throughput.json", "w"), indent=1)
print("wrote bench/results/runtime_throughput.json")
PY
rm -f "$out"
