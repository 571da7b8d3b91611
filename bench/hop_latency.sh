#!/usr/bin/env bash
# Per-hop cost (header encode + decode, one actor hop, and receiving an encoded gpt2-small hop
# in int8, int4 and entropy: checked, then decoded), p50/p99 in microseconds.
# Usage: bench/hop_latency.sh  -> table + bench/results/hop_latency.json (machine in "context")
source "$(dirname "$0")/lib.sh"
prepare_build
build/bin/bench_hop_latency --benchmark_out=bench/results/hop_latency.json --benchmark_out_format=json
