#!/usr/bin/env bash
# Hop encodings (swarm.hop_encoding) on the tiny model: `pp` 2x1 over configs/tiny.toml's
# 300 steps (STEPS) for each encoding in ENCODINGS and each seed FIRST..LAST, one run at a time
# (each worker one thread). Per encoding: hop bytes per token (activations forward + input
# gradients back between the stages, from the swarm's byte counters; the token ids and targets,
# int64, are taken out) against none, and the final validation loss against none's on the same
# seed (mean, 95% interval).
# REUSE=1 keeps a run whose folder already ends in an evaluation (to add seeds to a table).
# An encoding may name its swarm.hop_block after a colon ("int3:256"; else the config's, 128).
# Usage: [STEPS=300] [ENCODINGS="none int8 int4 int5/3"] [REUSE=1] [RESULT=file.json]
#        bench/hops.sh [FIRST] [LAST]
#   -> table + RESULT, else bench/results/hops.json (300 steps) or hops_STEPS.json
source "$(dirname "$0")/lib.sh"
first=${1:-1} last=${2:-3}
[[ $first =~ ^[0-9]+$ && $last =~ ^[0-9]+$ && $first -le $last ]] ||
  { echo "usage: bench/hops.sh [FIRST] [LAST]" >&2; exit 2; }
prepare_bench
bin=${SWARMRT_BIN:-build/bin/swarmrt}  # a copy keeps a long run apart from rebuilds
steps=${STEPS:-300}
encodings=${ENCODINGS:-none int8 int4 int5/3}
out=runs/bench_hops_$steps
mkdir -p "$out"
for seed in $(seq "$first" "$last"); do
  for e in $encodings; do
    name=$seed-${e//[\/:]/-}  # int5/3 -> int5-3, int3:256 -> int3-256
    block=()
    [[ $e == *:* ]] && block=(--set swarm.hop_block="${e#*:}")
    if [ "${REUSE:-0}" = 1 ] && grep -q '"event":"eval"' "$out/$name/metrics.jsonl" 2>/dev/null; then
      echo "seed $seed $e: kept" >&2
      continue
    fi
    echo "seed $seed $e" >&2
    "$bin" train -c configs/tiny.toml --set swarm.mode=pp --set swarm.stages=2 \
      --set swarm.workers_per_stage=1 --set swarm.hop_encoding="${e%%:*}" "${block[@]}" \
      --set train.steps="$steps" \
      --set train.seed="$seed" --set train.eval_every=0 --set checkpoint.every_steps=0 \
      --set train.log_every=1000 --sample-tokens 0 --out "$out/$name" --overwrite \
      >"$out/$name.log" 2>&1 || { echo "$name failed; its log: $out/$name.log" >&2; exit 1; }
  done
done
python3 - "$(bench/machine.sh)" "$out" "$first" "$last" "$encodings" "$steps" <<'PY'
import json, os, statistics, sys
sys.path.insert(0, "bench")  # the scripts run from the repository's root
from stats import mean_ci95
machine, out = json.loads(sys.argv[1]), sys.argv[2]
first, last, encodings, steps = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split(), int(sys.argv[6])
result = os.environ.get("RESULT") or (
    "bench/results/hops.json" if steps == 300 else f"bench/results/hops_{steps}.json")
def load(seed, e):
    recs = [json.loads(l) for l in open(f"{out}/{seed}-{e.replace('/', '-').replace(':', '-')}/metrics.jsonl") if l.strip()]
    st = [r for r in recs if r.get("event") == "step"]
    ev = [r for r in recs if r.get("event") == "eval"][-1]
    b = st[-1]["bytes"]
    tokens = st[-1]["tokens"]
    # ids + targets to stage 0 (16 B a token) and targets handed on (8 B a token) are int64.
    hop = (b["activations"] + b["gradients"] - 24 * tokens) / tokens
    tps = statistics.median(r["tokens_per_s"] for r in st[2:])
    return {"val_loss": ev["val_loss"], "val_bpb": ev.get("val_bpb"), "hop_bytes_per_token": hop,
            "tokens_per_s": tps}
ci = mean_ci95
rows = {e: {s: load(s, e) for s in range(first, last + 1)} for e in encodings}
print(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB")
print(f"tiny model, pp 2x1, {steps} steps, seeds {first}..{last}")
print(f"{'encoding':<10}{'hop B/token':>12}{'x none':>8}{'val loss':>10}{'vs none':>20}{'tokens/s':>10}")
summary = {}
for e in encodings:
    hop = statistics.mean(r["hop_bytes_per_token"] for r in rows[e].values())
    loss = statistics.mean(r["val_loss"] for r in rows[e].values())
    tps = statistics.mean(r["tokens_per_s"] for r in rows[e].values())
    entry = {"hop_bytes_per_token": hop, "val_loss": loss, "tokens_per_s": tps}
    if "none" in rows:
        entry["hop_ratio"] = hop / statistics.mean(r["hop_bytes_per_token"] for r in rows["none"].values())
        gaps = [rows[e][s]["val_loss"] / rows["none"][s]["val_loss"] - 1 for s in rows[e]]
        m, h = ci(gaps)
        entry["val_loss_vs_none"] = {"mean": m, "ci95": h, "per_seed": gaps}
    summary[e] = entry
    ratio = f"{entry['hop_ratio']:.3f}" if "hop_ratio" in entry else "-"
    vs = (f"{100 * entry['val_loss_vs_none']['mean']:+.2f}% ± {100 * entry['val_loss_vs_none']['ci95']:.2f}"
          if "val_loss_vs_none" in entry else "-")
    print(f"{e:<10}{hop:>12.1f}{ratio:>8}{loss:>10.4f}{vs:>20}{tps:>10.0f}")
json.dump({"machine": machine, "steps": steps, "seeds": [first, last], "rows": rows,
           "summary": summary}, open(result, "w"), indent=1)
print(f"wrote {result}")
PY
