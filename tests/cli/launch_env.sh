#!/usr/bin/env bash
# launch --from-env under torchrun-style variables on 127.0.0.1: three ranks, started as a
# launcher would start them (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; SWARMRT_CPUS=2),
# become a coordinator and two nodes of two workers that train diloco-swarm 2x2. SIGUSR1 to
# all three at once (Slurm's --signal=USR1@120 before a time limit) makes the coordinator save
# the step under way while the nodes serve on; the same three commands with --resume finish
# the run from that checkpoint.
# Refused, each with the variable and its value named and a non-zero exit: no scheduler's
# variables, a rank past the world, no head address, Slurm and WORLD_SIZE disagreeing, no
# secret, a second rank 0 while the first listens, and a rank that read another world size
# (the coordinator refuses its join: the run id follows the world). Every process is
# stopped by pid.
bin=$1 root=$2
source "$(dirname "$0")/lib.sh"
# The ranks get SIGTERM first, as a scheduler would send it.
at_exit 'for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done; sleep 1'
# Only what each case sets: nothing inherited from the shell that runs the suite.
clean_env=(env -i PATH=/usr/bin:/bin HOME="$tmp" OPENBLAS_NUM_THREADS=1)
(umask 077 && echo launch-env-secret >"$tmp/secret")
port=$(free_port)
steps=30
cfg=(-c "$root/configs/tiny.toml" --set train.steps=$steps --set train.eval_every=0
     --set train.eval_batches=2 --set diloco.inner_steps=3 --set checkpoint.every_steps=0)
torchrun_env() {  # RANK WORLD
  echo RANK="$1" WORLD_SIZE="$2" LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" SWARMRT_CPUS=2
}
refused() {  # NAME EXPECTED-TEXT ENV... -- ARGS...
  local name=$1 want=$2
  shift 2
  local vars=()
  while [ "$1" != "--" ]; do vars+=("$1"); shift; done
  shift
  "${clean_env[@]}" "${vars[@]}" "$bin" launch --from-env "${cfg[@]}" "$@" >"$tmp/$name.log" 2>&1
  local code=$?
  [ "$code" = 2 ] || fail "$name: exit $code, not 2: $(cat "$tmp/$name.log")"
  grep -qF -- "$want" "$tmp/$name.log" || fail "$name: no '$want' in: $(cat "$tmp/$name.log")"
}
refused none "no scheduler's variables" -- --secret-file "$tmp/secret"
refused past_world "RANK=3 is not below the world size 3" $(torchrun_env 3 3) -- --secret-file "$tmp/secret"
refused no_head "MASTER_ADDR is not set" RANK=1 WORLD_SIZE=3 MASTER_PORT="$port" -- --secret-file "$tmp/secret"
refused disagree "SLURM_NTASKS=3 but WORLD_SIZE=4" SLURM_PROCID=1 SLURM_NTASKS=3 SLURM_JOB_ID=7 \
  SLURM_JOB_NODELIST=localhost WORLD_SIZE=4 -- --secret-file "$tmp/secret"
refused no_secret "no cluster secret" $(torchrun_env 1 3) --
refused bad_secret_file "secret" $(torchrun_env 1 3) -- --secret-file "$tmp/missing"

# Rank 0.
"${clean_env[@]}" $(torchrun_env 0 3) "$bin" launch --from-env "${cfg[@]}" -o "$tmp/run" \
  --secret-file "$tmp/secret" >"$tmp/rank0.log" 2>&1 &
pids+=($!)
rank0=$!
for _ in $(seq 1 120); do
  grep -q "coordinator listening on 127.0.0.1:$port" "$tmp/rank0.log" && break
  kill -0 "$rank0" 2>/dev/null || fail "rank 0 exited: $(cat "$tmp/rank0.log")"
  nap 0.5
done
grep -q "coordinator listening on 127.0.0.1:$port" "$tmp/rank0.log" || fail "rank 0 never listened: $(cat "$tmp/rank0.log")"
grep -q "torchrun rank 0 of 3 (RANK=0 WORLD_SIZE=3 .*) -> coordinator on 127.0.0.1:$port" "$tmp/rank0.log" ||
  fail "rank 0 did not say its place: $(head -5 "$tmp/rank0.log")"

# A second rank 0, and a rank that read another world size, while rank 0 waits for nodes.
refused two_rank0 "another process claims rank 0" $(torchrun_env 0 3) -- --secret-file "$tmp/secret"
"${clean_env[@]}" $(torchrun_env 1 4) timeout 120 "$bin" launch --from-env "${cfg[@]}" \
  --secret-file "$tmp/secret" >"$tmp/other_world.log" 2>&1
