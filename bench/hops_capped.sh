#!/usr/bin/env bash
# Hop encodings across processes under a link cap: configs/tiny.toml's diloco-swarm 2x2 (an
# outer round every 25 steps) as `swarmrt launch --local 2` (a coordinator and two nodes of two
# workers), STEPS steps, each process's frame links paced to MBIT Mbit/s (chaos.link_mbit_s)
# or uncapped. The runs, alternated within a round and rotated from round to round:
#   none-free     hops as they are, no cap            (the uncapped run)
#   none          hops as they are, capped
#   int8          int8 hops, capped
#   none-stream   hops as they are and Streaming DiLoCo (as below), capped
#   int8-stream   int8 hops and Streaming DiLoCo, capped
#   int4-stream   int4 hops and Streaming DiLoCo (2 fragments, one a stage, tau = 1, fp4), capped
#   int4-free     the same, no cap
# Tokens/s is the run's tokens after the warm-up step (WARMUP) over the wall time they took,
# so the rounds and their syncs are in it. Per round: int8/none (plain DiLoCo, whose rounds
# also cross the capped links), int8-stream/none-stream (the rounds spread out: the hops'
# share), int4-stream/none-free and int4-stream/int4-free.
# Usage: [WARMUP=5] bench/hops_capped.sh [ROUNDS] [STEPS] [MBIT]   (2 rounds, 100 steps, 100)
#   -> table + bench/results/hops_capped_MBIT.json
source "$(dirname "$0")/lib.sh"
rounds=${1:-2} steps=${2:-100} mbit=${3:-100} warmup=${WARMUP:-5}
[[ $rounds =~ ^[1-9][0-9]*$ && $steps =~ ^[0-9]+$ && $steps -gt $warmup && $mbit =~ ^[0-9]+$ ]] ||
  { echo "usage: bench/hops_capped.sh [ROUNDS] [STEPS > WARMUP] [MBIT]" >&2; exit 2; }
prepare_bench
bench_scratch
streaming=(--set diloco.fragments=2 --set diloco.overlap_steps=1 --set diloco.quantize=fp4)
one() {  # ROUND NAME ENCODING CAP [--set ...]
  local round=$1 name=$2 enc=$3 cap=$4
  shift 4
  build/bin/swarmrt launch --local 2 -c configs/tiny.toml -o "$tmp/run" --overwrite \
    --set swarm.hop_encoding="$enc" --set chaos.link_mbit_s="$cap" \
    --set train.steps="$steps" --set train.eval_every=0 --set train.eval_batches=1 \
    --set checkpoint.every_steps=0 --set train.log_every=1000 "$@" \
    >"$tmp/launch.log" 2>&1 || { tail -20 "$tmp/launch.log"; exit 1; }
  python3 - "$tmp/run/metrics.jsonl" "$round" "$name" "$enc" "$cap" "$warmup" <<'PY' >>"$out"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
st = [r for r in recs if r.get("event") == "step"]
w = int(sys.argv[6])
a, b = st[w - 1], st[-1]
b_bytes = b["bytes"]
print(json.dumps({"round": int(sys.argv[2]), "run": sys.argv[3], "hop_encoding": sys.argv[4],
                  "link_mbit_s": float(sys.argv[5]), "steps": len(st), "tokens": b["tokens"],
                  "tokens_per_s": (b["tokens"] - a["tokens"]) / (b["wall"] - a["wall"]),
                  "activations_bytes": b_bytes.get("activations", 0),
                  "gradients_bytes": b_bytes.get("gradients", 0),
                  "pseudo_gradients_bytes": b_bytes.get("pseudo_gradients", 0),
                  "final_loss": b["loss"]}))
PY
}
runs=(none-free none int8 none-stream int8-stream int4-stream int4-free)
for r in $(seq "$rounds"); do
  for k in "${runs[@]:$((r % 7))}" "${runs[@]:0:$((r % 7))}"; do
    echo "round $r: $k" >&2
    case $k in
      none-free) one "$r" "$k" none 0 ;;
      none) one "$r" "$k" none "$mbit" ;;
      int8) one "$r" "$k" int8 "$mbit" ;;
      none-stream) one "$r" "$k" none "$mbit" "${streaming[@]}" ;;
      int8-stream) one "$r" "$k" int8 "$mbit" "${streaming[@]}" ;;
      int4-stream) one "$r" "$k" int4 "$mbit" "${streaming[@]}" ;;
      int4-free) one "$r" "$k" int4 0 "${streaming[@]}" ;;
    esac
  done
done
summarize "$out" "$mbit" "$steps" <<'PY'
mbit, steps = float(sys.argv[3]), int(sys.argv[4])
rounds = sorted({r["round"] for r in runs})
tps = lambda name, rnd: next(r["tokens_per_s"] for r in runs if r["run"] == name and r["round"] == rnd)
names = ["none-free", "none", "int8", "none-stream", "int8-stream", "int4-stream", "int4-free"]
med = {n: statistics.median(tps(n, r) for r in rounds) for n in names}
int8_ratio = [tps("int8", r) / tps("none", r) for r in rounds]
int8_stream = [tps("int8-stream", r) / tps("none-stream", r) for r in rounds]
stream_ratio = [tps("int4-stream", r) / tps("none-free", r) for r in rounds]
stream_own = [tps("int4-stream", r) / tps("int4-free", r) for r in rounds]
print(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB; "
      f"diloco-swarm 2x2 across 2 node processes, {steps} steps, cap {mbit:g} Mbit/s, {len(rounds)} rounds")
print(f"{'run':<14}{'tokens/s (median)':>20}{'hop bytes/token':>18}")
for n in names:
    last = [r for r in runs if r["run"] == n][-1]
    tokens = last["tokens"]
    print(f"{n:<14}{med[n]:>20.0f}{(last['activations_bytes'] + last['gradients_bytes']) / tokens:>18.0f}")
fmt = lambda xs: " ".join(f"{x:.2f}" for x in xs)
print(f"int8 / none, capped: {statistics.median(int8_ratio):.2f}   per round: {fmt(int8_ratio)}")
print(f"int8 / none, capped, Streaming: {statistics.median(int8_stream):.2f}   per round: {fmt(int8_stream)}")
print(f"int4 + Streaming capped / none uncapped: {statistics.median(stream_ratio):.2f}   per round: {fmt(stream_ratio)}")
print(f"int4 + Streaming capped / the same uncapped: {statistics.median(stream_own):.2f}   per round: {fmt(stream_own)}")
json.dump({"benchmark": "hops_capped", "config": "configs/tiny.toml", "machine": machine,
           "link_mbit_s": mbit, "steps": steps,
           "summary": {"tokens_per_s_median": med, "int8_to_none_capped": statistics.median(int8_ratio),
                       "int8_to_none_capped_rounds": int8_ratio,
                       "int8_to_none_capped_streaming": statistics.median(int8_stream),
                       "int8_to_none_capped_streaming_rounds": int8_stream,
                       "int4_streaming_capped_to_none_uncapped": statistics.median(stream_ratio),
                       "int4_streaming_capped_to_none_uncapped_rounds": stream_ratio,
                       "int4_streaming_capped_to_itself_uncapped": statistics.median(stream_own),
                       "int4_streaming_capped_to_itself_uncapped_rounds": stream_own},
           "runs": runs}, open(f"bench/results/hops_capped_{mbit:g}.json", "w"), indent=1)
print(f"wrote bench/results/hops_capped_{mbit:g}.json")
PY
