#!/usr/bin/env bash
# train.precision = bf16 against fp32 on this machine's CPU:
#   1. tokens/s and peak RSS of `single` and `pp` 2x1 for each preset in PRESETS, STEPS steps of
#      MICRO_BATCH sequences at the preset's context (the first 2 steps left out of tokens/s);
#   2. hop bytes per token between the two stages of `pp`, from the swarm's byte counters
#      (activations forward + input gradients back, the token ids the tracker sends left out);
#   3. with QUALITY_STEPS > 0: the tiny preset in `single` for that many steps of configs/tiny.toml
#      (one micro-batch of 4 x 128 a step), fp32 against bf16: validation loss and bits per byte.
# On a CPU without AVX-512 BF16 or AMX the bf16 GEMM converts every element and runs far below
# fp32 (bench/gemm_dtype.sh measures the kernel alone), so bf16 is slower here, not faster.
# Usage: [PRESETS="tiny llama-tiny"] [STEPS=12 (at least 4)] [MICRO_BATCH=4] [QUALITY_STEPS=0]
#        bench/precision.sh -> table + bench/results/precision.json
source "$(dirname "$0")/lib.sh"
prepare_bench
bin=${SWARMRT_BIN:-build/bin/swarmrt}  # a copy keeps a long run apart from rebuilds
presets=${PRESETS:-tiny llama-tiny}
steps=${STEPS:-12}
micro_batch=${MICRO_BATCH:-4}
quality_steps=${QUALITY_STEPS:-0}
out=runs/bench_precision
mkdir -p "$out"
rows=$out/rows.jsonl
: >"$rows"

run() {  # NAME ARGS... : one run, its peak RSS (KiB) in $out/NAME.rss
  local name=$1
  shift
  /usr/bin/time -f "%M" -o "$out/$name.rss" "$bin" train -c configs/tiny.toml \
    --set train.eval_every=0 --set train.eval_batches=2 --set checkpoint.every_steps=0 \
    --set train.log_every=1000 --sample-tokens 0 "$@" --out "$out/$name" --overwrite \
    >"$out/$name.log" 2>&1 || { echo "$name failed; its log: $out/$name.log" >&2; return 1; }
}

for preset in $presets; do
  for mode in single pp; do
    if [ "$mode" = single ]; then
      layout=(--set swarm.mode=single --set swarm.stages=1 --set swarm.workers_per_stage=1
        --set train.threads=2)
    else
      layout=(--set swarm.mode=pp --set swarm.stages=2 --set swarm.workers_per_stage=1)
    fi
    for precision in fp32 bf16; do
      name=$preset-$mode-$precision
      echo "$name" >&2
      run "$name" --set model.preset="$preset" "${layout[@]}" --set train.steps="$steps" \
        --set train.micro_batch="$micro_batch" --set train.micro_batches=2 \
        --set train.warmup_steps=1 --set train.precision="$precision"
      python3 - "$out/$name" "$preset" "$mode" "$precision" "$(cat "$out/$name.rss")" >>"$rows" <<'PY'
import json, sys
run, preset, mode, precision, rss = sys.argv[1:6]
recs = [json.loads(l) for l in open(f"{run}/metrics.jsonl") if l.strip()]
steps = [r for r in recs if r.get("event") == "step"]
# Steps 1 and 2 (allocation, first casts) are left out: tokens/s from step 2's end to the last.
tokens = steps[-1]["tokens"] - steps[1]["tokens"]
secs = steps[-1]["time_s"] - steps[1]["time_s"]
row = {"preset": preset, "mode": mode, "precision": precision, "steps": len(steps),
       "tokens_per_s": tokens / secs, "peak_rss_mib": int(rss) / 1024,
       "last_loss": steps[-1]["loss"]}
