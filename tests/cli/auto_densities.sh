#!/usr/bin/env bash
# swarm.compression = auto choosing each worker's sparse DiLoCo rounds per link: plain DiLoCo
# (1 stage x 2 workers, H = 4, top-k rounds at a floor of 2% of each 4,096 values in 2 bits)
# with the coordinator, which holds the DiLoCo group, and node a in one network namespace and
# node b in another, their link shaped by tc tbf. At 1 Gbit/s a round at 16% (~240 kB on the
# tiny model) reaches the group in ~2 ms, under a step's compute: both workers climb from the
# floor to 16%. The link is then cut to 3 Mbit/s, where 16% takes 0.64 s, longer than a step
# even on a loaded machine: node b's worker moves down to a density that hides (8%: 0.32 s;
# 2%: ~33 kB, 87 ms) while node a's, whose link to the group never leaves its namespace,
# stays at 16%. The choices are in the
# metrics (hop_encoding events, every step record) and in `swarmrt ctl stats`; no round is
# refused and every loss is finite. The run is stopped by pid once that is seen.
bin=$1 root=$2
tag=$(($$ % 100000))
names=("ada$tag" "adb$tag") addrs=(10.231.10.1 10.231.10.2)
source "$(dirname "$0")/lib.sh"
on_fail() { for n in a b; do echo "--- node $n:"; tail -15 "$tmp/$n.log" 2>/dev/null; done; }
bridged_namespaces "adh$tag" 1gbit "${names[0]}=${addrs[0]}" "${names[1]}=${addrs[1]}"

export SWARMRT_SECRET=auto-densities-test
unset SWARMRT_SECRET_FILE
mkdir -p "$tmp/run"
echo "$SWARMRT_SECRET" >"$tmp/run/secret"
ip netns exec "${names[0]}" "$bin" coordinator -c "$root/configs/tiny.toml" --listen "${addrs[0]}:7431" \
  --set "data.path=$root/data/brown.txt" --set swarm.mode=diloco --set swarm.stages=1 \
  --set swarm.workers_per_stage=2 --set swarm.compression=auto --set diloco.inner_steps=4 \
  --set diloco.compress=topk --set diloco.topk_density=0.02 --set diloco.outer_lr=1 \
  --set diloco.outer_momentum=0 --set train.steps=5000 --set train.eval_every=0 \
  --set checkpoint.every_steps=0 -o "$tmp/out" >"$tmp/coord.log" 2>&1 &
coord=$!
pids+=("$coord")
fail_log="$tmp/coord.log"
ns_node a "${names[0]}" "${addrs[0]}" "${addrs[0]}:7431"
ns_node b "${names[1]}" "${addrs[1]}" "${addrs[0]}:7431"
metrics=$tmp/out/metrics.jsonl
# densities STEP SPLIT: a step record from STEP on lists both workers' rounds to the group;
# SPLIT=same: both at 16%, each measured over 100 Mbit/s; SPLIT=split: one at 16% over
# 100 Mbit/s, the other below 16% under 20 Mbit/s.
densities() {
  py '
import json, sys
step, split = int(sys.argv[2]), sys.argv[3]
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("event") != "step" or r["step"] < step: continue
    rounds = [h for h in r.get("hop_encodings", []) if h["to"].startswith("DiLoCo group at ")]
    if len(rounds) != 2 or len({h["worker"] for h in rounds}) != 2: continue
    fast = [h for h in rounds if h["encoding"] == "topk 16%" and h["mbit_s"] > 100]
    slow = [h for h in rounds if h["encoding"] != "topk 16%" and 0 < h["mbit_s"] < 20]
    if (split == "same" and len(fast) == 2) or (split == "split" and len(fast) == 1 and len(slow) == 1):
        sys.exit(0)
sys.exit(1)' "$metrics" "$@"
}

wait_until 120 test -s "$metrics" || fail "no step in 120 s"
within 90 densities 1 same || fail "at 1 Gbit/s the rounds did not climb to 16%: $(tail -1 "$metrics")"
tbf_rate 3mbit 32kb "${names[@]}"
s=$(($(last_step "$metrics") + 1))
echo "3 Mbit/s from step $s"
within 120 densities "$s" split ||
  fail "at 3 Mbit/s node b's rounds did not move down alone: $(tail -1 "$metrics")"
ctl() { ip netns exec "${names[0]}" "$bin" ctl "${addrs[0]}:7431" --secret-file "$tmp/run/secret" "$@"; }
ctl stats >"$tmp/stats.txt" || fail "ctl stats: $(cat "$tmp/stats.txt")"
grep -q "rounds of worker .* to DiLoCo group at .*: topk 16% (" "$tmp/stats.txt" ||
  fail "ctl stats shows no density: $(cat "$tmp/stats.txt")"
py '
import json, math, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in recs if r.get("event") == "step"]
assert all(math.isfinite(r["loss"]) for r in steps), "a loss is not finite"
moves = [r for r in recs if r.get("event") == "hop_encoding" and r["to"].startswith("DiLoCo group")]
seqs = {w: [m["encoding"] for m in moves if m["worker"] == w] for w in {m["worker"] for m in moves}}
assert len(seqs) == 2, seqs
for w, seq in seqs.items():
    # the floor first, up to 16%; one worker down again once its link was cut
    assert seq[0] == "topk 2%" and "topk 16%" in seq, (w, seq)
    print("worker", w, ":", " ".join("%s@%d" % (m["encoding"], m["step"]) for m in moves if m["worker"] == w))
assert sorted(seq[-1] == "topk 16%" for seq in seqs.values()) == [False, True], seqs
print(len(steps), "steps;", len(moves), "choices")' "$metrics" || fail "the metrics disagree"
for f in coord a b; do
  ! grep -qi "refused" "$tmp/$f.log" || fail "$f refused a round: $(grep -i refused "$tmp/$f.log" | head -3)"
done
echo "ok: both at 16% at 1 Gbit/s; at 3 Mbit/s node b's rounds lower, node a's still 16%"
