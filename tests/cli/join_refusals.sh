#!/usr/bin/env bash
# The join handshake refuses, on both sides and with the reason: a node whose model config
# differs, a wrong secret, a missing secret. A coordinator listening beyond 127.0.0.1 needs a
# secret. Processes are stopped by pid.
set -u
bin=$1 root=$2
tmp=$(mktemp -d)
coord=""
cleanup() {
  [ -n "$coord" ] && kill -KILL "$coord" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
cfg="$root/configs/tiny.toml"

"$bin" coordinator -c "$cfg" --listen 0.0.0.0:0 -o "$tmp/open" >"$tmp/open.log" 2>&1
[ $? = 2 ] || fail "listening on 0.0.0.0 without a secret must exit 2"
grep -q "requires --secret" "$tmp/open.log" || fail "message: $(cat "$tmp/open.log")"
# A device this process cannot use is refused before joining, with the reason: on a CPU-only
# LibTorch "no CUDA", on a CUDA one the number of devices there are.
"$bin" node --join 127.0.0.1:1 --device cuda:99 >"$tmp/dev.log" 2>&1
[ $? = 2 ] || fail "--device cuda:99 must exit 2: $(cat "$tmp/dev.log")"
grep -Eq -- "--device cuda:99: (this build's LibTorch has no CUDA|this machine has [0-9]+ CUDA device)" \
  "$tmp/dev.log" || fail "message: $(cat "$tmp/dev.log")"
"$bin" node --join 127.0.0.1:1 --device tpu:0 >"$tmp/dev.log" 2>&1
[ $? = 2 ] || fail "--device tpu:0 must exit 2"
grep -q "unknown device (cpu or cuda:K)" "$tmp/dev.log" || fail "message: $(cat "$tmp/dev.log")"
"$bin" node --join nowhere >"$tmp/bad.log" 2>&1
[ $? = 2 ] || fail "a malformed --join must exit 2"
grep -q "is not HOST:PORT" "$tmp/bad.log" || fail "message: $(cat "$tmp/bad.log")"

"$bin" coordinator -c "$cfg" --listen 127.0.0.1:0 --secret s3cret -o "$tmp/run" >"$tmp/coord.log" 2>&1 &
coord=$!
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's/^coordinator listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$tmp/coord.log")
  [ -n "$port" ] && break
  sleep 0.2
done
[ -n "$port" ] || fail "the coordinator did not listen: $(cat "$tmp/coord.log")"

join() { timeout 60 "$bin" node --join "127.0.0.1:$port" --connect-timeout-s 10 "$@"; }

join -c "$cfg" --set model.n_layer=6 --secret s3cret >"$tmp/n1.log" 2>&1
[ $? = 3 ] || fail "a different model must be refused (exit 3): $(cat "$tmp/n1.log")"
grep -q "refused this node: .*model.n_layer: 4 on the coordinator, 6 on the joining node" "$tmp/n1.log" \
  || fail "node-side message: $(cat "$tmp/n1.log")"

SWARMRT_SECRET=guess join >"$tmp/n2.log" 2>&1
[ $? = 3 ] || fail "a wrong secret must be refused"
grep -q "refused this node: .*wrong secret" "$tmp/n2.log" || fail "message: $(cat "$tmp/n2.log")"

join >"$tmp/n3.log" 2>&1
[ $? = 3 ] || fail "a missing secret must be refused"
grep -q "requires a secret" "$tmp/n3.log" || fail "message: $(cat "$tmp/n3.log")"

grep -q "refused node .*model.n_layer: 4 on the coordinator, 6 on the joining node" "$tmp/coord.log" \
  || fail "coordinator-side message: $(cat "$tmp/coord.log")"
grep -q "refused node .*wrong secret" "$tmp/coord.log" || fail "coordinator did not log the wrong secret"
grep -q "joined as node" "$tmp/coord.log" && fail "a refused node was admitted"

kill -TERM "$coord"
wait "$coord"
code=$?
coord=""
[ $code = 0 ] || fail "the coordinator must exit cleanly on SIGTERM, exited $code: $(cat "$tmp/coord.log")"
grep -q "stopped before the swarm was full" "$tmp/coord.log" || fail "stop message: $(cat "$tmp/coord.log")"
echo "ok"
