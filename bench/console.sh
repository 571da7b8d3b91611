#!/usr/bin/env bash
# What the console costs and how fast it answers (the console issue's two figures).
#  1. Overhead: configs/tiny.toml (diloco-swarm 2x2) across a coordinator and two nodes. The
#     same run rotates windows of WINDOW_S seconds with no console, with one console polling
#     `stats` every 100 ms (`swarmrt ctl ... watch 0.1`), and with 20 consoles polling `top`
#     every second (its default); tokens/s per window from the step records' wall clock in
#     metrics.jsonl. Ratios = polled / quiet and crowd / quiet (median over the rounds).
#  2. Latency: a swarm of 64 workers in 4 node processes (2 stages x 32); one console session
#     asks `actors` REPEAT times; the median answer time (ctl --timing), the first left out.
#  3. The CPU one console process takes: to start and answer one `stats` (8 starts of
#     `swarmrt ctl` alternated with 8 of `swarmrt-core ctl`, the same console in a process that
#     loads LibTorch), and over 30 s of polling every 100 ms (/usr/bin/time).
# A console's cost (under 1%) is smaller than this VM's drift between 10 s windows (a pair's
# ratio spans 0.94-1.03): 12 rounds of 6 s windows, adjacent in time, and their median.
# Usage: bench/console.sh [PAIRS] [WINDOW_S] [REPEAT] -> table + bench/results/console.json
source "$(dirname "$0")/lib.sh"
prepare_bench
pairs=${1:-12} window=${2:-6} repeat=${3:-21}
export OPENBLAS_NUM_THREADS=1
bin=build/bin/swarmrt
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
net=(--heartbeat-ms 250 --connection-timeout-ms 5000)

# Starts a coordinator with "$@" as extra options; sets $port.
start_coordinator() {
  local dir=$1
  shift
  "$bin" coordinator -c configs/tiny.toml --listen 127.0.0.1:0 -o "$tmp/$dir" "${net[@]}" "$@" \
    >"$tmp/$dir.log" 2>&1 &
  pids+=($!)
  port=""
  for _ in $(seq 1 200); do
    port=$(sed -n 's/^coordinator listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$tmp/$dir.log")
    [ -n "$port" ] && return 0
    sleep 0.1
  done
  echo "the coordinator did not start: $(tail -5 "$tmp/$dir.log")" >&2
  exit 1
}
start_node() {  # DIR NAME WORKERS
  "$bin" node --join "127.0.0.1:$port" --secret-file "$tmp/$1/secret" -w "$3" --name "$2" \
    "${net[@]}" >"$tmp/$1-$2.log" 2>&1 &
  pids+=($!)
}

echo "1/2 overhead: $pairs rounds of ${window} s windows (quiet, 1 console polling stats every 100 ms, 20 polling top)" >&2
start_coordinator overhead --set train.steps=100000 --set train.eval_every=0 \
  --set checkpoint.every_steps=0
start_node overhead a 2
start_node overhead b 2
for _ in $(seq 1 600); do grep -q "step 10/" "$tmp/overhead.log" && break; sleep 0.1; done
marks=()
# Answers the consoles of the window have had so far.
polls() { cat "$tmp/polls.jsonl" "$tmp"/top*.jsonl 2>/dev/null | wc -l || true; }
for i in $(seq 1 "$pairs"); do
  # The order inside a round rotates, so a drift in speed favours none of the three.
  case $((i % 3)) in
    1) order="quiet polled crowd" ;;
    2) order="polled crowd quiet" ;;
    *) order="crowd quiet polled" ;;
  esac
  for what in $order; do
    # A polled window starts once the console is up and polling: what is measured is the
    # standing cost of a console, not its start (loading the executable's libraries takes
    # about a second of CPU, measured apart below).
    if [ "$what" = polled ]; then
      (sleep $((window + 4)) | "$bin" ctl "127.0.0.1:$port" --secret-file "$tmp/overhead/secret" \
        watch 0.1 --json >"$tmp/polls.jsonl") &
      poller=$!
      for _ in $(seq 1 100); do [ -s "$tmp/polls.jsonl" ] && break; sleep 0.1; done
      sleep 1
    fi
    if [ "$what" = crowd ]; then
      crowd=()
      fds=()
      # A console stops at the end of its input: each reads a FIFO this script holds open
      # (nothing polls for a stop meanwhile, so the harness itself takes no CPU).
      for c in $(seq 1 20); do
        rm -f "$tmp/in$c"
        mkfifo "$tmp/in$c"
        "$bin" ctl "127.0.0.1:$port" --secret-file "$tmp/overhead/secret" top --json \
          <"$tmp/in$c" >"$tmp/top$c.jsonl" 2>&1 &
        crowd+=($!)
        exec {fd}>"$tmp/in$c"
        fds+=("$fd")
      done
      for _ in $(seq 1 1200); do
        up=0
        for c in $(seq 1 20); do [ -s "$tmp/top$c.jsonl" ] && up=$((up + 1)); done
        [ $up -eq 20 ] && break
        sleep 0.1
      done
      [ $up -eq 20 ] || { echo "only $up of 20 consoles answered" >&2; exit 1; }
      sleep 2
    fi
    start=$(date +%s.%N)
    before=$(polls)
    sleep "$window"
    marks+=("$what $start $(date +%s.%N) $(($(polls) - before))")
    if [ "$what" = crowd ]; then
      for fd in "${fds[@]}"; do exec {fd}>&-; done
      wait "${crowd[@]}"
      rm -f "$tmp"/top*.jsonl
    fi
    [ "$what" = polled ] && wait "$poller"
    rm -f "$tmp/polls.jsonl"
    echo "  round $i: $what window done" >&2
  done
