#!/usr/bin/env bash
# The console issue's tests against a swarm of real processes: a coordinator and two nodes on
# 127.0.0.1, and `swarmrt ctl` as a user runs it — one-shot commands with --json and exit codes,
# a kill of two workers that their supervisors restart, a group's round, a worker's trace, a
# node killed from the console, the credential refused, and the interactive console through a
# pseudo-terminal (console_pty.py). The run must still complete. Processes are stopped by pid.
bin=$1 root=$2
source "$(dirname "$0")/lib.sh"
tops=()
net=(--heartbeat-ms 100 --connection-timeout-ms 1000)

# The balancer is off: the commands below name workers, and the slowdowns they make would
# move some (net.balancer tests the balancer through the console).
start_coordinator -c "$root/configs/tiny.toml" --listen 127.0.0.1:0 -o "$tmp/run" "${net[@]}" \
  --set "data.path=$root/data/brown.txt" --set train.steps=150 --set train.eval_every=0 \
  --set train.eval_batches=4 --set diloco.inner_steps=5 --set supervision.microbatch_timeout_s=8 \
  --set balancer.enabled=false
target=127.0.0.1:$port
# Node a opens a console port too: a console reaches the whole swarm through it.
join_node a -w 2 "${net[@]}" --console 127.0.0.1:0
join_node b -w 2 "${net[@]}"
wait_log "$tmp/coord.log" "step 3/150" 60 || fail "the run did not reach step 3: $(tail -5 "$tmp/coord.log")"
# Slowed down, the run outlasts every command below.
for w in stage0/worker0 stage0/worker1 stage1/worker0 stage1/worker1; do
  ctl slow "$w" 3 >/dev/null || fail "slow $w"
done

