#!/usr/bin/env bash
# Loopback throughput of tensor frames between two processes, against a plain TCP socket copy
# of the same bytes: swarmrt's frame link (the default between processes: ids over CAF, bytes
# on a TCP connection of their own), the same chunks inside CAF messages, and the tensors on a
# TCP communicator link (transport.links = "comm"); and the frame link inside TLS 1.3
# (transport.encrypt = "on") against the plaintext one in the same round. 1, 16 and 64 MiB
# float32 tensors, 512 MiB per trial; the four paths alternate within each round, the order
# rotates, and medians of the per-round ratios are reported (this VM's speed drifts).
# Usage: bench/frame_throughput.sh [ROUNDS]  -> table + bench/results/frame_throughput.json
source "$(dirname "$0")/lib.sh"
prepare_build
rounds=${1:-5}
out=$(mktemp)
paths=(tcp bulk bulk-tls caf comm)
for r in $(seq "$rounds"); do
  order=("${paths[@]:$((r % 5))}" "${paths[@]:0:$((r % 5))}")
  for size in 1 16 64; do
    for p in "${order[@]}"; do
      build/bin/bench_frame_throughput "$size" $((512 / size)) "$p" | sed "s/^{/{\"round\":$r,/" >>"$out"
    done
  done
done
summarize "$out" <<'PY'
def rate(path, size, rnd):
    return next(r["mib_per_s"] for r in runs if r["path"] == path and r["size_mib"] == size and r["round"] == rnd)
rounds = sorted({r["round"] for r in runs})
print(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB; {len(rounds)} rounds")
print(f"{'size':>6}{'tcp MiB/s':>12}{'link MiB/s':>12}{'link/tcp':>10}{'tls MiB/s':>11}{'tls/link':>10}"
      f"{'caf MiB/s':>12}{'caf/tcp':>9}{'comm MiB/s':>12}{'comm/tcp':>10}   per-round tls/link")
summary = {}
for size in (1, 16, 64):
    med = {p: statistics.median(rate(p, size, r) for r in rounds) for p in ("tcp", "bulk", "bulk-tls", "caf", "comm")}
    link = [rate("bulk", size, r) / rate("tcp", size, r) for r in rounds]
    tls = [rate("bulk-tls", size, r) / rate("bulk", size, r) for r in rounds]
    caf = [rate("caf", size, r) / rate("tcp", size, r) for r in rounds]
    comm = [rate("comm", size, r) / rate("tcp", size, r) for r in rounds]
    summary[f"{size} MiB"] = {"mib_per_s_median": med, "link_to_tcp_median": statistics.median(link),
                              "caf_to_tcp_median": statistics.median(caf),
                              "comm_to_tcp_median": statistics.median(comm),
                              "tls_to_link_median": statistics.median(tls),
                              "link_to_tcp": link, "caf_to_tcp": caf, "comm_to_tcp": comm,
                              "tls_to_link": tls}
    print(f"{size:>4}MiB{med['tcp']:>12.0f}{med['bulk']:>12.0f}{statistics.median(link):>10.2f}"
          f"{med['bulk-tls']:>11.0f}{statistics.median(tls):>10.2f}"
          f"{med['caf']:>12.0f}{statistics.median(caf):>9.2f}{med['comm']:>12.0f}{statistics.median(comm):>10.2f}"
          f"   {' '.join(f'{x:.2f}' for x in tls)}")
json.dump({"benchmark": "frame_throughput", "machine": machine, "summary": summary, "runs": runs},
          open("bench/results/frame_throughput.json", "w"), indent=1)
print("wrote bench/results/frame_throughput.json")
PY
rm -f "$out"
