#!/usr/bin/env bash
# The GPU check: on a machine with CUDA, builds swarmrt against that machine's CUDA LibTorch and
# runs, by GPU_CHECK_PARTS (default "tests bench modes"):
#   tests  tests/gpu (gpu_tests): the GPU paths against the CPU's (attention, fused AdamW, the
#          one-read norm and overflow check, hop codecs on the device, pinned staging)
#   bench  bench/gpu_vs_pytorch.sh: gpt2-small on the GPU beside the project's plain PyTorch loop
#   modes  configs/tiny.toml for 50 steps on one worker (`swarm` 1x1: `single` trains in the
#          process of `swarmrt train`, which has no device option), in `pp` (2 stages), in
#          `diloco-swarm` (2x2) and `llama-tiny` in `pp`, every worker on cuda:0 (a coordinator
#          and one node, over 127.0.0.1); then the same four runs on the CPU, and `gpt2-small`
#          on one GPU worker for 20 steps. It prints a table: tokens/s (median step after the
#          5th), the GPU's peak memory in use during the run (nvidia-smi, the CUDA context
#          included), and each run's last training and validation loss beside the CPU run's.
#          The GPU runs compute in GPU_CHECK_PRECISION (bf16; fp16 also runs there, with its
#          loss scaler), the CPU runs in fp32 (a CPU without AVX-512 BF16 runs bf16 far slower,
#          bench/precision.sh).
# On a machine without CUDA it says so and exits 0.
#
# Usage: scripts/gpu_check.sh [DEBS_DIR]
#   LibTorch: $TORCH_DIR (the folder holding share/cmake/Torch), else python3's torch.
#   The other libraries (CAF, Cap'n Proto, spdlog, toml++, CLI11, cpp-httplib, OpenSSL,
#   readline; GoogleTest for the tests): installed, or Debian bookworm .deb files in DEBS_DIR,
#   unpacked into a prefix beside the build (for a machine with no package registry).
#   GPU_CHECK_RUN_S: a run not finished after this many seconds (240) is stopped and reported.
#   GPU_CHECK_RUNS: where the runs' logs and metrics go (build-gpu/runs), e.g. a folder that a
#   remote machine's caller copies back even when the whole check is cut short.
#   -> table on stdout, build-gpu/gpu_check.json, the runs' logs under build-gpu/runs/
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh  # log_port
set +e  # its strict mode off here: a part that fails is reported, and the others still run
root=$PWD
out=$root/build-gpu
debs=${1:-}

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: no CUDA GPU on this machine (nvidia-smi finds none): nothing to check"
  exit 0
fi
torch_dir=${TORCH_DIR:-$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null)}
if [ -z "$torch_dir" ] || [ ! -d "$torch_dir/share/cmake/Torch" ]; then
  echo "gpu_check: no LibTorch found (set TORCH_DIR, or install PyTorch for python3)" >&2
  exit 1
fi
mkdir -p "$out"
nvidia-smi -L
echo "LibTorch: $torch_dir"

# The libraries from DEBS_DIR, unpacked into a prefix (nothing installed system-wide).
prefix=$out/deps
parts=" ${GPU_CHECK_PARTS:-tests bench modes} "
cmake_args=(-DCMAKE_BUILD_TYPE=Release -DSWARMRT_BUILD_TESTS=OFF -DSWARMRT_BUILD_BENCH=OFF)
targets=(swarmrt)
if [[ $parts == *" tests "* ]]; then
  cmake_args+=(-DSWARMRT_BUILD_GPU_TESTS=ON)
  targets+=(gpu_tests)
fi
if [[ $parts == *" bench "* ]]; then
  cmake_args=("${cmake_args[@]/-DSWARMRT_BUILD_BENCH=OFF/-DSWARMRT_BUILD_BENCH=ON}")
  targets+=(bench_train_throughput)  # the model library's own loop, beside the runtime
