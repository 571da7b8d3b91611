#!/usr/bin/env bash
# Per-hop cost (header encode + decode, and one actor hop), p50/p99 in microseconds.
# Usage: bench/hop_latency.sh  -> table + bench/results/hop_latency.json (machine in "context")
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
install_deps
build
build/bin/bench_hop_latency --benchmark_out=bench/results/hop_latency.json --benchmark_out_format=json
