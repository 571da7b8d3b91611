#!/usr/bin/env bash
# Nodes find the next leader on their own (#32): two coordinator replicas of one run on an etcd
# of the test's own. Node n1 is given only the first leader's address, node n2 only the etcd
# (no --join). The standby starts after both joined, so n1 learns its address only from the
# leader's later lists. From step 15 on, the leader dies as the next node's join comes in
# (chaos.kill_at_phase = "join"): node n3, given only the etcd, joins then. Its join goes
# unanswered and it joins the new leader; n1 and n2 attach to it as well (the same processes,
# each a second attachment), and the run completes every step with one step record a step.
# A third replica, c, starts beside b and is SIGKILLed before the failover: once its lease
# lapses the leader lists it no more, the nodes say so, and n1 looks for the next leader at
# the others only. Processes are stopped by pid.
bin=$1 root=$2
source "$(dirname "$0")/lib.sh"
replicas_test failover-learned
run_id=00000000000000ee steps=100
pa=$(free_port) pb=$(free_port) pc=$(free_port)
replica() {  # NAME PORT
  "$bin" coordinator -c "$root/configs/tiny.toml" --listen "127.0.0.1:$2" -o "$tmp/run" \
    --etcd "$etcd_url" --lease-ttl-s 2 --run-id $run_id --set "data.path=$root/data/brown.txt" \
    --set train.steps=$steps --set train.eval_every=0 --set train.eval_batches=4 \
    --set checkpoint.every_steps=10 --set diloco.inner_steps=10 \
    --set chaos.kill=coordinator --set chaos.kill_at_step=15 --set chaos.kill_at_phase=join \
    >"$tmp/$1.log" 2>&1 &
  pids+=($!)
}
node() {  # NAME ARGS...
  local name=$1
  shift
  "$bin" node "$@" --run-id $run_id --workers 2 --name "$name" --connect-timeout-s 60 \
    >"$tmp/$name.log" 2>&1 &
  pids+=($!)
  eval "$name=$!"
}
on_fail() { for n in a b c n1 n2 n3; do echo "--- $n:"; tail -15 "$tmp/$n.log"; done; }
replica a "$pa"
a=$!
wait_log "$tmp/a.log" "leading run $run_id" 30 || fail "replica a does not lead"
node n1 --join "127.0.0.1:$pa"
node n2 --etcd "$etcd_url"
wait_log "$tmp/a.log" "step 2/$steps" 180 || fail "the run did not start"
replica b "$pb"
b=$!
wait_log "$tmp/b.log" "standby for run $run_id" 30 || fail "replica b is not a standby"
wait_log "$tmp/n1.log" "replica(s) 127.0.0.1:$pb learned from the coordinator" 30 ||
  fail "n1 was not told the standby's address"
replica c "$pc"
c=$!
wait_log "$tmp/c.log" "standby for run $run_id" 30 || fail "replica c is not a standby"
wait_log "$tmp/n1.log" "replica(s) 127.0.0.1:$pc learned from the coordinator" 30 ||
  fail "n1 was not told the second standby's address"
kill -9 "$c"
wait "$c" 2>/dev/null
for n in n1 n2; do
  wait_log "$tmp/$n.log" "replica(s) 127.0.0.1:$pc no longer listed by the coordinator" 30 ||
    fail "$n was not told that replica c is gone"
done
wait_log "$tmp/a.log" "step 15/$steps" 180 || fail "the run did not reach step 15"
ended "$a" && fail "the leader died before a node joined"
node n3 --etcd "$etcd_url"
wait_exit "$a" 30 || fail "the leader was not killed by n3's join"
grep -q "chaos: killing this coordinator process (chaos.kill_at_step = 15, join" "$tmp/a.log" ||
  fail "the leader did not die at the join"
grep -q "node 'n3' joined" "$tmp/a.log" && fail "the old leader answered n3's join"
wait_log "$tmp/b.log" "leading run $run_id .*taking over" 30 || fail "the standby did not take over"
run_finished "$b" "$tmp/b.log" "the new leader"
for n in n1 n2 n3; do
  wait_exit "${!n}" 15 || fail "node $n did not stop"
  wait "${!n}" || fail "node $n exited with $?"
  grep -q "node '$n' joined" "$tmp/b.log" || fail "node $n did not join the new leader"
done
for n in n1 n2; do
  [ "$(grep -c "serving 2 workers" "$tmp/$n.log")" = 2 ] || fail "node $n: not two attachments"
done
[ "$(grep -c "serving 2 workers" "$tmp/n3.log")" = 1 ] || fail "node n3: not one attachment"
again=$(grep "attaching again to" "$tmp/n1.log")
[[ "$again" == *"127.0.0.1:$pb"* && "$again" != *":$pc"* ]] ||
  fail "n1 looked for the next leader at: $again"
grep -q "the join went unanswered" "$tmp/n3.log" || fail "n3's first join was answered"
check_records "$tmp/run/metrics.jsonl" $steps '
faults = of("fault", "coordinator")
assert len(faults) == 1, f"failover records: {faults}"
print("one failover, resumed at step", faults[0]["resumed_step"])
' || fail "the run's records"
echo "ok: $(grep 'final validation loss' "$tmp/b.log")"
