#!/usr/bin/env bash
# A worker that lies, end to end through the executable, in MODE (the third argument):
# `diloco` with 4 workers on a small model, the first (worker 0) sending its pseudo-gradient
# sign-flipped x10 in every round from step 4 (chaos.malicious), the rounds combined under
# diloco.aggregate; or `dp` with 4 workers, worker 0 sending its gradient to the stage's
# averager sign-flipped x10 from step 4, combined under swarm.grad_aggregate. Under the mean
# the run follows the liar and its validation loss climbs far past the honest run's; under
# centered_clip with clip_drop the same run trains, its final loss within 2% of the same
# defence's run without the liar. The liar says so in the log, and no sample is lost or
# counted twice in either run.
# Uniform wiring: every worker takes micro-batches (seeded), so the liar has something to flip
# and the runs repeat exactly (throughput wiring could starve it, and a Δ of 0 lies about
# nothing); the robust aggregates take the workers in id order, whatever order they came in.
bin=$1 data=$2 mode=${3:-diloco}
if [ "$mode" = diloco ]; then key=diloco.aggregate; else key=swarm.grad_aggregate; fi
source "$(dirname "$0")/lib.sh"
small_text_config "$data" <<TOML
steps = 24
eval_every = 0
lr = 3e-3
micro_batches = 8
threads = 1
[swarm]
mode = "$mode"
workers_per_stage = 4
wiring = "uniform"
[diloco]
inner_steps = 4
[chaos]
malicious = "sign_flip"
malicious_from_step = 4
malicious_scale = 10.0
[checkpoint]
every_steps = 0
TOML
export OPENBLAS_NUM_THREADS=1
loss_of() {  # NAME: the run's final validation loss
  py 'import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in recs if r.get("event") == "step"]
assert len(steps) == 24, len(steps)
assert all(r["extra_samples"] == 0 and r["missing_samples"] == 0 for r in steps)
print([r for r in recs if "val_loss" in r][-1]["val_loss"])' "$tmp/$1/metrics.jsonl"
}
"$bin" train -c "$tmp/c.toml" -o "$tmp/honest" --sample-tokens 0 --set chaos.malicious=none \
  --set $key=centered_clip --set diloco.clip_drop=3 >"$tmp/honest.log" 2>&1 ||
  fail "honest: $(tail -5 "$tmp/honest.log")"
grep -q "misbehaves" "$tmp/honest.log" && fail "a worker lied with chaos.malicious = none"
for agg in mean centered_clip; do
  "$bin" train -c "$tmp/c.toml" -o "$tmp/$agg" --sample-tokens 0 --set $key=$agg \
    --set diloco.clip_drop=3 >"$tmp/$agg.log" 2>&1 || fail "$agg: $(tail -5 "$tmp/$agg.log")"
  grep -q "worker 0 misbehaves on purpose from step 4: sign_flip x10" "$tmp/$agg.log" ||
    fail "$agg: the liar did not say so: $(grep -m3 worker "$tmp/$agg.log")"
  grep -q "worker 1 misbehaves" "$tmp/$agg.log" && fail "$agg: worker 1 lied too"
done
honest=$(loss_of honest) || fail "the honest run's records"
mean=$(loss_of mean) || fail "the mean run's records"
clip=$(loss_of centered_clip) || fail "the centered_clip run's records"
py 'import sys
honest, mean, clip = map(float, sys.argv[1:4])
assert mean > 6.0, f"under the mean the liar did not ruin the run: {mean}"
assert clip < 5.0, f"under centered_clip the run did not train: {clip}"
assert clip <= 1.02 * honest, f"under centered_clip the liar cost more than 2%: {clip} vs {honest}"
' "$honest" "$mean" "$clip" || fail "final validation losses: honest $honest, mean $mean, centered_clip $clip"
echo "ok: one liar of 4: mean $mean, centered_clip $clip; without the liar $honest"
