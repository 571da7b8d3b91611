#!/usr/bin/env bash
# Layers (docs/architecture.md §1): no library includes a header of one above it. The check
# runs on this tree, and on a copy with one upward include added, which it must refuse.
set -u
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check="$root/tests/layers/check_layers.py"
python3 "$check" "$root" || { echo "FAIL: the tree has an upward include (above)"; exit 1; }
mkdir -p "$tmp/model" "$tmp/policy" "$tmp/actors/stage" "$tmp/actors/runtime"
echo '#include "policy/wiring.hpp"' >"$tmp/model/config.hpp"
echo '#include "actors/runtime/runtime.hpp"' >"$tmp/actors/stage/worker.hpp"
echo '#include "actors/stage/worker.hpp"' >"$tmp/actors/runtime/runtime.hpp"
out=$(python3 "$check" "$tmp")
[ $? = 1 ] || { echo "FAIL: upward includes were not refused: $out"; exit 1; }
echo "$out" | grep -q "model/config.hpp:1: model includes policy/wiring.hpp" ||
  { echo "FAIL: model -> policy not named: $out"; exit 1; }
echo "$out" | grep -q "actors/stage/worker.hpp:1: actors/stage includes actors/runtime/runtime.hpp" ||
  { echo "FAIL: stage -> runtime not named: $out"; exit 1; }
echo "ok: every include points down; two upward ones in a copy refused with file and line"
