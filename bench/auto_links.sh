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
link_bench_args "$@"
prepare_bench
bin=${SWARMRT_BIN:-build/bin/swarmrt}
bench_scratch
tag=$(($$ % 100000))
declare -A ns=([coord]=alx$tag [a]=ala$tag [b]=alb$tag [c]=alc$tag)
declare -A addr=([coord]=10.233.6.1 [a]=10.233.6.2 [b]=10.233.6.3 [c]=10.233.6.4)
shaped_namespaces "alh$tag" "${ns[coord]}=${addr[coord]}=$fast" "${ns[a]}=${addr[a]}=$fast" \
  "${ns[b]}=${addr[b]}=$fast" "${ns[c]}=${addr[c]}=$slow"
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
  # one at a time, so that a serves stage 0, b stage 1 and c stage 2
  join_in_turn "$bin" "${addr[coord]}:$port" "a:${ns[a]}:${addr[a]}" \
    "b:${ns[b]}:${addr[b]}" "c:${ns[c]}:${addr[c]}"
  wait "$coord" || { tail -20 "$tmp/coord.log" "$tmp/c.log"; echo "$name failed" >&2; exit 1; }
  end_nodes
  grep -h "stage [0-9]" "$tmp/a.log" "$tmp/b.log" "$tmp/c.log" | head -3 >&2 || true
  run_record "$dir/metrics.jsonl" "$round" "$name" "$warmup" "" activations gradients >>"$out"
  echo "round $round $name: $(tail -1 "$out")" >&2
}
names=(none int8 int4 auto)
for r in $(seq "$rounds"); do
  for i in 0 1 2 3; do one "$r" "${names[$(((i + r - 1) % 4))]}"; done
done
summarize "$out" "$steps" "$slow" "$fast" <<'PY'
steps, slow, fast = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
sys.path.insert(0, "bench")
from auto_vs_fixed import compare
n_rounds, summary = compare(runs, ["none", "int8", "int4"], machine,
                            f"configs/tiny.toml as pp 3x1 (a -{fast:g}- b -{slow:g}- c Mbit/s, "
                            f"tbf both ways), {steps} steps", "hop MB")
last = [r for r in runs if r["run"] == "auto"][-1]
for c in last["choices"]:
    print(f"  auto, worker {c['worker']} to {c['to']}: {c['encoding']} ({c['mbit_s']:.1f} Mbit/s measured, "
          f"{c['compute_ms']:.1f} ms compute)")
out = {"benchmark": "auto_links", "machine": machine, "config": "configs/tiny.toml", "mode": "pp 3x1",
       "steps": steps, "rounds": n_rounds, "slow_mbit_s": slow, "fast_mbit_s": fast, "runs": runs,
       "summary": summary}
json.dump(out, open("bench/results/auto_links.json", "w"), indent=1)
print("wrote bench/results/auto_links.json")
PY
