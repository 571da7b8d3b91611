#!/usr/bin/env bash
# The swarmrt executable refuses bad configs with exit code 2 and a message naming the file
# and the key.
set -u
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
expect() {  # expect NAME TOML PATTERN [ARGS...]
  local name=$1 toml=$2 pattern=$3
  shift 3
  printf '%s\n' "$toml" >"$tmp/$name.toml"
  out=$("$bin" train --config "$tmp/$name.toml" --out "$tmp/run-$name" "$@" 2>&1)
  rc=$?
  if [ $rc -ne 2 ]; then echo "FAIL $name: exit code $rc, expected 2: $out"; fail=1; return; fi
  if ! grep -q -- "$pattern" <<<"$out"; then echo "FAIL $name: message lacks '$pattern': $out"; fail=1; return; fi
  if ! grep -q -- "$name.toml" <<<"$out"; then echo "FAIL $name: message does not name the file: $out"; fail=1; return; fi
  [ -e "$tmp/run-$name" ] && { echo "FAIL $name: a run directory was created"; fail=1; return; }
  echo "ok   $name: $out"
}
expect unknown_key $'[train]\nstpes = 3' "unknown key 'train.stpes'"
expect unknown_section $'[trainer]\nsteps = 3' "unknown section \[trainer\]"
expect wrong_type $'[train]\nsteps = "ten"' "train.steps: expected an integer"
expect too_many_stages $'[swarm]\nmode = "pp"\nstages = 9' "swarm.stages: must be <= model.n_layer"
expect bad_syntax $'[train\nsteps = 3' "syntax error"
expect bad_override '' "unknown key 'train.bogus'" --set train.bogus=1
expect bad_chaos $'[chaos]\nslow_factor = 0.5' "chaos.slow_factor: must be between 1 and 1000"
expect bad_slowdown $'[chaos]\nslowdown = "1:4,1001:0.5"' "chaos.slowdown: factor of worker 1001 must be between 1 and 1000, not 0.5"
expect bad_kill $'[chaos]\nkill = "worker/x"' "chaos.kill: must be worker, group, loader, averager, tracker, any, node, coordinator or a name such as stage1/worker1, stage0/diloco, stage0/averager or loader/0, not 'worker/x'"
expect bad_kill_phase $'[chaos]\nkill_at_phase = "later"' "chaos.kill_at_phase: must be start, reduce, apply, save, eval, join or applied, not 'later'"
expect bad_drop $'[chaos]\ndrop_fraction = 0.9' "chaos.drop_fraction: must be between 0 and 0.5"
expect bad_bandwidth $'[chaos]\nlink_mbit_s = -1' "chaos.link_mbit_s: must be >= 0"
expect bad_timeout $'[supervision]\nmicrobatch_timeout_s = 0' "supervision.microbatch_timeout_s: must be > 0"
expect bad_backoff $'[supervision]\nbackoff_ms = 5000' "supervision.backoff_ms: must be >= 0 and <= supervision.max_backoff_ms"
expect bad_links $'[transport]\nlinks = "pigeon"' "transport.links: must be auto, comm or frames, not 'pigeon'"
expect nan_value $'[train]\nlr = nan' "train.lr: must be a finite number"
expect bad_precision $'[train]\nprecision = "fp8"' "train.precision: must be fp32, bf16 or fp16, not 'fp8'"
expect overflow_without_scaler $'[chaos]\noverflow_at_step = 3' "chaos.overflow_at_step: needs the loss scaler"
expect fp16_on_cpu $'[train]\nprecision = "fp16"' 'train.precision = "fp16" needs a CUDA device'
expect inf_value $'[diloco]\nround_timeout_s = inf' "diloco.round_timeout_s: must be a finite number"
# A hostfile host is ssh's destination: one that would be read as an option is refused.
printf '[train]\nsteps = 3\n' >"$tmp/good.toml"
for bad in '-oProxyCommand=touch%20/tmp/owned' 'host;rm' '127.0.0.1 user=-oX'; do
  printf '%s workers=1\n' "$bad" >"$tmp/hosts"
  out=$("$bin" launch --hostfile "$tmp/hosts" -c "$tmp/good.toml" 2>&1)
  rc=$?
  if [ $rc -ne 2 ] || ! grep -q "hosts:1: .*is not a" <<<"$out"; then
    echo "FAIL hostfile '$bad': rc $rc: $out"; fail=1
  else
    echo "ok   hostfile '$bad': $out"
  fi
done
expect bad_balancer $'[balancer]\nenabled = "yes"' "balancer.enabled: expected true or false"
expect bad_gain $'[balancer]\nmin_gain = -0.1' "balancer.min_gain: must be >= 0"
# Streaming DiLoCo's keys: an encoding by name, τ below H/P, no more fragments than blocks.
expect bad_quantize $'[diloco]\nquantize = "int3"' "diloco.quantize: must be none, fp16, int8, int4 or fp4, not 'int3'"
expect bad_pattern $'[diloco]\nfragment_pattern = "random"' "diloco.fragment_pattern: must be strided or sequential, not 'random'"
expect bad_overlap $'[diloco]\ninner_steps = 8\nfragments = 2\noverlap_steps = 4' "diloco.overlap_steps: must be < diloco.inner_steps / diloco.fragments (8 / 2)"
expect eager_no_overlap $'[diloco]\neager = true' "diloco.eager: needs diloco.overlap_steps >= 1"
expect bad_fragments $'[swarm]\nmode = "diloco-swarm"\nstages = 2\n[diloco]\nfragments = 3' "diloco.fragments: must be <= the blocks of the smallest stage (2), got 3"
expect bad_alpha $'[diloco]\nalpha = 1' "diloco.alpha: must be in \[0, 1)"
# swarmrt simulate: the same refusals (exit 2, the key named), no JSON written; a good config
# writes its JSON whole.
printf '[swarm]\nmode = "diloco-swarm"\nstages = 2\n[simulate]\nhours = 0\n' >"$tmp/sim-bad.toml"
out=$("$bin" simulate -c "$tmp/sim-bad.toml" -o "$tmp/sim-bad.json" 2>&1)
rc=$?
if [ $rc -ne 2 ] || ! grep -q "simulate.hours: must be in (0, 1000\]" <<<"$out" || [ -e "$tmp/sim-bad.json" ]; then
  echo "FAIL simulate hours = 0: rc $rc: $out"; fail=1
else
  echo "ok   simulate hours = 0: $out"
fi
printf '[swarm]\nmode = "diloco-swarm"\nstages = 2\nworkers_per_stage = 2\n[simulate]\npeers = 50\nhours = 0.1\n' >"$tmp/sim.toml"
out=$("$bin" simulate -c "$tmp/sim.toml" -o "$tmp/sim.json" 2>&1)
rc=$?
if [ $rc -ne 0 ] || ! python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["peers"] == 50 and 0 < r["balancer"]["fraction_of_optimal"] <= 1 and r["no_balancer"]["points"], r' "$tmp/sim.json"; then
  echo "FAIL simulate: rc $rc: $out"; fail=1
else
  echo "ok   simulate: $(tail -2 <<<"$out" | head -1)"
fi
"$bin" train --config "$tmp/does-not-exist.toml" >"$tmp/out" 2>&1
rc=$?
if [ $rc -ne 2 ] || ! grep -q "cannot open config file" "$tmp/out"; then echo "FAIL missing file: rc $rc $(cat "$tmp/out")"; fail=1; fi
exit $fail
