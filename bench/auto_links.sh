#!/usr/bin/env bash
# swarm.compression = auto across two real links of different speed, beside each fixed hop
# encoding. Four network namespaces on one bridge: the coordinator's, and nodes a, b and c of
# one worker each, which serve the tiny model's 3 stages as a `pp` chain (a: stage 0, b: 1,
# c: 2; they join in that order). tc tbf shapes both directions of every namespace's link to
# the bridge: a and b at FAST Mbit/s, c at SLOW, so hops between a and b cross a FAST link and
# hops between b and c a SLOW one, inside TLS (the nodes are on other addresses). Each run
# trains STEPS steps; the runs alternate within a round and rotate from round to round:
#   none, int8, int4   every hop in that encoding (the settings a user would choose by hand)
#   auto               swarm.compression = auto down to int4
# Per run: tokens/s after step WARMUP (the tokens over the wall time they took), the final
# validation loss, the hop bytes, and (auto) each link's last choice. The table gives medians
# over rounds and auto's tokens/s over the best fixed setting's, round by round.
# Needs root (network namespaces) and iproute2.
# Usage: [WARMUP=5] bench/auto_links.sh [ROUNDS] [STEPS] [SLOW_MBIT] [FAST_MBIT]
#   (2 rounds, 200 steps, 50, 1000) -> table + bench/results/auto_links.json
source "$(dirname "$0")/lib.sh"
rounds=${1:-2} steps=${2:-200} slow=${3:-50} fast=${4:-1000} warmup=${WARMUP:-5}
[[ $rounds =~ ^[1-9][0-9]*$ && $steps =~ ^[0-9]+$ && $steps -gt $((warmup + 2)) &&
  $slow =~ ^[1-9][0-9]*$ && $fast =~ ^[1-9][0-9]*$ ]] ||
  { echo "usage: bench/auto_links.sh [ROUNDS] [STEPS > WARMUP + 2] [SLOW_MBIT] [FAST_MBIT]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench/auto_links.sh: needs root for network namespaces" >&2; exit 2; }
command -v tc >/dev/null || { echo "bench/auto_links.sh: needs iproute2 (tc)" >&2; exit 2; }
prepare_bench
bin=${SWARMRT_BIN:-build/bin/swarmrt}
bench_scratch
tag=$(($$ % 100000))
hub=alh$tag
declare -A ns=([coord]=alx$tag [a]=ala$tag [b]=alb$tag [c]=alc$tag)
declare -A addr=([coord]=10.233.6.1 [a]=10.233.6.2 [b]=10.233.6.3 [c]=10.233.6.4)
declare -A mbit=([coord]=$fast [a]=$fast [b]=$fast [c]=$slow)
trap 'for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
      for n in "${ns[@]}" "$hub"; do ip netns del "$n" 2>/dev/null; done; rm -rf "$tmp" "$out"' EXIT
ip netns add "$hub" && ip netns exec "$hub" ip link add br0 type bridge &&
  ip netns exec "$hub" ip link set br0 up
for k in coord a b c; do
  n=${ns[$k]}
  ip netns add "$n"
  ip link add "v$n" netns "$n" type veth peer name "p$n" netns "$hub"
  ip netns exec "$hub" ip link set "p$n" master br0
  ip netns exec "$hub" ip link set "p$n" up
  ip netns exec "$n" ip link set lo up
  ip netns exec "$n" ip addr add "${addr[$k]}/24" dev "v$n"
  ip netns exec "$n" ip link set "v$n" up
  # both directions: the namespace's own end (what it sends) and the bridge's (what it receives)
  ip netns exec "$n" tc qdisc add dev "v$n" root tbf rate "${mbit[$k]}mbit" burst 128kb latency 50ms
  ip netns exec "$hub" tc qdisc add dev "p$n" root tbf rate "${mbit[$k]}mbit" burst 128kb latency 50ms