done
printf '%s\n' "${marks[@]}" >"$tmp/marks"

# A console's start: swarmrt runs ctl without LibTorch; swarmrt-core (beside it) runs the same
# ctl in a process that loads it, as every console did before. Alternated, 8 of each.
for _ in $(seq 1 8); do
  for b in "$bin" "$(dirname "$bin")/swarmrt-core"; do
    /usr/bin/time -a -f "%e %U %S" -o "$tmp/start_$(basename "$b")" "$b" ctl "127.0.0.1:$port" \
      --secret-file "$tmp/overhead/secret" stats >/dev/null
  done
done
sleep 30 | /usr/bin/time -f "%U %S" -o "$tmp/cpu_watch" "$bin" ctl "127.0.0.1:$port" \
  --secret-file "$tmp/overhead/secret" watch 0.1 --json >/dev/null
echo "2/2 latency: 64 workers in 4 node processes, $repeat x actors" >&2
start_coordinator latency --set swarm.workers_per_stage=32 --set train.steps=100000 \
  --set train.eval_every=0 --set checkpoint.every_steps=0
for n in 1 2 3 4; do start_node latency "n$n" 16; done
for _ in $(seq 1 1200); do grep -q "swarm is full" "$tmp/latency.log" && break; sleep 0.1; done
grep -q "swarm is full" "$tmp/latency.log" || { echo "64 workers never joined" >&2; exit 1; }
sleep 5
for _ in $(seq 1 "$repeat"); do echo "actors --json"; done |
  "$bin" ctl "127.0.0.1:$port" --secret-file "$tmp/latency/secret" --timing \
    >"$tmp/actors.out" 2>"$tmp/timing.txt"

python3 - "$tmp/overhead/metrics.jsonl" "$tmp/marks" "$tmp/timing.txt" "$tmp/actors.out" \
  "$(bench/machine.sh)" "$window" "$tmp/start_swarmrt" "$(cat "$tmp/cpu_watch")" \
  "$tmp/start_swarmrt-core" <<'PY'
