#!/usr/bin/env bash
# Prints a JSON object describing this machine, for benchmark result files.
cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
printf '{"cpu":"%s","cores":%s,"memory_gib":%s,"kernel":"%s","date":"%s"}\n' \
  "${cpu:-unknown}" "$(nproc)" "$(awk '/MemTotal/ {printf "%.0f", $2/1048576}' /proc/meminfo)" \
  "$(uname -r)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
