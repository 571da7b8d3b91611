#!/usr/bin/env bash
# Time from the leading coordinator's death to the next completed step under its standby, per
# phase of the step, for a 2x2 run of configs/tiny.toml (diloco-swarm, or the mode given) on
# 127.0.0.1: a private
# etcd, two coordinator replicas (coordinator --etcd, lease TTL given), two nodes of 2 workers
# that know both. chaos.kill = "coordinator" ends the leader's process in step 14 of 30, at its
# start, at its reduce, as the workers apply or while validation batches are in flight (an
# evaluation every 14 steps), or in step 20 while its checkpoint is gathered
# (chaos.kill_at_phase); the standby continues after the leader's last closed step from the
# states the nodes kept (in DiLoCo with each group's journal entry of its last round), or from
# the newest checkpoint (step 10) when they do not cover every stage at it (docs/faults.md). From the logs and metrics.jsonl: the kill's time (the chaos line in
# the old leader's log, UTC), the new leader's first step record ("wall"), the steps run again
# (the old leader's last completed step - the step the new one continued after), and
# extra_samples / missing_samples summed over every step record.
# Goal (issue #32): kill -> next completed step <= lease TTL + 2 s, median per phase; no
# micro-batch lost or counted twice.
# Usage: bench/failover.sh [ROUNDS_PER_PHASE] [LEASE_TTL_S] [MODE]
#   -> table + bench/results/failover.json (diloco-swarm) or failover_MODE.json
source "$(dirname "$0")/lib.sh"
install_daemons etcd-server  # a daemon package: installed without starting its service
prepare_bench
rounds=${1:-5} ttl=${2:-5} mode=${3:-diloco-swarm}
result=bench/results/failover.json
[ "$mode" = diloco-swarm ] || result=bench/results/failover_$mode.json
steps=30
export OPENBLAS_NUM_THREADS=1 TZ=UTC SWARMRT_SECRET=bench-failover
unset SWARMRT_SECRET_FILE
bench_scratch
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for() { for _ in $(seq 1 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }

client=$(free_port) peer=$(free_port)
# Mutual TLS with the cluster's certificates, as launch's private etcd: no open port.
build/bin/swarmrt tls --out "$tmp/tls" --host 127.0.0.1 >/dev/null
t="$tmp/tls"
etcd --name bench --data-dir "$tmp/etcd" --listen-client-urls "https://127.0.0.1:$client" \
  --advertise-client-urls "https://127.0.0.1:$client" --listen-peer-urls "https://127.0.0.1:$peer" \
  --initial-advertise-peer-urls "https://127.0.0.1:$peer" --initial-cluster "bench=https://127.0.0.1:$peer" \
  --client-cert-auth --trusted-ca-file "$t/ca.pem" --cert-file "$t/cert.pem" --key-file "$t/key.pem" \
  --peer-client-cert-auth --peer-trusted-ca-file "$t/ca.pem" --peer-cert-file "$t/cert.pem" \
  --peer-key-file "$t/key.pem" >"$tmp/etcd.log" 2>&1 &
pids+=($!)
etcd_url="https://127.0.0.1:$client"
sleep 2

one_round() { # phase round
  local phase=$1 r=$2 id pa pb a b n d at=14 every=0
  [ "$phase" = save ] && at=20
  [ "$phase" = eval ] && every=14
  id=$(printf '%016x' $((RANDOM * 32768 + RANDOM + 1)))
  pa=$(free_port) pb=$(free_port)
  d="$tmp/$phase$r"
  mkdir -p "$d"
  for x in a b; do
    build/bin/swarmrt coordinator -c configs/tiny.toml -o "$d/run" --etcd "$etcd_url" \
      --lease-ttl-s "$ttl" --run-id "$id" --listen "127.0.0.1:$([ $x = a ] && echo "$pa" || echo "$pb")" \
      --set swarm.mode="$mode" --set train.steps=$steps --set train.eval_every=$every --set train.eval_batches=1 \
      --set checkpoint.every_steps=10 --set chaos.kill=coordinator --set chaos.kill_at_step=$at \
      --set chaos.kill_at_phase="$phase" >"$d/$x.log" 2>&1 &
    pids+=($!)
    [ $x = a ] && { wait_for "$d/a.log" "leading run" || { cat "$d/a.log"; exit 1; }; }
  done
  b=$!
  for n in 1 2; do
    build/bin/swarmrt node --join "127.0.0.1:$pa,127.0.0.1:$pb" --run-id "$id" -w 2 --name "n$n" \
      --connect-timeout-s 120 >"$d/n$n.log" 2>&1 &
    pids+=($!)
  done
  wait "$b" || { tail -20 "$d/b.log"; exit 1; }
  sleep 1 # the nodes stop when the coordinator does
  python3 - "$d" "$phase" "$r" "$ttl" "$at" >>"$out" <<'PY'
import datetime, json, re, sys
d, phase, rnd, ttl, at = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
line = next(l for l in open(d + "/a.log") if "chaos: killing this coordinator process" in l)
hms = re.match(r"\[(\d+):(\d+):([\d.]+)\]", line).groups()
recs = [json.loads(l) for l in open(d + "/run/metrics.jsonl")]
steps = [r for r in recs if r.get("event") == "step"]
fault = next(r for r in recs if r.get("event") == "fault" and r.get("kind") == "coordinator")
# Where the new leader continued: after the nodes' kept states (a takeover record) or from the
# checkpoint; the old leader's last completed step is the last step line of its log.
took = [r for r in recs if r.get("event") == "takeover"]
after = took[0]["step"] if took else fault["resumed_step"]
done = [int(m.group(1)) for m in re.finditer(r"step (\d+)/\d+ \|", open(d + "/a.log").read())]
new_epoch = fault["epoch"]
first_new = next(r for r in steps if r["epoch"] == new_epoch)
day = datetime.datetime.fromtimestamp(first_new["wall"], datetime.timezone.utc).replace(
    hour=0, minute=0, second=0, microsecond=0).timestamp()
kill = day + int(hms[0]) * 3600 + int(hms[1]) * 60 + float(hms[2])
print(json.dumps({"phase": phase, "round": rnd, "lease_ttl_s": ttl,
                  "kill_to_next_step_s": first_new["wall"] - kill,
                  "continued_after": after, "from": took[0]["from"] if took else "checkpoint",
                  "steps_run_again": max(done, default=0) - after,
                  "step_records": [r["step"] for r in steps] == list(range(1, len(steps) + 1)),
                  "extra_samples": sum(r["extra_samples"] for r in steps),
                  "missing_samples": sum(r["missing_samples"] for r in steps)}))
PY
}

for phase in start reduce apply eval save; do
  for r in $(seq "$rounds"); do one_round "$phase" "$r"; done
done
summarize "$out" "$ttl" "$mode" "$result" <<'PY'
ttl = float(sys.argv[3])
print(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB; "
      f"{sys.argv[4]} 2x2 (configs/tiny.toml), 2 coordinator replicas, lease TTL {ttl:g} s")
print(f"{'phase':<8}{'kills':>6}{'kill->next step (median, min-max)':>36}{'goal':>8}"
      f"{'steps again':>13}{'extra/missing':>15}{'one record a step':>19}")
summary = {}
for phase in ("start", "reduce", "apply", "eval", "save"):
    rs = [r for r in runs if r["phase"] == phase]
    t = [r["kill_to_next_step_s"] for r in rs]
    med = statistics.median(t)
    summary[phase] = {"kills": len(rs), "median_s": med, "min_s": min(t), "max_s": max(t),
                      "goal_s": ttl + 2, "steps_run_again": statistics.median(r["steps_run_again"] for r in rs),
                      "extra_samples": sum(r["extra_samples"] for r in rs),
                      "missing_samples": sum(r["missing_samples"] for r in rs),
                      "one_record_a_step": all(r["step_records"] for r in rs)}
    s = summary[phase]
    print(f"{phase:<8}{len(rs):>6}{med:>17.2f} s ({min(t):.2f}-{max(t):.2f} s){'':>3}{ttl + 2:>6.1f} s"
          f"{s['steps_run_again']:>13g}{s['extra_samples']:>7}/{s['missing_samples']:<7}"
          f"{'yes' if s['one_record_a_step'] else 'NO':>19}")
json.dump({"benchmark": "failover", "config": "configs/tiny.toml", "mode": sys.argv[4],
           "lease_ttl_s": ttl, "machine": machine, "summary": summary, "runs": runs},
          open(sys.argv[5], "w"), indent=1)
print("wrote", sys.argv[5])
PY
