# A benchmark script's start, sourced first: strict mode, the checkout's root as the working
# directory, and scripts/common.sh (install_deps, prepare_build, prepare_bench, ...).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh

# summarize RUNS [ARGS...] <<'PY' ... PY: runs the Python on stdin with json, statistics and sys
# imported, `machine` (bench/machine.sh's JSON) and `runs` (RUNS: a JSON object a line); ARGS
# follow in sys.argv[3:].
summarize() {
  local code
  code=$(cat)
  python3 -c "import json, statistics, sys
machine = json.loads(sys.argv[1])
runs = [json.loads(l) for l in open(sys.argv[2])]
$code" "$(bench/machine.sh)" "$@"
}

# bench_scratch: $out (a file for the runs' JSON lines) and $tmp (a directory), removed at
# exit with every process whose pid is in $pids, killed first, and every network namespace
# named in $namespaces.
bench_scratch() {
  out=$(mktemp) tmp=$(mktemp -d)
  pids=() namespaces=()
  trap 'for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
        for n in "${namespaces[@]}"; do ip netns del "$n" 2>/dev/null; done
        rm -rf "$tmp" "$out"' EXIT
}

# link_bench_args [ROUNDS] [STEPS] [SLOW_MBIT] [FAST_MBIT]: a benchmark across a slow and a fast
# link: $rounds (2), $steps (200), $slow (50) and $fast (1000) Mbit/s, and $warmup (WARMUP, 5:
# the steps before tokens/s are counted), checked; a usage line naming the script otherwise.
link_bench_args() {
  rounds=${1:-2} steps=${2:-200} slow=${3:-50} fast=${4:-1000} warmup=${WARMUP:-5}
  [[ $rounds =~ ^[1-9][0-9]*$ && $steps =~ ^[0-9]+$ && $steps -gt $((warmup + 2)) &&
    $slow =~ ^[1-9][0-9]*$ && $fast =~ ^[1-9][0-9]*$ ]] ||
    { echo "usage: $0 [ROUNDS] [STEPS > WARMUP + 2] [SLOW_MBIT] [FAST_MBIT]" >&2; exit 2; }
}

# shaped_namespaces HUB NAME=ADDR=MBIT...: network namespace HUB with a bridge, and one
# namespace per NAME joined to it by a veth pair, NAME at ADDR/24 with both directions of its
# link shaped by tc tbf to MBIT Mbit/s: its own end (what it sends) and the bridge's (what it
# receives), so that a message crosses its sender's rate and then its receiver's. Each is
# added to $namespaces (bench_scratch removes them). Needs root and iproute2.
shaped_namespaces() {
  local hub=$1 spec n rest a rate
  shift
  [ "$(id -u)" = 0 ] || { echo "$0: needs root for network namespaces" >&2; exit 2; }
  command -v tc >/dev/null || { echo "$0: needs iproute2 (tc)" >&2; exit 2; }
  namespaces+=("$hub")
  ip netns add "$hub" && ip netns exec "$hub" ip link add br0 type bridge &&
    ip netns exec "$hub" ip link set br0 up
  for spec in "$@"; do
    n=${spec%%=*} rest=${spec#*=}
    a=${rest%%=*} rate=${rest#*=}
    namespaces+=("$n")
    ip netns add "$n"
    ip link add "v$n" netns "$n" type veth peer name "p$n" netns "$hub"
    ip netns exec "$hub" ip link set "p$n" master br0
    ip netns exec "$hub" ip link set "p$n" up
    ip netns exec "$n" ip link set lo up
    ip netns exec "$n" ip addr add "$a/24" dev "v$n"
    ip netns exec "$n" ip link set "v$n" up
    ip netns exec "$n" tc qdisc add dev "v$n" root tbf rate "${rate}mbit" burst 128kb latency 50ms
    ip netns exec "$hub" tc qdisc add dev "p$n" root tbf rate "${rate}mbit" burst 128kb latency 50ms
  done
}

# join_in_turn BIN COORD_ENDPOINT NODE:NS:ADDR...: starts `BIN node` of one worker in
# each NODE's namespace NS at ADDR, one after the other once the coordinator's log
# ($tmp/coord.log) says the last one joined, so that nodes take the stages or places in the
# order given; node NODE's log is $tmp/NODE.log, its pid added to $pids. $NET_FLAGS (e.g.
# "--connection-timeout-ms 20000") go to every node.
join_in_turn() {
  local bin=$1 endpoint=$2 spec k n a
  shift 2
  for spec in "$@"; do
    IFS=: read -r k n a <<<"$spec"
    ip netns exec "$n" "$bin" node --join "$endpoint" --workers 1 --name "$k" \
      --listen "$a" --connect-timeout-s 30 ${NET_FLAGS:-} >"$tmp/$k.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 1 300); do grep -q "node '$k' joined" "$tmp/coord.log" && break; sleep 0.1; done
    grep -q "node '$k' joined" "$tmp/coord.log" || { tail -20 "$tmp/coord.log"; echo "$k did not join" >&2; exit 1; }
  done
}

# end_nodes: waits up to 10 s for each node in $pids but the first (the coordinator, which has
# ended) to end, and then kills it.
end_nodes() {
  local p
  for p in "${pids[@]:1}"; do
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
}

# run_record METRICS ROUND NAME WARMUP TO BYTES_KEY...: one JSON line for a run from its
# metrics.jsonl: tokens/s after step WARMUP (the tokens over the wall time they took), the
# final validation loss, the bytes under the step records' BYTES_KEYs, and the last step's
# chosen encodings whose `to` starts with TO ("" for every one) and how many times they moved.
run_record() {
  python3 - "$@" <<'PY'
import json, sys
path, rnd, name, w, to, keys = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6:]
recs = [json.loads(l) for l in open(path) if l.strip()]
st = [r for r in recs if r.get("event") == "step"]
ev = [r for r in recs if r.get("event") == "eval"]
a, b = st[w - 1], st[-1]
mine = lambda r: r["to"].startswith(to)
print(json.dumps({"round": rnd, "run": name, "steps": len(st),
                  "tokens_per_s": (b["tokens"] - a["tokens"]) / (b["wall"] - a["wall"]),
                  "val_loss": ev[-1]["val_loss"] if ev else None,
                  "bytes": sum(b["bytes"].get(k, 0) for k in keys),
                  "choices": [c for c in b.get("hop_encodings", []) if mine(c)],
                  "moves": sum(1 for r in recs if r.get("event") == "hop_encoding" and mine(r))}))
PY
}
