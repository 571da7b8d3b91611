#!/usr/bin/env bash
# A world that cannot fill the swarm says so: three ranks under torchrun-style variables, each
# node given one CPU (SWARMRT_CPUS=1, so one worker), start configs/tiny.toml's 2x2 swarm. Once
# both nodes have joined with their one worker each, rank 0 names the shortfall (the config
# wants 4 workers, the world's 2 nodes brought 2) and what fills it (--workers 2, or
# swarm.workers_per_stage = 1), in its log and its metrics, and goes on waiting for nodes
# instead of failing. Every process is stopped by pid.
bin=$1 root=$2
source "$(dirname "$0")/lib.sh"
clean_env=(env -i PATH=/usr/bin:/bin HOME="$tmp" OPENBLAS_NUM_THREADS=1)
(umask 077 && echo short-world-secret >"$tmp/secret")
port=$(free_port)
rank() {  # RANK
  "${clean_env[@]}" RANK="$1" WORLD_SIZE=3 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
    SWARMRT_CPUS=1 "$bin" launch --from-env -c "$root/configs/tiny.toml" -o "$tmp/run" \
    --secret-file "$tmp/secret" --set train.steps=5 >"$tmp/rank$1.log" 2>&1 &
  pids+=($!)
}
rank 0
rank0=$!
fail_log=$tmp/rank0.log
wait_log "$tmp/rank0.log" "coordinator listening on 127.0.0.1:$port" 60 || fail "rank 0 never listened"
rank 1
rank 2
wait_log "$tmp/rank0.log" "the swarm will not fill" 60 || fail "no word of the short world"
line=$(grep "the swarm will not fill" "$tmp/rank0.log")
for want in "world's 2 node(s) has joined" "brought 2 worker(s)" "config wants 4" \
  "swarm.stages = 2 x swarm.workers_per_stage = 2" "launch --from-env --workers 2" \
  "swarm.workers_per_stage = 1"; do
  grep -qF -- "$want" <<<"$line" || fail "'$want' is not in: $line"
done
[ "$(grep -c "the swarm will not fill" "$tmp/rank0.log")" = 1 ] || fail "said more than once"
wait_until 10 grep -q '"event":"short_world"' "$tmp/run/metrics.jsonl" || fail "no short_world record"
grep '"event":"short_world"' "$tmp/run/metrics.jsonl" | grep -q '"wanted":4' || fail "record: $(grep short_world "$tmp/run/metrics.jsonl")"
sleep 1
running "$rank0" || fail "rank 0 ended instead of waiting for nodes"
grep -q '"event":"step"' "$tmp/run/metrics.jsonl" && fail "a short swarm trained"
echo "ok: $line"
