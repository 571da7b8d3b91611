#!/usr/bin/env bash
# The leader killed while a DiLoCo round is in flight (#32): diloco-swarm with one worker per
# stage (2 stages, one node), inner_steps = 10, a standby on an etcd of the test's own. Plain
# DiLoCo: chaos.kill = "coordinator" as the workers apply step 20, which starts the round of
# step 20 (pseudo-gradients on their way to the groups). Streaming DiLoCo (2 fragments,
# overlap_steps = 2): killed at the start of step 21, while the fragment whose round began at
# step 20 is still in its overlap; its checkpoints wait for rounds in flight to merge, so the
# standby resumes from one with no round half-done (before that rule the resumed run's step 21
# differed from the unkilled run's by 5e-3). With one worker per stage the run is deterministic, so the
# bound is exact: every step's loss and the final validation loss equal those of the same run
# unkilled to 1e-5, every step has one record and extra_samples = missing_samples = 0.
# Processes are stopped by pid.
bin=$1 root=$2
source "$(dirname "$0")/lib.sh"
replicas_test failover-rounds
steps=32
base=(--set "data.path=$root/data/brown.txt" --set swarm.mode=diloco-swarm
  --set swarm.workers_per_stage=1 --set train.steps=$steps --set train.eval_every=0
  --set train.eval_batches=4 --set checkpoint.every_steps=10 --set diloco.inner_steps=10)
on_fail() { for f in "$tmp"/*-a.log "$tmp"/*-b.log; do echo "--- $f:"; tail -8 "$f"; done; }
# run NAME [SETTINGS...]: the run with a standby (lib.sh), with this test's settings.
run() { local name=$1; shift; run_with_standby "$name" "${base[@]}" "$@"; }
# same PLAIN KILLED RESUMED: the killed run's records against the unkilled one's; the standby
# resumed from the checkpoint of step RESUMED.
same() {
  py '
import json, sys
def records(path, event):
    return [r for r in map(json.loads, open(path)) if r.get("event") == event]
plain, killed = records(sys.argv[1], "step"), records(sys.argv[2], "step")
assert [r["step"] for r in killed] == list(range(1, int(sys.argv[3]) + 1)), [r["step"] for r in killed]
for r in killed:
    assert r["extra_samples"] == 0 and r["missing_samples"] == 0, r
    step, got, want = r["step"], r["loss"], plain[r["step"] - 1]["loss"]
    assert abs(want - got) <= 1e-5, f"step {step}: loss {got} vs unkilled {want}"
faults = [r for r in records(sys.argv[2], "fault") if r.get("kind") == "coordinator"]
assert len(faults) == 1 and faults[0]["resumed_step"] == int(sys.argv[4]), faults
' "$tmp/$1/metrics.jsonl" "$tmp/$2/metrics.jsonl" $steps "$3" || fail "$2: the run's records"
  local want got
  want=$(sed -n 's/^final validation loss \([0-9.]*\) .*/\1/p' "$tmp/$1-a.log")
  got=$(sed -n 's/^final validation loss \([0-9.]*\) .*/\1/p' "$tmp/$2-b.log")
  [ -n "$want" ] && [ -n "$got" ] || fail "$2: no final validation loss ($want, $got)"
  py 'import sys; assert abs(float(sys.argv[1]) - float(sys.argv[2])) <= 1e-4, sys.argv[1:]' \
    "$want" "$got" || fail "$2: final validation loss $got, unkilled $want"
}
streaming=(--set diloco.fragments=2 --set diloco.overlap_steps=2)
run plain
run plain_streaming "${streaming[@]}"
run round --set chaos.kill=coordinator --set chaos.kill_at_step=20 --set chaos.kill_at_phase=apply
grep -q "chaos: killing this coordinator process (chaos.kill_at_step = 20, apply" "$tmp/round-a.log" ||
  fail "round: the leader was not killed as step 20 applied"
same plain round 10
run overlap "${streaming[@]}" --set chaos.kill=coordinator --set chaos.kill_at_step=21 \
  --set chaos.kill_at_phase=start
grep -q "chaos: killing this coordinator process (chaos.kill_at_step = 21, start" "$tmp/overlap-a.log" ||
  fail "overlap: the leader was not killed at step 21's start"
# Its checkpoint of step 20 waited for fragment 0's round of step 20 to merge (step 22), as the
# one of step 10 did (step 12): the standby resumed from step 12, with no round half-done.
same plain_streaming overlap 12
[ -e "$tmp/plain_streaming/checkpoints/step_00000022.ckpt" ] ||
  fail "the streaming run's checkpoints: $(ls "$tmp/plain_streaming/checkpoints")"
# Killed between rounds (step 15) and as the checkpoint after step 30's round is gathered: the
# node keeps its workers' states (parameters, AdamW moments, anchor θ, next round) and each
# group's journal holds its last round (θ, outer momentum): the standby continues after the
# last recorded step (14, 30) from them, and no step runs again.
# (PHASE:STEP:KEPT:CHECKPOINT: the newest checkpoint when it was killed, in the fault record.)
for spec in start:15:14:10 save:30:30:20; do
  IFS=: read -r phase at kept ckpt <<<"$spec"
  run "$phase" --set chaos.kill=coordinator --set chaos.kill_at_step="$at" --set chaos.kill_at_phase="$phase"
  grep -q "chaos: killing this coordinator process (chaos.kill_at_step = $at, $phase" "$tmp/$phase-a.log" ||
    fail "$phase: the leader was not killed at step $at's $phase"
  same plain "$phase" "$ckpt"
  py '
import json, re, sys
records = [r for r in map(json.loads, open(sys.argv[1])) if r.get("event") == "takeover"]
assert len(records) == 1 and records[0]["from"] == "kept" and records[0]["step"] == int(sys.argv[3]), records
first = int(re.search(r"step (\d+)/", open(sys.argv[2]).read()).group(1))
assert first == int(sys.argv[3]) + 1, f"the standby ran step {first} first"
' "$tmp/$phase/metrics.jsonl" "$tmp/$phase-b.log" "$kept" || fail "$phase: where the standby continued"
  [ "$(grep -c "took its state from the state a node kept of stage [01] at step $kept$" "$tmp/$phase-n.log")" = 2 ] ||
    fail "$phase: the workers did not start from the kept states: $(grep 'took its state' "$tmp/$phase-n.log")"
  grep -q "DiLoCo group 1 continues from its round of step $((kept / 10 * 10))" "$tmp/$phase-b.log" ||
    fail "$phase: the groups did not continue from their journal: $(grep -i journal "$tmp/$phase-b.log")"
done
echo "ok: killed with a DiLoCo round and a Streaming fragment's overlap in flight (resumed from checkpoints), between rounds and at a checkpoint after a round (continued from the kept states and the groups' journal); losses equal the unkilled runs'"
