#!/usr/bin/env bash
# Bits per byte after the same training bytes: BPE tokens (a SentencePiece tokenizer of VOCAB
# pieces, `swarmrt data prepare`) against bytes, the tiny model in `single`, on seeds
# FIRST..LAST. The byte run trains configs/tiny.toml's 300 steps x 2048 tokens (614,400 bytes);
# the BPE run the same tokens a step for as many steps as cover the same bytes of training
# text (its tokens hold data.json's bytes a token), so both have read the same text. Each
# reports the final validation loss in bits per byte of the validation text. Two runs at a time,
# one thread each; about 20 minutes for 10 seeds on a 2-core VM.
# Usage: bench/bpe_vs_bytes.sh [FIRST] [LAST] [VOCAB] -> table + bench/results/bpe_vs_bytes.json
set -euo pipefail
cd "$(dirname "$0")/.."
first=${1:-1} last=${2:-10} vocab=${3:-8192}
[[ $first =~ ^[0-9]+$ && $last =~ ^[0-9]+$ && $first -le $last && $vocab =~ ^[0-9]+$ ]] ||
  { echo "usage: bench/bpe_vs_bytes.sh [FIRST] [LAST] [VOCAB]" >&2; exit 2; }
source scripts/common.sh
prepare_bench
bin=${SWARMRT_BIN:-build/bin/swarmrt}  # a copy keeps a long run apart from rebuilds
runs=runs/bpe_vs_bytes
data=data/brown-bpe$vocab
mkdir -p "$runs"
[ -f "$data/data.json" ] ||
  "$bin" data prepare --input data/brown.txt --vocab "$vocab" --out "$data" >&2
bytes_per_token=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["train_bytes"]/d["train_tokens"])' "$data/data.json")
bpe_steps=$(python3 -c 'import sys; print(round(300 / float(sys.argv[1])))' "$bytes_per_token")
echo "BPE $vocab: $bytes_per_token bytes a token -> $bpe_steps steps for the byte run's 614,400 bytes" >&2

common=(--set swarm.mode=single --set swarm.stages=1 --set swarm.workers_per_stage=1
  --set train.threads=1 --set train.eval_every=0 --set checkpoint.every_steps=0 --sample-tokens 0)
run() {  # NAME SEED ARGS...
  local name=$1 seed=$2
  shift 2
  OPENBLAS_NUM_THREADS=1 "$bin" train -c configs/tiny.toml "${common[@]}" --set train.seed="$seed" \
    "$@" --out "$runs/$seed-$name" --overwrite >"$runs/$seed-$name.log" 2>&1 ||
    { echo "seed $seed $name failed; its log: $runs/$seed-$name.log" >&2; return 1; }
}
for seed in $(seq "$first" "$last"); do
  echo "seed $seed" >&2
  run bytes "$seed" &
  a=$!
  run bpe "$seed" --set data.path="$data" --set data.format=tokens \
    --set model.vocab_size="$vocab" --set train.steps="$bpe_steps" &
  b=$!
  wait $a && wait $b
done
python3 - "$(bench/machine.sh)" "$runs" "$first" "$last" "$vocab" "$bpe_steps" "$bytes_per_token" <<'PY'
import json, statistics, sys
sys.path.insert(0, "bench")  # the scripts run from the repository's root
from stats import mean_ci95
machine, runs = json.loads(sys.argv[1]), sys.argv[2]
first, last, vocab, bpe_steps, bpt = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7])
def final(seed, name):
    recs = [json.loads(l) for l in open(f"{runs}/{seed}-{name}/metrics.jsonl") if l.strip()]
    ev = [r for r in recs if r.get("event") == "eval"][-1]
    steps = [r for r in recs if r.get("event") == "step"]
    return ev["val_bpb"], ev["val_loss"], steps[-1]["time_s"]
print(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB")
print(f"bytes: 300 steps; BPE {vocab}: {bpe_steps} steps ({bpt:.3f} bytes a token); 2048 tokens a step")
print(f"{'seed':>5}{'bytes bpb':>11}{'BPE bpb':>10}{'BPE/bytes':>11}")
rows = []
for seed in range(first, last + 1):
    (b, bl, bt), (t, tl, tt) = final(seed, "bytes"), final(seed, "bpe")
    rows.append({"seed": seed, "bytes_bpb": b, "bpe_bpb": t, "bytes_val_loss": bl, "bpe_val_loss": tl,
                 "bytes_time_s": bt, "bpe_time_s": tt})
    print(f"{seed:>5}{b:>11.4f}{t:>10.4f}{t / b:>11.3f}")
def ci(xs):
    m, h = mean_ci95(xs)
    return m, h, min(xs), max(xs)
summary = {}
for key in ("bytes_bpb", "bpe_bpb"):
    m, h, lo, hi = ci([r[key] for r in rows])
    summary[key] = {"mean": m, "ci95": h, "min": lo, "max": hi}
    print(f"{key}: mean {m:.4f} ± {h:.4f} (95% CI), range {lo:.4f} .. {hi:.4f}")
summary["bpe_time_s"] = statistics.mean(r["bpe_time_s"] for r in rows)
summary["bytes_time_s"] = statistics.mean(r["bytes_time_s"] for r in rows)
print(f"mean time: bytes {summary['bytes_time_s']:.0f} s, BPE {summary['bpe_time_s']:.0f} s (two runs sharing the cores)")
json.dump({"machine": machine, "vocab": vocab, "bpe_steps": bpe_steps, "bytes_steps": 300,
           "bytes_per_token": bpt, "rows": rows, "summary": summary},
          open("bench/results/bpe_vs_bytes.json", "w"), indent=1)
print("wrote bench/results/bpe_vs_bytes.json")
PY
