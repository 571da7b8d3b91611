#!/usr/bin/env bash
# swarmrt on one CUDA GPU beside the project's own plain PyTorch loop of the same model and batch
# (bench/gpu_vs_pytorch.py), in one run: gpt2-small (configs/gpu-small.toml), bf16, 16,384
# tokens a step, every swarmrt worker on cuda:0.
#   PyTorch: eager with scaled_dot_product_attention (4 micro-batches of 4, and 1 of 16),
#            torch.compile (4x4), eager with the attention math swarmrt ran before LibTorch 2 (4x4)
#   swarmrt: one worker (`swarm` 1x1) 4x4 and 1x16; `pp` 2x1 in one node with hops `none` and
#            `int8`; `pp` 2x1 across two node processes (hops over the frame link);
#            `diloco-swarm` 2x2 (H = 10) in one node
# Prints a table (tokens/s, share of the GPU's bf16 peak, peak memory, ratios) and writes
# bench/results/gpu_vs_pytorch.json. For swarmrt's runs also each worker's busy share: the part
# of steps 6 to STEPS-2 its thread spent in its handlers (`swarmrt ctl ... actors --kind worker`
# twice). A worker on a GPU queues kernels there, so a share well under 1 while the host bounds
# the step says the worker waited (for its next micro-batch, or the step's end) rather than
# queued. Without a CUDA GPU it says so and exits 0.
#
# Usage: bench/gpu_vs_pytorch.sh [SWARMRT]   (default build-gpu/build/bin/swarmrt, as
#        scripts/gpu_check.sh builds it against the machine's CUDA LibTorch)
#   GPU_BENCH_STEPS      steps of each run (30; tokens/s is the median step after the 5th)
#   GPU_BENCH_RUN_S      a run not done after this many seconds is stopped and reported (180)
#   GPU_BENCH_ONLY       names of the runs to make, space-separated (all)
#   GPU_BENCH_OUT        the JSON (bench/results/gpu_vs_pytorch.json)
#   GPU_BENCH_LOGS       the runs' logs and metrics (build-gpu/bench)
#   GPU_BENCH_PEAK_TFLOPS  the GPU's dense bf16 peak for the share column (790: an H200 measured)
#   GPU_BENCH_DEVICE, GPU_BENCH_SET  the workers' device (cuda:0) and settings added to every
#                        swarmrt run: a dry run of the script elsewhere (cpu, --set model.preset=tiny)
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh  # log_port
set +e  # its strict mode off here: a part that fails is reported, and the others still run
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_vs_pytorch: no CUDA GPU on this machine (nvidia-smi finds none): nothing to measure"
  exit 0
fi
bin=${1:-build-gpu/build/bin/swarmrt}
loop_bin=$(dirname "$bin")/bench_train_throughput
[ -f data/brown.txt ] || scripts/fetch_data.sh
steps=${GPU_BENCH_STEPS:-30}
run_s=${GPU_BENCH_RUN_S:-180}
only=${GPU_BENCH_ONLY:-}
out=${GPU_BENCH_OUT:-bench/results/gpu_vs_pytorch.json}
logs=${GPU_BENCH_LOGS:-build-gpu/bench}
peak_tflops=${GPU_BENCH_PEAK_TFLOPS:-790}
device=${GPU_BENCH_DEVICE:-cuda:0}
read -r -a extra <<<"${GPU_BENCH_SET:-}"
loop_extra=()
for x in "${extra[@]}"; do [ "$x" = --set ] || loop_extra+=("$x"); done
rm -rf "$logs"
mkdir -p "$logs"
unset SWARMRT_SECRET
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done' EXIT

wanted() { [ -z "$only" ] || [[ " $only " == *" $1 "* ]]; }
gpu_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | head -1; }

# sample NAME: the GPU's memory in use every 0.2 s into NAME.mem, the idle level first (once
# the last run's processes have given theirs back, at most 10 s later).
idle=$(gpu_used)
sampler=""
sample_start() {
  for _ in $(seq 1 50); do [ "$(gpu_used)" -le $((idle + 64)) ] && break; sleep 0.2; done
  gpu_used >"$logs/$1.mem"
  (while :; do gpu_used >>"$logs/$1.mem"; sleep 0.2; done) &
  sampler=$!
}
sample_stop() { kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null; }

