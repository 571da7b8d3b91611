#!/usr/bin/env bash
# The balancer across processes: a coordinator and two nodes of 2 workers (2 stages x 2). The
# console slows both stage-1 workers 8x; within a few 1-second periods the balancer sees
# stage 1 slower than stage 0 (the workers' rate EMAs follow within a few micro-batches) and
# moves a stage-0 worker there, the only move that raises the pipeline: the directory picks
# the new id (stage 1's third, 1002), the node's stage supervisor retires the old worker and
# starts the new one, which takes stage 1's state. The console lists the new worker and the
# run completes with every micro-batch counted once. Processes are stopped by pid.
bin=$1 root=$2
source "$(dirname "$0")/lib.sh"

start_coordinator -c "$root/configs/tiny.toml" --listen 127.0.0.1:0 -o "$tmp/run" \
  --set "data.path=$root/data/brown.txt" --set train.steps=60 --set train.eval_every=0 \
  --set train.eval_batches=4 --set diloco.inner_steps=5 --set balancer.period_s=1 \
  --set balancer.cooldown_s=1000
for n in 1 2; do join_node "n$n" -w 2; done
wait_log "$tmp/coord.log" "step 2/60" || fail "the run did not start"
for w in stage1/worker0 stage1/worker1; do
  ctl slow "$w" 8 >"$tmp/slow.out" 2>&1 || fail "slow $w: $(cat "$tmp/slow.out")"
done
wait_log "$tmp/run/metrics.jsonl" '"event":"rebalance"' 30 ||
  fail "no rebalance within 30 s: $(grep -i balanc "$tmp/coord.log" | tail -5)"
# The console lists the moved worker under its new name once it has joined.
lists_worker2() {
  ctl actors --json >"$tmp/actors.json" 2>&1 &&
    py 'import json,sys; a=json.load(open(sys.argv[1]))["actors"]; sys.exit(0 if any(x["name"].startswith("stage1/worker2") for x in a) else 1)' "$tmp/actors.json"
}
wait_until 10 lists_worker2 ||
  fail "the console does not list stage1/worker2: $(cat "$tmp/actors.json")"
ctl info balancer --json >"$tmp/balancer.json" 2>&1 || fail "info balancer: $(cat "$tmp/balancer.json")"
wait_exit "$coord" 300 || fail "the coordinator still runs after 300 s"
wait "$coord" || fail "coordinator exited with $?"
grep -q "final validation loss" "$tmp/coord.log" || fail "no final loss"
py '
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
moves = [r for r in records if r.get("event") == "rebalance"]
# The first move is into the slowed stage, the only one that raises the pipeline. Later ones
# follow the measured rates of the workers, which on a busy machine move with the load.
assert moves, moves
m = moves[0]
assert m["from"] == 0 and m["to"] == 1 and m["new_worker"] == 1002, m
assert m["worker"] in (0, 1), m
steps = [r for r in records if r.get("event") == "step"]
assert len(steps) == 60, len(steps)
for s in steps:
    assert s["duplicates"] == 0 and s["missing_samples"] == 0 and s["extra_samples"] == 0, s
info = json.load(open(sys.argv[2]))["actor"]["info"]
assert info["moves"] >= 1 and info["periods"] >= 1, info
print("ok: worker %d moved to stage 1 as %d (gain %.2f): %s; %d move(s) in all" % (m["worker"], m["new_worker"], m["gain"], m["reason"], len(moves)))
' "$tmp/run/metrics.jsonl" "$tmp/balancer.json" || fail "metrics: $(grep -i balanc "$tmp/coord.log" | tail -5)"
