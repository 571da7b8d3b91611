#!/usr/bin/env bash
# The live balancer's figure: tokens/s of configs/tiny.toml (diloco-swarm, 2 stages) with 3
# workers of equal speed and one 4x slower, started skewed (3 + 1), with the balancer against
# without, and against every static placement (bench_balancer tries each: A + B workers, the
# slow one in stage K). Every worker's compute is stretched BASE_SLOW times so that on a
# machine with fewer cores than workers each runs at its own emulated speed (see
# bench/balancer.cpp). Two skewed starts: the slow worker alone in stage 1, and the slow worker
# among the three of stage 0.
# Usage: bench/balancer.sh [STEPS] [BASE_SLOW] -> table + bench/results/balancer.json
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
prepare_bench
steps=${1:-60} base=${2:-4}
export OPENBLAS_NUM_THREADS=1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
cases=(balancer:3+1:1 static:3+1:1 balancer:3+1:0 static:3+1:0
  static:2+2:0 static:1+3:0 static:1+3:1)
i=0
for c in "${cases[@]}"; do
  i=$((i + 1))
  echo "[$i/${#cases[@]}] $c" >&2
  # The runtime logs to stdout too; the results are the JSON lines.
  build/bin/bench_balancer configs/tiny.toml "$steps" 5 "$base" "$c" \
    --set balancer.period_s=2 --set balancer.cooldown_s=1000 | grep '^{' >>"$out"
done
python3 - "$(bench/machine.sh)" "$out" "$steps" "$base" <<'PY'
import json, sys
machine = json.loads(sys.argv[1])
runs = {r["case"]: r for r in map(json.loads, open(sys.argv[2]))}
steps, base = int(sys.argv[3]), float(sys.argv[4])
best = max((r for r in runs.values() if not r["balancer"]), key=lambda r: r["tokens_per_s"])
rows = []
for start in ("3+1:1", "3+1:0"):
    on, off = runs["balancer:" + start], runs["static:" + start]
    rows.append({"start": start, "balancer_tokens_per_s": on["tokens_per_s"],
                 "static_tokens_per_s": off["tokens_per_s"],
                 "ratio": on["tokens_per_s"] / off["tokens_per_s"],
                 "of_best_static": on["tokens_per_s"] / best["tokens_per_s"],
                 "moves": on["moves"]})
print("| start (A+B, slow worker's stage) | balancer tokens/s | no balancer | ratio | of the best static placement | moves |")
print("|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['start']} | {r['balancer_tokens_per_s']:.0f} | {r['static_tokens_per_s']:.0f} | "
          f"{r['ratio']:.2f}x | {r['of_best_static']:.3f} | {r['moves']} |")
print()
print("| static placement | tokens/s |")
print("|---|---|")
for c, r in sorted(runs.items()):
    if not r["balancer"]:
        print(f"| {c.split(':', 1)[1]} | {r['tokens_per_s']:.0f} |")
print(f"\nbest static placement: {best['case']}; {steps} steps after 5 warm-up steps; every worker "
      f"{base:g}x slower, the slow one {4 * base:g}x; machine: {machine['cpu']}, {machine['cores']} cores")
json.dump({"machine": machine, "steps": steps, "base_slow": base, "runs": list(runs.values()),
           "best_static": best["case"], "rows": rows},
          open("bench/results/balancer.json", "w"), indent=1)
PY
