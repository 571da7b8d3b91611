#!/usr/bin/env bash
# launch --local 2 --coordinators 2 (#32): launch starts a private etcd, two coordinator
# replicas and two nodes that know both; the leader is SIGKILLed at step 25 of 60 and the run
# completes under the standby with no human action: launch exits 0, says so, and the run's
# metrics.jsonl has exactly one step record per step. The etcd launch started takes only the
# cluster's certificate (no plain http, no client without one, none of another secret's), and
# is gone after.
bin=$1 root=$2
source "$(dirname "$0")/lib.sh"
export SWARMRT_SECRET=launch-failover-test
unset SWARMRT_SECRET_FILE
steps=60
"$bin" launch --local 2 --coordinators 2 --lease-ttl-s 2 -c "$root/configs/tiny.toml" \
  -o "$tmp/run" --set "data.path=$root/data/brown.txt" --set train.steps=$steps \
  --set train.eval_every=0 --set train.eval_batches=4 --set checkpoint.every_steps=10 \
  --set diloco.inner_steps=10 >"$tmp/launch.log" 2>&1 &
launcher=$!
launchers+=("$launcher")
fail_log="$tmp/launch.log"
wait_log "$tmp/launch.log" "\[coord\] .*step 25/$steps" 180 || fail "the run did not reach step 25"
leader=$(sed -n 's/^\[launch\] coord started (pid \([0-9]*\))$/\1/p' "$tmp/launch.log")
etcd=$(sed -n 's/^\[launch\] etcd for .* (pid \([0-9]*\))$/\1/p' "$tmp/launch.log")
[ -n "$leader" ] && [ -n "$etcd" ] || fail "launch did not name the leader's and etcd's pids"
url=$(sed -n 's/^\[launch\] etcd for .* at \(https:[^ ]*\) (pid .*$/\1/p' "$tmp/launch.log")
[ -n "$url" ] || fail "launch did not name an https etcd"
run_id=$(sed -n 's/^\[coord\] .*leading run \([0-9a-f]*\) .*/\1/p' "$tmp/launch.log" | head -1)
key=/swarmrt/runs/$run_id/leader
etcd_tls "$tmp/mine" 127.0.0.1
holder=$(etcd_get "$url" "$key" "$tmp/mine/ca.pem" "$tmp/mine/cert.pem" "$tmp/mine/key.pem") ||
  fail "the private etcd refused the cluster's certificate"
[[ "$holder" == *"pid $leader"* ]] || fail "the leader key holds '$holder', not the leader"
etcd_get "${url/https:/http:}" "$key" 2>/dev/null && fail "the private etcd answered plain http"
etcd_get "$url" "$key" 2>/dev/null && fail "the private etcd answered a client without a certificate"
SWARMRT_SECRET=another-cluster etcd_tls "$tmp/other" 127.0.0.1
etcd_get "$url" "$key" "" "$tmp/other/cert.pem" "$tmp/other/key.pem" 2>/dev/null &&
  fail "the private etcd answered a certificate of another cluster"
kill -KILL "$leader"
wait_exit "$launcher" 300 || fail "launch still runs after 300 s"
wait "$launcher" || fail "launch exited with $?"
grep -q "^\[launch\] the run completed" "$tmp/launch.log" || fail "launch did not say the run completed"
grep -q "^\[coord2\] .*leading run .*taking over" "$tmp/launch.log" || fail "the standby did not take over"
grep -q "^\[coord2\] final validation loss" "$tmp/launch.log" || fail "no final loss from the new leader"
grep -q "^\[launch\] run [0-9a-f]*: completed under epoch" "$tmp/launch.log" || fail "no recorded end"
running "$etcd" && fail "the private etcd still runs"
check_records "$tmp/run/metrics.jsonl" $steps || fail "the run's step records"
echo "ok: $(grep '^\[coord2\] final validation loss' "$tmp/launch.log")"
