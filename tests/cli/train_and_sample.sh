#!/usr/bin/env bash
# End to end through the executable: train a few steps, refuse to clobber the run, resume it,
# sample from its checkpoint, and refuse a corrupt checkpoint naming the file.
bin=$1 data=$2
source "$(dirname "$0")/lib.sh"
small_text_config "$data" <<TOML
steps = 4
eval_every = 2
[checkpoint]
every_steps = 2
TOML
"$bin" train -c "$tmp/c.toml" -o "$tmp/run" --sample-tokens 0 >"$tmp/log" 2>&1 || fail "train: $(cat "$tmp/log")"
grep -q "final validation loss" "$tmp/log" || fail "no final validation line"
grep -q "step 4/4 | loss" "$tmp/log" || fail "no progress line"
[ "$(grep -c '"event":"step"' "$tmp/run/metrics.jsonl")" = 4 ] || fail "metrics.jsonl lacks 4 step lines"
[ -f "$tmp/run/config.toml" ] || fail "no effective config"
ls "$tmp/run/checkpoints/step_00000004.ckpt" >/dev/null || fail "no checkpoint at step 4"

"$bin" train -c "$tmp/c.toml" -o "$tmp/run" >"$tmp/log" 2>&1 && fail "a second run into the same directory must be refused"
grep -q "already holds a run" "$tmp/log" || fail "clobber refusal message: $(cat "$tmp/log")"

"$bin" train -c "$tmp/c.toml" -o "$tmp/run" --resume --set train.steps=6 --sample-tokens 0 >"$tmp/log" 2>&1 || fail "resume: $(cat "$tmp/log")"
grep -q "resumed from .*step_00000004.ckpt at step 4" "$tmp/log" || fail "resume did not start at step 4: $(cat "$tmp/log")"
[ "$(grep -c '"event":"step"' "$tmp/run/metrics.jsonl")" = 6 ] || fail "metrics after resume"

out=$("$bin" sample --checkpoint "$tmp/run" --prompt "The " --tokens 20 2>&1) || fail "sample: $out"
[ "${#out}" -ge 24 ] || fail "sample too short: '$out'"
[[ "$out" == "The "* ]] || fail "sample does not start with the prompt: '$out'"

newest="$tmp/run/checkpoints/step_00000006.ckpt"
printf 'garbage' | dd of="$newest" bs=1 seek=100 conv=notrunc 2>/dev/null
out=$("$bin" sample --checkpoint "$newest" --tokens 5 2>&1) && fail "a corrupt checkpoint must be refused"
grep -q "step_00000006.ckpt: checksum mismatch" <<<"$out" || fail "corrupt message: $out"
out=$("$bin" sample --checkpoint "$tmp/run" --tokens 5 2>&1) || fail "fallback to the previous checkpoint: $out"
grep -q "skipping checkpoint .*step_00000006.ckpt" <<<"$out" || fail "no warning about the skipped file: $out"
echo "ok"
