#!/usr/bin/env bash
# Coordinator replicas (#32): two coordinators of one run on a private etcd, each its own
# process, and two nodes that know both addresses. The leader trains; at step 25 of 60 it is
# SIGKILLed (argument "kill") or SIGSTOPped (argument "freeze"). The standby takes the lease
# within its 4 s TTL (at 2 s a leader's renewal starved under four such runs at once on 2
# cores: 2 of 21 stepped down), and the same node processes attach to it: the run completes
# all 60 steps
# with exactly one step record per step. It continues from the states the nodes kept of their
# workers, after the last step the old leader recorded (no step runs again), each node handing
# out the stage states it holds, and none starts from the newest checkpoint (step 20): in
# diloco-swarm (configs/tiny.toml, the default) with each DiLoCo group's journal entry of its
# last round (step 20), in the mode given as the fourth argument (swarm) with the averaged
# states of the grad-sync modes. Frozen: SIGCONT after the new leader's first step, and the
# old leader steps down without writing anything (its records carry its epoch: none after the
# new leader's first). Processes are stopped by pid.
bin=$1 root=$2 fault=${3:-kill} mode=${4:-diloco-swarm}
source "$(dirname "$0")/lib.sh"
replicas_test failover
run_id=0123456789abcdef steps=60
pa=$(free_port) pb=$(free_port)
replica() {  # NAME PORT
  "$bin" coordinator -c "$root/configs/tiny.toml" --listen "127.0.0.1:$2" -o "$tmp/run" \
    --etcd "$etcd_url" --lease-ttl-s 4 --run-id $run_id --set "data.path=$root/data/brown.txt" \
    --set train.steps=$steps --set train.eval_every=0 --set train.eval_batches=4 \
    --set checkpoint.every_steps=10 --set diloco.inner_steps=10 --set swarm.mode=$mode \
    >"$tmp/$1.log" 2>&1 &
  pids+=($!)
}
on_fail() { for n in a b n1 n2; do echo "--- $n:"; tail -15 "$tmp/$n.log"; done; }
replica a "$pa"
a=$!
wait_log "$tmp/a.log" "leading run $run_id" 30 || fail "replica a does not lead"
replica b "$pb"
b=$!
wait_log "$tmp/b.log" "standby for run $run_id" 30 || fail "replica b is not a standby"
join_run "127.0.0.1:$pa,127.0.0.1:$pb" "$run_id" n1 n2
wait_log "$tmp/a.log" "step 25/$steps" 180 || fail "the run did not reach step 25"
if [ "$fault" = kill ]; then kill -KILL "$a"; else kill -STOP "$a"; fi
wait_log "$tmp/b.log" "leading run $run_id .*taking over" 30 || fail "the standby did not take over"
wait_log "$tmp/b.log" "takeover: continuing after step [0-9]* from the states 2 node(s) kept" 60 ||
  fail "not continued from the nodes' states: $(grep -i takeover "$tmp/b.log")"
first=$(($(sed -n 's/.*takeover: continuing after step \([0-9]*\) .*/\1/p' "$tmp/b.log") + 1))
if [ "$mode" = diloco-swarm ]; then
  for k in 0 1; do
    grep -q "DiLoCo group $k continues from its round of step 20" "$tmp/b.log" ||
      fail "group $k did not continue from its journal: $(grep -i 'diloco group' "$tmp/b.log")"
  done
fi
if [ "$fault" = freeze ]; then
  wait_log "$tmp/b.log" "step $first/$steps" 120 || fail "the new leader completed no step"
  kill -CONT "$a"
  exits_with "$a" 20 4 "the thawed leader (stepping down)"
  grep -q "stepping down as leader" "$tmp/a.log" || fail "the thawed leader did not say it stepped down"
fi
run_finished "$b" "$tmp/b.log" "the new leader"
nodes_ended 2 n1 n2
for n in n1 n2; do
  grep -q "attaching again" "$tmp/$n.log" || fail "node $n did not attach again"
  # Its new workers start from the kept states, and none from the older checkpoint.
  [ "$(grep -c "took its state from the state a node kept of stage [01] at step $((first - 1))$" "$tmp/$n.log")" = 2 ] ||
    fail "node $n: its workers did not start from the kept states: $(grep 'took its state' "$tmp/$n.log")"
  grep -q "took its state from .*ckpt" "$tmp/$n.log" && fail "node $n: a worker started from a checkpoint"
done
check_records "$tmp/run/metrics.jsonl" $steps '
epochs = [r["epoch"] for r in records if r.get("event") == "step"]
old = int(argv[0]) - 1  # steps of the old leader that stay
assert epochs[0] < epochs[-1] and epochs[:old] == [epochs[0]] * old and epochs[old:] == [epochs[-1]] * (len(epochs) - old), f"epochs: {epochs}"
# No record of the old leader after the new leader first wrote (fencing).
late = late_records()
assert not late, f"records of the old leader after the new one took over: {late}"
faults = of("fault", "coordinator")
assert len(faults) == 1 and faults[0]["resumed_step"] == 20, f"failover records: {faults}"
recovered = of("recovered", "coordinator")
assert len(recovered) == 1 and recovered[0]["step"] == old + 1 and recovered[0]["seconds"] > 0, f"recovered: {recovered}"
took = of("takeover")
assert old > 20 and [(t["from"], t["step"]) for t in took] == [("kept", old)] and faults[0]["kept_step"] == old, f"takeover: {took}"
print("epochs", epochs[0], "->", epochs[-1], "; step", old + 1, "completed", round(recovered[0]["seconds"], 2), "s after the old leader last wrote")
' $first || fail "the run's records"
echo "ok ($fault): $(grep 'final validation loss' "$tmp/b.log")"
