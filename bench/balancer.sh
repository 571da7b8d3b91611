#!/usr/bin/env bash
# The live balancer's figure: tokens/s of configs/tiny.toml (diloco-swarm, 2 stages) with 3
# workers of equal speed and one 4x slower, started skewed (3 + 1), with the balancer against
# without, and against every static placement (bench_balancer tries each: A + B workers, the
# slow one in stage K). Every worker's compute is stretched BASE_SLOW times so that on a
# machine with fewer cores than workers each runs at its own emulated speed (see
# bench/balancer.cpp). Two skewed starts: the slow worker alone in stage 1, and the slow worker
# among the three of stage 0. A static placement runs at its speed from the first timed step,
# so STEPS of it measure it; a balancer run spends its first seconds measuring and moving, so
# it runs BALANCER_STEPS, its whole run timed, moves and all (about 85 s at the best speed).
# This VM's speed drifts by 5-10% between runs minutes apart: ROUNDS rounds run every case
# once each, in a rotating order, and the figures are medians of the per-round ratios.
# Usage: bench/balancer.sh [STEPS] [BASE_SLOW] [BALANCER_STEPS] [ROUNDS] -> table +
#        bench/results/balancer.json
source "$(dirname "$0")/lib.sh"
prepare_bench
steps=${1:-40} base=${2:-4} balancer_steps=${3:-240} rounds=${4:-3}
export OPENBLAS_NUM_THREADS=1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
cases=(balancer:3+1:1 static:3+1:1 balancer:3+1:0 static:3+1:0
  static:2+2:0 static:2+2:1 static:1+3:0 static:1+3:1)
for r in $(seq "$rounds"); do
  order=("${cases[@]:$((r % ${#cases[@]}))}" "${cases[@]:0:$((r % ${#cases[@]}))}")
  i=0
  for c in "${order[@]}"; do
    i=$((i + 1))
    echo "[round $r/$rounds, $i/${#cases[@]}] $c" >&2
    n=$steps
    [[ $c == balancer:* ]] && n=$balancer_steps
    # The runtime logs to stdout too; the results are the JSON lines.
    build/bin/bench_balancer configs/tiny.toml "$n" 5 "$base" "$c" \
      --set balancer.period_s=2 --set balancer.cooldown_s=1000 | grep '^{' |
      sed "s/^{/{\"round\":$r,/" >>"$out"
  done
done
summarize "$out" "$steps" "$base" "$balancer_steps" "$rounds" <<'PY'
steps, base, balancer_steps, rounds = int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
by_round = {}
for r in runs:
    by_round.setdefault(r["round"], {})[r["case"]] = r
def settled(r):
    # The second half of a run: the placement the balancer settled on, its moves behind it.
    s = r["step_seconds"][len(r["step_seconds"]) // 2:]
    return r["tokens_per_s"] * sum(r["step_seconds"]) / len(r["step_seconds"]) * len(s) / sum(s)
med = statistics.median
rows = []
for start in ("3+1:1", "3+1:0"):
    per = []
    for rnd, cs in sorted(by_round.items()):
        best = max((r for r in cs.values() if not r["balancer"]), key=lambda r: r["tokens_per_s"])
        on, off = cs["balancer:" + start], cs["static:" + start]
        per.append({"round": rnd, "balancer": on["tokens_per_s"], "static": off["tokens_per_s"],
                    "best_static": best["case"], "best_static_tokens_per_s": best["tokens_per_s"],
                    "ratio": on["tokens_per_s"] / off["tokens_per_s"],
                    "of_best_static": on["tokens_per_s"] / best["tokens_per_s"],
                    "settled_of_best_static": settled(on) / best["tokens_per_s"],
                    "moves": on["moves"]})
    rows.append({"start": start, "rounds": per,
                 "balancer_tokens_per_s": med(p["balancer"] for p in per),
                 "static_tokens_per_s": med(p["static"] for p in per),
                 "ratio": med(p["ratio"] for p in per),
                 "of_best_static": med(p["of_best_static"] for p in per),
                 "settled_of_best_static": med(p["settled_of_best_static"] for p in per),
                 "moves": [p["moves"] for p in per]})
print("| start (A+B, slow worker's stage) | balancer tokens/s | no balancer | ratio | of the best static placement | per round | its second half, of the best static | moves per round |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['start']} | {r['balancer_tokens_per_s']:.0f} | {r['static_tokens_per_s']:.0f} | "
          f"{r['ratio']:.2f}x | {r['of_best_static']:.3f} | "
          f"{' '.join(format(p['of_best_static'], '.2f') for p in r['rounds'])} | "
          f"{r['settled_of_best_static']:.3f} | {' '.join(map(str, r['moves']))} |")
print()
cases = sorted({c for cs in by_round.values() for c in cs if c.startswith("static:")})
print("| static placement | tokens/s (median) | per round |")
print("|---|---|---|")
for c in cases:
    v = [cs[c]["tokens_per_s"] for _, cs in sorted(by_round.items()) if c in cs]
    print(f"| {c.split(':', 1)[1]} | {med(v):.0f} | {' '.join(f'{x:.0f}' for x in v)} |")
print(f"\nmedians over {rounds} rounds; best static placement per round: "
      f"{', '.join(p['best_static'] for p in rows[0]['rounds'])}; static placements {steps} steps, "
      f"balancer runs {balancer_steps}, after 5 warm-up steps; every worker "
      f"{base:g}x slower, the slow one {4 * base:g}x; machine: {machine['cpu']}, {machine['cores']} cores")
json.dump({"machine": machine, "steps": steps, "balancer_steps": balancer_steps, "base_slow": base,
           "rounds": rounds, "runs": runs, "rows": rows},
          open("bench/results/balancer.json", "w"), indent=1)
PY
