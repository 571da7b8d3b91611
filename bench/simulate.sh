#!/usr/bin/env bash
# The simulator's figures (configs/simulate.toml: GPT-2 small in DiLoCo-SWARM, speeds spread
# 10x, 10% of peers failing per hour, 1 Gbit/s links): samples/s as a fraction of the optimal
# placement's with the balancer and without, for 1000 peers on 4 and 8 stages and 10,000 peers
# on 8, one simulated hour each, and the wall time of each simulation on one core; goodput
# (samples completed / the same peers' without churn) beside a synchronous job's over the same
# failures (restarting from a checkpoint every 10 minutes in 2 minutes), and at 1000 peers on 4
# stages with a donor sparing a quarter of its link: state from 1 donor against 4.
# Usage: bench/simulate.sh -> table + bench/results/simulate.json
source "$(dirname "$0")/lib.sh"
prepare_build
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# peers, stages, donors, donor share, failures per peer per hour
cases=("1000 4 1 1 0.1" "1000 8 1 1 0.1" "10000 8 1 1 0.1" "1000 4 1 0.25 0.1"
       "1000 4 4 0.25 0.1" "1000 4 1 1 0.01" "10000 8 1 1 0.01")
i=0
for c in "${cases[@]}"; do
  read -r peers stages donors share failures <<<"$c"
  i=$((i + 1))
  echo "[$i/${#cases[@]}] $peers peers, $stages stages, $donors donors sparing $share," \
    "$failures failures per peer-hour" >&2
  # One core: the simulation is one thread; taskset keeps it on one.
  taskset -c 0 build/bin/swarmrt simulate -c configs/simulate.toml --set "simulate.peers=$peers" \
    --set "swarm.stages=$stages" --set "simulate.donors=$donors" \
    --set "simulate.donor_share=$share" --set "simulate.failures_per_hour=$failures" \
    -o "$tmp/$i.json" >"$tmp/$i.txt"
done
python3 - "$(bench/machine.sh)" "$tmp" <<'PY'
import json, os, sys
machine, tmp = json.loads(sys.argv[1]), sys.argv[2]
rows = []
for name in sorted(os.listdir(tmp)):
    if not name.endswith(".json"):
        continue
    r = json.load(open(os.path.join(tmp, name)))
    b, n = r["balancer"], r["no_balancer"]
    rows.append({"peers": r["peers"], "stages": len(r["stages"]), "hours": r["hours"],
                 "balancer_fraction": b["fraction_of_optimal"], "moves": b["moves"],
                 "no_balancer_fraction": n["fraction_of_optimal"], "failures": b["failures"],
                 "recoveries": b["recoveries"], "wall_s": b["wall_s"] + n["wall_s"],
                 "donors": r["donors"], "donor_share": r["donor_share"], "goodput": r["goodput"],
                 "sync_goodput": r["sync_goodput"], "case": int(name.split(".")[0]),
                 "failures_per_hour": r["failures_per_hour"]})
rows.sort(key=lambda r: r["case"])
print("| peers | stages | failing per hour | donors (share) | balancer (of optimal) | moves | no balancer | failures | recoveries | goodput | synchronous | both simulations, wall s (1 core) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['peers']} | {r['stages']} | {100 * r['failures_per_hour']:g}% | "
          f"{r['donors']} ({r['donor_share']:g}) | "
          f"{100 * r['balancer_fraction']:.1f}% | {r['moves']} | "
          f"{100 * r['no_balancer_fraction']:.1f}% | {r['failures']} | {r['recoveries']} | "
          f"{r['goodput']:.3f} | {r['sync_goodput']:.3f} | {r['wall_s']:.2f} |")
print(f"\none simulated hour each; machine: {machine['cpu']}, {machine['cores']} cores")
json.dump({"machine": machine, "config": "configs/simulate.toml", "rows": rows},
          open("bench/results/simulate.json", "w"), indent=1)
PY
