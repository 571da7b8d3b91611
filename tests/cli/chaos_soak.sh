#!/usr/bin/env bash
# Test 7 of the supervision issue, across processes: a diloco-swarm run of a coordinator and
# two nodes on 127.0.0.1 while every process's chaos control kills one of its own supervised
# actors (groups and loaders on the coordinator, workers on the nodes) every 0.2 s, and this
# script SIGKILLs a node process three times, starting it again each time; 1% of the
# micro-batch hops are lost on the way and every link is capped at 200 Mbit/s. The run completes;
# every step of metrics.jsonl counts its micro-batches once (no duplicate completion, no
# sample backpropagated twice or missed). Processes are stopped by pid. SOAK_STEPS changes the
# run length; SOAK_KEEP=DIR keeps the logs and metrics there.
bin=$1 root=$2
steps=${SOAK_STEPS:-90}
source "$(dirname "$0")/lib.sh"
at_exit '[ -n "${SOAK_KEEP:-}" ] && cp -r "$tmp" "$SOAK_KEEP"'
# A run that stalls says where: the tracker's own view (phase, waiting micro-batches, paused,
# members) and what the coordinator and the nodes said about pauses, resets and refusals.
on_fail() {
  echo "--- ctl info:"
  timeout 10 "$bin" ctl "127.0.0.1:$port" --secret-file "$tmp/run/secret" info tracker 2>&1 | head -40
  for w in $(timeout 10 "$bin" ctl "127.0.0.1:$port" --secret-file "$tmp/run/secret" actors --kind worker 2>/dev/null | grep -o 'worker/[0-9]*' | sort -u); do
    timeout 10 "$bin" ctl "127.0.0.1:$port" --secret-file "$tmp/run/secret" info "$w" 2>&1 | head -20
  done
  echo "--- pauses, resets, refusals and stale hops in every log:"
  grep -H "paused\|resumed\|reopen\|rejected\|refused\|stale\|error" "$tmp"/*.log | tail -40
}
net=(--heartbeat-ms 100 --connection-timeout-ms 1000)
step_lines() { grep -c "^\[.*step [0-9]*/$steps" "$tmp/coord.log"; }

# Nodes take the coordinator's config, chaos and supervision included.
start_coordinator -c "$root/configs/tiny.toml" --listen 127.0.0.1:0 -o "$tmp/run" "${net[@]}" \
  --set "data.path=$root/data/brown.txt" --set train.steps="$steps" --set train.eval_every=0 \
  --set train.eval_batches=4 --set diloco.inner_steps=5 --set checkpoint.every_steps=0 \
  --set chaos.kill=any --set chaos.kill_every_s=0.2 --set chaos.kill_limit=15 \
  --set chaos.seed=11 --set supervision.max_restarts=200 --set supervision.max_backoff_ms=200 \
  --set chaos.drop_fraction=0.01 --set chaos.link_mbit_s=200 \
  --set supervision.microbatch_timeout_s=2
# A node's log is named by its life: a0, a1 (a restarted), ...
start_node() { # name log
  "$bin" node --join "127.0.0.1:$port" --secret-file "$tmp/run/secret" -w 2 --name "$1" "${net[@]}" >"$2" 2>&1 &
  pids+=($!)
  last_pid=$!
}
start_node a "$tmp/a0.log"
node_a=$last_pid
start_node b "$tmp/b0.log"
node_b=$last_pid

# Three node kills, at a third, a half and two thirds of the run; a, b, a.
victims=(a b a)
for i in 0 1 2; do
  at=$(((i + 2) * steps / 6))
  for _ in $(seq 1 1200); do [ "$(step_lines)" -ge "$at" ] && break; nap 0.1; done
  [ "$(step_lines)" -ge "$at" ] || fail "the run did not reach step $at: $(tail -5 "$tmp/coord.log")"
  v=${victims[$i]}
  if [ "$v" = a ]; then victim=$node_a; else victim=$node_b; fi
  lost_before=$(grep -c '"kind":"worker_lost"' "$tmp/run/metrics.jsonl")
  gone_before=$(grep -c "node .* is gone" "$tmp/coord.log")
  kill -KILL "$victim"
  echo "killed node $v (pid $victim) at step $(step_lines)"
  # The directory notices the node gone (the connection timeout, 1 s); counted from before the
  # kill, as earlier kills' lines stay in the log.
  for _ in $(seq 1 100); do
    [ "$(grep -c "node .* is gone" "$tmp/coord.log")" -gt "$gone_before" ] && break
    nap 0.1
  done
  sleep 1.5 # its workers are out of the swarm before the node starts again
  start_node "$v" "$tmp/$v$((i + 1)).log"
  if [ "$v" = a ]; then node_a=$last_pid; else node_b=$last_pid; fi
  [ "$(grep -c '"kind":"worker_lost"' "$tmp/run/metrics.jsonl")" -gt "$lost_before" ] \
    || fail "the killed node's workers were not noticed as lost"
done

wait_exit "$coord" 300 || fail "the coordinator still runs after 300 s: $(tail -5 "$tmp/coord.log")"
wait "$coord" || fail "coordinator exited with $?: $(tail -20 "$tmp/coord.log")"
grep -q "final validation loss" "$tmp/coord.log" || fail "no final loss"

m="$tmp/run/metrics.jsonl"
python3 - "$m" "$steps" <<'EOF' || fail "metrics.jsonl shows a lost or duplicated micro-batch"
import json, sys
steps = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("event") == "step":
        steps[r["step"]] = r
want = int(sys.argv[2])
bad = [s for s in range(1, want + 1) if s not in steps]
if bad:
    sys.exit(f"steps missing from metrics.jsonl: {bad[:10]}")
for s, r in sorted(steps.items()):
    if r["duplicates"] or r["extra_samples"] or r["missing_samples"]:
        sys.exit(f"step {s}: duplicates {r['duplicates']}, extra samples {r['extra_samples']}, "
                 f"missing samples {r['missing_samples']}")
EOF
kills=$(cat "$tmp"/*.log | grep -c "chaos: killing")
restarts=$(cat "$tmp"/*.log | grep -c "supervisor: restarted")
timeouts=$(grep -c '"kind":"microbatch_timeout"' "$m")
echo "actor kills: $kills, supervisor restarts: $restarts, node kills: 3, micro-batches re-run after a lost hop: $timeouts"
[ "$kills" -ge 50 ] || fail "only $kills actor kills (want >= 50)"
# Every kill is restarted, except workers whose node was SIGKILLed before their restart (2 a node).
[ "$restarts" -ge $((kills - 6)) ] || fail "only $restarts restarts after $kills kills"
echo "ok: $steps steps, $kills actor kills and 3 node kills, no micro-batch lost or counted twice"
