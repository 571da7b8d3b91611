#!/usr/bin/env bash
# Nodes on separate network hosts: three network namespaces (coordinator and two nodes) on one
# bridge, each link capped at 100 Mbit/s with tc tbf, and 5 ms added to every frame by
# chaos.link_delay_ms (this kernel has tbf but no netem). The coordinator listens on its
# namespace address (so a secret is required), the nodes join from theirs, and a short
# diloco-swarm run completes. Processes are stopped by pid and the namespaces removed, also on
# failure.
bin=$1 root=$2
tag=$(( $$ % 100000 ))
names=("swc$tag" "swa$tag" "swb$tag") addrs=(10.231.7.1 10.231.7.2 10.231.7.3)
source "$(dirname "$0")/lib.sh"
# Stopped gently first (each writes its last line), then the namespaces go.
at_exit 'for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done; sleep 0.5'
on_fail() { for i in 1 2; do echo "--- node $i log:"; tail -20 "$tmp/node$i.log" 2>/dev/null; done; }
# Background processes start with `ip netns exec` itself (it execs them), not through ns: `$!`
# is then their own pid, which the cleanup stops.
ns() { ip netns exec "$@"; }
bridged_namespaces "swh$tag" 100mbit "${names[0]}=${addrs[0]}" "${names[1]}=${addrs[1]}" \
  "${names[2]}=${addrs[2]}"

export SWARMRT_SECRET=netns-test
ip netns exec "${names[0]}" "$bin" coordinator -c "$root/configs/tiny.toml" --listen "${addrs[0]}:7411" \
  --set "data.path=$root/data/brown.txt" --set train.steps=8 --set train.eval_every=0 \
  --set train.eval_batches=4 --set diloco.inner_steps=4 --set chaos.link_delay_ms=5 \
  -o "$tmp/run" >"$tmp/coord.log" 2>&1 &
pids+=($!)
coord=$!
for i in 1 2; do
  ip netns exec "${names[$i]}" "$bin" node --join "${addrs[0]}:7411" --workers 2 --name "ns$i" \
    --listen "${addrs[$i]}" >"$tmp/node$i.log" 2>&1 &
  pids+=($!)
done
wait_exit "$coord" 240 || fail "coordinator still running after 240 s: $(tail -20 "$tmp/coord.log")"
wait "$coord" || fail "coordinator exited with $?: $(tail -30 "$tmp/coord.log")"
grep -q "final validation loss" "$tmp/coord.log" || fail "no final loss: $(cat "$tmp/coord.log")"
grep -q "node 'ns1' joined" "$tmp/coord.log" || fail "ns1 did not join"
grep -q "chaos: every frame sent between processes waits 5 ms" "$tmp/coord.log" || fail "no link delay"
grep -q "node 'ns2' joined" "$tmp/coord.log" || fail "ns2 did not join"
# The qdisc really was in the path: it counted the nodes' bytes.
sent=$(ns "${names[1]}" tc -s qdisc show dev "v${names[1]}" | sed -n 's/.*Sent \([0-9]*\) bytes.*/\1/p' | head -1)
[ "${sent:-0}" -gt 100000 ] || fail "tbf on ${names[1]} saw only ${sent:-0} bytes"
for i in 1 2; do
  wait_exit "${pids[$i]}" 10
  grep -q "stopped" "$tmp/node$i.log" || fail "node $i did not stop: $(cat "$tmp/node$i.log")"
done
echo "ok: $(grep 'final validation loss' "$tmp/coord.log"); ${sent} bytes through node 1's tbf"