fi
# GPU_CHECK_TARGETS: only these (a short check that needs fewer than the parts' targets).
[ -n "${GPU_CHECK_TARGETS:-}" ] && read -r -a targets <<<"$GPU_CHECK_TARGETS"
if [ -n "$debs" ] && ! ls "$debs"/*.deb >/dev/null 2>&1; then
  echo "gpu_check: no .deb files in $debs (DEBS_DIR: Debian bookworm packages to unpack)" >&2
  exit 1
fi
if [ -n "$debs" ]; then
  rm -rf "$prefix"
  mkdir -p "$prefix"
  for d in "$debs"/*.deb; do dpkg-deb -x "$d" "$prefix"; done
  lib=$prefix/usr/lib/x86_64-linux-gnu
  # The unpacked tools find their libraries through a wrapper (the machine's own programs keep
  # theirs: no LD_LIBRARY_PATH for the whole script); swarmrt through its RPATH.
  mkdir -p "$out/tools"
  for tool in capnp capnpc-c++ pkgconf; do
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$lib" "$prefix/usr/bin/$tool" >"$out/tools/$tool"
    chmod +x "$out/tools/$tool"
  done
  export PKG_CONFIG_PATH=$lib/pkgconfig:$prefix/usr/share/pkgconfig PKG_CONFIG_SYSROOT_DIR=$prefix
  # Debian's spdlog is built on fmt 9; LibTorch's include folder carries fmt 11 headers, and an
  # -I folder is searched before the -isystem ones of imported targets: fmt 9 comes first.
  mkdir -p "$out/fmt9"
  ln -sfn "$prefix/usr/include/fmt" "$out/fmt9/fmt"
  cmake_args+=(-DCMAKE_PREFIX_PATH="$prefix/usr;$torch_dir" -DOPENSSL_ROOT_DIR="$prefix/usr"
    -DZLIB_ROOT="$prefix/usr" -DPKG_CONFIG_EXECUTABLE="$out/tools/pkgconf"
    -DCAPNP_EXECUTABLE="$out/tools/capnp" -DCAPNPC_CXX_EXECUTABLE="$out/tools/capnpc-c++"
    -DCAPNPC_IMPORT_DIRS="$prefix/usr/include" -DCMAKE_CXX_FLAGS="-I$out/fmt9"
    -DCMAKE_EXE_LINKER_FLAGS="-L$lib -Wl,-rpath-link,$lib -Wl,--disable-new-dtags -Wl,-rpath,$lib")
else
  cmake_args+=(-DCMAKE_PREFIX_PATH="$torch_dir")
fi
# LibTorch from 2.12 on requires C++20 of the code that includes it.
cmake_args+=(-DCMAKE_CXX_STANDARD="${GPU_CHECK_CXX_STANDARD:-17}")
# NCCL as PyTorch's wheels carry it (nvidia/nccl), when it is there.
nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null \
  || python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null)
if [ -n "$nccl" ] && [ -f "$nccl/include/nccl.h" ]; then
  cmake_args+=(-DNCCL_INCLUDE_DIR="$nccl/include" -DNCCL_LIBRARY="$(ls "$nccl"/lib/libnccl.so* | head -1)")
fi

echo "== configure and build (${targets[*]})"
cmake -S "$root" -B "$out/build" -G Ninja "${cmake_args[@]}" >"$out/configure.log" 2>&1 \
  || { tail -n 40 "$out/configure.log"; echo "gpu_check: configure failed ($out/configure.log)"; exit 1; }
grep -E "NCCL transport|CUDA" "$out/configure.log" | head -3
start=$(date +%s)
cmake --build "$out/build" --target "${targets[@]}" -j "$(nproc)" >"$out/build.log" 2>&1 \
  || { grep -E "error|Error" "$out/build.log" | head -30; echo "gpu_check: build failed ($out/build.log)"; exit 1; }
echo "built in $(($(date +%s) - start)) s"
bin=$out/build/bin/swarmrt
[ -f "$root/data/brown.txt" ] || scripts/fetch_data.sh

if [[ $parts == *" tests "* ]]; then
  echo "== tests/gpu"
  "$out/build/bin/gpu_tests" --gtest_brief=1 2>&1 | tail -n 40
fi
if [[ $parts == *" bench "* ]]; then
  echo "== bench/gpu_vs_pytorch.sh"
  GPU_BENCH_LOGS=${GPU_CHECK_BENCH_LOGS:-$out/bench} bench/gpu_vs_pytorch.sh "$bin"
fi
[[ $parts == *" modes "* ]] || exit 0

pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done' EXIT
unset SWARMRT_SECRET
run_s=${GPU_CHECK_RUN_S:-240}  # the longest one run may take
precision=${GPU_CHECK_PRECISION:-bf16}  # train.precision of the GPU runs
runs=${GPU_CHECK_RUNS:-$out/runs}  # the runs' logs and metrics
rm -rf "$runs"
mkdir -p "$runs"

# run NAME DEVICE WORKERS SETTINGS...: a coordinator and one node of WORKERS workers on DEVICE.
run() {
  local name=$1 device=$2 workers=$3
  shift 3
  local dir=$runs/$name
  "$bin" coordinator -c configs/tiny.toml --listen 127.0.0.1:0 -o "$dir" --set train.steps=50 \
    --set train.eval_every=50 --set train.eval_batches=4 --set train.log_every=10 \
    --set checkpoint.every_steps=0 "$@" >"$runs/$name.coord.log" 2>&1 &
  local coord=$!
  pids+=("$coord")
  local port
  port=$(log_port "$runs/$name.coord.log" coordinator)
  [ -n "$port" ] || { echo "$name: the coordinator did not listen"; tail -n 5 "$runs/$name.coord.log"; return 1; }
  "$bin" node --join "127.0.0.1:$port" --secret-file "$dir/secret" --name n1 -w "$workers" \
    --device "$device" >"$runs/$name.node.log" 2>&1 &
  local node=$!
  pids+=("$node")
  # A run that hangs is stopped after run_s and reported; the check goes on with the next.
  local waited
  if ! waited=$(wait_pid "$coord" "$run_s"); then
    kill -9 "$coord" "$node" 2>/dev/null
    echo "$name: not finished after $run_s s, stopped; its last lines:"
    tail -n 5 "$runs/$name.coord.log" "$runs/$name.node.log"
    return 1
  fi
  grep -q "final validation loss" "$runs/$name.coord.log" \
    || { echo "$name: no result"; tail -n 8 "$runs/$name.coord.log" "$runs/$name.node.log"; }
  for _ in $(seq 1 20); do kill -0 "$node" 2>/dev/null || break; sleep 1; done
  kill -9 "$node" 2>/dev/null
  echo "$name: done in $waited s"
}

# The GPU's memory in use, sampled every 0.2 s while `run` runs: its maximum, in MiB.
gpu_run() {
  local name=$1
  (while :; do
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 >>"$runs/$name.mem"
    sleep 0.2
  done) &
  local sampler=$!
  run "$@"
  kill "$sampler" 2>/dev/null
}

modes=(one-worker pp diloco-swarm llama-pp)
declare -A settings=(
  [one-worker]="--set swarm.mode=swarm --set swarm.stages=1 --set swarm.workers_per_stage=1"
  [pp]="--set swarm.mode=pp --set swarm.stages=2 --set swarm.workers_per_stage=1"
  [diloco-swarm]="--set swarm.mode=diloco-swarm --set diloco.inner_steps=10"
  # The Llama block (RMSNorm, rotary positions, SwiGLU) at the tiny size, in a pipeline.
  [llama-pp]="--set model.preset=llama-tiny --set swarm.mode=pp --set swarm.stages=2 --set swarm.workers_per_stage=1"
)
declare -A workers=([one-worker]=1 [pp]=2 [diloco-swarm]=4 [llama-pp]=2)
echo "== on cuda:0, one run after another"
for m in "${modes[@]}"; do
  # shellcheck disable=SC2086
  gpu_run "gpu-$m" cuda:0 "${workers[$m]}" ${settings[$m]} --set train.precision="$precision"
done
# A real size (124M parameters, context 1024, 16k tokens a step): the GPU only.
gpu_run gpu-gpt2-small cuda:0 1 ${settings[one-worker]} --set model.preset=gpt2-small \
  --set train.precision="$precision" --set train.steps=20 --set train.eval_every=20 --set train.eval_batches=2
echo "== on the CPU, all at once"
for m in "${modes[@]}"; do
  # shellcheck disable=SC2086
  run "cpu-$m" cpu "${workers[$m]}" ${settings[$m]} &
done
wait

python3 - "$runs" "$out/gpu_check.json" "$(nvidia-smi -L | head -1)" "$precision" <<'PY'
import json, os, statistics, sys
runs, out, gpu, precision = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
def load(name):
    path = os.path.join(runs, name, "metrics.jsonl")
    if not os.path.exists(path):
        return None
    recs = [json.loads(l) for l in open(path)]
    steps = [r for r in recs if r.get("event") == "step"]
    evals = [r for r in recs if r.get("event") == "eval"]
    mem = os.path.join(runs, name + ".mem")
    peak = max((int(l) for l in open(mem) if l.strip().isdigit()), default=None) if os.path.exists(mem) else None
    return {"steps": len(steps),
            "tokens_per_s": statistics.median(r["tokens_per_s"] for r in steps[5:]) if len(steps) > 5 else None,
            "loss": steps[-1]["loss"] if steps else None,
            "val_loss": evals[-1]["val_loss"] if evals else None,
            "peak_gpu_mib": peak}
rows = []
print(f"{'mode':14s} {'device':7s} {'steps':>5s} {'tokens/s':>10s} {'peak GPU MiB':>12s} {'loss':>8s} {'val loss':>8s}")
for mode in ("one-worker", "pp", "diloco-swarm", "llama-pp", "gpt2-small"):
    for dev in ("gpu", "cpu") if mode != "gpt2-small" else ("gpu",):
        r = load(f"{dev}-{mode}")
        if r is None:
            print(f"{mode:14s} {dev:7s} no result")
            continue
        rows.append({"mode": mode, "device": "cuda:0" if dev == "gpu" else "cpu", **r})
        f = lambda v, fmt: format(v, fmt) if v is not None else "-"
        print(f"{mode:14s} {dev:7s} {r['steps']:5d} {f(r['tokens_per_s'], '10.0f')} "
              f"{f(r['peak_gpu_mib'], '12d') if r['peak_gpu_mib'] is not None else '           -'} {f(r['loss'], '8.4f')} {f(r['val_loss'], '8.4f')}")
json.dump({"gpu": gpu, "precision": {"gpu": precision, "cpu": "fp32"}, "config": "configs/tiny.toml, 50 steps (gpt2-small: 20)",
           "runs": rows}, open(out, "w"), indent=1)
print("wrote", out)
PY
