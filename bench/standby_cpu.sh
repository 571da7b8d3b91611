#!/usr/bin/env bash
# What a standby coordinator costs its machine while it waits: a one-member etcd on loopback
# taking only mutual TLS (the cluster's certificates, as launch's private etcd), a leading
# replica and a standby of one run, no nodes (the leader waits for its swarm). Over SECONDS,
# the CPU seconds (user + system, /proc/PID/stat) of the standby and of etcd (which also serves
# the leader's renewals). The standby renews its lease and asks for the leader's key every
# 250 ms. Each binary in BINS (default: build/bin/swarmrt) runs once a round, in turn.
# Usage: [BINS="build/bin/swarmrt /tmp/other"] bench/standby_cpu.sh [ROUNDS] [SECONDS]
#   -> table + bench/results/standby_cpu.json
source "$(dirname "$0")/lib.sh"
install_daemons etcd-server  # a daemon package: installed without starting its service
prepare_bench
rounds=${1:-2} seconds=${2:-20}
bins=${BINS:-build/bin/swarmrt}
export SWARMRT_SECRET=bench-standby-cpu
unset SWARMRT_SECRET_FILE
out=$(mktemp) tmp=${KEEP_TMP:-$(mktemp -d)}
pids=()
# Started with `disown`: their ends are not reported.
stop_all() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  pids=()
}
trap 'stop_all; [ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"; rm -f "$out"' EXIT
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
cpu_s() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }
wait_for() { # FILE PATTERN
  for _ in $(seq 300); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "not seen in $1: $2" >&2; tail -5 "$1" >&2; exit 1
}
build/bin/swarmrt tls --out "$tmp/tls" --host 127.0.0.1 >/dev/null
one_run() { # BIN ROUND INDEX
  local bin=$1 r=$2 d="$tmp/r$2-b$3" client peer
  client=$(port) peer=$(port)
  mkdir -p "$d"
  etcd --name e1 --data-dir "$d/etcd" --listen-client-urls "https://127.0.0.1:$client" \
    --advertise-client-urls "https://127.0.0.1:$client" --listen-peer-urls "https://127.0.0.1:$peer" \
    --initial-advertise-peer-urls "https://127.0.0.1:$peer" --initial-cluster "e1=https://127.0.0.1:$peer" \
    --client-cert-auth --trusted-ca-file "$tmp/tls/ca.pem" --cert-file "$tmp/tls/cert.pem" \
    --key-file "$tmp/tls/key.pem" --peer-client-cert-auth --peer-trusted-ca-file "$tmp/tls/ca.pem" \
    --peer-cert-file "$tmp/tls/cert.pem" --peer-key-file "$tmp/tls/key.pem" >"$d/etcd.log" 2>&1 &
  local etcd=$!
  pids+=($etcd)
  disown
  wait_for "$d/etcd.log" "ready to serve client requests"
  local pid=()
  for n in a b; do
    "$bin" coordinator -c configs/tiny.toml --listen "127.0.0.1:$(port)" -o "$d/run" \
      --etcd "https://127.0.0.1:$client" --run-id 00000000000000bb >"$d/$n.log" 2>&1 &
    pid+=($!)
    pids+=($!)
    disown
    wait_for "$d/$n.log" "leading run\|standby for run"
  done
  sleep 2
  local b0 e0 b1 e1
  b0=$(cpu_s "${pid[1]}") e0=$(cpu_s "$etcd")
  sleep "$seconds"
  b1=$(cpu_s "${pid[1]}") e1=$(cpu_s "$etcd")
  stop_all
  python3 -c "import json, sys; print(json.dumps({'round': int(sys.argv[1]), 'bin': sys.argv[2],
    'seconds': float(sys.argv[3]), 'standby_cpu_s': float(sys.argv[5]) - float(sys.argv[4]),
    'etcd_cpu_s': float(sys.argv[7]) - float(sys.argv[6])}))" \
    "$r" "$bin" "$seconds" "$b0" "$b1" "$e0" "$e1" >>"$out"
}
for r in $(seq "$rounds"); do
  i=0
  for b in $bins; do
    i=$((i + 1))
    one_run "$b" "$r" "$i"
  done
done
summarize "$out" <<'PY'
bins = list(dict.fromkeys(r["bin"] for r in runs))
print(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB; "
      f"{len(runs) // len(bins)} rounds of {runs[0]['seconds']:.0f} s")
print(f"{'binary':<40}{'standby CPU s':>15}{'etcd CPU s':>12}   per round (standby)")
summary = {}
for b in bins:
    rs = [r for r in runs if r["bin"] == b]
    sb = statistics.median(r["standby_cpu_s"] for r in rs)
    et = statistics.median(r["etcd_cpu_s"] for r in rs)
    summary[b] = {"standby_cpu_s": sb, "etcd_cpu_s": et}
    per = " ".join("%.2f" % r["standby_cpu_s"] for r in rs)
    print(f"{b:<40}{sb:>15.2f}{et:>12.2f}   {per}")
json.dump({"machine": machine, "runs": runs, "summary": summary},
          open("bench/results/standby_cpu.json", "w"), indent=1)
print("wrote bench/results/standby_cpu.json")
PY
