#!/usr/bin/env bash
# scripts/gpu_check.sh and bench/gpu_vs_pytorch.sh where there is no GPU (CI: CUDA's
# libraries, no device): nvidia-smi, stubbed here as the driver's tool answers without a
# device, finds none. Each script says so, exits 0, builds nothing and writes no result.
bin=$1 root=$2
source "$(dirname "$0")/lib.sh"
mkdir -p "$tmp/stub"
cat >"$tmp/stub/nvidia-smi" <<'SH'
#!/bin/sh
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." >&2
exit 9
SH
chmod +x "$tmp/stub/nvidia-smi"
before=$(ls -d "$root/build-gpu" 2>/dev/null)
out=$(PATH="$tmp/stub:$PATH" bash "$root/scripts/gpu_check.sh" 2>&1) || fail "exit $?: $out"
grep -q "no CUDA GPU on this machine" <<<"$out" || fail "no word of the missing GPU: $out"
[ "$(ls -d "$root/build-gpu" 2>/dev/null)" = "$before" ] || fail "it started a build without a GPU"
echo "gpu_check without a GPU: $out"
result="$root/bench/results/gpu_vs_pytorch.json"
sum=$(md5sum "$result" 2>/dev/null)
out=$(PATH="$tmp/stub:$PATH" GPU_BENCH_LOGS="$tmp/bench" bash "$root/bench/gpu_vs_pytorch.sh" 2>&1) ||
  fail "gpu_vs_pytorch: exit $?: $out"
grep -q "no CUDA GPU on this machine" <<<"$out" || fail "gpu_vs_pytorch: no word of the missing GPU: $out"
[ "$(md5sum "$result" 2>/dev/null)" = "$sum" ] || fail "gpu_vs_pytorch rewrote its result without a GPU"
[ -e "$tmp/bench" ] && fail "gpu_vs_pytorch made its log folder without a GPU"
echo "gpu_vs_pytorch without a GPU: $out"
