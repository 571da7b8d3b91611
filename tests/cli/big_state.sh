#!/usr/bin/env bash
# A stage's state far larger than what crosses the control plane within its connection timeout
# (25M parameters: about 300 MB with AdamW's moments, against the default 2 s): a coordinator
# and two nodes of one worker each train `swarm` 1x2 over 127.0.0.1. Gradients cross to the
# averager and back every step; the checkpoint at step 2 gathers both workers' states; a worker
# killed after it restarts on its node from its peer's state (fetched in checksummed chunks
# from the peer's donor on the other node, over the frame link); the run ends at step 4 with a
# checkpoint and the final parameters (a third checkpoint took 30 s more and tested nothing
# new). Every other big message goes in slices (transport/relay.hpp, transport/parcel.hpp). As
# single messages, a checkpoint dropped a node's link (at step 2 or 4 here); so did all of a
# state's slices serialized by the middleman before it wrote any (actors/runtime/runtime.cpp,
# scheduler.max-throughput). Processes are stopped by pid.
bin=$1 root=$2
source "$(dirname "$0")/lib.sh"
net=(--heartbeat-ms 250 --connection-timeout-ms 2000)

head -c 400000 "$root/data/brown.txt" >"$tmp/text.txt"
cat >"$tmp/c.toml" <<EOF
[model]
n_layer = 2
n_head = 8
n_embd = 1024
block_size = 32
[data]
path = "$tmp/text.txt"
[train]
steps = 4
micro_batch = 1
micro_batches = 2
warmup_steps = 1
eval_every = 0
eval_batches = 1
threads = 1
[swarm]
mode = "swarm"
stages = 1
workers_per_stage = 2
[checkpoint]
every_steps = 2
keep = 3
EOF
start_coordinator -c "$tmp/c.toml" --listen 127.0.0.1:0 -o "$tmp/run" "${net[@]}"
join_node n1 -w 1 "${net[@]}"
join_node n2 -w 1 "${net[@]}"
wait_log "$tmp/coord.log" "step_00000002.ckpt (2 workers)" 180 \
  || fail "no checkpoint of both workers at step 2: $(tail -n 8 "$tmp/coord.log"; tail -n 5 "$tmp/n1.log" "$tmp/n2.log")"
ctl kill stage0/worker1 >"$tmp/kill.out" 2>&1 || fail "kill: $(cat "$tmp/kill.out")"
wait_exit "$coord" 300 || fail "the coordinator still runs after 300 s: $(tail -n 8 "$tmp/coord.log")"
wait "$coord" || fail "coordinator exited with $?: $(tail -n 20 "$tmp/coord.log")"
grep -q "final validation loss" "$tmp/coord.log" || fail "no final loss"
grep -q "remote_link_unreachable\|is gone" "$tmp/coord.log" \
  && fail "a node's link dropped: $(grep -m3 "remote_link_unreachable\|is gone" "$tmp/coord.log")"
[ -f "$tmp/run/checkpoints/step_00000004.ckpt" ] || fail "no checkpoint at the end: $(ls "$tmp/run/checkpoints")"
grep -q "step_00000004.ckpt (2 workers)" "$tmp/coord.log" \
  || fail "the last checkpoint lacks a worker: $(grep "checkpoint" "$tmp/coord.log")"
# From its peer's donor on the other node, in checksummed chunks (actors/recovery/).
took=$(cat "$tmp/n1.log" "$tmp/n2.log" | grep "took its state from 1 donor at step [0-9]" | head -1)
[ -n "$took" ] || fail "the restarted worker did not take its peer's state: $(cat "$tmp/n1.log" "$tmp/n2.log")"
grep -q "fetched its state ([0-9.]* MiB, step [0-9]*) from 1 donors" "$tmp/n1.log" "$tmp/n2.log" \
  || fail "no fetch from a donor logged: $(grep -h "state" "$tmp/n1.log" "$tmp/n2.log" | tail -n 5)"
mb=$(py 'import os,sys; print(os.path.getsize(sys.argv[1]) >> 20)' "$tmp/run/checkpoints/step_00000004.ckpt")
echo "ok: checkpoints of $mb MiB with both workers, and ${took##*] }"
