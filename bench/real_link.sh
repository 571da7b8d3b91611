#!/usr/bin/env bash
# What a real thin link costs each way of synchronizing, beside what the pacing model
# (chaos.link_mbit_s) predicts. Two network namespaces on one bridge: A holds the coordinator
# and node a, B holds node b, one worker each (configs/bench_comm.toml: the tiny model in one
# stage of 2 workers), so every byte between worker b and the rest crosses the veth pair, inside
# TLS (the coordinator listens on A's address). Each mode runs STEPS steps three ways:
#   free    no cap
#   tbf     both ends of the link shaped by tc tbf at MBIT Mbit/s (rate, 128 kB burst, 50 ms
#           queue), so every process's traffic queues in one FIFO, control and sync alike
#   paced   no qdisc, every process paces its own frame links to MBIT (chaos.link_mbit_s, what
#           `bench comm` uses)
# Modes: swarm (gradients every step), diloco (H = 64, one float32 round), streaming (the
# config's Streaming DiLoCo). Runs are alternated within a round. Per run: end-to-end tokens/s
# (tokens after step WARMUP over the wall time they took: rounds included) and the median step's
# tokens/s; the table gives each capped way against free, medians over rounds.
# Needs root (network namespaces) and iproute2; this kernel has tbf but no netem.
# Usage: [WARMUP=2] [MODES="streaming diloco swarm"] bench/real_link.sh [ROUNDS] [STEPS] [MBIT]
#   (2 rounds, 130 steps, 100 Mbit/s) -> table + bench/results/real_link_MBIT.json, the runs
#   under runs/bench_real_link/ROUND-MODE-WAY
source "$(dirname "$0")/lib.sh"
rounds=${1:-2} steps=${2:-130} mbit=${3:-100} warmup=${WARMUP:-2}
modes=${MODES:-streaming diloco swarm}
[[ $rounds =~ ^[1-9][0-9]*$ && $steps =~ ^[0-9]+$ && $steps -gt $((warmup + 2)) && $mbit =~ ^[1-9][0-9]*$ ]] ||
  { echo "usage: bench/real_link.sh [ROUNDS] [STEPS > WARMUP + 2] [MBIT > 0]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench/real_link.sh: needs root for network namespaces" >&2; exit 2; }
