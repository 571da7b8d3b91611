#!/usr/bin/env bash
# bf16 against fp32 GEMMs on this CPU (bench/gemm_dtype.cpp), at 1 and 2 threads, with the CPU's
# bf16-related flags: whether `train.precision = bf16` can be faster here at all.
# Usage: bench/gemm_dtype.sh [REPS]   -> table + bench/results/gemm_dtype.json
source "$(dirname "$0")/lib.sh"
prepare_build
reps=${1:-5}
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512f|avx512_bf16|amx_bf16|avx2|fma)$' | tr '\n' ' ')
echo "CPU flags: ${flags:-none of avx2, fma, avx512f, avx512_bf16, amx_bf16}"
out=()
for threads in 1 2; do
  echo "threads $threads"
  res=$(OPENBLAS_NUM_THREADS=$threads build/bin/bench_gemm_dtype "$threads" "$reps")
  sed '$d' <<<"$res"
  out+=("$(tail -1 <<<"$res")")
done
python3 - "$(bench/machine.sh)" "$flags" "${out[@]}" <<'PY'
import json, sys
machine, flags, runs = json.loads(sys.argv[1]), sys.argv[2].split(), [json.loads(a) for a in sys.argv[3:]]
json.dump({"machine": machine, "cpu_flags": flags, "runs": runs},
          open("bench/results/gemm_dtype.json", "w"), indent=1)
print(f"machine: {machine['cpu']}, {machine['cores']} cores; wrote bench/results/gemm_dtype.json")
PY
