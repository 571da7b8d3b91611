#!/usr/bin/env bash
# Runs every benchmark of the project, one after another (they would skew each other side by
# side), with a progress line per benchmark, and gathers their results into
#   bench/results/<date>-<host>.json   every benchmark's own JSON, its command and its duration
#   bench/results/<date>-<host>.md     the machine, a summary, and each benchmark's table
# Each benchmark also leaves its own bench/results/<name>.json, as when run alone.
# Usage: scripts/bench.sh [--quick] [--only NAME[,NAME...]] [--list]
#   --quick  fewer rounds and steps (minutes instead of about an hour; noisier figures)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

quick=0 only="" list=0
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    --only) only=${2:?--only needs a list of names}; shift ;;
    --list) list=1 ;;
    -h | --help) sed -n 2,8p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scripts/bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# name | full arguments | quick arguments | results file. In order of cost, cheapest first.
BENCHMARKS=(
  "hop_latency|bench/hop_latency.sh||hop_latency.json"
  "simulate|bench/simulate.sh||simulate.json"
  "train_throughput|bench/train_throughput.sh 5 30|bench/train_throughput.sh 1 10|train_throughput.json"
  "frame_throughput|bench/frame_throughput.sh 5|bench/frame_throughput.sh 1|frame_throughput.json"
  "allreduce|bench/allreduce.sh 5|bench/allreduce.sh 1|allreduce.json"
  "runtime_throughput|bench/runtime_throughput.sh 6 10|bench/runtime_throughput.sh 1 6|runtime_throughput.json"
  "multiprocess_throughput|bench/multiprocess_throughput.sh 5 10|bench/multiprocess_throughput.sh 1 6|multiprocess_throughput.json"
  "traffic|bench/traffic.sh|bench/traffic.sh 20 10|traffic.json"
  "hops_capped|bench/hops_capped.sh 2 100 100|bench/hops_capped.sh 1 30 100|hops_capped_100.json"
  "real_link|bench/real_link.sh 2 130 100|bench/real_link.sh 1 30 100|real_link_100.json"
  "state_transfer|bench/state_transfer.sh 1000||state_transfer.json"
  "churn|bench/churn.sh 30 15|bench/churn.sh 3 15|churn.json"
  "byzantine|bench/byzantine.sh 600 1|bench/byzantine.sh 150|byzantine.json"
  "byzantine_swarm|env MODE=swarm NOISE=1 bench/byzantine.sh 600|env MODE=swarm bench/byzantine.sh 150|byzantine_swarm.json"
  "spot_checks|bench/spot_checks.sh 200 3|bench/spot_checks.sh 80 1|spot_checks.json"
  "fault_recovery|bench/fault_recovery.sh 3|bench/fault_recovery.sh 1|fault_recovery.json"
  "failover|bench/failover.sh 3 5|bench/failover.sh 1 5|failover.json"
  "replicas|bench/replicas.sh 5 120|bench/replicas.sh 1 30|replicas.json"
  "balancer|bench/balancer.sh|bench/balancer.sh 20 4 100 1|balancer.json"
  "console|bench/console.sh|bench/console.sh 1 5 4|console.json"
  "loss_curves|bench/loss_curves.sh|bench/loss_curves.sh 100 1 runs/loss_curves|loss_curves.json"
  "comm|build/bin/swarmrt bench comm -c configs/bench_comm.toml|build/bin/swarmrt bench comm -c configs/bench_comm.toml --set train.steps=128|comm.json"
  "comm_seeds|bench/comm_seeds.sh 2 31|bench/comm_seeds.sh 2 3|comm_seeds.json"
  "long_runs|bench/long_runs.sh 2 11|bench/long_runs.sh 2 3 400|long_runs.json"
)

known=()
for b in "${BENCHMARKS[@]}"; do known+=("${b%%|*}"); done
if [ "$list" = 1 ]; then printf '%s\n' "${known[@]}"; exit 0; fi
selected=()
for b in "${BENCHMARKS[@]}"; do
  name=${b%%|*}
  if [ -n "$only" ] && [[ ",$only," != *",$name,"* ]]; then continue; fi
  selected+=("$b")