command -v tc >/dev/null || { echo "bench/real_link.sh: needs iproute2 (tc)" >&2; exit 2; }
prepare_bench
bin=${SWARMRT_BIN:-build/bin/swarmrt}
tag=$(($$ % 100000))
hub=rlh$tag a=rla$tag b=rlb$tag addr_a=10.233.5.1 addr_b=10.233.5.2
out=$(mktemp) tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  for n in "$a" "$b" "$hub"; do ip netns del "$n" 2>/dev/null; done
  rm -rf "$tmp" "$out"
}
trap cleanup EXIT
ns() { ip netns exec "$@"; }
ip netns add "$hub" && ns "$hub" ip link add br0 type bridge && ns "$hub" ip link set br0 up
for pair in "$a=$addr_a" "$b=$addr_b"; do
  n=${pair%%=*} addr=${pair#*=}
  ip netns add "$n"
  ip link add "v$n" netns "$n" type veth peer name "p$n" netns "$hub"
  ns "$hub" ip link set "p$n" master br0
  ns "$hub" ip link set "p$n" up
  ns "$n" ip link set lo up
  ns "$n" ip addr add "$addr/24" dev "v$n"
  ns "$n" ip link set "v$n" up
done
shape() {  # on | off: tbf on both ends of the link (A's and B's egress), or none
  local n
  for n in "$a" "$b"; do
    if [ "$1" = on ]; then
      ns "$n" tc qdisc replace dev "v$n" root tbf rate "${mbit}mbit" burst 128kb latency 50ms
    else
      ns "$n" tc qdisc del dev "v$n" root 2>/dev/null || true
    fi
  done
}
export SWARMRT_SECRET=real-link-bench-$tag
declare -A mode_sets=(
  [swarm]="--set swarm.mode=swarm"
  [diloco]="--set swarm.mode=diloco --set diloco.fragments=1 --set diloco.overlap_steps=0 --set diloco.quantize=none"
  [streaming]="--set swarm.mode=diloco"
)
one() {  # ROUND MODE WAY
  local round=$1 mode=$2 way=$3 cap=0 port=""
  [ "$way" = tbf ] && shape on || shape off
  [ "$way" = paced ] && cap=$mbit
  local dir=runs/bench_real_link/$round-$mode-$way  # kept: its metrics.jsonl has every step
  rm -rf "$dir"
  mkdir -p runs/bench_real_link
  # shellcheck disable=SC2086
  ns "$a" "$bin" coordinator -c configs/bench_comm.toml --listen "$addr_a:0" -o "$dir" \
    ${mode_sets[$mode]} --set train.steps="$steps" --set train.eval_batches=1 \
    --set checkpoint.every_steps=0 --set train.log_every=1000 --set chaos.link_mbit_s="$cap" \
    >"$tmp/coord.log" 2>&1 &
  local coord=$!
  pids=("$coord")
  for _ in $(seq 1 300); do
    port=$(sed -n "s/^coordinator listening on $addr_a:\([0-9]*\)\$/\1/p" "$tmp/coord.log" 2>/dev/null)
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { tail -20 "$tmp/coord.log"; echo "the coordinator did not listen" >&2; exit 1; }
  ns "$a" "$bin" node --join "$addr_a:$port" --workers 1 --name a --listen "$addr_a" \
    >"$tmp/a.log" 2>&1 &
  pids+=($!)
  ns "$b" "$bin" node --join "$addr_a:$port" --workers 1 --name b --listen "$addr_b" \
    >"$tmp/b.log" 2>&1 &
  pids+=($!)
  wait "$coord" || { tail -20 "$tmp/coord.log" "$tmp/b.log"; echo "$mode $way failed" >&2; exit 1; }
  # the nodes stop once the run is over; one that does not within 20 s is killed
  for _ in $(seq 1 200); do
    kill -0 "${pids[1]}" 2>/dev/null || kill -0 "${pids[2]}" 2>/dev/null || break
    sleep 0.1
  done
  for p in "${pids[@]:1}"; do
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  # what node b's end of the link sent through its tbf (0 without one): the cap was in the path
  local shaped=0
  [ "$way" = tbf ] && shaped=$(ns "$b" tc -s qdisc show dev "v$b" | sed -n 's/.*Sent \([0-9]*\) bytes.*/\1/p' | head -1)
  python3 - "$dir/metrics.jsonl" "$round" "$mode" "$way" "$warmup" "${shaped:-0}" <<'PY' >>"$out"
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
st = [r for r in recs if r.get("event") == "step"]
w = int(sys.argv[5])
a, b = st[w - 1], st[-1]
print(json.dumps({"round": int(sys.argv[2]), "mode": sys.argv[3], "way": sys.argv[4],
                  "steps": len(st), "bytes_through_tbf": int(sys.argv[6]),
                  "tokens_per_s": (b["tokens"] - a["tokens"]) / (b["wall"] - a["wall"]),
                  "median_step_tokens_per_s": statistics.median(r["tokens_per_s"] for r in st[w:-1])}))
PY
  echo "round $round $mode $way: $(tail -1 "$out")" >&2
}
ways=(free tbf paced)
for r in $(seq 1 "$rounds"); do
  for mode in $modes; do
    # rotated from round to round, so no way always runs first
    for i in 0 1 2; do one "$r" "$mode" "${ways[$(((i + r - 1) % 3))]}"; done
  done
done
summarize "$out" "$mbit" "$steps" "$rounds" <<'PY'
mbit, steps, rounds = float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
table, out = {}, {"benchmark": "real_link", "machine": machine, "mbit_s": mbit, "steps": steps,
                  "rounds": rounds, "runs": runs, "modes": {}}
print(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB")
print(f"configs/bench_comm.toml, 1 stage x 2 workers (one behind the link), {steps} steps, "
      f"{mbit:g} Mbit/s, {rounds} rounds; medians of per-round ratios to free")
print(f"{'mode':<11}{'free tok/s':>11}{'tbf e2e':>9}{'tbf step':>9}{'paced e2e':>10}{'paced step':>11}")
for mode in dict.fromkeys(r["mode"] for r in runs):
    per = {}
    for k in ("tokens_per_s", "median_step_tokens_per_s"):
        for way in ("tbf", "paced"):
            ratios = []
            for rd in range(1, rounds + 1):
                f = [r[k] for r in runs if r["mode"] == mode and r["round"] == rd and r["way"] == "free"]
                c = [r[k] for r in runs if r["mode"] == mode and r["round"] == rd and r["way"] == way]
                if f and c: ratios.append(c[0] / f[0])
            per[f"{way}_{k}"] = {"median": statistics.median(ratios), "per_round": ratios}
    free = statistics.median(r["tokens_per_s"] for r in runs if r["mode"] == mode and r["way"] == "free")
    out["modes"][mode] = {"free_tokens_per_s": free, **per}
    g = lambda way, k: per[f"{way}_{k}"]["median"]
    print(f"{mode:<11}{free:>11.0f}{g('tbf', 'tokens_per_s'):>9.2f}{g('tbf', 'median_step_tokens_per_s'):>9.2f}"
          f"{g('paced', 'tokens_per_s'):>10.2f}{g('paced', 'median_step_tokens_per_s'):>11.2f}")
path = f"bench/results/real_link_{mbit:g}.json"
json.dump(out, open(path, "w"), indent=1)
print("wrote", path)
PY
