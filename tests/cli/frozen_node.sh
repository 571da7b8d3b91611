#!/usr/bin/env bash
# Heartbeats: a node frozen with SIGSTOP is noticed by the coordinator within the configured
# connection timeout. Until supervisors re-wire around lost workers, the run then fails with a
# message naming the worker and the step, and the other node is told to stop. All processes
# are stopped by pid (SIGKILL also ends the frozen one).
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
  --set "data.path=$root/data/brown.txt" --set train.steps=300 >"$tmp/coord.log" 2>&1 &
coord=$!
pids+=("$coord")
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's/^coordinator listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$tmp/coord.log")
  [ -n "$port" ] && break
  sleep 0.2
done
[ -n "$port" ] || fail "the coordinator did not listen: $(cat "$tmp/coord.log")"
"$bin" node --join "127.0.0.1:$port" -w 2 --name steady "${net[@]}" >"$tmp/steady.log" 2>&1 &
steady=$!
pids+=("$steady")
"$bin" node --join "127.0.0.1:$port" -w 2 --name frozen "${net[@]}" >"$tmp/frozen.log" 2>&1 &
frozen=$!
pids+=("$frozen")
for _ in $(seq 1 600); do grep -q "step 5/300" "$tmp/coord.log" && break; sleep 0.1; done
grep -q "step 5/300" "$tmp/coord.log" || fail "the run did not reach step 5"
stopped_at=$(date +%s.%N)
kill -STOP "$frozen"
for _ in $(seq 1 100); do kill -0 "$coord" 2>/dev/null || break; sleep 0.1; done
kill -0 "$coord" 2>/dev/null && fail "the coordinator did not notice the frozen node within 10 s"
wait "$coord"
code=$?
[ $code = 1 ] || fail "a failed run must exit 1, got $code"
gone=$(grep "node 'frozen' .* is gone" "$tmp/coord.log" | head -1)
[ -n "$gone" ] || fail "no 'is gone' line: $(tail -5 "$tmp/coord.log")"
grep -q "swarm run failed: .*stage worker [0-9]* went down at step" "$tmp/coord.log" \
  || fail "the failure does not name the worker and step: $(tail -5 "$tmp/coord.log")"
# The coordinator logs wall-clock time: detection must lie within the 1 s timeout (+2 s slack
# for heartbeat phase and scheduling).
seen=$(echo "$gone" | sed -n 's/^\[\([0-9:.]*\)\].*/\1/p')
delay=$(awk -v s="$stopped_at" -v t="$seen" 'BEGIN { split(t, a, ":"); d = a[1]*3600 + a[2]*60 + a[3] - (s % 86400); print d }')
awk -v d="$delay" 'BEGIN { exit !(d >= 0 && d < 3.0) }' || fail "detected after $delay s"
for _ in $(seq 1 50); do kill -0 "$steady" 2>/dev/null || break; sleep 0.1; done
kill -0 "$steady" 2>/dev/null && fail "the steady node was not stopped"
echo "ok: frozen node noticed after ${delay} s"
