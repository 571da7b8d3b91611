#!/usr/bin/env bash
# coordinator --etcd refusals (#32), each a one-line error, a non-zero exit and nothing written
# to the run directory: no --run-id; a malformed etcd URL; etcd unreachable at start; a replica
# whose config differs from the run's; a replica of a run that ended (stopped on purpose by its
# leader, so no standby starts it again). Processes are stopped by pid.
bin=$1 root=$2
source "$(dirname "$0")/lib.sh"
export SWARMRT_SECRET=leader-refusals-test
unset SWARMRT_SECRET_FILE
run_id=00000000000000aa
args=(-c "$root/configs/tiny.toml" --listen 127.0.0.1:0 --set "data.path=$root/data/brown.txt")
# expect NAME CODE PATTERN ARGS...: the coordinator exits CODE, logs PATTERN, writes no run dir.
expect() {
  local name=$1 want=$2 pattern=$3
  shift 3
  timeout 60 "$bin" coordinator "${args[@]}" -o "$tmp/$name" "$@" >"$tmp/$name.log" 2>&1
  local code=$?
  [ "$code" = "$want" ] || fail "$name: exit $code, not $want: $(cat "$tmp/$name.log")"
  grep -q -- "$pattern" "$tmp/$name.log" || fail "$name: no '$pattern' in: $(cat "$tmp/$name.log")"
  [ -e "$tmp/$name" ] && fail "$name: the run directory was written"
  return 0
}
expect no_run_id 2 "--etcd needs --run-id" --etcd http://127.0.0.1:1
expect bad_url 2 "is not an etcd client URL" --etcd 127.0.0.1:2379 --run-id $run_id
dead=$(free_port)
expect unreachable 1 "etcd at http://127.0.0.1:$dead: no etcd member answered" \
  --etcd "http://127.0.0.1:$dead" --lease-ttl-s 1 --run-id $run_id

start_etcd
"$bin" coordinator "${args[@]}" -o "$tmp/run" --etcd "$etcd_url" --run-id $run_id \
  >"$tmp/leader.log" 2>&1 &
leader=$!
pids+=("$leader")
wait_log "$tmp/leader.log" "leading run $run_id" 30 || fail "no leader: $(cat "$tmp/leader.log")"
expect other_config 3 "run $run_id in etcd has another config" --etcd "$etcd_url" \
  --run-id $run_id --set train.steps=7
# Stopped on purpose (SIGINT: no checkpoint, no swarm), the run is over for every replica.
kill -INT "$leader"
wait_exit "$leader" 30 || fail "the leader did not stop"
expect over 3 "run $run_id is over (stopped" --etcd "$etcd_url" --run-id $run_id
echo "ok"
