#!/usr/bin/env bash
# Goodput under a stream of faults (#59): configs/tiny.toml's diloco-swarm 2x2 on 4 node
# processes (one worker each) and 2 coordinator replicas on a private etcd, every process in its
# own network namespace on one bridge. Two runs of MINUTES each, from their first step: one
# unfaulted, then one with a fault starting every SECONDS (SECONDS x (i + 1) after the first
# step; at once when the one before ran past that), the kinds in turn:
#   worker     a worker actor killed (`ctl kill`): its supervisor restarts it
#   node-kill  a node process SIGKILLed, started again 1 s later
#   freeze     a node process SIGSTOPped for 3 s, then SIGCONTed
#   leader     the leading coordinator SIGKILLed (its standby takes over), started again as the
#              new standby
#   partition  a node's link down for 4 s
# Per run: steps committed from the first step's record to MINUTES later. goodput = tokens of
# the faulted run's committed steps / the unfaulted run's in the same wall time. Per fault: the
# seconds from the fault to the first step completed after it ended (the process back, the link
# up). Lost or duplicated samples (every step record's duplicates, extra_samples and
# missing_samples), step records per step, and the validation loss of both runs at the last
# evaluation both reached (equal tokens). A chart of both runs with their fault events. A
# worker kill that found no worker to kill is listed as worker-missed.
# Failure detection: every process runs with --connection-timeout-ms $CHURN_TIMEOUT_MS (1000 by
# default, the CLI tests' setting; the runtime's own default is 2000) and a heartbeat a tenth of
# it: a frozen node or a cut link stops the pipeline for about that long before its workers
# leave. CHURN_CALM=DIR takes the unfaulted run from a directory an earlier invocation kept
# (CHURN_KEEP=DIR) instead of running it again, when it is at least MINUTES long and ran with
# the same timeout.
# Needs root (namespaces) and etcd (installed here when missing).
# Usage: bench/churn.sh [MINUTES] [SECONDS] (30, 15)
#   -> table + bench/results/churn.json (churn_SECONDS.json when SECONDS is not 15),
#      docs/img/churn.png (swarmrt plot: loss, bytes and tokens/s, the tracker's fault events
#      marked)
source "$(dirname "$0")/lib.sh"
minutes=${1:-30} every=${2:-15}
[[ $minutes =~ ^[0-9]+([.][0-9]+)?$ && $every =~ ^[1-9][0-9]*$ ]] ||
  { echo "usage: bench/churn.sh [MINUTES] [SECONDS > 0]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench/churn.sh: needs root for network namespaces" >&2; exit 2; }
install_daemons etcd-server
prepare_build
root=$PWD bin=$PWD/build/bin/swarmrt
# The multi-process helpers of the CLI tests: namespaces on a bridge, etcd's TLS, waits.
source tests/cli/lib.sh
set +e +o pipefail  # faults fail and processes die on purpose; each step checks what it needs
[ -n "${CHURN_KEEP:-}" ] && at_exit 'cp -r "$tmp" "$CHURN_KEEP"'
result=bench/results/churn.json
[ "$every" = 15 ] || result=bench/results/churn_$every.json
export OPENBLAS_NUM_THREADS=1 TZ=UTC SWARMRT_SECRET=bench-churn-$$
unset SWARMRT_SECRET_FILE
timeout_ms=${CHURN_TIMEOUT_MS:-1000}
[[ $timeout_ms =~ ^[0-9]+$ && $timeout_ms -ge 500 ]] || { echo "CHURN_TIMEOUT_MS >= 500" >&2; exit 2; }
netopts=(--heartbeat-ms $((timeout_ms / 10)) --connection-timeout-ms "$timeout_ms")
tag=$(($$ % 10000))
net=10.232.8
ns_etcd=cue$tag ns_a=cua$tag ns_b=cub$tag
declare -A ns_of=([etcd]=$ns_etcd [a]=$ns_a [b]=$ns_b) ip_of=([etcd]=$net.1 [a]=$net.2 [b]=$net.3)
specs=("$ns_etcd=$net.1" "$ns_a=$net.2" "$ns_b=$net.3")
for k in 1 2 3 4; do
  ns_of[n$k]=cun$tag$k ip_of[n$k]=$net.1$k
  specs+=("cun$tag$k=$net.1$k")
