#!/usr/bin/env bash
# pp 2x1 across processes against pp 2x1 in one process, on configs/bench_tiny.toml (tiny
# model, 16 micro-batches of 2 per step, one torch thread per worker). The multi-process run is
# `swarmrt launch --local 2`: a coordinator (tracker, loaders) and two nodes with one stage
# worker each, hops over the frame link on 127.0.0.1, and the same with the hops' tensors on a
# TCP communicator link (transport.links = comm), and the frame link inside TLS 1.3
# (transport.encrypt = on; the control plane is on mutual TLS in every run). Tokens/s from
# the median step time after 3 warm-up steps; the four runs alternate, the order rotates.
# Usage: bench/multiprocess_throughput.sh [ROUNDS] [STEPS]  -> table + bench/results/multiprocess_throughput.json
source "$(dirname "$0")/lib.sh"
prepare_bench
rounds=${1:-5} steps=${2:-12}
export OPENBLAS_NUM_THREADS=1
bench_scratch
in_process() {
  build/bin/bench_runtime_throughput configs/bench_tiny.toml "$steps" 3 pp:2x1 \
    | sed "s/^{/{\"round\":$1,\"where\":\"in-process\",/" >>"$out"
}
multi_process() {
  local where=multi-process links=auto encrypt=off
  [ "${2:-}" = comm ] && where="multi-process comm" links=comm
  [ "${2:-}" = tls ] && where="multi-process tls" encrypt=on
  build/bin/swarmrt launch --local 2 -c configs/bench_tiny.toml -o "$tmp/run" --overwrite \
    --set swarm.mode=pp --set swarm.stages=2 --set swarm.workers_per_stage=1 \
    --set transport.links=$links --set transport.encrypt=$encrypt \
    --set train.steps=$((steps + 3)) --set train.eval_every=0 --set train.eval_batches=1 \
    >"$tmp/launch.log" 2>&1 || { tail -20 "$tmp/launch.log"; exit 1; }
  python3 - "$tmp/run/metrics.jsonl" "$1" "$where" <<'PY' >>"$out"
import json, statistics, sys
steps = [json.loads(l) for l in open(sys.argv[1])]
steps = [s for s in steps if s.get("event") == "step"][3:]
print(json.dumps({"round": int(sys.argv[2]), "where": sys.argv[3], "mode": "pp", "stages": 2,
                  "workers_per_stage": 1, "tokens_per_s": statistics.median(s["tokens_per_s"] for s in steps)}))
PY
}
runs=(in plain comm tls)
for r in $(seq "$rounds"); do
  for k in "${runs[@]:$((r % 4))}" "${runs[@]:0:$((r % 4))}"; do
    case $k in
      in) in_process "$r" ;;
      plain) multi_process "$r" ;;
      *) multi_process "$r" "$k" ;;
    esac
  done
done
summarize "$out" <<'PY'
rounds = sorted({r["round"] for r in runs})
tps = lambda where, rnd: next(r["tokens_per_s"] for r in runs if r["where"] == where and r["round"] == rnd)
ratios = [tps("multi-process", r) / tps("in-process", r) for r in rounds]
comm_ratios = [tps("multi-process comm", r) / tps("in-process", r) for r in rounds]
tls_ratios = [tps("multi-process tls", r) / tps("multi-process", r) for r in rounds]
med = {w: statistics.median(tps(w, r) for r in rounds)
       for w in ("in-process", "multi-process", "multi-process comm", "multi-process tls")}
print(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB; {len(rounds)} rounds")
print(f"{'pp 2x1':<20}{'tokens/s (median)':>20}")
for w, v in med.items(): print(f"{w:<20}{v:>20.0f}")
print(f"multi/in-process, median of rounds: {statistics.median(ratios):.2f}   per round: {' '.join(f'{x:.2f}' for x in ratios)}")
print(f"multi comm/in-process, median of rounds: {statistics.median(comm_ratios):.2f}   per round: {' '.join(f'{x:.2f}' for x in comm_ratios)}")
print(f"multi tls/multi plaintext, median of rounds: {statistics.median(tls_ratios):.2f}   per round: {' '.join(f'{x:.2f}' for x in tls_ratios)}")
json.dump({"benchmark": "multiprocess_throughput", "config": "configs/bench_tiny.toml", "machine": machine,
           "summary": {"tokens_per_s_median": med, "ratio_median": statistics.median(ratios), "ratios": ratios,
                       "comm_ratio_median": statistics.median(comm_ratios), "comm_ratios": comm_ratios,
                       "tls_to_plaintext_median": statistics.median(tls_ratios), "tls_to_plaintext": tls_ratios},
           "runs": runs}, open("bench/results/multiprocess_throughput.json", "w"), indent=1)
print("wrote bench/results/multiprocess_throughput.json")
PY
