#!/usr/bin/env bash
# One coordinator, no replicas (#32): it is SIGKILLed at step 25 of 60; the nodes keep trying
# to attach for --connect-timeout-s instead of exiting, so when the coordinator is started
# again by hand with --resume on the same address and --run-id, the same node processes attach
# to it and the run completes from its step-20 checkpoint, with one step record per step.
# Then, its coordinator killed for good, a node gives up after its timeout and says why.
bin=$1 root=$2
source "$(dirname "$0")/lib.sh"
export SWARMRT_SECRET=coordinator-restart-test
unset SWARMRT_SECRET_FILE
run_id=00000000000000bb steps=60
listen=$(free_port)
coordinator() {  # LOG ARGS...
  local log=$1
  shift
  "$bin" coordinator -c "$root/configs/tiny.toml" --listen "127.0.0.1:$listen" -o "$tmp/run" \
    --run-id $run_id --set "data.path=$root/data/brown.txt" --set train.steps=$steps \
    --set train.eval_every=0 --set train.eval_batches=4 --set checkpoint.every_steps=10 \
    "$@" >"$tmp/$log.log" 2>&1 &
  coord=$!
  pids+=("$coord")
}
on_fail() { for n in first second third lone n1 n2; do echo "--- $n:"; tail -15 "$tmp/$n.log"; done; }
coordinator first
join_run "127.0.0.1:$listen" "$run_id" n1 n2
wait_log "$tmp/first.log" "step 25/$steps" 180 || fail "the run did not reach step 25"
kill -KILL "$coord"
wait_log "$tmp/n1.log" "attaching again" 20 || fail "node n1 did not try to attach again"
sleep 2
running "$n1" && running "$n2" || fail "a node exited while its coordinator was gone"
coordinator second --resume
wait_exit "$coord" 300 || fail "the resumed coordinator still runs after 300 s"
wait "$coord" || fail "the resumed coordinator exited with $?"
grep -q "resuming from .* at step 20" "$tmp/second.log" || fail "not resumed from step 20"
grep -q "final validation loss" "$tmp/second.log" || fail "no final loss"
nodes_ended 2 n1 n2
check_records "$tmp/run/metrics.jsonl" $steps || fail "the run's step records"
# All coordinators gone for good: a node gives up after its --connect-timeout-s, saying so.
coordinator third --overwrite --set train.steps=1000
wait_log "$tmp/third.log" "coordinator listening on" 60 || fail "the third coordinator did not listen"
"$bin" node --join "127.0.0.1:$listen" --run-id $run_id --workers 4 --name lone \
  --connect-timeout-s 3 >"$tmp/lone.log" 2>&1 &
lone=$!
pids+=("$lone")
wait_log "$tmp/third.log" "step 2/" 120 || fail "the third run did not start"
kill -KILL "$coord"
exits_with "$lone" 30 1 "the node whose coordinator died"
grep -q "no coordinator at 127.0.0.1:$listen answered within --connect-timeout-s (3 s)" \
  "$tmp/lone.log" || fail "the node did not say why it gave up: $(tail -3 "$tmp/lone.log")"
echo "ok: $(grep 'final validation loss' "$tmp/second.log")"
