#!/usr/bin/env bash
# swarmrt plot on real runs: a swarm run with a worker killed and a DiLoCo-SWARM run of the
# same small model, drawn as PNG and SVG (gnuplot); bad input refused with its reason and an
# existing chart left as it was.
bin=$1 data=$2
source "$(dirname "$0")/lib.sh"
small_text_config "$data" <<TOML
steps = 12
micro_batches = 2
eval_every = 4
[swarm]
stages = 2
workers_per_stage = 2
[diloco]
inner_steps = 4
TOML
"$bin" train -c "$tmp/c.toml" -o "$tmp/swarm" --sample-tokens 0 --set swarm.mode=swarm \
  --set chaos.kill=stage1/worker0 --set chaos.kill_at_step=5 >"$tmp/swarm.log" 2>&1 \
  || fail "swarm run: $(tail -5 "$tmp/swarm.log")"
"$bin" train -c "$tmp/c.toml" -o "$tmp/diloco" --sample-tokens 0 --set swarm.mode=diloco-swarm \
  >"$tmp/diloco.log" 2>&1 || fail "diloco run: $(tail -5 "$tmp/diloco.log")"
grep -q '"event":"fault"' "$tmp/swarm/metrics.jsonl" || fail "the killed run recorded no fault"

out=$("$bin" plot "$tmp/swarm" "$tmp/diloco" --out "$tmp/chart.png" --title "plot test" 2>&1) \
  || fail "plot png: $out"
grep -q "2 run(s)" <<<"$out" || fail "plot png said: $out"
python3 - "$tmp/chart.png" <<'PY' || fail "not a 1200x1200 PNG"
import struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n" and b[12:16] == b"IHDR", b[:16]
assert struct.unpack(">II", b[16:24]) == (1200, 1200), struct.unpack(">II", b[16:24])
assert len(b) > 20000, len(b)  # three panels of curves, not an empty canvas
PY
"$bin" plot "$tmp/swarm" "$tmp/diloco" -o "$tmp/chart.svg" --width 900 --height 900 \
  >"$tmp/svg.log" 2>&1 || fail "plot svg: $(cat "$tmp/svg.log")"
python3 - "$tmp/chart.svg" <<'PY' || fail "the SVG lacks a run, a panel or the fault marker"
import sys
s = open(sys.argv[1]).read()
assert s.lstrip().startswith("<?xml") and "<svg" in s
for text in ("swarm train", "swarm validation", "diloco train", "diloco pseudo_gradients",
             "swarm gradients", "fault", "recovered", "tokens trained", "MB sent", "tokens/s"):
    assert text in s, text
PY

# Bad input: a clear message, exit 1 (2 for usage), and the chart already there untouched.
before=$(md5sum <"$tmp/chart.png")
out=$("$bin" plot "$tmp/nothing-here" --out "$tmp/chart.png" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "no such file" <<<"$out" || fail "missing run: rc $rc, $out"
mkdir "$tmp/no-record"
echo '{"event":"step","step":' >"$tmp/no-record/metrics.jsonl"
out=$("$bin" plot "$tmp/no-record" --out "$tmp/chart.png" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "no step record.*metrics.jsonl:1: not a JSON record" <<<"$out" \
  || fail "metrics without a record: rc $rc, $out"
out=$("$bin" plot "$tmp/swarm" --out "$tmp/chart.jpg" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q ".png or .svg" <<<"$out" || fail "jpg: rc $rc, $out"
out=$(PATH=/nonexistent "$bin" plot "$tmp/swarm" --out "$tmp/chart.png" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "gnuplot is not installed" <<<"$out" || fail "no gnuplot: rc $rc, $out"
[ "$(md5sum <"$tmp/chart.png")" = "$before" ] || fail "a failed plot changed the chart"

# A run whose process was killed mid-write: its torn last line is named and skipped, and the
# rest is plotted.
cp -r "$tmp/diloco" "$tmp/crashed"
lines=$(wc -l <"$tmp/crashed/metrics.jsonl")
printf '{"event":"step","step":' >>"$tmp/crashed/metrics.jsonl"
out=$("$bin" plot "$tmp/crashed" --out "$tmp/crashed.png" 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q "crashed/metrics.jsonl:$((lines + 1)): not a JSON record.*skipped" <<<"$out" \
  && grep -q "1 line(s) that are no record skipped" <<<"$out" && [ -s "$tmp/crashed.png" ] \
  || fail "torn last line: rc $rc, $out"
ls "$tmp" | grep -q "\.tmp-" && fail "a temporary file was left: $(ls "$tmp")"
echo "ok: plot of 2 real runs as PNG and SVG; a torn line skipped by name; bad input refused"
