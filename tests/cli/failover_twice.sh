#!/usr/bin/env bash
# Two failovers and an etcd member lost in one run (#32): three coordinator replicas on a
# 3-member etcd, two nodes that know all three. At step 15 of 60 one etcd member is SIGKILLed
# (the other two keep a majority; every call tries the members in turn); at step 25 the leader
# is SIGKILLed, and once the second leader has passed step 45, it is SIGKILLed too. The third
# replica completes the run with the same node processes: one step record per step, three
# epochs in order, two failover records. The lease TTL is the default 5 s: an etcd member lost
# may cost an election of about a second or two, which a 2 s TTL would not outlast.
bin=$1 root=$2
source "$(dirname "$0")/lib.sh"
export SWARMRT_SECRET=failover-twice-test
unset SWARMRT_SECRET_FILE
start_etcd_cluster 3
run_id=00000000000000dd steps=60
ports=($(free_port) $(free_port) $(free_port))
joined=127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}
replica() {  # INDEX
  "$bin" coordinator -c "$root/configs/tiny.toml" --listen "127.0.0.1:${ports[$1]}" -o "$tmp/run" \
    --etcd "$etcd_url" --lease-ttl-s 5 --run-id $run_id --set "data.path=$root/data/brown.txt" \
    --set train.steps=$steps --set train.eval_every=0 --set train.eval_batches=4 \
    --set checkpoint.every_steps=10 --set diloco.inner_steps=10 >"$tmp/r$1.log" 2>&1 &
  pids+=($!)
  rpid[$1]=$!
}
on_fail() { for n in r0 r1 r2 n1 n2; do echo "--- $n:"; tail -12 "$tmp/$n.log"; done; }
replica 0
wait_log "$tmp/r0.log" "leading run $run_id" 30 || fail "replica 0 does not lead"
replica 1
replica 2
join_run "$joined" "$run_id" n1 n2
wait_log "$tmp/r0.log" "step 15/$steps" 180 || fail "the run did not reach step 15"
kill -KILL "${etcd_pids[0]}"
wait_log "$tmp/r0.log" "step 25/$steps" 180 || fail "the run did not reach step 25 with an etcd member down"
kill -KILL "${rpid[0]}"
# Whichever standby takes over; then it is killed past step 45.
wait_until 30 grep -q "leading run .*taking over" "$tmp/r1.log" "$tmp/r2.log" || fail "no standby took over"
second=$(grep -l "leading run .*taking over" "$tmp/r1.log" "$tmp/r2.log" | head -1)
third=$([ "$second" = "$tmp/r1.log" ] && echo "$tmp/r2.log" || echo "$tmp/r1.log")
k=$([ "$second" = "$tmp/r1.log" ] && echo 1 || echo 2)
wait_log "$second" "step 45/$steps" 180 || fail "the second leader did not reach step 45"
kill -KILL "${rpid[$k]}"
wait_log "$third" "leading run .*taking over" 30 || fail "the third replica did not take over"
k3=$((3 - k))
run_finished "${rpid[$k3]}" "$third" "the third leader"
nodes_ended 3 n1 n2
check_records "$tmp/run/metrics.jsonl" $steps '
epochs = [r["epoch"] for r in records if r.get("event") == "step"]
assert epochs == sorted(epochs) and len(set(epochs)) == 3, f"epochs: {sorted(set(epochs))}"
faults = of("fault", "coordinator")
assert [f["resumed_step"] for f in faults] == [20, 40], f"failovers: {faults}"
' || fail "the run's records"
echo "ok: two failovers and an etcd member lost; $(grep 'final validation loss' "$third")"
