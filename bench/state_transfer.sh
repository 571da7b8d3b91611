#!/usr/bin/env bash
# A worker's whole state from 1 and from 4 donors (actors/recovery/, docs/recovery.md): a stage
# holding all of gpt2-small (parameters and AdamW's two moments), served by donor processes and
# fetched by one joiner process (`swarmrt bench state`), twice:
#   loopback  every process on 127.0.0.1
#   links     each donor in a network namespace of its own whose link to a bridge is shaped by
#             tc tbf at MBIT Mbit/s (its uplink, as a donor on a machine of its own would have),
#             the joiner in another, unshaped (needs root and iproute2; skipped with a line
#             saying so otherwise)
# Each: from 1 donor and from 4; 4 donors with one SIGKILLed halfway; 8 joiners at once on one
# donor (a 2-layer model's state, so that 8 copies fit in memory) with the donor's peak RSS.
# Usage: bench/state_transfer.sh [MBIT] (1000) -> tables + bench/results/state_transfer.json
source "$(dirname "$0")/lib.sh"
mbit=${1:-1000}
[[ $mbit =~ ^[1-9][0-9]*$ ]] || { echo "usage: bench/state_transfer.sh [MBIT > 0]" >&2; exit 2; }
prepare_build
bin=$PWD/build/bin/swarmrt
tmp=$(mktemp -d)
tag=$(($$ % 10000))
hub=sth$tag joiner=stj$tag
spaces=("$hub" "$joiner")
cleanup() {
  for n in "${spaces[@]}"; do ip netns del "$n" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
echo "== loopback" >&2
"$bin" bench state -o "$tmp/loopback.json"
link=false
# plug NAME ADDRESS [MBIT]: a namespace on the hub's bridge, its uplink shaped when MBIT is given.
plug() {
  ip netns add "$1"
  spaces+=("$1")
  ip link add "v$1" netns "$1" type veth peer name "p$1" netns "$hub"
  ip -n "$hub" link set "p$1" master br0
  ip -n "$hub" link set "p$1" up
  ip -n "$1" link set lo up
  ip -n "$1" addr add "$2/24" dev "v$1"
  ip -n "$1" link set "v$1" up
  if [ -n "${3:-}" ]; then
    ip netns exec "$1" tc qdisc replace dev "v$1" root tbf rate "${3}mbit" burst 256kb latency 50ms
  fi
}
if [ "$(id -u)" = 0 ] && command -v tc >/dev/null && ip netns add "$hub" 2>/dev/null; then
  ip -n "$hub" link add br0 type bridge
  ip -n "$hub" link set br0 up
  plug "$joiner" 10.233.7.100
  for i in 0 1 2 3 4; do plug "std$tag$i" "10.233.7.1$i" "$mbit"; done
  echo "== each donor's uplink ${mbit} Mbit/s (tbf), a namespace each; the joiner's unshaped" >&2
  ip netns exec "$joiner" "$bin" bench state --listen 10.233.7.100 --donor-listen "10.233.7.1{i}" \
    --donor-prefix "ip netns exec std$tag{i}" -o "$tmp/link.json"
  link=true
else
  echo "bench/state_transfer.sh: no root or no iproute2: the shaped links are skipped" >&2
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
    out["links"] = r
print(f"{'where':<10}{'case':<30}{'s':>8}{'MiB/s':>9}{'again':>7}")
for where in ("loopback", "links"):
    if where not in out:
        continue
    r = out[where]
    for row in r["from_donors"]:
        extra = (f"  {row['fraction_of_link']:.2f} of one donor's link"
                 if "fraction_of_link" in row else "")
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
