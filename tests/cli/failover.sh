#!/usr/bin/env bash
# Coordinator replicas (#32): two coordinators of one run on a private etcd, each its own
# process, and two nodes that know both addresses. The leader trains; at step 25 of 60 it is
# SIGKILLed (argument "kill") or SIGSTOPped (argument "freeze"). The standby takes the lease
# within its 2 s TTL, continues the run from the newest checkpoint (step 20) in the shared run
# directory, and the same node processes attach to it: the run completes all 60 steps with
# exactly one step record per step. Frozen: SIGCONT after the new leader's first step, and the
# old leader steps down without writing anything (its records carry its epoch: none after the
# new leader's first). Processes are stopped by pid.
bin=$1 root=$2 fault=${3:-kill}
source "$(dirname "$0")/lib.sh"
export SWARMRT_SECRET=failover-test
unset SWARMRT_SECRET_FILE
start_etcd
run_id=0123456789abcdef steps=60
pa=$(free_port) pb=$(free_port)
replica() {  # NAME PORT
  "$bin" coordinator -c "$root/configs/tiny.toml" --listen "127.0.0.1:$2" -o "$tmp/run" \
    --etcd "$etcd_url" --lease-ttl-s 2 --run-id $run_id --set "data.path=$root/data/brown.txt" \
    --set train.steps=$steps --set train.eval_every=0 --set train.eval_batches=4 \
    --set checkpoint.every_steps=10 --set diloco.inner_steps=10 >"$tmp/$1.log" 2>&1 &
  pids+=($!)
}
on_fail() { for n in a b n1 n2; do echo "--- $n:"; tail -15 "$tmp/$n.log"; done; }
replica a "$pa"
a=$!
wait_log "$tmp/a.log" "leading run $run_id" 30 || fail "replica a does not lead"
replica b "$pb"
b=$!
wait_log "$tmp/b.log" "standby for run $run_id" 30 || fail "replica b is not a standby"
for n in n1 n2; do
  "$bin" node --join "127.0.0.1:$pa,127.0.0.1:$pb" --run-id $run_id --workers 2 --name $n \
    --connect-timeout-s 60 >"$tmp/$n.log" 2>&1 &
  pids+=($!)
  eval "$n=$!"
done
wait_log "$tmp/a.log" "step 25/$steps" 180 || fail "the run did not reach step 25"
if [ "$fault" = kill ]; then kill -KILL "$a"; else kill -STOP "$a"; fi
wait_log "$tmp/b.log" "leading run $run_id .*taking over" 30 || fail "the standby did not take over"
wait_log "$tmp/b.log" "resuming from .* at step 20" 60 || fail "not resumed from step 20: $(grep -i resum "$tmp/b.log")"
if [ "$fault" = freeze ]; then
  wait_log "$tmp/b.log" "step 21/$steps" 120 || fail "the new leader completed no step"
  kill -CONT "$a"
  wait_exit "$a" 20 || fail "the thawed leader did not step down"
  wait "$a"
  code=$?
  [ $code = 4 ] || fail "the thawed leader exited $code, not 4 (stepped down)"
  grep -q "stepping down as leader" "$tmp/a.log" || fail "the thawed leader did not say it stepped down"
fi
wait_exit "$b" 300 || fail "the new leader still runs after 300 s"
wait "$b" || fail "the new leader exited with $?"
grep -q "final validation loss" "$tmp/b.log" || fail "no final loss"
for n in n1 n2; do
  wait_exit "${!n}" 15 || fail "node $n did not stop"
  wait "${!n}" || fail "node $n exited with $?"
  grep -q "attaching again" "$tmp/$n.log" || fail "node $n did not attach again"
  [ "$(grep -c "serving 2 workers" "$tmp/$n.log")" = 2 ] || fail "node $n: not two attachments"
done
py '
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
steps = [r["step"] for r in records if r.get("event") == "step"]
assert steps == list(range(1, int(sys.argv[2]) + 1)), f"step records: {steps}"
epochs = [r["epoch"] for r in records if r.get("event") == "step"]
assert epochs[0] < epochs[-1] and epochs[:20] == [epochs[0]] * 20 and epochs[20:] == [epochs[-1]] * 40, f"epochs: {epochs}"
# No record of the old leader after the new leader first wrote (fencing).
first_new = next(i for i, r in enumerate(records) if r.get("epoch") == epochs[-1])
late = [r for r in records[first_new:] if r.get("epoch") != epochs[-1]]
assert not late, f"records of the old leader after the new one took over: {late}"
faults = [r for r in records if r.get("event") == "fault" and r.get("kind") == "coordinator"]
assert len(faults) == 1 and faults[0]["resumed_step"] == 20, f"failover records: {faults}"
recovered = [r for r in records if r.get("event") == "recovered" and r.get("kind") == "coordinator"]
assert len(recovered) == 1 and recovered[0]["step"] == 21 and recovered[0]["seconds"] > 0, f"recovered: {recovered}"
print("epochs", epochs[0], "->", epochs[-1], "; step 21 completed", round(recovered[0]["seconds"], 2), "s after the old leader last wrote")
' "$tmp/run/metrics.jsonl" $steps || fail "the run's records"
echo "ok ($fault): $(grep 'final validation loss' "$tmp/b.log")"
