#!/usr/bin/env bash
# A DiLoCo run with a synchronous warm-up (diloco.warmup_sync_steps = 6 of 16 steps) resumed
# from a checkpoint inside the warm-up warms up again to step 6 and then takes local steps; one
# resumed after it starts its rounds from the checkpoint's group θ and syncs no gradient again.
# Both resumed runs cross the H schedule's change (H = 4 for steps 7..10, then 8).
bin=$1 data=$2
source "$(dirname "$0")/lib.sh"
small_text_config "$data" <<TOML
steps = 16
[swarm]
mode = "diloco"
workers_per_stage = 2
[diloco]
warmup_sync_steps = 6
inner_steps = 8
inner_steps_schedule = "4:4"
fragments = 2
overlap_steps = 1
alpha = 0.5
quantize = "fp4"
[checkpoint]
every_steps = 4
keep = 10
TOML
unset SWARMRT_SECRET
"$bin" train -c "$tmp/c.toml" -o "$tmp/run" --sample-tokens 0 >"$tmp/log" 2>&1 || fail "train: $(cat "$tmp/log")"
grep -q "the synchronous warm-up ended at step 6" "$tmp/log" || fail "no warm-up end: $(cat "$tmp/log")"
grep -q "H = 4 from step 7" "$tmp/log" && grep -q "H = 8 from step 11" "$tmp/log" ||
  fail "H did not follow diloco.inner_steps_schedule: $(grep "H = " "$tmp/log")"
# Fails, naming the step, when a step after the warm-up (a step record following its
# predecessor's) sent gradients: the records count each kind's bytes cumulatively.
local_after() {
  py 'import json, sys
prev = None
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("event") != "step": continue
    grads = r["bytes"]["gradients"]
    step = r["step"]
    if prev and step > 6 and prev[0] == step - 1 and grads > prev[1]:
        sys.exit(f"step {step} sent {grads - prev[1]} bytes of gradients")
    prev = (step, grads)' "$1/metrics.jsonl"
}
local_after "$tmp/run" || fail "a step after the warm-up synced gradients"

# (Checkpoints fall at 4, 9, 12 and 16: step 8's waits for fragment 1's round, started at 8, to
# merge.)
for from in 4 9; do
  cp -r "$tmp/run" "$tmp/run$from"
  for f in "$tmp/run$from"/checkpoints/*.ckpt; do
    n=$(basename "$f" .ckpt); n=$((10#${n#step_}))
    [ "$n" -gt "$from" ] && rm "$f"
  done
  "$bin" train -c "$tmp/c.toml" -o "$tmp/run$from" --resume --sample-tokens 0 >"$tmp/log$from" 2>&1 ||
    fail "resume from $from: $(cat "$tmp/log$from")"
  grep -q "resum.* at step $from" "$tmp/log$from" || fail "did not resume at step $from: $(cat "$tmp/log$from")"
  grep -q "final validation loss" "$tmp/log$from" || fail "resume from $from did not finish"
  grep -q "H = 8 from step 11" "$tmp/log$from" || fail "resumed from $from, H did not change at step 11"
  if [ "$from" -lt 6 ]; then
    grep -q "the synchronous warm-up ended at step 6" "$tmp/log$from" || fail "resumed in the warm-up, it did not end it"
  else
    grep -q "synchronous warm-up ended" "$tmp/log$from" && fail "resumed after the warm-up, it ended it again"
  fi
  local_after "$tmp/run$from" || fail "resumed from $from, a step after the warm-up synced gradients"
done
echo "ok"
