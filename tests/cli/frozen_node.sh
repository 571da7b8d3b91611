#!/usr/bin/env bash
# Test 4 of the supervision issue: a node frozen with SIGSTOP is noticed by the coordinator
# within the configured connection timeout; its workers leave the swarm and the run goes on
# with the other node. SIGCONT then does not corrupt the run: the thawed node finds its
# coordinator's link gone, stops its old workers (nothing they had in flight is counted) and
# attaches again as a new node, which the coordinator stops with the run. All processes are
# stopped by pid.
bin=$1 root=$2
source "$(dirname "$0")/lib.sh"
export TZ=UTC  # log times and date +%s agree
net=(--heartbeat-ms 100 --connection-timeout-ms 1000)

start_coordinator -c "$root/configs/tiny.toml" --listen 127.0.0.1:0 -o "$tmp/run" "${net[@]}" \
  --set "data.path=$root/data/brown.txt" --set train.steps=40 --set train.eval_every=0 --set train.eval_batches=4
join_node steady -w 2 "${net[@]}"
steady=$node
join_node frozen -w 2 "${net[@]}"
frozen=$node
wait_log "$tmp/coord.log" "step 5/40" 60 || fail "the run did not reach step 5"
stopped_at=$(date +%s.%N)
kill -STOP "$frozen"
wait_log "$tmp/coord.log" "node 'frozen' .* is gone" 10
gone=$(grep "node 'frozen' .* is gone" "$tmp/coord.log" | head -1)
[ -n "$gone" ] || fail "the coordinator did not notice the frozen node within 10 s: $(tail -5 "$tmp/coord.log")"
# The coordinator logs wall-clock time: detection must lie within the 1 s timeout (+2 s slack
# for heartbeat phase and scheduling).
seen=$(echo "$gone" | sed -n 's/^\[\([0-9:.]*\)\].*/\1/p')
delay=$(awk -v s="$stopped_at" -v t="$seen" 'BEGIN { split(t, a, ":"); d = a[1]*3600 + a[2]*60 + a[3] - (s % 86400); print d }')
awk -v d="$delay" 'BEGIN { exit !(d >= 0 && d < 3.0) }' || fail "detected after $delay s"
kill -CONT "$frozen"
wait_exit "$coord" 300 || fail "the coordinator still runs after 300 s"
wait "$coord" || fail "the run must complete without the frozen node, exit $?: $(tail -20 "$tmp/coord.log")"
grep -q "final validation loss" "$tmp/coord.log" || fail "no final loss"
grep -q "step 40/40" "$tmp/coord.log" || fail "not every step ran"
wait_exit "$frozen" 10 || fail "the thawed node did not stop"
grep -q "attaching again" "$tmp/frozen.log" || fail "the thawed node did not try to attach again"
wait_exit "$steady" 5 || fail "the steady node was not stopped"
echo "ok: frozen node noticed after ${delay} s; the run completed; the thawed node stopped"
