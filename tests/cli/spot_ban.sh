#!/usr/bin/env bash
# Spot checks across processes (docs/security.md): a `swarm` run of 2 stages x 3 workers on
# three node processes, where the first node's stage-0 worker (worker 0) adds noise of its
# activations' RMS to what it sends from step 5 (chaos.hop_noise). Half of stage 0's outputs are
# recomputed by another worker of the stage (verify.fraction = 0.5, seeded); the liar's is found
# different, a third worker settles it, and the coordinator bans worker 0: its node is told to
# stop, the step runs again without it, the run completes with every micro-batch counted once,
# and the same node started again is refused by name. Processes are stopped by pid.
bin=$1 root=$2
source "$(dirname "$0")/lib.sh"
net=(--heartbeat-ms 100 --connection-timeout-ms 1000)
unset SWARMRT_SECRET

start_coordinator -c "$root/configs/tiny.toml" --listen 127.0.0.1:0 -o "$tmp/run" "${net[@]}" \
  --set "data.path=$root/data/brown.txt" --set swarm.mode=swarm --set swarm.workers_per_stage=3 \
  --set swarm.wiring=uniform --set train.steps=60 --set train.eval_every=0 \
  --set train.eval_batches=4 --set balancer.enabled=false --set verify.fraction=0.5 \
  --set verify.seed=3 --set chaos.hop_noise=1.0 --set chaos.malicious_workers=1 \
  --set chaos.malicious_from_step=5
# The first node to join takes workers 0 (stage 0) and 1000 (stage 1): the liars.
join_node liar -w 2 "${net[@]}"
liar=$node
wait_log "$tmp/coord.log" "node 'liar' joined" 30 || fail "the first node did not join"
join_node honest1 -w 2 "${net[@]}"
join_node honest2 -w 2 "${net[@]}"
wait_log "$tmp/coord.log" "worker 0 banned" 120 ||
  fail "worker 0 was not banned: $(grep -c '"event":"spot_check"' "$tmp/run/metrics.jsonl") checks"
wait_log "$tmp/coord.log" "node 'liar' banned for the rest of the run" 10 || fail "its node was not banned"
# The console shows the ban while the run goes on.
ctl info tracker --json >"$tmp/tracker.json" || fail "ctl info tracker: $(cat "$tmp/tracker.json")"
py 'import json, sys
c = json.load(open(sys.argv[1]))["actor"]["info"]["spot_checks"]
assert c["bans"] == 1 and c["banned"][0]["worker"] == 0 and c["checks"] >= 1, c' "$tmp/tracker.json" ||
  fail "ctl info tracker does not show the ban: $(cat "$tmp/tracker.json")"
wait_exit "$liar" 20 || fail "the banned node still runs"
grep -q "the coordinator said stop" "$tmp/liar.log" || fail "the banned node was not told to stop: $(tail -5 "$tmp/liar.log")"
# The same node again: refused by name.
"$bin" node --join "127.0.0.1:$port" --secret-file "$tmp/run/secret" -w 2 --name liar "${net[@]}" \
  >"$tmp/again.log" 2>&1 &
again=$!
pids+=("$again")
wait_exit "$again" 30 || fail "the banned node's second start still runs"
grep -q "is banned from this run: worker 0 failed a spot check of stage 0" "$tmp/again.log" ||
  fail "the banned node was not told why it was refused: $(tail -5 "$tmp/again.log")"
wait_exit "$coord" 300 || fail "the coordinator still runs after 300 s"
wait "$coord" || fail "coordinator exited with $?: $(tail -20 "$tmp/coord.log")"
py 'import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in recs if r.get("event") == "step"]
assert [r["step"] for r in steps] == list(range(1, 61)), [r["step"] for r in steps]
assert all(r["extra_samples"] == 0 and r["missing_samples"] == 0 for r in steps)
bans = [r for r in recs if r.get("kind") == "banned"]
assert len(bans) == 1 and bans[0]["worker"] == 0 and bans[0]["step"] >= 5, bans
checks = [r for r in recs if r.get("event") == "spot_check"]
assert all(c["verdict"] == "agreed" for c in checks if c["step"] < 5), checks
last = steps[-1]["spot_checks"]
assert last["bans"] == 1 and last["banned"][0]["worker"] == 0, last
print("ok: worker 0 banned at step %d after %d spot checks" % (bans[0]["step"], len(checks)))' \
  "$tmp/run/metrics.jsonl" || fail "the run's records"
