#!/usr/bin/env bash
# A node joins a diloco-swarm run that is already training: the balancer places it where the
# pipeline needs it (the console has slowed both stage-0 workers 8x, so stage 0; min_gain is
# out of reach, so nobody moves), its worker starts from that stage's global parameters, and
# it takes work from the next step on. Processes are stopped by pid.
bin=$1 root=$2
source "$(dirname "$0")/lib.sh"

start_coordinator -c "$root/configs/tiny.toml" --listen 127.0.0.1:0 -o "$tmp/run" \
  --set "data.path=$root/data/brown.txt" --set train.steps=40 --set train.eval_every=0 \
  --set train.eval_batches=4 --set diloco.inner_steps=5 --set balancer.period_s=0.5 \
  --set balancer.min_gain=1000
for n in 1 2; do join_node "n$n" -w 2; done
wait_log "$tmp/coord.log" "step 5/40" 120 || fail "the run did not reach step 5: $(tail -5 "$tmp/coord.log")"
for w in stage0/worker0 stage0/worker1; do
  ctl slow "$w" 8 >"$tmp/slow.out" 2>&1 ||
    fail "slow $w: $(cat "$tmp/slow.out")"
done
# The workers' rate EMAs follow within a few micro-batches; the balancer measures every 0.5 s.
wait_log "$tmp/coord.log" "step 10/40" 120
sleep 3
join_node late -w 1
late=$node
wait_exit "$coord" 300 || fail "the coordinator still runs after 300 s"
wait "$coord" || fail "coordinator exited with $?: $(tail -20 "$tmp/coord.log")"
grep -q "final validation loss" "$tmp/coord.log" || fail "no final loss"
grep -q "node 'late' joined as node 2 (cpu): workers 2 (stage 0) where the balancer placed them" \
  "$tmp/coord.log" || fail "the late node's assignment: $(grep joined "$tmp/coord.log")"
grep -q '"event":"rebalance"' "$tmp/run/metrics.jsonl" && fail "a worker moved (min_gain 1000)"
grep -q "swarm has 5/4 workers" "$tmp/coord.log" || fail "the late worker never entered the membership"
wait_exit "$late" 10
mb=$(sed -n "s/.*node 'late' stopped; bytes sent by its workers: activations \([0-9.]*\) MB.*/\1/p" "$tmp/late.log")
[ -n "$mb" ] || fail "the late node did not stop cleanly: $(cat "$tmp/late.log")"
awk -v x="$mb" 'BEGIN { exit !(x > 0) }' || fail "the late worker never forwarded a micro-batch"
grep -q "refused my contribution" "$tmp/late.log" && fail "the late worker's round contribution was refused"
echo "ok: late worker forwarded $mb MB of activations"
