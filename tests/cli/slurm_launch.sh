#!/usr/bin/env bash
# deploy/slurm/swarmrt.sbatch under a real Slurm on this machine: munged, slurmctld and slurmd
# started here for one host named localhost (8 CPUs configured over the machine's cores),
# state and spool under a temporary directory, every daemon stopped by pid. The shipped script,
# submitted with 3 tasks, starts a coordinator and two nodes of two workers that train
# diloco-swarm 2x2; `scancel --signal=TERM` mid-run makes the coordinator write a checkpoint
# of the step under way and stop the swarm; the same script submitted again resumes from that
# checkpoint and completes the run.
set -u
bin=$1 root=$2
for tool in munged mungekey slurmctld slurmd sbatch scancel squeue sinfo scontrol; do
  command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || {
    echo "SKIP: $tool is not installed (./scripts/test.sh installs slurmctld, slurmd, slurm-client and munge)"
    exit 77
  }
done
PATH=$PATH:/usr/sbin
tmp=$(mktemp -d)
chmod 755 "$tmp"
daemons=()
cleanup() {
  if [ -f "$tmp/slurm.conf" ]; then
    SLURM_CONF=$tmp/slurm.conf scancel --quiet --user="$(id -un)" 2>/dev/null
    sleep 1
  fi
  for p in "${daemons[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${daemons[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
  done
  # Job steps left behind by a killed slurmd: this test's swarmrt processes only.
  pkill -KILL -f "$tmp/secret/cluster" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$tmp"/slurmctld.log "$tmp"/slurmd.log; do [ -f "$f" ] && { echo "--- $f"; tail -15 "$f"; }; done
  exit 1
}
# Daemon ports come from 10000-19999: below the kernel's ephemeral range (outgoing
# connections) and below the jobs' ports.
free_port() {
  local p
  for _ in $(seq 1 50); do
    p=$((10000 + RANDOM % 10000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
  fail "no free port"
}

# munge, as root, with its socket, key and state here.
mkdir -p "$tmp/munge" "$tmp/state" "$tmp/spool/localhost"
chmod 700 "$tmp/munge"
mungekey -c -k "$tmp/munge/munge.key" || fail "mungekey"
munged -F -f -S "$tmp/munge/socket" --key-file="$tmp/munge/munge.key" \
  --pid-file="$tmp/munge/pid" --seed-file="$tmp/munge/seed" --log-file="$tmp/munge/log" \
  >"$tmp/munged.log" 2>&1 &
daemons+=($!)
for _ in $(seq 1 50); do [ -S "$tmp/munge/socket" ] && break; sleep 0.1; done
[ -S "$tmp/munge/socket" ] || fail "munged did not start: $(cat "$tmp/munged.log")"

# Slurm's daemons on ports free when chosen. Another test may bind one of them before
# slurmctld or slurmd does (the suite runs two at a time): then that daemon exits with
# "Address already in use", and the start is tried again on new ports. `sinfo` waits about
# 10 s when no controller answers, so every wait here runs against a deadline.
write_conf() {  # CTLD-PORT SLURMD-PORT FIRST-JOB
cat >"$tmp/slurm.conf" <<CONF
ClusterName=swarmrt-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$1
SlurmdPort=$2
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
AuthType=auth/munge
AuthInfo=socket=$tmp/munge/socket
CredType=cred/munge
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool/%n
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
FirstJobId=$3
SlurmdParameters=config_overrides
NodeName=localhost NodeHostname=$(hostname) NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
}
node_state() { timeout 5 sinfo -h -n localhost -o %T 2>/dev/null; }
start_slurm() {  # -> 0 when the node is idle, 1 when a daemon lost its port, 2 otherwise
  local ctld_port d_port first_job="" p ctld d
  ctld_port=$(free_port)
  d_port=$(free_port)
  [ "$ctld_port" = "$d_port" ] && return 1
  # Rank 0 listens on 20000 + SLURM_JOB_ID % 20000: the job ids start where that port and
  # the next (the second job's) are free.
  for _ in $(seq 1 50); do
    p=$((20000 + RANDOM % 19999))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && continue
    (exec 3<>"/dev/tcp/127.0.0.1/$((p + 1))") 2>/dev/null && continue
    [ "$p" = "$ctld_port" ] || [ "$p" = "$d_port" ] || [ $((p + 1)) = "$ctld_port" ] || [ $((p + 1)) = "$d_port" ] && continue
    first_job=$((100000 + p - 20000))
    break
  done
  [ -n "$first_job" ] || fail "no free pair of ports for the jobs"
  write_conf "$ctld_port" "$d_port" "$first_job"
  rm -f "$tmp"/slurmctld.log "$tmp"/slurmd.log
  slurmctld -D -i -f "$SLURM_CONF" >"$tmp/slurmctld.out" 2>&1 &
  ctld=$!
  slurmd -D -N localhost -f "$SLURM_CONF" >"$tmp/slurmd.out" 2>&1 &
  d=$!
  daemons+=("$ctld" "$d")
  local deadline=$((SECONDS + 60))
  while [ "$SECONDS" -lt "$deadline" ]; do
    [ "$(node_state)" = idle ] && return 0
    if ! kill -0 "$ctld" 2>/dev/null || ! kill -0 "$d" 2>/dev/null; then
      kill -KILL "$ctld" "$d" 2>/dev/null
      wait "$ctld" "$d" 2>/dev/null
      grep -qs "Address already in use" "$tmp"/slurmctld.log "$tmp"/slurmd.log \
        "$tmp"/slurmctld.out "$tmp"/slurmd.out && return 1
      return 2
    fi
    sleep 0.5
  done
  return 2
}
export SLURM_CONF=$tmp/slurm.conf
started=""
for attempt in 1 2 3; do
  start_slurm
  case $? in
    0) started=yes; break ;;
    1) echo "attempt $attempt: a daemon's port was taken before it bound it; new ports" ;;
    *) fail "the node is not idle within 60 s: $(timeout 5 sinfo 2>&1)" ;;
  esac