# pytorch NAME VARIANT MICRO_BATCHES MICRO_BATCH
pytorch() {
  local name=$1
  wanted "$name" || return 0
  sample_start "$name"
  timeout "$run_s" python3 bench/gpu_vs_pytorch.py "$2" "$3" "$4" "$steps" >"$logs/$name.json" \
    2>"$logs/$name.log" || { echo "$name: failed or stopped after $run_s s"; tail -n 5 "$logs/$name.log"; }
  sample_stop
  echo "$name: $(cat "$logs/$name.json" 2>/dev/null)"
}

# loop NAME MICRO_BATCHES MICRO_BATCH: swarmrt's model library in a loop of its own on the GPU
# (bench_train_throughput: no actors, no messages), the same steps as a worker takes.
loop() {
  local name=$1
  wanted "$name" || return 0
  [ -x "$loop_bin" ] || { echo "$name: no $loop_bin (scripts/gpu_check.sh builds it)"; return 0; }
  sample_start "$name"
  SWARMRT_BENCH_DEVICE=$device timeout "$run_s" "$loop_bin" configs/gpu-small.toml "$steps" 5 1 \
    train.micro_batches="$2" train.micro_batch="$3" "${loop_extra[@]}" >"$logs/$name.json" \
    2>"$logs/$name.log" ||
    { echo "$name: failed or stopped after $run_s s"; tail -n 5 "$logs/$name.log"; }
  sample_stop
  echo "$name: $(cat "$logs/$name.json" 2>/dev/null)"
}

# sample_busy NAME DIR PORT: every worker's busy seconds and uptime (one `ctl actors` line in
# NAME.busy) once the run has recorded step 6 and again at step STEPS-2.
sample_busy() {
  local name=$1 dir=$2 port=$3 at n
  for at in 6 $((steps - 2)); do
    for _ in $(seq 1 $((run_s * 10))); do
      n=$(grep -c '"event":"step"' "$dir/metrics.jsonl" 2>/dev/null)
      [ "${n:-0}" -ge "$at" ] && break
      sleep 0.1
    done
    "$bin" ctl "127.0.0.1:$port" --secret-file "$dir/secret" actors --kind worker --json \
      >>"$logs/$name.busy" 2>>"$logs/$name.busy.log"
  done
}

# swarmrt NAME NODES WORKERS_PER_NODE SETTINGS...: a coordinator and NODES node processes of
# WORKERS_PER_NODE workers each, all on cuda:0.
swarmrt() {
  local name=$1 nodes=$2 workers=$3
  shift 3
  wanted "$name" || return 0
  [ -x "$bin" ] || { echo "$name: no swarmrt at $bin (scripts/gpu_check.sh builds it)"; return 0; }
  local dir=$logs/$name
  sample_start "$name"
  "$bin" coordinator -c configs/gpu-small.toml --listen 127.0.0.1:0 -o "$dir" \
    --set train.steps="$steps" --set train.eval_every=0 --set train.eval_batches=2 \
    --set checkpoint.every_steps=0 "$@" "${extra[@]}" >"$logs/$name.coord.log" 2>&1 &
  local coord=$!
  pids+=("$coord")
  local port
  port=$(log_port "$logs/$name.coord.log" coordinator)
  if [ -z "$port" ]; then
    echo "$name: the coordinator did not listen"; tail -n 5 "$logs/$name.coord.log"
    kill -9 "$coord" 2>/dev/null; sample_stop; return 1
  fi
  local node_pids=()
  for k in $(seq 1 "$nodes"); do
    "$bin" node --join "127.0.0.1:$port" --secret-file "$dir/secret" --name "n$k" -w "$workers" \
      --device "$device" >"$logs/$name.node$k.log" 2>&1 &
    node_pids+=($!)
    pids+=($!)
  done
  sample_busy "$name" "$dir" "$port" &
  local busy=$!
  pids+=("$busy")
  local waited
  if ! waited=$(wait_pid "$coord" "$run_s"); then
    echo "$name: not finished after $run_s s, stopped; its last lines:"
    tail -n 5 "$logs/$name.coord.log" "$logs/$name.node1.log"
  fi
  kill -9 "$coord" "${node_pids[@]}" "$busy" 2>/dev/null
  sample_stop
  echo "$name: $(grep -c '"event":"step"' "$dir/metrics.jsonl" 2>/dev/null || echo 0) steps in $waited s"
}

