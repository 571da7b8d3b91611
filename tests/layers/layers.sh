#!/usr/bin/env bash
# Layers (docs/architecture.md §1): no library includes a header of one above it; and limits
# that hold: no product file over 500 lines, no function over 120 (check_limits.py says how
# they are counted). Each check runs on this tree, and on a copy with one offence of each kind
# added, which it must refuse, naming it.
set -u
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check="$root/tests/layers/check_layers.py"
python3 "$check" "$root" || { echo "FAIL: the tree has an upward include (above)"; exit 1; }
mkdir -p "$tmp/model" "$tmp/policy" "$tmp/actors/stage" "$tmp/actors/runtime"
echo '#include "transport/bulk.hpp"' >"$tmp/model/gpt.hpp"
echo '#include "actors/runtime/runtime.hpp"' >"$tmp/actors/stage/worker.hpp"
echo '#include "actors/stage/worker.hpp"' >"$tmp/actors/runtime/runtime.hpp"
out=$(python3 "$check" "$tmp")
[ $? = 1 ] || { echo "FAIL: upward includes were not refused: $out"; exit 1; }
echo "$out" | grep -q "model/gpt.hpp:1: model includes transport/bulk.hpp" ||
  { echo "FAIL: model -> transport not named: $out"; exit 1; }
echo "$out" | grep -q "actors/stage/worker.hpp:1: actors/stage includes actors/runtime/runtime.hpp" ||
  { echo "FAIL: stage -> runtime not named: $out"; exit 1; }
limits="$root/tests/layers/check_limits.py"
python3 "$limits" "$root" || { echo "FAIL: a file or function over its limit (above)"; exit 1; }
mkdir -p "$tmp/limits/model"
python3 -c '
import sys
d = sys.argv[1]
open(d + "/model/long_file.cpp", "w").write("// filler\n" * 501)
body = "".join("  x += %d;\n" % i for i in range(119))
open(d + "/model/long_function.cpp", "w").write(
    "namespace m {\nint fine(int x) {\n  return x;\n}\n\nint too_long(int x,\n             int y) {\n" + body + "  return x + y;\n}\n}  // namespace m\n")
' "$tmp/limits"
out=$(python3 "$limits" "$tmp/limits")
[ $? = 1 ] || { echo "FAIL: a file and a function over their limits were not refused: $out"; exit 1; }
echo "$out" | grep -q "model/long_file.cpp: 501 lines" || { echo "FAIL: the long file not named: $out"; exit 1; }
echo "$out" | grep -q "model/long_function.cpp:6: function too_long is 123 lines" ||
  { echo "FAIL: the long function not named: $out"; exit 1; }
echo "$out" | grep -q "fine" && { echo "FAIL: a short function named: $out"; exit 1; }
echo "ok: every include points down; two upward ones in a copy refused with file and line;"
echo "    every file and function within its limit; a long file and function refused by name"