done
[ -n "$started" ] || fail "three starts lost their ports"

# The job's environment is only this (sbatch passes the submitter's on to the tasks).
steps=80
job_env=(env -i PATH="$PATH" HOME="$tmp" SLURM_CONF="$SLURM_CONF" OPENBLAS_NUM_THREADS=1
         SWARMRT_BIN="$bin" SWARMRT_CONFIG="$root/configs/tiny.toml" SWARMRT_RUN_DIR="$tmp/run"
         SWARMRT_SECRET_FILE="$tmp/secret/cluster"
         SWARMRT_ARGS="--set train.steps=$steps --set train.eval_every=0 --set train.eval_batches=2 --set checkpoint.every_steps=0 --set diloco.inner_steps=5 --set train.log_every=5")
submit() {  # OUTPUT-FILE -> job id
  "${job_env[@]}" sbatch --parsable --chdir="$root" --output="$1" --ntasks=3 --cpus-per-task=2 \
    "$root/deploy/slurm/swarmrt.sbatch"
}
wait_job() {  # JOB SECONDS
  for _ in $(seq 1 "$2"); do
    [ -z "$(squeue -h -j "$1" 2>/dev/null)" ] && return 0
    sleep 1
  done
  return 1
}
steps_done() {
  local n
  n=$(grep -c '"event":"step"' "$tmp/run/metrics.jsonl" 2>/dev/null)
  echo "${n:-0}"
}

job1=$(submit "$tmp/job1.out") || fail "sbatch refused the script"
for _ in $(seq 1 180); do
  [ "$(steps_done)" -ge 10 ] && break
  [ -z "$(squeue -h -j "$job1")" ] && fail "job 1 ended before step 10: $(cat "$tmp/job1.out")"
  sleep 0.5
done
[ "$(steps_done)" -ge 10 ] || fail "job 1 did not reach step 10 in 90 s: $(tail -20 "$tmp/job1.out")"
scancel --signal=TERM "$job1" || fail "scancel"
wait_job "$job1" 120 || fail "job 1 still running 120 s after SIGTERM: $(tail -20 "$tmp/job1.out")"
grep -q "coordinator on 127.0.0.1" "$tmp/job1.out" || fail "no coordinator rank: $(head -20 "$tmp/job1.out")"
[ "$(grep -c -- "-> node with 2 workers joining 127.0.0.1" "$tmp/job1.out")" = 2 ] ||
  fail "not two nodes of two workers: $(grep -- '->' "$tmp/job1.out")"
saved=$(sed -n 's/.*checkpoint of step \([0-9]*\) written before stopping.*/\1/p' "$tmp/job1.out" | tail -1)
[ -n "$saved" ] || fail "no checkpoint after SIGTERM: $(grep -E 'warn|error' "$tmp/job1.out" | tail -20)"
[ "$saved" -lt "$steps" ] || fail "the run ended before the signal (step $saved)"
ckpt=$(printf '%s/run/checkpoints/step_%08d.ckpt' "$tmp" "$saved")
[ -s "$ckpt" ] || fail "no $ckpt: $(ls "$tmp/run/checkpoints" 2>&1)"
grep -q "the run did not complete" "$tmp/job1.out" || fail "job 1 does not say the run stopped early"
echo "job 1: SIGTERM at step $(steps_done) or so, checkpoint of step $saved"
grep -E -- "-> (coordinator|node)|before stopping|serving up to|did not complete" "$tmp/job1.out"

job2=$(submit "$tmp/job2.out") || fail "sbatch refused the script again"
wait_job "$job2" 300 || fail "job 2 still running after 300 s: $(tail -20 "$tmp/job2.out")"
grep -q "resuming from .* at step $saved" "$tmp/job2.out" || fail "job 2 did not resume from step $saved: $(head -40 "$tmp/job2.out")"
grep -q "final validation loss" "$tmp/job2.out" || fail "job 2 did not finish: $(tail -30 "$tmp/job2.out")"
[ -s "$(printf '%s/run/checkpoints/step_%08d.ckpt' "$tmp" "$steps")" ] || fail "no final checkpoint"
grep -q "$(cat "$tmp/secret/cluster")" "$tmp/job1.out" "$tmp/job2.out" && fail "the secret shows in the output"
grep -E -- "resuming from|final validation loss" "$tmp/job2.out"
echo "ok"
