#!/usr/bin/env bash
# swarm.compression = auto choosing sparse DiLoCo rounds' density per link, beside each fixed
# density, across two real links of different speed. Three network namespaces on one bridge:
# the coordinator's (it holds the DiLoCo group) and nodes a and b of one worker each; tc tbf
# shapes both directions of every namespace's link to the bridge: the coordinator's and a's at
# FAST Mbit/s, b's at SLOW, so a's rounds cross a FAST link and b's a SLOW one, inside TLS.
# Plain DiLoCo of the tiny model, 1 stage x 2 workers, H = 4, no overlap (a worker waits for its
# round's answer, so a slow round costs both workers the time it takes), top-k rounds of 2-bit
# values in chunks of 4,096, outer lr 1 without momentum (docs/streaming.md's sparse rounds).
# Each run trains STEPS steps; the runs alternate within a round and rotate from round to round:
#   2% 4% 8% 16%   every round at that density (the settings a user would choose by hand)
#   auto           swarm.compression = auto with a floor of 2%: 2, 4, 8 or 16% per worker
# Per run: tokens/s after step WARMUP, the final validation loss, the sync bytes (both
# directions, as the tracker counts them) and (auto) each worker's last choice. The table gives
# medians over rounds, and auto's tokens/s over the fastest fixed density's, round by round.
# Needs root (network namespaces) and iproute2.
# NET_FLAGS: flags for the coordinator and every node (e.g. "--connection-timeout-ms 20000").
# Usage: [WARMUP=5] [NET_FLAGS=...] bench/auto_densities.sh [ROUNDS] [STEPS] [SLOW_MBIT] [FAST_MBIT]
#   (2 rounds, 200 steps, 50, 1000) -> table + bench/results/auto_densities_SLOW.json
source "$(dirname "$0")/lib.sh"
link_bench_args "$@"
prepare_bench
bin=${SWARMRT_BIN:-build/bin/swarmrt}
bench_scratch
tag=$(($$ % 100000))
declare -A ns=([coord]=adx$tag [a]=ada$tag [b]=adb$tag)
declare -A addr=([coord]=10.233.7.1 [a]=10.233.7.2 [b]=10.233.7.3)
shaped_namespaces "adh$tag" "${ns[coord]}=${addr[coord]}=$fast" "${ns[a]}=${addr[a]}=$fast" \
  "${ns[b]}=${addr[b]}=$slow"
export SWARMRT_SECRET=auto-densities-bench-$tag
unset SWARMRT_SECRET_FILE
one() {  # ROUND NAME
  local round=$1 name=$2 port=7431 set
  case $name in
    auto) set=(--set swarm.compression=auto --set diloco.topk_density=0.02) ;;
    *) set=(--set diloco.topk_density="$(python3 -c "print(${name%\%} / 100)")") ;;
  esac
  local dir=runs/bench_auto_densities/$slow-$round-${name%\%}  # kept: metrics.jsonl has every step
  rm -rf "$dir"
  mkdir -p runs/bench_auto_densities
  ip netns exec "${ns[coord]}" "$bin" coordinator -c configs/tiny.toml --listen "${addr[coord]}:$port" \
    -o "$dir" --set swarm.mode=diloco --set swarm.stages=1 --set swarm.workers_per_stage=2 \
    --set diloco.inner_steps=4 --set diloco.compress=topk --set diloco.topk_bits=2 \
    --set diloco.outer_lr=1 --set diloco.outer_momentum=0 \
    --set train.steps="$steps" --set train.eval_every=0 --set train.eval_batches=8 \
    --set checkpoint.every_steps=0 --set train.log_every=1000 "${set[@]}" ${NET_FLAGS:-} \
    >"$tmp/coord.log" 2>&1 &
  pids=($!)
  join_in_turn "$bin" "${addr[coord]}:$port" "a:${ns[a]}:${addr[a]}" "b:${ns[b]}:${addr[b]}"
  wait "${pids[0]}" || { tail -20 "$tmp/coord.log" "$tmp/b.log"; echo "$name failed" >&2; exit 1; }
  end_nodes
  run_record "$dir/metrics.jsonl" "$round" "$name" "$warmup" "DiLoCo group" \
    pseudo_gradients parameters gradients >>"$out"
  echo "round $round $name: $(tail -1 "$out")" >&2
}
names=(2% 4% 8% 16% auto)
for r in $(seq "$rounds"); do
  for i in 0 1 2 3 4; do one "$r" "${names[$(((i + r - 1) % 5))]}"; done
done
summarize "$out" "$steps" "$slow" "$fast" <<'PY'
steps, slow, fast = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
sys.path.insert(0, "bench")
from auto_vs_fixed import compare
n_rounds, summary = compare(runs, ["2%", "4%", "8%", "16%"], machine,
                            f"configs/tiny.toml as diloco 1x2, H = 4, top-k 2-bit rounds (worker a "
                            f"-{fast:g}- group, worker b -{slow:g}- group Mbit/s, tbf both ways), "
                            f"{steps} steps", "sync MB")
for r in [r for r in runs if r["run"] == "auto"]:
    print(f"  auto, round {r['round']}: " + "; ".join(
        f"worker {c['worker']} {c['encoding']} ({c['mbit_s']:.1f} Mbit/s measured, {c['compute_ms']:.0f} ms "
        f"to hide under)" for c in sorted(r["choices"], key=lambda c: c["worker"])) + f"; {r['moves']} moves")
path = f"bench/results/auto_densities_{slow:g}.json"
json.dump({"benchmark": "auto_densities", "machine": machine, "config": "configs/tiny.toml",
           "mode": "diloco 1x2, H = 4, topk 2 bits, outer lr 1, no momentum", "steps": steps,
           "rounds": n_rounds, "slow_mbit_s": slow, "fast_mbit_s": fast, "runs": runs,
           "summary": summary},
          open(path, "w"), indent=1)
print("wrote " + path)
PY
