#!/usr/bin/env bash
# A transient partition (#32): three network namespaces on a bridge (coordinator, node "cut",
# node "steady"); the cut node's link goes down for 6 s at step 20 and comes back. The
# coordinator drops the cut node's workers and trains on with the steady node's; the cut node
# loses its coordinator, keeps trying, and attaches again as soon as the link is back: the
# same process (same pid, never restarted) joins as a new node and its workers serve the rest
# of the run as late joiners do, so the swarm is back at full strength. Processes are stopped
# by pid and the namespaces removed, also on failure.
bin=$1 root=$2
tag=$(( $$ % 100000 ))
names=("spc$tag" "spa$tag" "spb$tag") addrs=(10.231.8.1 10.231.8.2 10.231.8.3)
source "$(dirname "$0")/lib.sh"
at_exit 'for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done; sleep 0.5'
on_fail() { for n in cut steady; do echo "--- $n log:"; tail -25 "$tmp/$n.log" 2>/dev/null; done; }
# Background processes start with `ip netns exec` itself (it execs them), not through ns: `$!`
# is then their own pid, which the cleanup stops.
ns() { ip netns exec "$@"; }
bridged_namespaces "sph$tag" "" "${names[0]}=${addrs[0]}" "${names[1]}=${addrs[1]}" \
  "${names[2]}=${addrs[2]}"

export SWARMRT_SECRET=partition-test
steps=100
ip netns exec "${names[0]}" "$bin" coordinator -c "$root/configs/tiny.toml" --listen "${addrs[0]}:7412" \
  --set "data.path=$root/data/brown.txt" --set train.steps=$steps --set train.eval_every=0 \
  --set train.eval_batches=4 --set diloco.inner_steps=10 --set checkpoint.every_steps=0 \
  -o "$tmp/run" >"$tmp/coord.log" 2>&1 &
coord=$!
pids+=("$coord")
fail_log="$tmp/coord.log"
start_in() {  # NAMESPACE_INDEX NAME
  ip netns exec "${names[$1]}" "$bin" node --join "${addrs[0]}:7412" --workers 2 --name "$2" \
    --listen "${addrs[$1]}" --connect-timeout-s 60 >"$tmp/$2.log" 2>&1 &
  pids+=($!)
}
start_in 1 cut
cut=$!
start_in 2 steady
steady=$!
wait_log "$tmp/coord.log" "step 20/$steps" 180 || fail "the run did not reach step 20"
ns "${names[1]}" ip link set "v${names[1]}" down
wait_log "$tmp/coord.log" "node 'cut' .* is gone" 20 || fail "the coordinator did not drop the cut node"
wait_log "$tmp/cut.log" "lost the coordinator" 20 || fail "the cut node did not notice"
sleep 4
ns "${names[1]}" ip link set "v${names[1]}" up
wait_log "$tmp/coord.log" "node 'cut' joined as node 2" 60 ||
  fail "the cut node did not attach again: $(tail -5 "$tmp/cut.log")"
wait_exit "$coord" 300 || fail "the coordinator still runs after 300 s"
wait "$coord" || fail "the coordinator exited with $?"
grep -q "step $steps/$steps" "$tmp/coord.log" || fail "not every step ran"
grep -q "final validation loss" "$tmp/coord.log" || fail "no final loss"
# Back at full strength after the rejoin: the membership counted 4 of 4 workers again.
sed -n "/node 'cut' joined as node 2/,\$p" "$tmp/coord.log" | grep -q "swarm has 4/4 workers" ||
  fail "the rejoined workers never entered the membership"
for n in cut steady; do
  pid=$([ $n = cut ] && echo "$cut" || echo "$steady")
  wait_exit "$pid" 15 || fail "node $n did not stop after the run"
  wait "$pid" || fail "node $n exited with $?: $(tail -5 "$tmp/$n.log")"
done
[ "$(grep -c "serving 2 workers" "$tmp/cut.log")" = 2 ] ||
  fail "the cut node should have served two attachments: $(grep serving "$tmp/cut.log")"
grep -q "attaching again" "$tmp/cut.log" || fail "the cut node never tried to attach again"
# The rejoined workers trained: after the rejoin, micro-batches went through them.
mb=$(sed -n "s/.*node 'cut' stopped; bytes sent by its workers: activations \([0-9.]*\) MB.*/\1/p" "$tmp/cut.log")
[ -n "$mb" ] || fail "the cut node did not stop cleanly"
# Each attachment reported its bytes under its own node index, so the run's swarm-wide totals
# count nothing twice: at most what the nodes themselves counted over both attachments, and
# short of it by no more than what was in flight when the link went down and at the end.
py '
import json, re, sys
steps = [r for r in map(json.loads, open(sys.argv[1])) if "step" in r and "bytes" in r]
record = {k: v / 1e6 for k, v in steps[-1]["bytes"].items()}
nodes = {}
for log in sys.argv[2:]:
    for line in open(log):
        m = re.search(r"stopped; bytes sent by its workers: (.*)", line)
        for kind, mb in re.findall(r"(\w+) ([0-9.]+) MB", m.group(1) if m else ""):
            nodes[kind] = nodes.get(kind, 0) + float(mb)
print("last step record (MB):", record, "nodes over all attachments (MB):", nodes)
for kind in ("activations", "gradients", "pseudo_gradients"):
    r, n = record[kind], nodes[kind]
    # The coordinator sends activations of its own (validation); the logs round to 0.1 MB.
    top = 1.05 * n + 0.3 if kind == "activations" else n + 0.3
    assert n > 1, f"the nodes sent no {kind}"
    assert 0.75 * n <= r <= top, f"{kind}: record {r} MB vs the nodes own {n} MB"
' "$tmp/run/metrics.jsonl" "$tmp/cut.log" "$tmp/steady.log" || fail "swarm-wide bytes"
echo "ok: cut node $cut attached twice, run completed: $(grep 'final validation loss' "$tmp/coord.log")"
