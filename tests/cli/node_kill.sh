#!/usr/bin/env bash
# Test 3 of the supervision issue: a node process SIGKILLed at step 10 of a diloco-swarm run.
# The coordinator notices through heartbeats and monitors, removes its workers and the run goes
# on with the other node; the node is started again, rejoins, its workers take their stage's
# state from a peer (the DiLoCo group) and take work. Processes are stopped by pid.
# With a third argument "comm" the workers exchange hops over TCP communicator links
# (transport.links = comm): links to the dead node fail, those hops are re-run, and the
# node that comes back opens new links.
bin=$1 root=$2 links=${3:-auto}
source "$(dirname "$0")/lib.sh"
net=(--heartbeat-ms 100 --connection-timeout-ms 1000)

start_coordinator -c "$root/configs/tiny.toml" --listen 127.0.0.1:0 -o "$tmp/run" "${net[@]}" \
  --set "data.path=$root/data/brown.txt" --set train.steps=60 --set train.eval_every=0 \
  --set train.eval_batches=4 --set diloco.inner_steps=5 --set "transport.links=$links"
join_node steady -w 2 "${net[@]}"
join_node victim -w 2 "${net[@]}"
victim=$node
wait_log "$tmp/coord.log" "step 10/60" 60 || fail "the run did not reach step 10: $(tail -5 "$tmp/coord.log")"
kill -KILL "$victim"
wait_log "$tmp/coord.log" "went down at step" 10 || fail "the lost workers were not noticed"
# The run goes on without the node...
killed_at=$(grep -c "^\[.*step [0-9]*/60" "$tmp/coord.log")
for _ in $(seq 1 300); do
  [ "$(grep -c "^\[.*step [0-9]*/60" "$tmp/coord.log")" -ge $((killed_at + 3)) ] && break
  nap 0.1
done
[ "$(grep -c "^\[.*step [0-9]*/60" "$tmp/coord.log")" -ge $((killed_at + 3)) ] \
  || fail "no step completed after the node was killed: $(tail -5 "$tmp/coord.log")"
# ...and the node comes back.
"$bin" node --join "127.0.0.1:$port" --secret-file "$tmp/run/secret" -w 2 --name victim "${net[@]}" \
  >"$tmp/back.log" 2>&1 &
back=$!
pids+=("$back")
wait_exit "$coord" 300 || fail "the coordinator still runs after 300 s"
wait "$coord" || fail "coordinator exited with $?: $(tail -20 "$tmp/coord.log")"
grep -q "final validation loss" "$tmp/coord.log" || fail "no final loss"
grep -q '"kind":"worker_lost"' "$tmp/run/metrics.jsonl" || fail "no worker_lost fault in metrics.jsonl"
grep -q "took its state from DiLoCo group" "$tmp/back.log" \
  || fail "the restarted node's workers did not load state from a peer: $(cat "$tmp/back.log")"
wait_exit "$back" 10
mb=$(sed -n "s/.*node 'victim' stopped; bytes sent by its workers: activations \([0-9.]*\) MB.*/\1/p" "$tmp/back.log")
[ -n "$mb" ] || fail "the restarted node did not stop cleanly: $(tail -5 "$tmp/back.log")"
awk -v x="$mb" 'BEGIN { exit !(x > 0) }' || fail "the restarted node never took work"
if [ "$links" = comm ]; then
  grep -q "tcp link" "$tmp/victim.log" || fail "the victim had no link before it was killed"
  grep -q "tcp link" "$tmp/back.log" || fail "the node that came back has no link: $(cat "$tmp/back.log")"
  hops=$(sed -n 's/.* \([0-9]*\) hops came over communicator links.*/\1/p' "$tmp/coord.log")
  [ "${hops:-0}" -gt 0 ] || fail "no hop came over a link"
  echo "links: $hops hops over links; $(grep -c "link dropped\|frames instead" "$tmp/steady.log") links dropped by the steady node"
fi
echo "ok: node killed at step 10, the run went on, the node came back and sent $mb MB"
