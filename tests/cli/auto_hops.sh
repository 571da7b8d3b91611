#!/usr/bin/env bash
# swarm.compression = auto over a real link that changes: a `pp` pipeline of 2 stages, one
# worker each, in two network namespaces whose link is shaped by tc tbf both ways. At 1 Gbit/s
# the tiny model's hops (262 kB as float32) leave in ~2 ms, under the compute of a micro-batch:
# each worker, starting at the floor (int4), climbs to sending them as they are. The link is then cut to 10 Mbit/s, where a float32 hop
# takes 0.2 s, longer than a micro-batch's compute (35 ms alone, up to ~150 ms on a loaded
# machine): each worker measures it and moves down to bf16 (0.1 s), int8 (55 ms) or int4 (29 ms),
# whichever hides under its compute. Back at 1 Gbit/s, each
# moves up again rung by rung. The choices are in the metrics (hop_encoding events, every step
# record) and in `swarmrt ctl stats`; no hop is refused and every loss is finite. The run is
# stopped by pid once that is seen.
bin=$1 root=$2
tag=$(($$ % 100000))
names=("aha$tag" "ahb$tag") addrs=(10.231.9.1 10.231.9.2)
source "$(dirname "$0")/lib.sh"
on_fail() { for n in a b; do echo "--- node $n:"; tail -15 "$tmp/$n.log" 2>/dev/null; done; }
bridged_namespaces "ahh$tag" 1gbit "${names[0]}=${addrs[0]}" "${names[1]}=${addrs[1]}"

export SWARMRT_SECRET=auto-hops-test
unset SWARMRT_SECRET_FILE
mkdir -p "$tmp/run"
echo "$SWARMRT_SECRET" >"$tmp/run/secret"
ip netns exec "${names[0]}" "$bin" coordinator -c "$root/configs/tiny.toml" --listen "${addrs[0]}:7421" \
  --set "data.path=$root/data/brown.txt" --set swarm.mode=pp --set swarm.workers_per_stage=1 \
  --set swarm.compression=auto --set swarm.hop_encoding=int4 --set train.steps=5000 \
  --set train.eval_every=0 --set checkpoint.every_steps=0 -o "$tmp/out" >"$tmp/coord.log" 2>&1 &
coord=$!
pids+=("$coord")
fail_log="$tmp/coord.log"
ns_node a "${names[0]}" "${addrs[0]}" "${addrs[0]}:7421"
ns_node b "${names[1]}" "${addrs[1]}" "${addrs[0]}:7421"
metrics=$tmp/out/metrics.jsonl
# choices STEP ENCODING CMP MBIT: a step record from STEP on lists both workers' links, each in
# ENCODING ("compressed": any but none), its measured rate CMP (gt/lt) MBIT Mbit/s.
choices() {
  py '
import json, sys
step, enc, cmp, mbit = int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5])
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("event") != "step" or r["step"] < step: continue
    hops = r.get("hop_encodings", [])
    ok = len(hops) == 2 and len({h["worker"] for h in hops}) == 2 and all(
        (h["encoding"] == enc or enc == "compressed" and h["encoding"] != "none") and (h["mbit_s"] > mbit if cmp == "gt" else h["mbit_s"] < mbit)
        for h in hops)
    if ok: sys.exit(0)
sys.exit(1)' "$metrics" "$@"
}
step_from() { echo $(($(last_step "$metrics") + 1)); }

wait_until 120 test -s "$metrics" || fail "no step in 120 s"
within 60 choices 30 none gt 100 || fail "at 1 Gbit/s the hops did not stay as they are: $(tail -1 "$metrics")"
tbf_rate 10mbit 32kb "${names[@]}"
s=$(step_from)
echo "10 Mbit/s from step $s"
within 90 choices "$s" compressed lt 20 || fail "at 10 Mbit/s the hops did not move down: $(tail -1 "$metrics")"
ctl() { ip netns exec "${names[0]}" "$bin" ctl "${addrs[0]}:7421" --secret-file "$tmp/run/secret" "$@"; }
ctl stats >"$tmp/stats.txt" || fail "ctl stats: $(cat "$tmp/stats.txt")"
grep -q "hops of worker .* \(bf16\|int8\|int4\) (" "$tmp/stats.txt" || fail "ctl stats shows no choice: $(cat "$tmp/stats.txt")"
tbf_rate 1gbit 128kb "${names[@]}"
s=$(step_from)
echo "1 Gbit/s from step $s"
within 240 choices "$s" none gt 100 || fail "back at 1 Gbit/s the hops did not move up: $(tail -1 "$metrics")"
py '
import json, math, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in recs if r.get("event") == "step"]
assert all(math.isfinite(r["loss"]) for r in steps), "a loss is not finite"
moves = [r for r in recs if r.get("event") == "hop_encoding"]
# both workers: int4 (the floor, first hop), up to none, down (maybe through rungs), up to none
for w in {m["worker"] for m in moves}:
    seq = [m["encoding"] for m in moves if m["worker"] == w]
    assert seq[0] == "int4" and "none" in seq[1:-1] and seq[-1] == "none", (w, seq)
    print("worker", w, ":", " ".join("%s@%d" % (m["encoding"], m["step"]) for m in moves if m["worker"] == w))
print(len(steps), "steps;", len(moves), "choices")' "$metrics" || fail "the metrics disagree"
for n in a b; do
  ! grep -q "rejected" "$tmp/$n.log" || fail "node $n refused a hop: $(grep rejected "$tmp/$n.log" | head -3)"
done
echo "ok: none at 1 Gbit/s, compressed at 10 Mbit/s, none again at 1 Gbit/s"