nvidia-smi -L | head -1
one_worker=(--set swarm.mode=swarm --set swarm.stages=1 --set swarm.workers_per_stage=1)
pp=(--set swarm.mode=pp --set swarm.stages=2 --set swarm.workers_per_stage=1)
# The pairs that decide first (a run cut short still leaves those).
pytorch pytorch-sdpa-4x4 sdpa 4 4
swarmrt swarmrt-4x4 1 1 "${one_worker[@]}"
pytorch pytorch-sdpa-1x16 sdpa 1 16
swarmrt swarmrt-1x16 1 1 "${one_worker[@]}" --set train.micro_batch=16 --set train.micro_batches=1
loop loop-4x4 4 4
loop loop-1x16 1 16
swarmrt swarmrt-pp 1 2 "${pp[@]}"
swarmrt swarmrt-pp-int8 1 2 "${pp[@]}" --set swarm.hop_encoding=int8
swarmrt swarmrt-pp-2proc 2 1 "${pp[@]}" --set transport.links=frames
pytorch pytorch-compile-4x4 compile 4 4
pytorch pytorch-math-4x4 math 4 4
swarmrt swarmrt-diloco-swarm 1 4 --set swarm.mode=diloco-swarm --set swarm.stages=2 \
  --set swarm.workers_per_stage=2 --set diloco.inner_steps=10

python3 - "$logs" "$out" "$peak_tflops" "$(nvidia-smi -L | head -1)" "$(bench/machine.sh)" <<'PY'
import json, os, statistics, sys
logs, out, peak_tflops, gpu, machine = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], json.loads(sys.argv[5])
L, T, D, N = 12, 1024, 768, 86_235_648  # gpt2-small at vocabulary 256, untied head
flop_per_token = None

def peak_mib(name):
    path = os.path.join(logs, name + ".mem")
    if not os.path.exists(path):
        return None
    vals = [int(l) for l in open(path) if l.strip().isdigit()]
    return max(vals) - vals[0] if len(vals) > 1 else None

def pytorch(name):
    path = os.path.join(logs, name + ".json")
    try:
        r = json.loads(open(path).read().strip().splitlines()[-1])
    except Exception:
        return None
    global flop_per_token
    flop_per_token = 6 * r["params"] + 12 * L * T * D
    return {"tokens_per_s": r["tokens_per_s"], "peak_mib": peak_mib(name),
            "allocated_mib": r["peak_allocated_mib"], "torch": r["torch"],
            "step_s": r.get("step_s"), "launch_s": r.get("launch_s")}

def loop(name):
    try:
        r = json.loads(open(os.path.join(logs, name + ".json")).read().strip().splitlines()[-1])
    except Exception:
        return None
    return {"tokens_per_s": r["tokens_per_s"], "peak_mib": peak_mib(name),
            "step_s": r["step_s"], "launch_s": r["launch_s"]}

def busy_share(name):
    # Each worker's busy seconds over its uptime between the two samples (sample_busy).
    try:
        first, last = [{a["name"]: a for a in json.loads(l)["actors"]}
                       for l in open(os.path.join(logs, name + ".busy")) if l.startswith("{")][:2]
    except (OSError, ValueError, KeyError):
        return None
    share = {}
    for w, a in last.items():
        if w in first and a["uptime_s"] > first[w]["uptime_s"]:
            share[w] = (a["busy_s"] - first[w]["busy_s"]) / (a["uptime_s"] - first[w]["uptime_s"])
    return share or None

def swarmrt(name):
    path = os.path.join(logs, name, "metrics.jsonl")
    if not os.path.exists(path):
        return None
    steps = [json.loads(l) for l in open(path)]
    steps = [r for r in steps if r.get("event") == "step"]
    if len(steps) <= 5:
        return None
    later = steps[5:]
    phases = {k: statistics.median(r["phases_s"][k] for r in later if k in r.get("phases_s", {}))
              for k in ("compute", "reduce", "apply") if all(k in r.get("phases_s", {}) for r in later)}
    # Between two step records: the steps' own time and what passed between them (the record,
    # the next step's opening), as the whole run's tokens over its time.
    span = later[-1]["time_s"] - steps[4]["time_s"]
    wall = (later[-1]["tokens"] - steps[4]["tokens"]) / span if span > 0 else None
    return {"tokens_per_s": statistics.median(r["tokens_per_s"] for r in later),
            "wall_tokens_per_s": wall, "phases_s": phases, "worker_busy_share": busy_share(name),
            "peak_mib": peak_mib(name), "steps": len(steps), "loss": steps[-1]["loss"]}

