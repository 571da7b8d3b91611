#!/usr/bin/env bash
# The leader killed by chaos.kill = "coordinator" in each phase of the tracker (at step 13 of
# 22: start, micro-batches in flight; reduce, all done, gradients being summed; apply, workers
# taking the step; applied, every worker took it and its record is not written; eval,
# validation batches in flight; at step 20: save, the checkpoint being gathered), in `pp`
# (2 stages x 1 worker, one node), with a standby on a private etcd.
# Every time the run completes with one step record per step, extra_samples = missing_samples
# = 0 in each, and the losses of every step equal to 1e-5 those of the same run unkilled (pp
# is deterministic). The node keeps its workers' states when it loses the leader, and the
# standby continues after the step the leader closed last, from those states: no step runs
# again (12 in start and reduce, 13 in eval, 20 in save; 13 in applied, whose record the
# standby writes from the one the leader left pending; in apply the workers may have taken
# step 13 or not, or only one of them, and the standby continues after 13 or 12, or from the
# step-10 checkpoint, recomputing steps 11-22 exactly). Processes are stopped by pid.
bin=$1 root=$2
source "$(dirname "$0")/lib.sh"
replicas_test failover-phases
steps=22
set_args=(--set "data.path=$root/data/brown.txt" --set swarm.mode=pp --set swarm.workers_per_stage=1
  --set train.steps=$steps --set train.eval_every=13 --set train.eval_batches=4
  --set checkpoint.every_steps=10)
on_fail() { for f in "$tmp"/*-a.log "$tmp"/*-b.log; do echo "--- $f:"; tail -8 "$f"; done; }
# run NAME [SETTINGS...]: the run with a standby (lib.sh), with this test's settings.
run() { local name=$1; shift; run_with_standby "$name" "${set_args[@]}" "$@"; }
run plain
grep -q "final validation loss" "$tmp/plain-a.log" || fail "the unkilled run did not complete"
for spec in start:13 reduce:13 apply:13 applied:13 eval:13 save:20; do
  phase=${spec%%:*}
  run "$phase" --set chaos.kill=coordinator --set chaos.kill_at_step=${spec#*:} --set chaos.kill_at_phase=$phase
  grep -q "chaos: killing this coordinator process (chaos.kill_at_step = ${spec#*:}, $phase of the step)" \
    "$tmp/$phase-a.log" || fail "$phase: the leader was not killed in step ${spec#*:}'s $phase"
  grep -q "final validation loss" "$tmp/$phase-b.log" || fail "$phase: the standby did not complete the run"
  case $phase in start | reduce) kept=12 ;; eval | applied) kept=13 ;; save) kept=20 ;; apply) kept=any ;; esac
  py '
import json, re, sys
records = [r for r in map(json.loads, open(sys.argv[1])) if r.get("event") == "takeover"]
assert len(records) == 1, f"takeover records: {records}"
t, kept = records[0], sys.argv[3]
first = int(re.search(r"step (\d+)/", open(sys.argv[2]).read()).group(1))
if kept == "any":
    assert (t["from"], t["step"]) in (("kept", 12), ("kept", 13), ("checkpoint", 10)), t
else:
    assert t["from"] == "kept" and t["step"] == int(kept), f"continued from {t}, not the states kept at {kept}"
assert first == t["step"] + 1, f"the standby ran step {first} first, after continuing from {t}"
by = [r.get("recorded_by") for r in map(json.loads, open(sys.argv[1]))
      if r.get("event") == "step" and r["step"] == 13]
want = ["takeover"] if sys.argv[4] == "applied" or (kept == "any" and t["step"] == 13) else [None]
assert by == want, f"step 13 recorded by {by}, not {want}"
' "$tmp/$phase/metrics.jsonl" "$tmp/$phase-b.log" $kept $phase || fail "$phase: where the standby continued"
  if [ "$kept" != any ]; then
    grep -q "keeps the state of 2 of its 2 workers" "$tmp/$phase-n.log" || fail "$phase: the node kept no state of its workers"
    [ "$(grep -c "took its state from the state a node kept of stage [01] at step $kept$" "$tmp/$phase-n.log")" = 2 ] ||
      fail "$phase: the workers did not start from the kept states: $(grep 'took its state' "$tmp/$phase-n.log")"
  fi
  py '
import json, sys
def steps(path, event="step"):
    return [r for r in map(json.loads, open(path)) if r.get("event") == event]
plain, killed = steps(sys.argv[1]), steps(sys.argv[2])
evals = [r["step"] for r in steps(sys.argv[2], "eval")]
assert evals == [r["step"] for r in steps(sys.argv[1], "eval")], f"eval records at steps {evals}"
assert [r["step"] for r in killed] == list(range(1, int(sys.argv[3]) + 1)), [r["step"] for r in killed]
for r in killed:
    assert r["extra_samples"] == 0 and r["missing_samples"] == 0, r
    p = plain[r["step"] - 1]
    step, got, want = r["step"], r["loss"], p["loss"]
    assert abs(want - got) <= 1e-5, f"step {step}: loss {got} vs unkilled {want}"
' "$tmp/plain/metrics.jsonl" "$tmp/$phase/metrics.jsonl" $steps || fail "$phase: the run's records"
done
echo "ok: killed in start, reduce, apply, applied, eval and save; every step's loss equals the unkilled run's; no step ran again after start, reduce, applied, eval and save"
