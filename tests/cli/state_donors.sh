#!/usr/bin/env bash
# A worker restarted in a swarm of three node processes (dp: one stage of three workers, one a
# node) takes its stage's state from both other nodes at once: each peer snapshots its state
# between steps, the restarted worker's fetcher takes checksummed chunks from both donors over
# the frame links (actors/recovery/). The run completes with one step record per step.
# Processes are stopped by pid.
bin=$1 root=$2
source "$(dirname "$0")/lib.sh"

steps=24
start_coordinator -c "$root/configs/tiny.toml" --listen 127.0.0.1:0 -o "$tmp/run" \
  --set "data.path=$root/data/brown.txt" --set "train.steps=$steps" --set train.eval_every=0 \
  --set train.eval_batches=4 --set swarm.mode=dp --set swarm.stages=1 \
  --set swarm.workers_per_stage=3 --set recovery.chunk_mib=1
for n in 1 2 3; do join_node "n$n" -w 1; done
wait_log "$tmp/coord.log" "step 6/$steps" 120 || fail "the run did not reach step 6: $(tail -5 "$tmp/coord.log")"
ctl kill stage0/worker1 >"$tmp/kill.out" 2>&1 || fail "kill: $(cat "$tmp/kill.out")"
wait_exit "$coord" 300 || fail "the coordinator still runs after 300 s: $(tail -n 8 "$tmp/coord.log")"
wait "$coord" || fail "coordinator exited with $?: $(tail -n 20 "$tmp/coord.log")"
grep -q "final validation loss" "$tmp/coord.log" || fail "no final loss"
logs=("$tmp/n1.log" "$tmp/n2.log" "$tmp/n3.log")
fetched=$(cat "${logs[@]}" | grep "fetched its state" | head -1)
[[ $fetched =~ "from 2 donors" ]] || fail "the restarted worker did not fetch from both peers: ${fetched:-none}; $(grep -h "state" "${logs[@]}" | tail -n 5)"
cat "${logs[@]}" | grep -q "took its state from 2 donors at step [0-9]" \
  || fail "the restarted worker did not load the state fetched: $(grep -h "took its state" "${logs[@]}")"
cat "${logs[@]}" | grep -q "drops state donor" && fail "a donor was dropped: $(grep -h "drops state donor" "${logs[@]}")"
check_records "$tmp/run/metrics.jsonl" "$steps"
echo "ok: ${fetched##*] }"