done
bridged_namespaces "cuh$tag" "" "${specs[@]}"
ns() { ip netns exec "$@"; }
etcd_tls "$tmp/etcd-tls" "$net.1"
# shellcheck disable=SC2046
ip netns exec "$ns_etcd" etcd --name e --data-dir "$tmp/etcd" --listen-client-urls "https://$net.1:2379" \
  --advertise-client-urls "https://$net.1:2379" --listen-peer-urls "https://$net.1:2380" \
  --initial-advertise-peer-urls "https://$net.1:2380" --initial-cluster "e=https://$net.1:2380" \
  $(etcd_tls_flags "$tmp/etcd-tls") >"$tmp/etcd.log" 2>&1 &
pids+=($!)
declare -A pid_of
coordinators="$net.2:7413,$net.3:7413"

# Started with `ip netns exec` itself (it execs the process), not through a function: `$!` is
# then the process's pid, which the faults signal.
replica() {  # RUN NAME: a coordinator replica, its log appended to (it may start again)
  ip netns exec "${ns_of[$2]}" "$bin" coordinator -c "$root/configs/tiny.toml" --listen "${ip_of[$2]}:7413" \
    -o "$tmp/$1" --etcd "https://$net.1:2379" --lease-ttl-s 2 --run-id "$run_id" "${netopts[@]}" \
    --set "data.path=$root/data/brown.txt" --set train.steps=1000000 --set train.eval_every=200 \
    --set train.eval_batches=8 --set checkpoint.every_steps=500 --set train.log_every=50 \
    >>"$tmp/$1-$2.log" 2>&1 &
  pids+=($!)
  pid_of[$2]=$!
}
node() {  # RUN NAME
  ip netns exec "${ns_of[$2]}" "$bin" node --join "$coordinators" --run-id "$run_id" --workers 1 --name "$2" \
    --listen "${ip_of[$2]}" --connect-timeout-s 120 "${netopts[@]}" >>"$tmp/$1-$2.log" 2>&1 &
  pids+=($!)
  pid_of[$2]=$!
}
leader() {  # RUN: the replica that announced leadership last
  local best="" at="" t r
  for r in a b; do
    t=$(grep -h "leading run $run_id" "$tmp/$1-$r.log" 2>/dev/null | tail -1 | cut -c2-13)
    [ -n "$t" ] && [[ -z "$at" || "$t" > "$at" ]] && at=$t best=$r
  done
  echo "$best"
}
now() { python3 -c 'import time; print(f"{time.time():.3f}")'; }
fault() {  # RUN INDEX: the INDEX-th fault, kinds and victims in turn; a line of JSON
  local run=$1 i=$2 kinds=(worker node-kill freeze leader partition) kind victim t0 t1 idx
  kind=${kinds[$((i % 5))]}
  victim=n$(((i / 5) % 4 + 1))
  t0=$(now)
  case $kind in
    worker)
      # The victim's worker, by the index the leader gave its node when it last joined.
      idx=$(grep -h "node '$victim' joined as node" "$tmp/$run-a.log" "$tmp/$run-b.log" | sort |
        tail -1 | sed -n "s/.*joined as node \([0-9]*\).*/\1/p")
      ns "$ns_etcd" "$bin" ctl "$coordinators" kill "*/worker*@node$idx" --yes >>"$tmp/$run-ctl.log" 2>&1 ||
        kind=worker-missed ;;
    node-kill)
      kill -KILL "${pid_of[$victim]}" 2>/dev/null
      wait "${pid_of[$victim]}" 2>/dev/null
      sleep 1
      node "$run" "$victim" ;;
    freeze)
      kill -STOP "${pid_of[$victim]}"
      sleep 3
      kill -CONT "${pid_of[$victim]}" ;;
    leader)
      victim=$(leader "$run")
      kill -KILL "${pid_of[$victim]}" 2>/dev/null
      wait "${pid_of[$victim]}" 2>/dev/null
      sleep 1
      replica "$run" "$victim" ;;
    partition)
      ns "${ns_of[$victim]}" ip link set "v${ns_of[$victim]}" down
      sleep 4
      ns "${ns_of[$victim]}" ip link set "v${ns_of[$victim]}" up ;;
  esac
  t1=$(now)
  echo "{\"kind\": \"$kind\", \"victim\": \"$victim\", \"start\": $t0, \"end\": $t1}"
}
first_step_wall() {  # RUN: the wall time of the run's first step record, once there
  python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("event") == "step" and "wall" in r: print(r["wall"]); break' "$tmp/$1/metrics.jsonl" 2>/dev/null
}
one_run() {  # RUN FAULTS(0|1)
  local run=$1 faulty=$2 start="" i=0 p
  run_id=$(printf '%016x' $((RANDOM * 65536 + RANDOM)))
  replica "$run" a
  wait_log "$tmp/$run-a.log" "leading run $run_id" 60 || fail "$run: replica a does not lead"
  replica "$run" b
  for k in 1 2 3 4; do node "$run" "n$k"; done
  for _ in $(seq 1 1800); do
    start=$(first_step_wall "$run")
    [ -n "$start" ] && break
    sleep 0.1
  done
  [ -n "$start" ] || fail "$run: no first step: $(tail -5 "$tmp/$run-a.log")"
  echo "== $run: started at $start, $minutes min" >&2
  local end
  end=$(python3 -c "print($start + $minutes * 60)")
  : >"$tmp/$run-faults.jsonl"
  # Fault i starts SECONDS x (i + 1) after the first step (at once when the one before it ran
  # past that): a fault every SECONDS, whatever each lasts.
  while python3 -c "import sys, time; sys.exit(0 if time.time() < $end else 1)"; do
    if [ "$faulty" = 1 ]; then
      python3 -c "import time; time.sleep(max(0, $start + $every * ($i + 1) - time.time()))"
      python3 -c "import sys, time; sys.exit(0 if time.time() < $end else 1)" || break
      fault "$run" "$i" >>"$tmp/$run-faults.jsonl"
      i=$((i + 1))
    else
      sleep 1
    fi
  done
  for p in a b n1 n2 n3 n4; do kill -KILL "${pid_of[$p]}" 2>/dev/null; done
  for p in a b n1 n2 n3 n4; do wait "${pid_of[$p]}" 2>/dev/null; done
  echo "$start" >"$tmp/$run.start"
}
if [ -n "${CHURN_CALM:-}" ]; then
  why=$(python3 - "$CHURN_CALM/calm.json" "$minutes" "$timeout_ms" <<'PY'
import json, sys
def refuse(why):
    print(why)
    sys.exit(1)
try:
    kept = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    refuse(f"no calm.json there ({e})")
if kept.get("timeout_ms") != int(sys.argv[3]):
    refuse(f"it ran with --connection-timeout-ms {kept.get('timeout_ms')}, not {sys.argv[3]}")
if kept.get("minutes", 0) < float(sys.argv[2]):
    refuse(f"its unfaulted run is {kept.get('minutes')} min, shorter than {sys.argv[2]}")
PY
  ) || fail "CHURN_CALM=$CHURN_CALM: $why"
  cp -r "$CHURN_CALM/calm" "$CHURN_CALM/calm.start" "$tmp/"
  echo "== calm: taken from $CHURN_CALM" >&2