import json, statistics, sys
steps = [json.loads(l) for l in open(sys.argv[1])]
steps = [s for s in steps if s.get("event") == "step"]
def rate(t0, t1):
    inside = [s for s in steps if t0 <= s["wall"] <= t1]
    if len(inside) < 2:
        return float("nan")
    return (inside[-1]["tokens"] - inside[0]["tokens"]) / (inside[-1]["wall"] - inside[0]["wall"])
windows = []
for line in open(sys.argv[2]):
    what, t0, t1, polls = line.split()
    windows.append({"what": what, "tokens_per_s": rate(float(t0), float(t1)), "polls": int(polls)})
def of(what):
    return [w["tokens_per_s"] for w in windows if w["what"] == what]
quiet = of("quiet")
# One window of each kind per round: each ratio is to the quiet window of the same round.
pair_ratios = [p / q for p, q in zip(of("polled"), quiet)]
crowd_ratios = [c / q for c, q in zip(of("crowd"), quiet)]
times = [float(l.split()[2]) for l in open(sys.argv[3]) if l.startswith("answered in")][1:]
listed = [len(json.loads(l)["actors"]) for l in open(sys.argv[4]) if l.startswith("{")]
def starts(path):
    rows = [list(map(float, l.split())) for l in open(path) if l.strip()]
    return {"n": len(rows), "wall_s": statistics.median(r[0] for r in rows),
            "cpu_s": statistics.median(r[1] + r[2] for r in rows)}
result = {
    "machine": json.loads(sys.argv[5]),
    "overhead": {"window_s": float(sys.argv[6]), "windows": windows,
                 "polled_over_quiet": pair_ratios,
                 "median_ratio": statistics.median(pair_ratios),
                 "crowd_over_quiet": crowd_ratios,
                 "crowd_median_ratio": statistics.median(crowd_ratios)},
    "console_cpu_s": {"start_and_one_stats": starts(sys.argv[7])["cpu_s"],
                      "polling_30_s": sum(map(float, sys.argv[8].split()))},
    # Median wall and CPU seconds of `ctl ... stats`, started anew each time.
    "console_start": {"swarmrt": starts(sys.argv[7]), "swarmrt-core": starts(sys.argv[9])},
    "latency": {"workers": 64, "processes": 5, "actors_listed": listed[-1] if listed else 0,
                "answers_ms": times, "median_ms": statistics.median(times)},
}
json.dump(result, open("bench/results/console.json", "w"), indent=1)
print(f"| figure | measured | goal |")
print(f"|---|---|---|")
print(f"| tokens/s with a console polling `stats` every 100 ms / without (median of {len(pair_ratios)} pairs) "
      f"| {result['overhead']['median_ratio']:.3f} ({', '.join(f'{r:.3f}' for r in pair_ratios)}) | >= 0.98 |")
print(f"| tokens/s with 20 consoles polling `top` every second / without (median of {len(crowd_ratios)} rounds) "
      f"| {result['overhead']['crowd_median_ratio']:.3f} ({', '.join(f'{r:.3f}' for r in crowd_ratios)}) | >= 0.98 |")
print(f"| `actors` over 64 workers in 4 node processes ({listed[-1] if listed else 0} actors), median of {len(times)} "
      f"| {result['latency']['median_ms']:.1f} ms | <= 100 ms |")
print(f"| CPU of one console process: start + one `stats` / 30 s of `watch 0.1` "
      f"| {result['console_cpu_s']['start_and_one_stats']:.2f} s / {result['console_cpu_s']['polling_30_s']:.2f} s | |")
for b, r in result["console_start"].items():
    print(f"| `{b} ctl ... stats` started anew, median of {r['n']}: wall / CPU "
          f"| {r['wall_s']:.2f} s / {r['cpu_s']:.2f} s | |")
print(f"machine: {result['machine']['cpu']}, {result['machine']['cores']} cores")
PY
