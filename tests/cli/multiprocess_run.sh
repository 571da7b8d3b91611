#!/usr/bin/env bash
# One coordinator and two node processes on 127.0.0.1 (swarmrt launch --local 2) train
# diloco-swarm 2x2 for 30 steps; the final validation loss is within 0.5% of the same config
# trained in one process. Every process is stopped by pid, also when the test fails.
#
# Both runs route every micro-batch the same way, so they differ only in the order floating-
# point sums are taken: seeded uniform wiring with a slot for every micro-batch of a step
# (max_inflight = micro_batches) picks each hop's worker from the seed, the micro-batch's
# identity and the open workers by id. With throughput wiring the routes followed the
# machine's load, and a 3% bound failed by chance (2.7880 against 2.8928); with seeded draws
# taken in arrival order (and candidates in join order), 1 run in 7 took other routes (2.8419
# against 2.8050) until picks were keyed by the micro-batch (policy::route_key). The final evaluation follows the last round, when every replica
# holds θ, so its routing does not matter.
bin=$1 data=$2 root=$3
source "$(dirname "$0")/lib.sh"
final_loss() { sed -n 's/.*final validation loss \([0-9.]*\).*/\1/p' "$1" | tail -1; }

args=(-c "$root/configs/tiny.toml" --set "data.path=$data" --set train.steps=30
      --set train.eval_every=0 --set train.log_every=10
      --set swarm.wiring=uniform --set swarm.max_inflight=4 --set train.micro_batches=4)
run_launch multi 300 --local 2 "${args[@]}" -o "$tmp/multi"
grep -q "^\[node1\] .*serving 2 workers" "$tmp/multi.log" || fail "node1 did not serve: $(cat "$tmp/multi.log")"
grep -q "^\[node2\] .*serving 2 workers" "$tmp/multi.log" || fail "node2 did not serve"
grep -q "swarm has 4/4 workers" "$tmp/multi.log" || fail "the swarm never was full"
grep -q "frames were rejected" "$tmp/multi.log" && fail "frames were rejected"
# Nodes told to stop at the end are not lost nodes: a clean end logs no fault.
grep -E "\[warning\].*is gone" "$tmp/multi.log" && fail "a clean end logged a node as gone"
multi=$(final_loss "$tmp/multi.log")
[ -n "$multi" ] || fail "no final loss from the multi-process run: $(tail -20 "$tmp/multi.log")"
ls "$tmp/multi/checkpoints/step_00000030.ckpt" >/dev/null || fail "no checkpoint from the coordinator"
# The run's byte counts are the swarm's: the last step record holds what the nodes' workers
# sent (each node prints its own totals when it stops). Gradients and pseudo-gradients end with
# the last step; the final evaluation's forward hops come after the last record, so activations
# there are short of the nodes' by about eval_batches / (steps x micro_batches) = 16/136.
python3 - "$tmp/multi/metrics.jsonl" "$tmp/multi.log" <<'PY' || fail "swarm-wide bytes: see above"
import json, re, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"event":"step"' in l]
record = {k: v / 1e6 for k, v in steps[-1]["bytes"].items()}
nodes = {}
for line in open(sys.argv[2]):
    m = re.search(r"stopped; bytes sent by its workers: (.*)", line)
    if m:
        for kind, mb in re.findall(r"(\w+) ([0-9.]+) MB", m.group(1)):
            nodes[kind] = nodes.get(kind, 0) + float(mb)
print("last step record (MB):", record, "\nsum of the nodes' own totals (MB):", nodes)
assert len(re.findall("stopped; bytes sent", open(sys.argv[2]).read())) == 2, "2 nodes' totals"
for kind in ("gradients", "pseudo_gradients"):
    tol = 0.05 * nodes[kind] + 0.2  # one step of 30 in flight, and the logs' 0.1 MB rounding
    assert nodes[kind] > 1, f"the nodes sent no {kind}"
    assert abs(record[kind] - nodes[kind]) <= tol, f"{kind}: record {record[kind]} vs nodes {nodes[kind]}"
a, n = record["activations"], nodes["activations"]
assert 0.75 * n <= a <= 1.05 * n + 0.3, f"activations: record {a} vs nodes {n}"
PY

timeout 300 "$bin" train "${args[@]}" -o "$tmp/single" --sample-tokens 0 >"$tmp/single.log" 2>&1 \
  || fail "in-process run: $(tail -20 "$tmp/single.log")"
single=$(final_loss "$tmp/single.log")
echo "final validation loss: multi-process $multi, in-process $single"
awk -v a="$multi" -v b="$single" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d; exit !(d <= 0.005) }' \
  || fail "multi-process loss $multi is not within 0.5% of in-process $single; what the" \
          "multi-process run reported beyond info lines:" \
          "$(grep -vE '\] \[info\] ' "$tmp/multi.log" | head -40)"
# The model the coordinator wrote samples like any other run's.
"$bin" sample --checkpoint "$tmp/multi" --tokens 20 >"$tmp/sample.log" 2>&1 || fail "sample: $(cat "$tmp/sample.log")"
echo "ok"
