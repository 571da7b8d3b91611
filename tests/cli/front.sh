#!/usr/bin/env bash
# The swarmrt executable people run: `ctl` in a process that loads no LibTorch, every other
# command in swarmrt-core, which the process becomes (same pid, arguments and environment).
set -u
bin=$1
data=$2
source "$(dirname "$0")/lib.sh"
core=$(dirname "$bin")/swarmrt-core
[ -x "$core" ] || fail "no swarmrt-core beside $bin"

# What the console's process loads: no LibTorch, no CUDA (the half second of CPU a start of the
# core costs is LibTorch's).
needed=$(readelf -d "$bin" | grep NEEDED) || fail "readelf: $bin"
grep -Eq 'libtorch|libc10|libcudart|libnccl' <<<"$needed" && fail "swarmrt loads LibTorch or CUDA: $needed"
grep -q libtorch <<<"$(readelf -d "$core" | grep NEEDED)" || fail "swarmrt-core does not load LibTorch"

# ctl's own help, and its refusals, from the front; the other commands' from the core.
"$bin" ctl --help | grep -q -- "--etcd" || fail "ctl --help: $("$bin" ctl --help 2>&1)"
out=$(env -u SWARMRT_SECRET "$bin" ctl 127.0.0.1:1 stats 2>&1)
rc=$?
[ $rc = 2 ] && grep -q "no cluster secret" <<<"$out" || fail "ctl without a secret: exit $rc: $out"
help=$("$bin" --help) || fail "swarmrt --help: exit $?"
for c in train coordinator node launch ctl data; do
  grep -q "^  $c" <<<"$help" || fail "swarmrt --help lists no $c: $help"
done
out=$("$bin" bogus 2>&1)
rc=$?
[ $rc = 2 ] && grep -q "unknown command 'bogus' (the commands: train, sample, .*ctl" <<<"$out" ||
  fail "an unknown command: exit $rc: $out"

# A forwarded command keeps its process: the pid the shell started is the one that trains
# (what every test and launcher that signals a node or coordinator by pid relies on).
printf '[model]\nn_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 16\n[train]\nsteps = 1000000\neval_every = 0\n' >"$tmp/c.toml"
printf '[data]\npath = "%s"\n' "$tmp/text.txt" >>"$tmp/c.toml"
head -c 100000 "$data" >"$tmp/text.txt"
"$bin" train -c "$tmp/c.toml" -o "$tmp/run" >"$tmp/train.log" 2>&1 &
pid=$!
pids+=("$pid")
wait_until 60 test -s "$tmp/run/metrics.jsonl" || fail "no step recorded: $(tail -5 "$tmp/train.log")"
[ "$(readlink "/proc/$pid/exe")" = "$(readlink -f "$core")" ] ||
  fail "pid $pid runs $(readlink "/proc/$pid/exe"), not swarmrt-core"
grep -q " train " <<<" $(tr '\0' ' ' <"/proc/$pid/cmdline")" || fail "its arguments changed"
kill -TERM "$pid"
wait_exit "$pid" 20 || fail "train did not stop on SIGTERM"

# Without swarmrt-core beside it, a command other than ctl is refused with the reason.
mkdir "$tmp/alone"
cp "$bin" "$tmp/alone/swarmrt"
out=$("$tmp/alone/swarmrt" train -c "$tmp/c.toml" 2>&1)
rc=$?
[ $rc = 127 ] && grep -q "swarmrt-core" <<<"$out" || fail "no core: exit $rc: $out"
"$tmp/alone/swarmrt" ctl --help >/dev/null || fail "ctl needs no core"
echo "ok"
