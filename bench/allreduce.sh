#!/usr/bin/env bash
# The collective under DiLoCo rounds across CPU processes: swarmrt's TCP communicator against
# Gloo's ring all-reduce (libgloo, what PyTorch and torchft use on CPU) at 1-64 MiB and 2-8
# members on 127.0.0.1, one thread per member, both in the same run; medians of REPEATS.
# Usage: bench/allreduce.sh [REPEATS]  -> table + bench/results/allreduce.json
source "$(dirname "$0")/lib.sh"
prepare_build
repeats=${1:-5}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ranks in 2 4 8; do
  for mib in 1 4 16 64; do
    OPENBLAS_NUM_THREADS=1 build/bin/bench_allreduce "$mib" "$ranks" "$repeats" | grep '^{' >>"$out"
  done
done
summarize "$out" <<'PY'
sec = {(r["library"], r["mib"], r["ranks"]): r["seconds"] for r in runs}
print(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB")
print(f"{'MiB':>5} {'ranks':>6} {'swarmrt tcp ms':>15} {'gloo ring ms':>13} {'gloo/swarmrt time':>18}")
rows = []
for ranks in (2, 4, 8):
    for mib in (1, 4, 16, 64):
        a, b = sec[("swarmrt-tcp", mib, ranks)], sec[("gloo-ring", mib, ranks)]
        rows.append({"mib": mib, "ranks": ranks, "swarmrt_tcp_s": a, "gloo_ring_s": b, "gloo_over_swarmrt": b / a})
        print(f"{mib:>5} {ranks:>6} {1e3 * a:>15.1f} {1e3 * b:>13.1f} {b / a:>18.2f}")
json.dump({"benchmark": "allreduce", "machine": machine, "rows": rows, "runs": runs},
          open("bench/results/allreduce.json", "w"), indent=1)
print("wrote bench/results/allreduce.json")
PY