code=$?
[ "$code" = 3 ] || fail "a rank of another world size: exit $code, not 3: $(cat "$tmp/other_world.log")"
grep -q "this node was started for run .*, this coordinator runs" "$tmp/other_world.log" ||
  fail "no run id refusal: $(cat "$tmp/other_world.log")"
grep -q "torchrun rank 1 of 4 (RANK=1 WORLD_SIZE=4" "$tmp/other_world.log" ||
  fail "the refused rank did not say what it read: $(cat "$tmp/other_world.log")"

start_nodes() {  # extra launch arguments (the same on every rank, as a scheduler runs them)
  for r in 1 2; do
    "${clean_env[@]}" $(torchrun_env $r 3) "$bin" launch --from-env "${cfg[@]}" \
      --secret-file "$tmp/secret" "$@" >>"$tmp/rank$r.log" 2>&1 &
    pids[$r]=$!
  done
}
steps_done() {
  local n
  n=$(grep -c '"event":"step"' "$tmp/run/metrics.jsonl" 2>/dev/null)
  echo "${n:-0}"
}
wait_ranks() {  # SECONDS: waits for rank 0, then the nodes; sets rank0_code
  for _ in $(seq 1 "$1"); do kill -0 "${pids[0]}" 2>/dev/null || break; nap 1; done
  kill -0 "${pids[0]}" 2>/dev/null && fail "rank 0 still running after $1 s: $(tail -20 "$tmp/rank0.log")"
  wait "${pids[0]}"
  rank0_code=$?
  for r in 1 2; do
    wait_exit "${pids[$r]}" 30
    wait "${pids[$r]}" || fail "rank $r exited with $?: $(tail -20 "$tmp/rank$r.log")"
  done
}

start_nodes
for _ in $(seq 1 240); do
  [ "$(steps_done)" -ge 5 ] && break
  kill -0 "$rank0" 2>/dev/null || fail "rank 0 exited before step 5: $(tail -20 "$tmp/rank0.log")"
  nap 0.25
done
[ "$(steps_done)" -ge 5 ] || fail "no step 5 in 60 s: $(tail -20 "$tmp/rank0.log")"
kill -USR1 "${pids[0]}" "${pids[1]}" "${pids[2]}"
wait_ranks 120
[ "$rank0_code" = 1 ] || fail "rank 0 stopped by SIGUSR1 exited $rank0_code, not 1: $(tail -10 "$tmp/rank0.log")"
for r in 1 2; do
  grep -q "torchrun rank $r of 3 .* -> node with 2 workers joining 127.0.0.1:$port" "$tmp/rank$r.log" ||
    fail "rank $r: $(head -5 "$tmp/rank$r.log")"
  grep -q "node 'torchrun-rank$r' serving 2 workers" "$tmp/rank$r.log" || fail "rank $r did not serve: $(cat "$tmp/rank$r.log")"
  grep -q "serving up to 60 s more" "$tmp/rank$r.log" || fail "rank $r did not wait for the checkpoint: $(tail -5 "$tmp/rank$r.log")"
done
saved=$(sed -n 's/.*checkpoint of step \([0-9]*\) written before stopping.*/\1/p' "$tmp/rank0.log")
[ -n "$saved" ] && [ "$saved" -lt "$steps" ] ||
  fail "no checkpoint before stopping on SIGUSR1: $(grep -E 'warn|error' "$tmp/rank0.log" | tail -10)"
[ -s "$(printf '%s/run/checkpoints/step_%08d.ckpt' "$tmp" "$saved")" ] || fail "no checkpoint file of step $saved"
echo "SIGUSR1 at step $(steps_done) or so: checkpoint of step $saved"

# The next allocation: the same commands, with --resume.
"${clean_env[@]}" $(torchrun_env 0 3) "$bin" launch --from-env "${cfg[@]}" -o "$tmp/run" \
  --secret-file "$tmp/secret" --resume >"$tmp/rank0.log" 2>&1 &
pids[0]=$!
start_nodes --resume
wait_ranks 240
[ "$rank0_code" = 0 ] || fail "the resumed rank 0 exited $rank0_code: $(tail -30 "$tmp/rank0.log")"
grep -q "resuming from .* at step $saved" "$tmp/rank0.log" || fail "not resumed from step $saved: $(head -30 "$tmp/rank0.log")"
grep -q "final validation loss" "$tmp/rank0.log" || fail "no final loss: $(tail -20 "$tmp/rank0.log")"
[ -s "$(printf '%s/run/checkpoints/step_%08d.ckpt' "$tmp" "$steps")" ] || fail "no final checkpoint"
grep -q "launch-env-secret" "$tmp"/*.log && fail "the secret shows in a log"
echo "ok"