# Without the credential: refused, with the reason.
out=$("$bin" ctl "$target" nodes 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "no cluster secret" <<<"$out" || fail "no secret: rc $rc, $out"
out=$(SWARMRT_SECRET=not-this-cluster "$bin" ctl "$target" nodes 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "refused this console" <<<"$out" || fail "wrong secret: rc $rc, $out"

# Through node a's console port: the same swarm, the same credential rule.
nport=$(wait_port "$tmp/a.log" "node console") \
  || fail "node a opened no console port: $(tail -5 "$tmp/a.log")"
"$bin" ctl "127.0.0.1:$nport" --secret-file "$tmp/run/secret" nodes --json >"$tmp/via-node.json" \
  || fail "ctl through a node: $(cat "$tmp/via-node.json")"
py 'import json,sys; n=json.load(open(sys.argv[1]))["nodes"]; assert len(n) == 3 and all(r["alive"] for r in n), n' \
  "$tmp/via-node.json" || fail "nodes through a node: $(cat "$tmp/via-node.json")"
out=$(SWARMRT_SECRET=not-this-cluster "$bin" ctl "127.0.0.1:$nport" nodes 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "refused this console" <<<"$out" || fail "wrong secret at a node: rc $rc, $out"

# Interactive, through a pseudo-terminal.
python3 "$root/tests/cli/console_pty.py" "$bin" "$target" "$tmp/run/secret" live || exit 1

# actors --json: every actor with name, kind, stage, node and mailbox; four workers.
ctl actors --json >"$tmp/actors.json" || fail "actors: $(cat "$tmp/actors.json")"
py '
import json, sys
a = json.load(open(sys.argv[1]))["actors"]
for r in a:
    for k in ("name", "kind", "stage", "node", "mailbox", "handled", "restarts"):
        assert k in r, (k, r)
workers = sorted(r["name"] for r in a if r["kind"] == "worker")
assert len(workers) == 4 and all("@node" in w for w in workers), workers
assert {r["stage"] for r in a if r["kind"] == "worker"} == {0, 1}
assert {"tracker", "directory", "stage0/diloco", "stage1/diloco"} <= {r["name"] for r in a}
' "$tmp/actors.json" || fail "actors --json: $(cat "$tmp/actors.json")"

# Usage errors exit 2, errors exit 1, with a one-line message.
out=$(ctl frobnicate 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "unknown command 'frobnicate'" <<<"$out" || fail "unknown command: rc $rc, $out"
out=$(ctl info stage9/nobody 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "no actor 'stage9/nobody'" <<<"$out" || fail "unknown actor: rc $rc, $out"

# A kill of more than one actor needs --yes; with it both workers die and come back.
out=$(ctl kill 'stage1/worker*' 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "matches 2 actors" <<<"$out" || fail "kill without --yes: rc $rc, $out"
ctl kill 'stage1/worker*' --yes --json >"$tmp/kill.json" || fail "kill: $(cat "$tmp/kill.json")"
py 'import json,sys; assert len(json.load(open(sys.argv[1]))["killed"]) == 2' "$tmp/kill.json" \
  || fail "kill --yes: $(cat "$tmp/kill.json")"
restarted=""
for _ in $(seq 1 100); do
  ctl actors 'stage1/worker*' --json >"$tmp/back.json" 2>/dev/null
  if py 'import json,sys; a=json.load(open(sys.argv[1]))["actors"]; assert len(a)==2 and all(r["restarts"]==1 for r in a)' "$tmp/back.json" 2>/dev/null; then
    restarted=yes
    break
  fi
  nap 0.2
done
[ -n "$restarted" ] || fail "the killed workers were not listed restarted: $(cat "$tmp/back.json")"

# A group's round.
ctl info stage0/diloco --json >"$tmp/group.json" || fail "info: $(cat "$tmp/group.json")"
py 'import json,sys; i=json.load(open(sys.argv[1]))["actor"]["info"]; assert i["round"] >= 0, i' \
  "$tmp/group.json" || fail "info stage0/diloco: $(cat "$tmp/group.json")"

# A worker's own figures: its compute rate and the bytes it sent, by kind.
ctl info stage0/worker0 --json >"$tmp/worker.json" || fail "info worker: $(cat "$tmp/worker.json")"
py '
import json, sys
i = json.load(open(sys.argv[1]))["actor"]["info"]
assert "samples_per_s" in i and set(i["bytes_sent"]) >= {"activations", "control"}, i
' "$tmp/worker.json" || fail "info stage0/worker0: $(cat "$tmp/worker.json")"

# A checkpoint on demand: the path of a file that is there.
ctl checkpoint --json >"$tmp/ckpt.json" || fail "checkpoint: $(cat "$tmp/ckpt.json")"
py 'import json,os,sys; c=json.load(open(sys.argv[1])); assert c["step"] >= 3 and os.path.isfile(c["path"]), c' \
  "$tmp/ckpt.json" || fail "checkpoint: $(cat "$tmp/ckpt.json")"

# 20 consoles polling `top` at once: each is answered every time, and none of it reaches a
# worker (an inspector reads the probes; it never asks a busy actor), so a trace of a worker
# taken meanwhile shows only the pipeline's own messages.
# All 20 start at once: a console's handshake on a machine this busy spans CAF's heartbeat
# ticks, which a console therefore does not run (it keeps its connection alive itself).
for i in $(seq 1 20); do
  # Also ends with this script (`kill -0 $$`): after a failure, no loop outlives the test and
  # holds CTest's pipe open until its timeout.
  (while [ ! -e "$tmp/stop-top" ] && kill -0 $$ 2>/dev/null; do nap 0.2; done) |
    "$bin" ctl "$target" --secret-file "$tmp/run/secret" top 1 --json >"$tmp/top$i.jsonl" 2>&1 &
  tops+=($!)
  pids+=($!)
done
for _ in $(seq 1 1200); do
  up=0
  for i in $(seq 1 20); do [ -s "$tmp/top$i.jsonl" ] && up=$((up + 1)); done
  [ $up -eq 20 ] && break
  nap 0.1
done
[ $up -eq 20 ] || fail "only $up of 20 consoles answered"
# On a machine this loaded the worker may handle nothing in one 3 s trace: traces are taken
# until one shows messages (at most 10), each free of the consoles' questions (checked below).
# A trace console that cannot connect while the 20 hold their connections (seen once, with the
# suite's other tests on 2 cores) tries again; every try failing fails the test.
traced=0
for _ in $(seq 1 10); do
  ctl trace stage0/worker0 3 --json >"$tmp/try.json" 2>"$tmp/busy.err" || { nap 1; continue; }
  mv "$tmp/try.json" "$tmp/busy.json"
  traced=$((traced + 1))
  py 'import json,sys; assert json.load(open(sys.argv[1]))["trace"]' "$tmp/busy.json" 2>/dev/null && break
done
[ $traced -gt 0 ] || fail "trace while polled: $(cat "$tmp/busy.err")"
touch "$tmp/stop-top"
i=0
for p in "${tops[@]}"; do
  i=$((i + 1))
  wait "$p" || fail "console $i polling top exited with $?: $(tail -c 600 "$tmp/top$i.jsonl")"
done
py '
import json, sys
t = json.load(open(sys.argv[1]))["trace"]
assert t, "no message traced in 10 traces"
strange = [e for e in t if "inspector" in e["peer"] or e["kind"] == "info"]
assert not strange, strange
for f in sys.argv[2:]:
    frames = [json.loads(l) for l in open(f)]
    assert len(frames) >= 2 and all(fr["ok"] and fr["actors"] for fr in frames), (f, frames[:1])
' "$tmp/busy.json" "$tmp"/top*.jsonl || fail "20 consoles polling top: $(head -c 1500 "$tmp/busy.json")"

# misbehave: a kind it does not know is refused with the kinds it does; a worker told to add
# noise to its hops says so in its node's log from the step it is in (`heal all` below makes it
# honest again, and says so too).
nodes_said() { cat "$tmp/a.log" "$tmp/b.log" | grep -q "$1"; }
out=$(ctl misbehave stage1/worker1 lie 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "KIND must be sign_flip, scale, random, stale, noise or none, not 'lie'" <<<"$out" ||
  fail "misbehave with an unknown kind: rc $rc, $out"
out=$(ctl misbehave stage1/worker1 noise 0 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "SCALE must be in (0, 1e6]" <<<"$out" || fail "misbehave noise 0: rc $rc, $out"
ctl misbehave stage1/worker1 noise 0.5 --json >"$tmp/lie.json" || fail "misbehave: $(cat "$tmp/lie.json")"
grep -q '"misbehaving"' "$tmp/lie.json" || fail "misbehave answered: $(cat "$tmp/lie.json")"
wait_until 20 nodes_said "worker 1001 misbehaves on purpose from step [0-9]*: noise x0.5 (console)" ||
  fail "the worker told to misbehave did not say so: $(grep -h misbehave "$tmp"/a.log "$tmp"/b.log)"

# A partition between the two nodes: frames between them are lost both ways (the run's
# micro-batches that crossed are re-run), until `heal all`; the run stays correct (below).
out=$(ctl partition node0 node0 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "two different processes" <<<"$out" || fail "partition with itself: rc $rc, $out"
out=$(ctl partition node0 node9 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "no node 'node9'" <<<"$out" || fail "partition with no node: rc $rc, $out"
ctl partition node0 node1 --json >"$tmp/cut.json" || fail "partition: $(cat "$tmp/cut.json")"
cut_seen=""
for _ in $(seq 1 300); do
  ctl nodes --json >"$tmp/nodes.json" 2>/dev/null
  if py '
import json, sys
n = {r["node"]: r for r in json.load(open(sys.argv[1]))["nodes"]}
assert n["node0"]["partitioned_from"] == ["node1"] and n["node1"]["partitioned_from"] == ["node0"]
assert n["node0"]["partitioned_frames"] + n["node1"]["partitioned_frames"] > 0
' "$tmp/nodes.json" 2>/dev/null; then cut_seen=yes; break; fi
  nap 0.2
done
[ -n "$cut_seen" ] || fail "no frame was lost to the partition: $(cat "$tmp/nodes.json")"
ctl heal all --json >"$tmp/heal.json" || fail "heal: $(cat "$tmp/heal.json")"
ctl nodes --json >"$tmp/nodes.json" || fail "nodes"
py '
import json, sys
assert all(not r.get("partitioned_from") for r in json.load(open(sys.argv[1]))["nodes"])
' "$tmp/nodes.json" || fail "heal left a partition: $(cat "$tmp/nodes.json")"
wait_until 20 nodes_said "worker 1001 is honest again from step" ||
  fail "heal all left worker 1001 misbehaving: $(grep -h "1001" "$tmp"/a.log "$tmp"/b.log | tail -3)"
# `heal all` lifted the slowdowns too: slowed again, the run outlasts the commands below.
# (At full speed the last ~90 steps took 14 s, and on a loaded machine the run ended before
# the trace: 3 runs in 6.)
for w in stage0/worker0 stage0/worker1 stage1/worker0 stage1/worker1; do
  ctl slow "$w" 3 >/dev/null || fail "slow $w after heal"
done


# A node killed from the console: its commands then fail with a clear message.
ctl kill-node node1 >/dev/null || fail "kill-node"
for _ in $(seq 1 100); do
  ctl nodes --json 2>/dev/null | grep -q '"alive":false' && break
  nap 0.2
done
out=$(ctl freeze node1 1 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "node 'node1' is gone" <<<"$out" || fail "command to a dead node: rc $rc, $out"

# With node1 gone, stage0/worker0 (node0 joined first) is stage 0's only worker: every
# micro-batch goes through it, so its trace has forward and backward hops. Not always within 5
# s of the kill: a micro-batch lost to the partition above holds its place until its timeout
# (8 s), and one 5 s trace once saw no message at all (1 run in 6): traces are taken until one
# shows both (at most 6, 30 s; the run then still has to complete, below).
traced() {
  py '
import json, sys
t = json.load(open(sys.argv[1]))["trace"]
details = " ".join(e["detail"] for e in t)
assert "forward" in details and "backward" in details, details
' "$tmp/trace.json"
}
for _ in $(seq 1 6); do
  ctl trace stage0/worker0 5 --json >"$tmp/trace.json" || fail "trace: $(cat "$tmp/trace.json")"
  traced 2>/dev/null && break
done
traced || fail "trace stage0/worker0: $(head -c 2000 "$tmp/trace.json")"

# The events: every command that changed the swarm, with the console's name.
ctl events --json >"$tmp/events.json" || fail "events"
py '
import json, sys
e = [x for x in json.load(open(sys.argv[1]))["events"] if x["event"] == "console"]
cmds = [x["command"] for x in e]
assert "kill stage1/worker*" in cmds and "kill-node node1" in cmds, cmds
assert all(x["console"].startswith("ctl ") for x in e)
' "$tmp/events.json" || fail "events: $(cat "$tmp/events.json")"

# The commands are done: the workers compute at full speed again (heal all undoes the
# slowdowns), and the run completes.
ctl heal all >/dev/null || fail "heal all"
wait_exit "$coord" 120
wait "$coord" || fail "coordinator exited with $?: $(tail -20 "$tmp/coord.log")"
grep -q "final validation loss" "$tmp/coord.log" || fail "the run did not complete: $(tail -20 "$tmp/coord.log")"
grep -q '"event":"console"' "$tmp/run/metrics.jsonl" || fail "no console event in metrics.jsonl"
# Every step once, with every micro-batch counted once, partition and kills included.
py '
import json, sys
steps = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("event") == "step":
        steps[r["step"]] = r
missing = [s for s in range(1, 151) if s not in steps]
assert not missing, f"steps missing: {missing[:10]}"
bad = [s for s, r in steps.items() if r["duplicates"] or r["extra_samples"] or r["missing_samples"]]
assert not bad, f"steps with a micro-batch lost or counted twice: {bad[:10]}"
' "$tmp/run/metrics.jsonl" || fail "metrics.jsonl"

# A console whose coordinator goes away says so and exits non-zero: a second coordinator (it
# waits for nodes that never come) is killed while a console is open on it.
"$bin" coordinator -c "$root/configs/tiny.toml" --listen 127.0.0.1:0 -o "$tmp/run2" "${net[@]}" \
  --set "data.path=$root/data/brown.txt" >"$tmp/coord2.log" 2>&1 &
coord2=$!
pids+=("$coord2")
port2=$(wait_port "$tmp/coord2.log" coordinator) \
  || fail "the second coordinator did not listen: $(cat "$tmp/coord2.log")"
python3 "$root/tests/cli/console_pty.py" "$bin" "127.0.0.1:$port2" "$tmp/run2/secret" gone "$coord2" \
  || exit 1
echo "ok: console commands against 1 coordinator + 2 nodes"
