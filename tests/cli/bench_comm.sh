#!/usr/bin/env bash
# swarmrt bench comm on a very small model: three modes, each once in one process and once
# across processes uncapped and capped at 50 Mbit/s. The JSON and the Markdown table hold
# every mode; per-step gradient sync sends the most, DiLoCo less, Streaming DiLoCo (2
# fragments, int4) the least and the lowest peak. A config without a streaming key is refused
# (exit 2) and writes nothing. The benchmark and every process it starts run in their own
# session and are killed by its id, also when the test fails.
set -u
bin=$1 data=$2
tmp=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ]; then
    kill -TERM -- -"$pid" 2>/dev/null
    sleep 1
    kill -KILL -- -"$pid" 2>/dev/null
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

printf '[swarm]\nmode = "diloco"\nworkers_per_stage = 2\n[data]\npath = "%s"\n' "$data" >"$tmp/plain.toml"
out=$("$bin" bench comm -c "$tmp/plain.toml" -o "$tmp/plain.json" 2>&1)
rc=$?
[ $rc -eq 2 ] || fail "a plain DiLoCo config: exit $rc, expected 2: $out"
grep -q "the streaming mode needs" <<<"$out" || fail "no reason given: $out"
[ -e "$tmp/plain.json" ] && fail "a refused config wrote its JSON"

cat >"$tmp/comm.toml" <<EOF
[model]
preset = "tiny"
n_embd = 32
n_head = 2
block_size = 32
[train]
steps = 12
micro_batch = 2
micro_batches = 4
warmup_steps = 2
eval_every = 0
eval_batches = 2
[data]
path = "$data"
[swarm]
mode = "diloco"
workers_per_stage = 2
[diloco]
inner_steps = 4
fragments = 2
overlap_steps = 1
quantize = "int4"
EOF
setsid "$bin" bench comm -c "$tmp/comm.toml" --caps 0,50 --work "$tmp/work" -o "$tmp/comm.json" \
  --markdown "$tmp/comm.md" >"$tmp/bench.log" 2>&1 &
pid=$!
for _ in $(seq 1 280); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
kill -0 "$pid" 2>/dev/null && fail "bench comm still running after 280 s: $(tail -5 "$tmp/bench.log")"
wait "$pid" || fail "bench comm exited $?: $(tail -20 "$tmp/bench.log"; tail -30 "$tmp/work/runs.log")"
pid=""
python3 - "$tmp/comm.json" "$tmp/comm.md" "$tmp/work" <<'PY' || fail "results: $(cat "$tmp/bench.log")"
import json, math, sys
r = json.load(open(sys.argv[1]))
modes = {m["mode"]: m for m in r["modes"]}
assert list(modes) == ["swarm", "diloco", "streaming"], list(modes)
for m in modes.values():
    q = m["quality"]
    assert q["steps"] == 12 and math.isfinite(q["val_loss"]) and q["val_loss"] > 0, q
    assert [t["link_mbit_s"] for t in m["throughput"]] == [0, 50], m["throughput"]
    assert all(t["tokens_per_s"] > 0 for t in m["throughput"]), m["throughput"]
per = {k: m["quality"]["sync_bytes_per_worker_step"] for k, m in modes.items()}
peak = {k: m["quality"]["peak_sync_bytes_per_worker_step"] for k, m in modes.items()}
assert per["swarm"] > per["diloco"] > per["streaming"] > 0, per
assert peak["streaming"] < peak["diloco"] / 2, peak
# The peak counts a round both ways: its contributions in the step it starts and the group's
# answers (int4 updates, as many bytes) in the steps up to tau = 1 later, where they land.
steps = [json.loads(l) for l in open(sys.argv[3] + "/streaming-quality/metrics.jsonl")
         if '"event":"step"' in l.replace(" ", "")]
before = [{"bytes": {"pseudo_gradients": 0, "parameters": 0}}] + steps
up = [s["bytes"]["pseudo_gradients"] - b["bytes"]["pseudo_gradients"] for b, s in zip(before, steps)]
down = [s["bytes"]["parameters"] - b["bytes"]["parameters"] for b, s in zip(before, steps)]
# rounds whose two steps end before the last one (the last step's consolidation is left out)
rounds = [(i, up[i], down[i] + down[i + 1]) for i in range(len(steps) - 2) if up[i] > 0]
assert rounds and all(u == d for _, u, d in rounds), rounds
assert peak["streaming"] == max(u + d for _, u, d in rounds) / 2, (peak, rounds)
assert modes["streaming"]["quality"]["peak_span_steps"] == 2, modes["streaming"]["quality"]
assert r["machine"]["cores"] >= 1 and r["machine"]["cpu"], r["machine"]
md = open(sys.argv[2]).read().splitlines()
assert len(md) == 5 and md[0].startswith("| mode") and "Streaming DiLoCo" in md[4], md
print("ok: sync bytes per worker and step", {k: round(v) for k, v in per.items()}, "peak", {k: round(v) for k, v in peak.items()})
PY
grep -q "wrote $tmp/comm.json" "$tmp/bench.log" || fail "no 'wrote' line: $(cat "$tmp/bench.log")"
echo "ok: bench comm"
