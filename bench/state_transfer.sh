#!/usr/bin/env bash
# A worker's whole state from 1 and from 4 donors (actors/recovery/, docs/recovery.md): a stage
# holding all of gpt2-small (parameters and AdamW's two moments), served by donor processes and
# fetched by one joiner process (`swarmrt bench state`), twice:
#   loopback  every process on 127.0.0.1
#   link      the donors in one network namespace, the joiner in another, the veth pair between
#             them shaped by tc tbf at MBIT Mbit/s both ways (needs root and iproute2; skipped
#             with a line saying so otherwise)
# Each: from 1 donor and from 4; 4 donors with one SIGKILLed halfway; 8 joiners at once on one
# donor (a 2-layer model's state, so that 8 copies fit in memory) with the donor's peak RSS.
# Usage: bench/state_transfer.sh [MBIT] (1000) -> tables + bench/results/state_transfer.json
source "$(dirname "$0")/lib.sh"
mbit=${1:-1000}
[[ $mbit =~ ^[1-9][0-9]*$ ]] || { echo "usage: bench/state_transfer.sh [MBIT > 0]" >&2; exit 2; }
prepare_build
bin=$PWD/build/bin/swarmrt
tmp=$(mktemp -d)
tag=$(($$ % 100000))
a=sta$tag b=stb$tag
cleanup() {
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
echo "== loopback" >&2
"$bin" bench state -o "$tmp/loopback.json"
link=false
if [ "$(id -u)" = 0 ] && command -v tc >/dev/null && ip netns add "$a" 2>/dev/null; then
  ip netns add "$b"
  ip link add "v$a" netns "$a" type veth peer name "v$b" netns "$b"
  ip -n "$a" addr add 10.233.7.1/24 dev "v$a"
  ip -n "$b" addr add 10.233.7.2/24 dev "v$b"
  for n in "$a" "$b"; do
    ip -n "$n" link set lo up
    ip -n "$n" link set "v$n" up
    ip netns exec "$n" tc qdisc replace dev "v$n" root tbf rate "${mbit}mbit" burst 256kb latency 50ms
  done
  echo "== a ${mbit} Mbit/s link (tbf) between two network namespaces" >&2
  ip netns exec "$a" "$bin" bench state --listen 10.233.7.1 --donor-listen 10.233.7.2 \
    --donor-prefix "ip netns exec $b" -o "$tmp/link.json"
  link=true
else
  echo "bench/state_transfer.sh: no root or no iproute2: the shaped link is skipped" >&2
fi
python3 - "$(bench/machine.sh)" "$tmp" "$mbit" "$link" <<'PY'
import json, os, sys
machine, tmp, mbit, link = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4] == "true"
out = {"machine": machine, "loopback": json.load(open(os.path.join(tmp, "loopback.json")))}
if link:
    r = json.load(open(os.path.join(tmp, "link.json")))
    r["link_mbit_s"] = mbit
    for row in r["from_donors"]:
        row["fraction_of_link"] = row["mib_per_s"] * 1048576 * 8 / (mbit * 1e6)
    out["link"] = r
print(f"{'where':<10}{'case':<30}{'s':>8}{'MiB/s':>9}{'again':>7}")
for where in ("loopback", "link"):
    if where not in out:
        continue
    r = out[where]
    for row in r["from_donors"]:
        extra = f"  {row['fraction_of_link']:.2f} of the link" if "fraction_of_link" in row else ""
        print(f"{where:<10}{'from %d donors' % row['donors']:<30}{row['seconds']:>8.2f}"
              f"{row['mib_per_s']:>9.1f}{row['chunks_again']:>7}{extra}")
    if "donor_killed" in r:
        k = r["donor_killed"]
        print(f"{where:<10}{'4 donors, one SIGKILLed':<30}{k['seconds']:>8.2f}{k['mib_per_s']:>9.1f}"
              f"{k['chunks_again']:>7}  (window {k['killed_donor_window_chunks']})")
    j = r["joiners_at_once"]
    print(f"{where:<10}{'%d joiners on one donor' % j['joiners']:<30}{j['seconds_all']:>8.2f}"
          f"{j['joiners'] * j['state_mib'] / j['seconds_all']:>9.1f}{'':>7}  donor peak RSS "
          f"{j['donor_peak_rss_mib']:.0f} MiB, state {j['state_mib']:.0f} MiB")
    print(f"{where:<10}speed-up of 4 donors over 1: {r['speedup_most_over_one']:.2f}x "
          f"(state {r['state_mib']:.0f} MiB)")
os.makedirs("bench/results", exist_ok=True)
json.dump(out, open("bench/results/state_transfer.json", "w"), indent=2)
print("wrote bench/results/state_transfer.json")
PY