done
export SWARMRT_SECRET=auto-links-bench-$tag
unset SWARMRT_SECRET_FILE
one() {  # ROUND NAME
  local round=$1 name=$2 port=7431 set
  case $name in
    auto) set=(--set swarm.compression=auto --set swarm.hop_encoding=int4) ;;
    *) set=(--set swarm.hop_encoding="$name") ;;
  esac
  local dir=runs/bench_auto_links/$round-$name  # kept: its metrics.jsonl has every step
  rm -rf "$dir"
  mkdir -p runs/bench_auto_links
  ip netns exec "${ns[coord]}" "$bin" coordinator -c configs/tiny.toml --listen "${addr[coord]}:$port" \
    -o "$dir" --set swarm.mode=pp --set swarm.stages=3 --set swarm.workers_per_stage=1 \
    --set train.steps="$steps" --set train.eval_every=0 --set train.eval_batches=8 \
    --set checkpoint.every_steps=0 --set train.log_every=1000 "${set[@]}" >"$tmp/coord.log" 2>&1 &
  local coord=$!
  pids=("$coord")
  for k in a b c; do
    ip netns exec "${ns[$k]}" "$bin" node --join "${addr[coord]}:$port" --workers 1 --name "$k" \
      --listen "${addr[$k]}" --connect-timeout-s 30 >"$tmp/$k.log" 2>&1 &
    pids+=($!)
    # one at a time, so that a serves stage 0, b stage 1 and c stage 2
    for _ in $(seq 1 300); do grep -q "node '$k' joined" "$tmp/coord.log" && break; sleep 0.1; done
    grep -q "node '$k' joined" "$tmp/coord.log" || { tail -20 "$tmp/coord.log"; echo "$k did not join" >&2; exit 1; }
  done
  wait "$coord" || { tail -20 "$tmp/coord.log" "$tmp/c.log"; echo "$name failed" >&2; exit 1; }
  for p in "${pids[@]:1}"; do
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  grep -h "stage [0-9]" "$tmp/a.log" "$tmp/b.log" "$tmp/c.log" | head -3 >&2 || true
  python3 - "$dir/metrics.jsonl" "$round" "$name" "$warmup" <<'PY' >>"$out"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
st = [r for r in recs if r.get("event") == "step"]
ev = [r for r in recs if r.get("event") == "eval"]
w = int(sys.argv[4])
a, b = st[w - 1], st[-1]
print(json.dumps({"round": int(sys.argv[2]), "run": sys.argv[3], "steps": len(st),
                  "tokens_per_s": (b["tokens"] - a["tokens"]) / (b["wall"] - a["wall"]),
                  "val_loss": ev[-1]["val_loss"] if ev else None,
                  "hop_bytes": b["bytes"].get("activations", 0) + b["bytes"].get("gradients", 0),
                  "choices": b.get("hop_encodings", []),
                  "moves": sum(1 for r in recs if r.get("event") == "hop_encoding")}))
PY
  echo "round $round $name: $(tail -1 "$out")" >&2
}
names=(none int8 int4 auto)
for r in $(seq "$rounds"); do
  for i in 0 1 2 3; do one "$r" "${names[$(((i + r - 1) % 4))]}"; done
done
summarize "$out" "$steps" "$slow" "$fast" <<'PY'
steps, slow, fast = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
rounds = sorted({r["round"] for r in runs})
get = lambda name, rnd, k: next(r[k] for r in runs if r["run"] == name and r["round"] == rnd)
fixed = ["none", "int8", "int4"]
med = {n: statistics.median(get(n, r, "tokens_per_s") for r in rounds) for n in fixed + ["auto"]}
loss = {n: statistics.median(get(n, r, "val_loss") for r in rounds) for n in fixed + ["auto"]}
best = max(fixed, key=lambda n: med[n])
ratios = [get("auto", r, "tokens_per_s") / max(get(n, r, "tokens_per_s") for n in fixed) for r in rounds]
print(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB")
print(f"configs/tiny.toml as pp 3x1 (a -{fast:g}- b -{slow:g}- c Mbit/s, tbf both ways), "
      f"{steps} steps, {len(rounds)} rounds")
print(f"{'run':<8}{'tokens/s':>10}{'val loss':>10}{'hop MB':>9}")
for n in fixed + ["auto"]:
    mb = statistics.median(get(n, r, "hop_bytes") for r in rounds) / 1e6
    print(f"{n:<8}{med[n]:>10.0f}{loss[n]:>10.4f}{mb:>9.1f}")
print(f"best fixed: {best}; auto / best fixed of each round: "
      + ", ".join(f"{x:.3f}" for x in ratios) + f" (median {statistics.median(ratios):.3f})")
last = [r for r in runs if r["run"] == "auto"][-1]
for c in last["choices"]:
    print(f"  auto, worker {c['worker']} to {c['to']}: {c['encoding']} ({c['mbit_s']:.1f} Mbit/s measured, "
          f"{c['compute_ms']:.1f} ms compute)")
out = {"benchmark": "auto_links", "machine": machine, "config": "configs/tiny.toml", "mode": "pp 3x1",
       "steps": steps, "rounds": len(rounds), "slow_mbit_s": slow, "fast_mbit_s": fast, "runs": runs,
       "summary": {"tokens_per_s_median": med, "val_loss_median": loss, "best_fixed": best,
                   "auto_to_best_fixed": ratios, "auto_to_best_fixed_median": statistics.median(ratios)}}
json.dump(out, open("bench/results/auto_links.json", "w"), indent=1)
print("wrote bench/results/auto_links.json")
PY