names = {
    "pytorch-sdpa-4x4": "pytorch sdpa eager gpt2-small 4x4",
    "pytorch-sdpa-1x16": "pytorch sdpa eager gpt2-small 1x16",
    "pytorch-math-4x4": "pytorch attention math eager gpt2-small 4x4",
    "pytorch-compile-4x4": "pytorch sdpa torch.compile gpt2-small 4x4",
    "swarmrt-4x4": "swarmrt gpt2-small 4x4",
    "swarmrt-1x16": "swarmrt gpt2-small 1x16",
    "swarmrt-pp": "swarmrt pp 2x1 gpt2-small 4x4 hops none",
    "swarmrt-pp-int8": "swarmrt pp 2x1 gpt2-small 4x4 hops int8",
    "swarmrt-pp-2proc": "swarmrt pp 2x1 two processes gpt2-small 4x4 hops none",
    "swarmrt-diloco-swarm": "swarmrt diloco-swarm 2x2 gpt2-small 4x4",
    "loop-4x4": "swarmrt model library in a plain loop gpt2-small 4x4",
    "loop-1x16": "swarmrt model library in a plain loop gpt2-small 1x16",
}
rows = {}
for key in names:
    r = pytorch(key) if key.startswith("pytorch") else loop(key) if key.startswith("loop") else swarmrt(key)
    if r is not None:
        rows[key] = {"name": names[key], **r}
if flop_per_token is None:
    flop_per_token = 6 * N + 12 * L * T * D
for key, r in rows.items():
    r["gpu_share"] = r["tokens_per_s"] * flop_per_token / (peak_tflops * 1e12)
    if key.startswith(("swarmrt", "loop")):
        ref = "pytorch-sdpa-1x16" if key.endswith("1x16") else "pytorch-sdpa-4x4"
        if ref in rows:
            r["ratio_to_sdpa_eager"] = r["tokens_per_s"] / rows[ref]["tokens_per_s"]
            if r["peak_mib"] and rows[ref]["peak_mib"]:
                r["memory_to_sdpa_eager"] = r["peak_mib"] / rows[ref]["peak_mib"]
        if key == "swarmrt-4x4" and "pytorch-compile-4x4" in rows:
            r["ratio_to_compile"] = r["tokens_per_s"] / rows["pytorch-compile-4x4"]["tokens_per_s"]
if "swarmrt-pp" in rows:
    for key in ("swarmrt-pp-int8", "swarmrt-pp-2proc"):
        if key in rows:
            rows[key]["ratio_to_pp_one_process_none"] = rows[key]["tokens_per_s"] / rows["swarmrt-pp"]["tokens_per_s"]
fmt = lambda v, f: "-" if v is None else format(v, f)
print(f"\n{'run':52s} {'tokens/s':>9s} {'GPU bf16':>8s} {'peak MiB':>8s}  ratios")
for key, r in rows.items():
    ratios = ", ".join(f"{k[9:] if k.startswith('ratio_to_') else k} {v:.2f}"
                       for k, v in r.items() if k.startswith(("ratio_to_", "memory_to_")))
    if r.get("phases_s"):
        ratios += "; ms " + "/".join(f"{k} {1000 * v:.1f}" for k, v in r["phases_s"].items())
    if r.get("launch_s"):
        ratios += f"; host queues a step in {1000 * r['launch_s']:.1f} of {1000 * r['step_s']:.1f} ms"
    if r.get("wall_tokens_per_s"):
        ratios += f"; wall {r['wall_tokens_per_s']:.0f} tok/s"
    if r.get("worker_busy_share"):
        ratios += "; busy " + " ".join(f"{v:.0%}" for v in r["worker_busy_share"].values())
    print(f"{r['name']:52s} {r['tokens_per_s']:9.0f} {r['gpu_share']:8.1%} {fmt(r['peak_mib'], '8d')}  {ratios}")
json.dump({"gpu": gpu, "machine": machine, "peak_bf16_tflops": peak_tflops,
           "model": "gpt2-small, vocabulary 256, context 1024, bf16, 16384 tokens a step",
           "memory": "peak GPU memory in use during the run (nvidia-smi, 0.2 s samples) less the idle level before it",
           "runs": list(rows.values())}, open(out, "w"), indent=1)
print("wrote", out)
PY