done
for n in ${only//,/ }; do
  [[ " ${known[*]} " == *" $n "* ]] || { echo "scripts/bench.sh: no benchmark '$n' (known: ${known[*]})" >&2; exit 2; }
done

install_deps python3-torch
build >/dev/null
scripts/fetch_data.sh >/dev/null

host=$(hostname -s 2>/dev/null || hostname)
stamp="$(date -u +%Y-%m-%d)-${host}"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
machine=$(bench/machine.sh)
python3 -c 'import json, sys; m = json.loads(sys.argv[1]); print("machine: %s, %s cores, %s GiB" % (m["cpu"], m["cores"], m["memory_gib"]))' "$machine"

total=${#selected[@]} i=0 failed=0
records=()
for b in "${selected[@]}"; do
  IFS='|' read -r name full quickargs result <<< "$b"
  cmd=$full
  [ "$quick" = 1 ] && [ -n "$quickargs" ] && cmd=$quickargs
  i=$((i + 1))
  printf '[%2d/%d] %-24s %s ... ' "$i" "$total" "$name" "$cmd"
  rm -f "bench/results/$result"
  start=$(date +%s)
  status=ok
  # shellcheck disable=SC2086  # the command is a word list from the table above
  if ! $cmd > "$logs/$name.out" 2> "$logs/$name.err"; then status=failed failed=$((failed + 1)); fi
  [ "$status" = ok ] && [ ! -s "bench/results/$result" ] && status="failed (no $result)" && failed=$((failed + 1))
  secs=$(($(date +%s) - start))
  echo "$status in ${secs} s"
  [ "$status" = ok ] || tail -5 "$logs/$name.err" | sed 's/^/    /'
  records+=("$name|$cmd|$secs|$status|$result")
done

python3 - "$machine" "$stamp" "$quick" "$logs" "${records[@]}" <<'PY'
import json, os, re, sys
machine, stamp, quick, logs = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3] == "1", sys.argv[4]
noise = re.compile(r"^(\[\d+/\d+\]|ninja:|-- |installing|Get:|Hit:|Reading |Selecting |Preparing |Unpacking |Setting up |Processing )")
runs, md = [], []
md.append(f"# Benchmarks, {stamp}{' (quick)' if quick else ''}\n")
md.append(f"Machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB, "
          f"kernel {machine['kernel']}; run at {machine['date']} by `scripts/bench.sh"
          f"{' --quick' if quick else ''}`.\n")
md.append("| benchmark | command | seconds | status |\n|---|---|---|---|")
for rec in sys.argv[5:]:
    name, cmd, secs, status, result = rec.split("|")
    path = os.path.join("bench/results", result)
    data = json.load(open(path)) if status == "ok" else None
    runs.append({"name": name, "command": cmd, "seconds": int(secs), "status": status, "result": data})
    md.append(f"| {name} | `{cmd}` | {secs} | {status} |")
md.append("")
for rec in sys.argv[5:]:
    name, cmd, secs, status, result = rec.split("|")
    out = [l.rstrip() for l in open(os.path.join(logs, name + ".out"), errors="replace")]
    out = [l for l in out if l and not noise.match(l)]
    md.append(f"## {name}\n\n`{cmd}` ({secs} s, {status})\n\n```\n" + "\n".join(out[-40:]) + "\n```\n")
base = os.path.join("bench/results", stamp)
json.dump({"machine": machine, "quick": quick, "benchmarks": runs}, open(base + ".json.tmp", "w"), indent=1)
os.replace(base + ".json.tmp", base + ".json")
open(base + ".md.tmp", "w").write("\n".join(md))
os.replace(base + ".md.tmp", base + ".md")
print(f"wrote {base}.json and {base}.md")
PY
[ "$failed" = 0 ] || { echo "$failed benchmark(s) failed" >&2; exit 1; }