b = steps[-1].get("bytes")
if mode == "pp" and b:
    # The tracker's own sends to stage 0 (int64 ids and targets, 16 bytes a token) are not a
    # hop between stages; stage 0 hands the targets (8 bytes a token) on beside its states.
    # The final evaluation's hops (2 micro-batches, forward only) are in the count too.
    total_tokens = steps[-1]["tokens"]
    hops = b.get("activations", 0) + b.get("gradients", 0)
    row["hop_bytes_per_token"] = (hops - 24 * total_tokens) / total_tokens
print(json.dumps(row))
PY
    done
  done
done

if [ "$quality_steps" -gt 0 ]; then
  for precision in fp32 bf16; do
    echo "quality $precision ($quality_steps steps)" >&2
    run "quality-$precision" --set swarm.mode=single --set swarm.stages=1 \
      --set swarm.workers_per_stage=1 --set train.threads=2 --set train.micro_batches=1 \
      --set train.steps="$quality_steps" --set train.eval_batches=16 \
      --set train.precision="$precision"
  done
fi

summarize "$rows" "$out" "$quality_steps" <<'PY'
out, quality_steps = sys.argv[3], int(sys.argv[4])
print(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB")
print(f"{'preset':<12}{'mode':<8}{'precision':<11}{'tokens/s':>10}{'peak RSS MiB':>14}{'hop B/token':>13}")
for r in runs:
    hop = f"{r['hop_bytes_per_token']:.0f}" if "hop_bytes_per_token" in r else "-"
    print(f"{r['preset']:<12}{r['mode']:<8}{r['precision']:<11}{r['tokens_per_s']:>10.0f}"
          f"{r['peak_rss_mib']:>14.0f}{hop:>13}")
ratios = []
for r in runs:
    if r["precision"] != "bf16": continue
    base = next(x for x in runs if x["precision"] == "fp32" and x["preset"] == r["preset"] and x["mode"] == r["mode"])
    ratio = {"preset": r["preset"], "mode": r["mode"], "bf16_over_fp32_tokens_per_s": r["tokens_per_s"] / base["tokens_per_s"]}
    if "hop_bytes_per_token" in r:
        ratio["bf16_over_fp32_hop_bytes"] = r["hop_bytes_per_token"] / base["hop_bytes_per_token"]
    ratios.append(ratio)
    extra = f", hop bytes x{ratio['bf16_over_fp32_hop_bytes']:.3f}" if "bf16_over_fp32_hop_bytes" in ratio else ""
    print(f"{r['preset']} {r['mode']}: bf16 tokens/s x{ratio['bf16_over_fp32_tokens_per_s']:.3f} of fp32{extra}")
quality = {}
if quality_steps > 0:
    for p in ("fp32", "bf16"):
        recs = [json.loads(l) for l in open(f"{out}/quality-{p}/metrics.jsonl") if l.strip()]
        ev = [r for r in recs if r.get("event") == "eval"][-1]
        quality[p] = {"val_loss": ev["val_loss"], "val_bpb": ev["val_bpb"]}
    d = quality["bf16"]["val_loss"] / quality["fp32"]["val_loss"] - 1
    quality["relative_difference"] = d
    print(f"tiny, {quality_steps} steps: val loss fp32 {quality['fp32']['val_loss']:.4f}, "
          f"bf16 {quality['bf16']['val_loss']:.4f} ({100 * d:+.2f}%)")
cpu_flags = open("/proc/cpuinfo").read()
bf16_native = "avx512_bf16" in cpu_flags or "amx_bf16" in cpu_flags
print("this CPU has AVX-512 BF16 or AMX" if bf16_native else
      "this CPU has neither AVX-512 BF16 nor AMX: bf16 GEMMs run converted (bench/gemm_dtype.sh)")
json.dump({"machine": machine, "cpu_bf16_native": bf16_native, "rows": runs, "ratios": ratios,
           "quality": quality}, open("bench/results/precision.json", "w"), indent=1)
print("wrote bench/results/precision.json")
PY