else
  one_run calm 0
  echo "{\"minutes\": $minutes, \"timeout_ms\": $timeout_ms}" >"$tmp/calm.json"
fi
one_run churn 1
mkdir -p bench/results docs/img
python3 - "$(bench/machine.sh)" "$tmp" "$minutes" "$every" "$result" "$timeout_ms" "${CHURN_CALM:-}" <<'PY'
import json, os, sys
machine, tmp, minutes, every, result = (json.loads(sys.argv[1]), sys.argv[2], float(sys.argv[3]),
                                        int(sys.argv[4]), sys.argv[5])
timeout_ms, calm_from = int(sys.argv[6]), sys.argv[7]
span = minutes * 60

def run(name):
    recs = [json.loads(l) for l in open(os.path.join(tmp, name, "metrics.jsonl"))]
    start = float(open(os.path.join(tmp, name + ".start")).read())
    seen, steps = set(), []
    for r in recs:  # a step recorded twice (run again after a takeover) counts once
        if r.get("event") == "step" and start <= r.get("wall", 0) <= start + span and r["step"] not in seen:
            seen.add(r["step"])
            steps.append(r)
    evals = {r["step"]: r["val_loss"] for r in recs if r.get("event") == "eval"}
    numbers = [r["step"] for r in recs if r.get("event") == "step"]
    return {"recs": recs, "start": start, "steps": steps, "evals": evals,
            "tokens": sum(r["tokens"] // r["step"] for r in steps),  # each step's own tokens
            "numbers": numbers}

calm, churn = run("calm"), run("churn")
faults = [json.loads(l) for l in open(os.path.join(tmp, "churn-faults.jsonl"))]
walls = sorted(r["wall"] for r in churn["steps"])
for f in faults:
    after = [w for w in walls if w > f["end"]]
    f["recovery_s"] = round(after[0] - f["start"], 3) if after else None
dup = sum(r["duplicates"] for r in churn["recs"] if r.get("event") == "step")
extra = sum(r["extra_samples"] for r in churn["recs"] if r.get("event") == "step")
missing = sum(r["missing_samples"] for r in churn["recs"] if r.get("event") == "step")
n = churn["numbers"]
one_record_each = n == list(range(n[0], n[0] + len(n))) if n else False
both = sorted(set(calm["evals"]) & set(churn["evals"]))
at = both[-1] if both else None
gap = (churn["evals"][at] / calm["evals"][at] - 1) if at else None
kinds = sorted({f["kind"] for f in faults})
out = {"machine": machine, "minutes": minutes, "seconds_between_faults": every,
       "connection_timeout_ms": timeout_ms, "heartbeat_ms": timeout_ms // 10,
       "unfaulted_run_from": calm_from or "this invocation",
       "goodput": churn["tokens"] / calm["tokens"], "tokens_unfaulted": calm["tokens"],
       "tokens_faulted": churn["tokens"], "steps_unfaulted": len(calm["steps"]),
       "steps_faulted": len(churn["steps"]), "faults": len(faults), "fault_kinds": kinds,
       "lost_samples": missing, "duplicated_samples": dup + extra,
       "one_step_record_per_step": one_record_each,
       "val_loss_at_step": at, "val_loss_unfaulted": calm["evals"].get(at),
       "val_loss_faulted": churn["evals"].get(at), "val_loss_gap": gap,
       "recovery_s_by_kind": {k: sorted(f["recovery_s"] for f in faults
                                        if f["kind"] == k and f["recovery_s"] is not None)
                              for k in kinds},
       "fault_list": faults}
json.dump(out, open(result, "w"), indent=2)
print(f"{'run':<10}{'steps':>8}{'tokens':>12}")
print(f"{'unfaulted':<10}{len(calm['steps']):>8}{calm['tokens']:>12}")
print(f"{'faulted':<10}{len(churn['steps']):>8}{churn['tokens']:>12}")
print(f"goodput {out['goodput']:.3f} over {minutes:g} min, {len(faults)} faults ({', '.join(kinds)})")
print(f"lost samples {missing}, duplicated {dup + extra}, one step record per step: {one_record_each}")
if at:
    print(f"val loss at step {at}: {calm['evals'][at]:.4f} unfaulted, {churn['evals'][at]:.4f} "
          f"faulted ({gap * 100:+.2f}%)")
for k in kinds:
    rs = out["recovery_s_by_kind"][k]
    if rs:
        print(f"  {k:<10} recovery median {rs[len(rs) // 2]:.2f} s, max {rs[-1]:.2f} s ({len(rs)})")
print(f"wrote {result}")
PY
chart=docs/img/churn.png
[ "$every" = 15 ] || chart=docs/img/churn_$every.png
"$bin" plot "$tmp/calm" "$tmp/churn" -o "$chart" --smooth 20 \
  --title "diloco-swarm 2x2: unfaulted, and a fault every $every s for $minutes min" &&
  echo "wrote $chart"
