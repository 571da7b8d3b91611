#!/usr/bin/env bash
# The coordinator replicas from the console (#32): two replicas of one run on an etcd of the
# test's own and two nodes, n2 given only the standby's address: the standby's port names the
# leader, and n2 joins it. `ctl B,A` (B the standby) reaches the leader;
# `nodes` lists both replicas with role, epoch, pid and address (b's the one it advertises).
# `kill-coordinator` ends the leader's process (exit 137) and is recorded; the standby takes
# over and `nodes` then lists it alone as leader under a higher epoch. `ctl --etcd URL --run-id ID` finds the leader through the
# replicas etcd lists, before and after the takeover; `ctl` given the standby's address alone
# is sent on to the leader. With no standby left, kill-coordinator asks first (exit 2)
# and kills nothing; the run completes with one step record per step. The workers are slowed
# while the console is at work, so that a short run outlasts it, and healed for the rest of it.
# Processes are stopped by pid.
bin=$1 root=$2
source "$(dirname "$0")/lib.sh"
replicas_test coordinator-console
run_id=00000000000000dd steps=100
pa=$(free_port) pb=$(free_port)
replica() {  # NAME PORT [ARGS...]
  local name=$1 port=$2
  shift 2
  "$bin" coordinator -c "$root/configs/tiny.toml" --listen "127.0.0.1:$port" "$@" -o "$tmp/run" \
    --etcd "$etcd_url" --lease-ttl-s 2 --run-id $run_id --set "data.path=$root/data/brown.txt" \
    --set train.steps=$steps --set train.eval_every=0 --set train.eval_batches=4 \
    --set checkpoint.every_steps=10 --set diloco.inner_steps=10 --set balancer.enabled=false \
    >"$tmp/$name.log" 2>&1 &
  pids+=($!)
}
both="127.0.0.1:$pb,127.0.0.1:$pa"
# coordinators [CTL ARGS]: the `coordinators` rows of `ctl $both nodes --json` (or of
# `ctl CTL ARGS nodes --json`), as "role:epoch:pid".
coordinators() {
  [ $# = 0 ] && set -- "$both"
  "$bin" ctl "$@" nodes --json >"$tmp/nodes.json" 2>"$tmp/ctl.err" || return 1
  py '
import json, sys
rows = json.load(open(sys.argv[1]))["coordinators"]
print(" ".join("%s:%s:%s" % (r["role"], r["epoch"], r["pid"]) for r in rows))
' "$tmp/nodes.json"
}
on_fail() { for n in a b n1 n2; do echo "--- $n:"; tail -15 "$tmp/$n.log"; done; }
replica a "$pa"
a=$!
wait_log "$tmp/a.log" "leading run $run_id" 30 || fail "replica a does not lead"
# b is listed under the address it advertises: 127.1 is 127.0.0.1 spelt otherwise, so the list
# shows which one it took, and nodes and consoles still reach it on this machine.
replica b "$pb" --advertise "127.1:$pb"
b=$!
wait_log "$tmp/b.log" "standby for run $run_id" 30 || fail "replica b is not a standby"
wait_log "$tmp/b.log" "standby: 127.0.0.1:$pb answers" 10 || fail "the standby opened no port"
# The standby's port admits only the cluster: another secret is refused, without the leader's
# address; bytes that are no TLS handshake close the connection and the standby goes on.
out=$(SWARMRT_SECRET=not-this-cluster "$bin" ctl "127.0.0.1:$pb" nodes 2>&1)
rc=$?
[ $rc -eq 1 ] && grep -q "refused this console" <<<"$out" && ! grep -q "$pa" <<<"$out" ||
  fail "a console with another secret at the standby: rc $rc, $out"
py '
import os, socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(os.urandom(4096))
s.settimeout(5)
try:
    while s.recv(4096):
        pass
except OSError:
    pass
' "$pb" || fail "the standby's port did not take or close a stranger's bytes"
running "$b" || fail "the standby died of a stranger's bytes"
[[ "$(coordinators "127.0.0.1:$pb")" == "leader:"*":$a"* ]] || fail "the standby no longer names the leader"
# n1 knows both replicas; n2 only the standby, which names the leader: the run starts only
# when both have joined.
for n in n1 n2; do
  join="127.0.0.1:$pa,127.0.0.1:$pb"
  [ $n = n2 ] && join="127.0.0.1:$pb"
  "$bin" node --join "$join" --run-id $run_id --workers 2 --name $n \
    --connect-timeout-s 60 >"$tmp/$n.log" 2>&1 &
  pids+=($!)
done
wait_log "$tmp/a.log" "step 15/$steps" 180 || fail "the run did not reach step 15"
# Slowed while the console is at work (the balancer is off: no worker is moved for it).
slow_workers 4 "$bin" ctl "$both"
grep -q "127.0.0.1:$pb is a standby coordinator; it names the leader first: 127.0.0.1:$pa" \
  "$tmp/n2.log" || fail "n2 did not learn the leader from the standby: $(tail -5 "$tmp/n2.log")"
grep -q "node 'n2' serving 2 workers for the coordinator at 127.0.0.1:$pa" "$tmp/n2.log" ||
  fail "n2 does not serve the leader: $(tail -5 "$tmp/n2.log")"
# The standby's key may take one refresh (1 s) to show in the leader's list.
seen=""
for _ in $(seq 1 30); do
  seen=$(coordinators) || fail "ctl $both nodes: $(cat "$tmp/ctl.err")"
  [[ "$seen" == *standby* ]] && break
  nap 0.2
done
[[ "$seen" =~ ^leader:([0-9]+):$a\ standby:None:$b$ ]] ||
  fail "ctl nodes lists the replicas as '$seen', not leader (pid $a) and standby (pid $b)"
epoch_a=${BASH_REMATCH[1]}
py '
import json, sys
rows = json.load(open(sys.argv[1]))["coordinators"]
assert [r["address"] for r in rows] == sys.argv[2:], rows
' "$tmp/nodes.json" "127.0.0.1:$pa" "127.1:$pb" || fail "the replicas are not listed at their addresses"
"$bin" ctl "$both" nodes >"$tmp/nodes.txt" || fail "ctl nodes (text)"
# Through etcd: the address left out, the command's first word where it would be.
via_etcd=$(coordinators --etcd "$etcd_url" --run-id $run_id) ||
  fail "ctl --etcd nodes: $(cat "$tmp/ctl.err")"
[[ "$via_etcd" == "leader:$epoch_a:$a "* ]] || fail "ctl --etcd nodes lists '$via_etcd'"
# The standby's address alone: it names the leader, and the console asks there.
via_standby=$(coordinators "127.0.0.1:$pb") || fail "ctl STANDBY nodes: $(cat "$tmp/ctl.err")"
[ "$via_standby" = "$seen" ] || fail "ctl STANDBY nodes lists '$via_standby', not '$seen'"
grep -q "127.0.0.1:$pb is a standby coordinator: asking 127.0.0.1:$pa" "$tmp/ctl.err" ||
  fail "the console did not say it was sent on: $(cat "$tmp/ctl.err")"
grep -q "^COORDINATOR" "$tmp/nodes.txt" && grep -q "^standby .* $b " "$tmp/nodes.txt" ||
  fail "the nodes table has no coordinator rows: $(cat "$tmp/nodes.txt")"
answer=$("$bin" ctl "$both" kill-coordinator 2>&1) || fail "kill-coordinator: $answer"
[[ "$answer" == *"pid $a"* ]] || fail "kill-coordinator answered '$answer'"
exits_with "$a" 10 137 "the leader killed from the console"
wait_log "$tmp/b.log" "leading run $run_id .*taking over" 30 || fail "the standby did not take over"
# The new leader's first step (the steps since the newest checkpoint run again).
wait_log "$tmp/b.log" "step [0-9]*/$steps" 180 || fail "the new leader completed no step"
# The workers continue from the states their nodes kept, at full speed: slowed again.
slow_workers 4 "$bin" ctl "$both"
seen=$(coordinators) || fail "ctl $both nodes after the takeover: $(cat "$tmp/ctl.err")"
[[ "$seen" =~ ^leader:([0-9]+):$b$ ]] || fail "after the takeover ctl nodes lists '$seen'"
[ "${BASH_REMATCH[1]}" -gt "$epoch_a" ] || fail "the new epoch ${BASH_REMATCH[1]} is not above $epoch_a"
via_etcd=$(coordinators --etcd "$etcd_url" --run-id $run_id) ||
  fail "ctl --etcd nodes after the takeover: $(cat "$tmp/ctl.err")"
[ "$via_etcd" = "$seen" ] || fail "after the takeover ctl --etcd nodes lists '$via_etcd', not '$seen'"
# No standby now: the console asks first, and without --yes nothing is killed.
"$bin" ctl "$both" kill-coordinator >"$tmp/ask.out" 2>&1
code=$?
[ $code = 2 ] || fail "kill-coordinator with no standby exited $code, not 2: $(cat "$tmp/ask.out")"
grep -q "no standby coordinator" "$tmp/ask.out" || fail "no reason given: $(cat "$tmp/ask.out")"
running "$b" || fail "the last coordinator was killed without confirmation"
slow_workers 1 "$bin" ctl "$both"
wait_exit "$b" 300 || fail "the new leader still runs after 300 s"
wait "$b" || fail "the new leader exited with $?"
check_records "$tmp/run/metrics.jsonl" $steps '
console = [r for r in of("console") if "kill-coordinator" in json.dumps(r)]
assert len(console) == 1, f"console records of kill-coordinator: {console}"
faults, recovered = of("fault", "coordinator"), of("recovered", "coordinator")
assert len(faults) == 1 and len(recovered) == 1, f"failover records: {faults} {recovered}"
' || fail "the run's records"
echo "ok: leader pid $a (epoch $epoch_a) killed from the console; $seen led on"
