#!/usr/bin/env bash
# coordinator --etcd refusals (#32), each a one-line error, a non-zero exit and nothing written
# to the run directory: no --run-id; a malformed etcd URL; etcd unreachable at start; an https
# etcd and no secret; an etcd of another cluster (another secret); a replica whose config
# differs from the run's; a replica of a run that ended (stopped on purpose by its leader, so
# no standby starts it again). And the etcd's own door: it answers only holders of the
# cluster's certificate (no plain http, no client without a certificate, none of another
# secret's). Processes are stopped by pid.
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
(unset SWARMRT_SECRET; expect no_secret 2 "over https needs the cluster secret" --etcd "$etcd_url" \
  --run-id $run_id) || exit 1
(export SWARMRT_SECRET=another-cluster; expect other_cluster 1 "etcd at $etcd_url: no etcd member answered" \
  --etcd "$etcd_url" --lease-ttl-s 1 --run-id $run_id) || exit 1
"$bin" coordinator "${args[@]}" -o "$tmp/run" --etcd "$etcd_url" --run-id $run_id \
  >"$tmp/leader.log" 2>&1 &
leader=$!
pids+=("$leader")
wait_log "$tmp/leader.log" "leading run $run_id" 30 || fail "no leader: $(cat "$tmp/leader.log")"
# The leader key, read with the cluster's certificate; refused to anyone without it.
key=/swarmrt/runs/$run_id/leader
mine=("$tmp/etcd-tls/ca.pem" "$tmp/etcd-tls/cert.pem" "$tmp/etcd-tls/key.pem")
holder=$(etcd_get "$etcd_url" $key "${mine[@]}") || fail "the cluster's certificate was refused"
[[ "$holder" == *"pid $leader"* ]] || fail "the leader key holds '$holder', not the leader"
etcd_get "${etcd_url/https:/http:}" $key 2>/dev/null && fail "etcd answered plain http"
etcd_get "$etcd_url" $key 2>/dev/null && fail "etcd answered a client without a certificate"
SWARMRT_SECRET=another-cluster etcd_tls "$tmp/other-tls" 127.0.0.1
etcd_get "$etcd_url" $key "" "$tmp/other-tls/cert.pem" "$tmp/other-tls/key.pem" 2>/dev/null &&
  fail "etcd answered a certificate of another cluster"
expect other_config 3 "run $run_id in etcd has another config" --etcd "$etcd_url" \
  --run-id $run_id --set train.steps=7
# Stopped on purpose (SIGINT: no checkpoint, no swarm), the run is over for every replica.
kill -INT "$leader"
wait_exit "$leader" 30 || fail "the leader did not stop"
expect over 3 "run $run_id is over (stopped" --etcd "$etcd_url" --run-id $run_id
echo "ok"
