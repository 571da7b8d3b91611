#!/usr/bin/env bash
# BPE end to end: `data prepare` trains a tokenizer on Brown text and writes shards; `train`
# learns from them with the tokenizer's vocabulary, which the prepared directory records (no
# model.vocab_size given), validation bits per byte below the unigram entropy of the shards'
# own tokens; `sample` decodes through the tokenizer; pp reads them too; a corrupt shard and a
# vocabulary set too small for the ids are refused before any step.
bin=$1 data=$2 config=$3
source "$(dirname "$0")/lib.sh"
unset SWARMRT_SPM_SHIM  # the shim this build made
head -c 1500000 "$data" >"$tmp/text.txt"
"$bin" data prepare --input "$tmp/text.txt" --vocab 1024 --out "$tmp/bpe" >"$tmp/prep.log" 2>&1 ||
  fail "prepare: $(cat "$tmp/prep.log")"
grep -q "tokenizer of 1024 pieces" "$tmp/prep.log" || fail "summary: $(cat "$tmp/prep.log")"
for f in tokenizer.model data.json val_000000.bin train_000000.bin; do
  [ -f "$tmp/bpe/$f" ] || fail "prepare wrote no $f"
done
"$bin" data prepare --input "$tmp/text.txt" --vocab 1024 --out "$tmp/bpe" >"$tmp/again.log" 2>&1 &&
  fail "preparing into a prepared directory must be refused"
grep -q "not an empty directory" "$tmp/again.log" || fail "refusal: $(cat "$tmp/again.log")"

common=(--set data.path="$tmp/bpe" --set data.format=tokens
  --set swarm.mode=single --set swarm.stages=1 --set swarm.workers_per_stage=1
  --set train.threads=2 --set checkpoint.every_steps=0)
"$bin" train -c "$config" -o "$tmp/run" "${common[@]}" --set train.steps=80 --set train.eval_every=0 \
  --set train.warmup_steps=20 --sample-tokens 30 >"$tmp/train.log" 2>&1 || fail "train: $(tail -20 "$tmp/train.log")"
bpb=$(sed -n 's/.*final validation loss [0-9.]* nats\/token, \([0-9.]*\) bits\/byte.*/\1/p' "$tmp/train.log")
[ -n "$bpb" ] || fail "no bits per byte in the final line: $(grep final "$tmp/train.log")"
grep -q '"val_bpb":' "$tmp/run/metrics.jsonl" || fail "no val_bpb in the eval record"
grep -q '"bpb":' "$tmp/run/metrics.jsonl" || fail "no bpb in the step records"
[ -f "$tmp/run/tokenizer.model" ] || fail "the run keeps no copy of its tokenizer"
grep -qx "vocab_size = 1024" "$tmp/run/config.toml" ||
  fail "the run's model did not take the prepared vocabulary: $(grep vocab "$tmp/run/config.toml")"

# The best context-free model of the shards' own tokens: training-shard frequencies (add-one
# smoothed over the 1024 ids) scored on the validation shard, in bits per byte of its text.
unigram=$(py '
import json, math, struct, sys, glob
d = sys.argv[1]
def ids(path):
    raw = open(path, "rb").read()
    magic, version, n = struct.unpack("<3i", raw[:12])
    assert (magic, version) == (20240520, 1), (magic, version)
    return struct.unpack("<%dH" % n, raw[1024:1024 + 2 * n])
counts = [1] * 1024
for p in sorted(glob.glob(d + "/train_*.bin")):
    for t in ids(p): counts[t] += 1
total = sum(counts)
val = ids(d + "/val_000000.bin")
info = json.load(open(d + "/data.json"))
assert info["val_tokens"] == len(val)
bits = -sum(math.log2(counts[t] / total) for t in val)
print("%.4f" % (bits / info["val_bytes"]))' "$tmp/bpe")
echo "validation: $bpb bits/byte after 80 steps; unigram entropy of the tokens: $unigram bits/byte"
py 'import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)' "$bpb" "$unigram" ||
  fail "the model ($bpb bits/byte) did not beat the unigram bound ($unigram bits/byte)"

out=$("$bin" sample --checkpoint "$tmp/run" --prompt "The " --tokens 20 2>&1) || fail "sample: $out"
[[ "$out" == "The "* ]] || fail "sample does not start with the prompt: '$out'"
[ "${#out}" -ge 30 ] || fail "20 BPE tokens decode to too little text: '$out'"
grep -q $'\xe2\x96\x81\|<0x' <<<"$out" && fail "the sample shows raw pieces: '$out'"

# pp reads shards through its loaders and evaluates through the tracker.
"$bin" train -c "$config" -o "$tmp/pp" "${common[@]}" --set swarm.mode=pp --set swarm.stages=2 \
  --set train.steps=3 --set train.threads=1 --sample-tokens 0 >"$tmp/pp.log" 2>&1 || fail "pp: $(tail -20 "$tmp/pp.log")"
grep -q 'bits/byte' "$tmp/pp.log" || fail "pp's final line has no bits per byte"
grep '"event":"eval"' "$tmp/pp/metrics.jsonl" | grep -q '"val_bpb":[0-9]' || fail "pp's eval record lacks val_bpb"

# Refusals before any step: a corrupt magic, and ids above the model's vocabulary.
cp -r "$tmp/bpe" "$tmp/bad"
printf 'XXXX' | dd of="$tmp/bad/val_000000.bin" bs=1 seek=0 conv=notrunc 2>/dev/null
"$bin" train -c "$config" -o "$tmp/badrun" "${common[@]}" --set data.path="$tmp/bad" >"$tmp/bad.log" 2>&1 &&
  fail "a shard with a wrong magic must be refused"
grep -q "val_000000.bin: at byte 0: magic" "$tmp/bad.log" || fail "magic message: $(tail -3 "$tmp/bad.log")"
grep -q '"event":"step"' "$tmp/badrun/metrics.jsonl" 2>/dev/null && fail "steps were trained on a bad shard"
"$bin" train -c "$config" -o "$tmp/small" "${common[@]}" --set model.vocab_size=512 >"$tmp/small.log" 2>&1 &&
  fail "ids above model.vocab_size must be refused"
grep -q "not below model.vocab_size (512)" "$tmp/small.log" || fail "vocab message: $(tail -3 "$tmp/small.log")"
echo "ok"
