#!/usr/bin/env bash
# A partition of the leader (#32, K = 2): etcd, two coordinator replicas and two nodes, each in
# its own network namespace on one bridge. At step 25 of 60 the leader's link goes down: it
# can renew its lease no more and its nodes no longer hear it. The standby takes over within
# the 2 s TTL and continues from the step-20 checkpoint, the same node processes attach to it,
# and the run completes. The cut-off leader is fenced (no record of its epoch after the new
# leader's first) and steps down (exit 4); its link comes back after 8 s and changes nothing.
# Processes are stopped by pid and the namespaces removed, also on failure.
bin=$1 root=$2
tag=$(( $$ % 100000 ))
ns_etcd="sqe$tag" ns_a="sqa$tag" ns_b="sqb$tag" ns_1="sqm$tag" ns_2="sqn$tag"
ip_etcd=10.231.9.1 ip_a=10.231.9.2 ip_b=10.231.9.3 ip_1=10.231.9.4 ip_2=10.231.9.5
source "$(dirname "$0")/lib.sh"
at_exit 'for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done; sleep 0.5'
on_fail() { for n in a b n1 n2; do echo "--- $n:"; tail -15 "$tmp/$n.log"; done; }
# Background processes start with `ip netns exec` itself (it execs them), not through ns: `$!`
# is then their own pid, which the cleanup stops.
ns() { ip netns exec "$@"; }
bridged_namespaces "sqh$tag" "" "$ns_etcd=$ip_etcd" "$ns_a=$ip_a" "$ns_b=$ip_b" "$ns_1=$ip_1" \
  "$ns_2=$ip_2"
command -v etcd >/dev/null || fail "needs etcd (Debian's etcd-server; scripts/test.sh installs it)"
export SWARMRT_SECRET=partition-leader-test
unset SWARMRT_SECRET_FILE
etcd_tls "$tmp/etcd-tls" $ip_etcd
# shellcheck disable=SC2046
ip netns exec "$ns_etcd" etcd --name e --data-dir "$tmp/etcd" --listen-client-urls "https://$ip_etcd:2379" \
  --advertise-client-urls "https://$ip_etcd:2379" --listen-peer-urls "https://$ip_etcd:2380" \
  --initial-advertise-peer-urls "https://$ip_etcd:2380" \
  --initial-cluster "e=https://$ip_etcd:2380" $(etcd_tls_flags "$tmp/etcd-tls") \
  >"$tmp/etcd.log" 2>&1 &
pids+=($!)
run_id=00000000000000cc steps=60
replica() {  # NAME NAMESPACE ADDRESS
  ip netns exec "$2" "$bin" coordinator -c "$root/configs/tiny.toml" --listen "$3:7413" -o "$tmp/run" \
    --etcd "https://$ip_etcd:2379" --lease-ttl-s 2 --run-id $run_id \
    --set "data.path=$root/data/brown.txt" --set train.steps=$steps --set train.eval_every=0 \
    --set train.eval_batches=4 --set checkpoint.every_steps=10 --set diloco.inner_steps=10 \
    >"$tmp/$1.log" 2>&1 &
  pids+=($!)
}
replica a "$ns_a" $ip_a
a=$!
wait_log "$tmp/a.log" "leading run $run_id" 30 || fail "replica a does not lead"
replica b "$ns_b" $ip_b
b=$!
wait_log "$tmp/b.log" "standby for run $run_id" 30 || fail "replica b is not a standby"
for k in 1 2; do
  nsk=ns_$k ipk=ip_$k
  ip netns exec "${!nsk}" "$bin" node --join "$ip_a:7413,$ip_b:7413" --run-id $run_id --workers 2 \
    --name n$k --listen "${!ipk}" --connect-timeout-s 60 >"$tmp/n$k.log" 2>&1 &
  pids+=($!)
  eval "n$k=$!"
done
wait_log "$tmp/a.log" "step 25/$steps" 180 || fail "the run did not reach step 25"
ns "$ns_a" ip link set "v$ns_a" down
wait_log "$tmp/b.log" "leading run $run_id .*taking over" 30 || fail "the standby did not take over"
exits_with "$a" 30 4 "the cut-off leader (stepping down)"
grep -q "stepping down as leader" "$tmp/a.log" || fail "the cut-off leader did not say it stepped down"
sleep 2
ns "$ns_a" ip link set "v$ns_a" up
run_finished "$b" "$tmp/b.log" "the new leader"
nodes_ended 2 n1 n2
check_records "$tmp/run/metrics.jsonl" $steps '
late = late_records()
assert not late, f"records of the cut-off leader after the new one took over: {late}"
' || fail "the run's records"
echo "ok: $(grep 'final validation loss' "$tmp/b.log")"
