#!/usr/bin/env bash
# A node that joins across a slow link keeps it. The coordinator (which holds the DiLoCo group)
# and node a share one network namespace; node b has one of its own whose link to the bridge is
# shaped by tc tbf to 10 Mbit/s both ways. Node b's worker takes its state from the group over
# the control plane: the tiny model's θ (3.5 MB) takes 2.8 s to cross, longer than the
# middleman's 2 s connection timeout, which judges a connection by its last whole message. In
# slices (transport/relay.hpp) each arrives in a fraction of that, so the run (sparse DiLoCo
# rounds, 1 stage x 2 workers) ends with node b never lost and never attaching again.
bin=$1 root=$2
tag=$(($$ % 100000))
names=("sja$tag" "sjb$tag") addrs=(10.231.11.1 10.231.11.2)
source "$(dirname "$0")/lib.sh"
on_fail() { for n in a b; do echo "--- node $n:"; tail -15 "$tmp/$n.log" 2>/dev/null; done; }
hub=sjh$tag
bridged_namespaces "$hub" 1gbit "${names[0]}=${addrs[0]}" "${names[1]}=${addrs[1]}"
tbf_rate 10mbit 32kb "${names[1]}"
# What the hub sends node b (the state, the answers) is shaped too.
ip netns exec "$hub" tc qdisc add dev "p${names[1]}" root tbf rate 10mbit burst 32kb latency 50ms ||
  fail "tbf on the hub's end of node b's link"

export SWARMRT_SECRET=slow-join-test
unset SWARMRT_SECRET_FILE
ip netns exec "${names[0]}" "$bin" coordinator -c "$root/configs/tiny.toml" --listen "${addrs[0]}:7431" \
  --set "data.path=$root/data/brown.txt" --set swarm.mode=diloco --set swarm.stages=1 \
  --set swarm.workers_per_stage=2 --set diloco.inner_steps=4 --set diloco.compress=topk \
  --set diloco.topk_density=0.02 --set diloco.outer_lr=1 --set diloco.outer_momentum=0 \
  --set train.steps=24 --set train.eval_every=0 --set train.eval_batches=4 \
  --set checkpoint.every_steps=0 -o "$tmp/out" >"$tmp/coord.log" 2>&1 &
coord=$!
pids+=("$coord")
fail_log="$tmp/coord.log"
# Node a first: the worker that joins second is the one that takes the group's θ.
ns_node a "${names[0]}" "${addrs[0]}" "${addrs[0]}:7431"
wait_log "$tmp/coord.log" "node 'a' joined" 60 || fail "node a did not join in 60 s"
ns_node b "${names[1]}" "${addrs[1]}" "${addrs[0]}:7431"
wait_exit "$coord" 300 || fail "the run did not end in 300 s"
wait "$coord" || fail "the coordinator exited with $?"
grep -q "final validation loss" "$tmp/coord.log" || fail "no final validation loss"
! grep -q "node 'b' (node [0-9]*) is gone" "$tmp/coord.log" ||
  fail "node b was lost: $(grep -c "node 'b' (node [0-9]*) is gone" "$tmp/coord.log") times"
! grep -q "attaching again" "$tmp/b.log" || fail "node b attached again"
grep -q "took its state from DiLoCo group" "$tmp/b.log" || fail "node b's worker took no state"
# The state really crossed the shaped link: the hub's end sent node b more than θ.
sent=$(ip netns exec "$hub" tc -s qdisc show dev "p${names[1]}" |
  sed -n 's/.*Sent \([0-9]*\) bytes.*/\1/p' | head -1)
[ "${sent:-0}" -gt 3500000 ] || fail "the hub sent node b only ${sent:-0} bytes through its tbf"
echo "ok: node b joined across 10 Mbit/s and stayed; the hub sent it $sent bytes"
