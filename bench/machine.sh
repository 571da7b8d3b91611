#!/usr/bin/env bash
# Prints a JSON object describing this machine, for benchmark result files. `blas`: the OpenBLAS
# kernels swarmrt's GEMMs run here (model/threads.hpp), the last OpenBLAS reports as it loads.
cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
bin=${SWARMRT_BIN:-build/bin/swarmrt}
blas=$(OPENBLAS_VERBOSE=2 "$bin" --help 2>&1 >/dev/null | sed -n 's/^Core: //p' | tail -1)
printf '{"cpu":"%s","cores":%s,"memory_gib":%s,"kernel":"%s","blas":"%s","date":"%s"}\n' \
  "${cpu:-unknown}" "$(nproc)" "$(awk '/MemTotal/ {printf "%.0f", $2/1048576}' /proc/meminfo)" \
  "$(uname -r)" "${blas:-unknown}" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
