#!/usr/bin/env bash
# The simulator's figures from the issue, as bench/simulate.sh runs them (configs/simulate.toml:
# 1000 peers, speeds spread 10x, 10% failing per hour, 1 Gbit/s links that cap workers in the
# middle stages): on 4 and 8 stages the balancer holds >= 90% of the optimal placement's
# throughput and no balancing holds less; the swarm's goodput under that churn is above the
# synchronous baseline's over the same failures. Seeded: the same figures every run.
# Usage: simulate_figures.sh SWARMRT CONFIG
set -uo pipefail
bin=$1 config=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for stages in 4 8; do
  if ! "$bin" simulate -c "$config" --set simulate.peers=1000 --set swarm.stages=$stages \
    -o "$tmp/$stages.json" >"$tmp/$stages.txt" 2>&1; then
    echo "FAIL $stages stages: simulate exited non-zero"; cat "$tmp/$stages.txt"; fail=1; continue
  fi
  python3 - "$tmp/$stages.json" "$stages" <<'PY' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
b, n = r["balancer"]["fraction_of_optimal"], r["no_balancer"]["fraction_of_optimal"]
g, s = r["goodput"], r["sync_goodput"]
ok = b >= 0.90 and n < b and r["balancer"]["moves"] > 0 and 0 < g <= 1 and 0 <= s < g
print(f"{'ok  ' if ok else 'FAIL'} {sys.argv[2]} stages: balancer {b:.3f} of optimal, "
      f"no balancer {n:.3f}, {r['balancer']['moves']} moves; goodput {g:.3f}, "
      f"synchronous {s:.3f}")
sys.exit(0 if ok else 1)
PY
done
exit $fail
