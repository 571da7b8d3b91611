#!/usr/bin/env bash
# Test 4 of the supervision issue: a node frozen with SIGSTOP is noticed by the coordinator
# within the configured connection timeout; its workers leave the swarm and the run goes on
# with the other node. SIGCONT then does not corrupt the run: the thawed node finds its
# coordinator gone and stops, and nothing it had in flight is counted. All processes are
# stopped by pid.
set -u
bin=$1 root=$2
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
export TZ=UTC  # log times and date +%s agree
net=(--heartbeat-ms 100 --connection-timeout-ms 1000)

"$bin" coordinator -c "$root/configs/tiny.toml" --listen 127.0.0.1:0 -o "$tmp/run" "${net[@]}" \
  --set "data.path=$root/data/brown.txt" --set train.steps=40 --set train.eval_every=0 --set train.eval_batches=4 >"$tmp/coord.log" 2>&1 &
coord=$!
pids+=("$coord")
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's/^coordinator listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$tmp/coord.log")
  [ -n "$port" ] && break
  sleep 0.2
done
[ -n "$port" ] || fail "the coordinator did not listen: $(cat "$tmp/coord.log")"
"$bin" node --join "127.0.0.1:$port" --secret-file "$tmp/run/secret" -w 2 --name steady "${net[@]}" >"$tmp/steady.log" 2>&1 &
steady=$!
pids+=("$steady")
"$bin" node --join "127.0.0.1:$port" --secret-file "$tmp/run/secret" -w 2 --name frozen "${net[@]}" >"$tmp/frozen.log" 2>&1 &
frozen=$!
pids+=("$frozen")
for _ in $(seq 1 600); do grep -q "step 5/40" "$tmp/coord.log" && break; sleep 0.1; done
grep -q "step 5/40" "$tmp/coord.log" || fail "the run did not reach step 5"
stopped_at=$(date +%s.%N)
kill -STOP "$frozen"
for _ in $(seq 1 100); do grep -q "node 'frozen' .* is gone" "$tmp/coord.log" && break; sleep 0.1; done
gone=$(grep "node 'frozen' .* is gone" "$tmp/coord.log" | head -1)
[ -n "$gone" ] || fail "the coordinator did not notice the frozen node within 10 s: $(tail -5 "$tmp/coord.log")"
# The coordinator logs wall-clock time: detection must lie within the 1 s timeout (+2 s slack
# for heartbeat phase and scheduling).
seen=$(echo "$gone" | sed -n 's/^\[\([0-9:.]*\)\].*/\1/p')
delay=$(awk -v s="$stopped_at" -v t="$seen" 'BEGIN { split(t, a, ":"); d = a[1]*3600 + a[2]*60 + a[3] - (s % 86400); print d }')
awk -v d="$delay" 'BEGIN { exit !(d >= 0 && d < 3.0) }' || fail "detected after $delay s"
kill -CONT "$frozen"
for _ in $(seq 1 300); do kill -0 "$coord" 2>/dev/null || break; sleep 1; done
kill -0 "$coord" 2>/dev/null && fail "the coordinator still runs after 300 s"
wait "$coord" || fail "the run must complete without the frozen node, exit $?: $(tail -20 "$tmp/coord.log")"
grep -q "final validation loss" "$tmp/coord.log" || fail "no final loss"
grep -q "step 40/40" "$tmp/coord.log" || fail "not every step ran"
for _ in $(seq 1 100); do kill -0 "$frozen" 2>/dev/null || break; sleep 0.1; done
kill -0 "$frozen" 2>/dev/null && fail "the thawed node did not stop"
for _ in $(seq 1 50); do kill -0 "$steady" 2>/dev/null || break; sleep 0.1; done
kill -0 "$steady" 2>/dev/null && fail "the steady node was not stopped"
echo "ok: frozen node noticed after ${delay} s; the run completed; the thawed node stopped"
