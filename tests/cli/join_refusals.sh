#!/usr/bin/env bash
# The cluster credential and the join handshake refuse, with the reason: --secret on a command
# line; a node without a secret; a node with a wrong secret (refused by the TLS handshake of
# the control plane, named on both sides); a node whose model config differs; a node started
# for another run; a coordinator slow to answer, which is no refusal. A coordinator started
# without a secret makes one and keeps it in <run dir>/secret (0600, never logged).
# Processes are stopped by pid.
bin=$1 root=$2
source "$(dirname "$0")/lib.sh"
cfg="$root/configs/tiny.toml"

# A secret on a command line shows in every process list: refused by every command.
for cmd in coordinator launch; do
  extra=()
  [ "$cmd" = launch ] && extra=(--local 1)
  "$bin" $cmd -c "$cfg" "${extra[@]}" --secret s3cret -o "$tmp/x" >"$tmp/cl.log" 2>&1
  [ $? = 2 ] || fail "$cmd --secret must exit 2: $(cat "$tmp/cl.log")"
  grep -q -- "--secret is refused: a secret on a command line shows in every process list" "$tmp/cl.log" \
    || fail "$cmd message: $(cat "$tmp/cl.log")"
done
"$bin" node --join 127.0.0.1:1 --secret s3cret >"$tmp/cl.log" 2>&1
[ $? = 2 ] || fail "node --secret must exit 2"
grep -q -- "--secret is refused" "$tmp/cl.log" || fail "node message: $(cat "$tmp/cl.log")"
"$bin" node --join 127.0.0.1:1 --secret-file "$tmp/none" >"$tmp/cl.log" 2>&1
[ $? = 2 ] || fail "a missing secret file must exit 2"
grep -q "secret file $tmp/none: No such file" "$tmp/cl.log" || fail "message: $(cat "$tmp/cl.log")"
# Nowhere to look for a coordinator, or an etcd without the run to look for in it.
"$bin" node --secret-file "$tmp/none" >"$tmp/cl.log" 2>&1
[ $? = 2 ] || fail "a node without --join or --etcd must exit 2"
grep -q "give --join HOST:PORT (the coordinator) or --etcd URL" "$tmp/cl.log" || fail "message: $(cat "$tmp/cl.log")"
"$bin" node --etcd http://127.0.0.1:1 >"$tmp/cl.log" 2>&1
[ $? = 2 ] || fail "node --etcd without --run-id must exit 2"
grep -q -- "--etcd needs --run-id" "$tmp/cl.log" || fail "message: $(cat "$tmp/cl.log")"
env -u SWARMRT_SECRET "$bin" node --join 127.0.0.1:1 >"$tmp/cl.log" 2>&1
[ $? = 2 ] || fail "a node without a secret must exit 2"
grep -q "no cluster secret" "$tmp/cl.log" || fail "message: $(cat "$tmp/cl.log")"

# A device this process cannot use is refused before joining, with the reason: on a CPU-only
# LibTorch "no CUDA", on a CUDA one the number of devices there are.
export SWARMRT_SECRET=unused
"$bin" node --join 127.0.0.1:1 --device cuda:99 >"$tmp/dev.log" 2>&1
[ $? = 2 ] || fail "--device cuda:99 must exit 2: $(cat "$tmp/dev.log")"
grep -Eq -- "--device cuda:99: (this build's LibTorch has no CUDA|this machine has [0-9]+ CUDA device)" \
  "$tmp/dev.log" || fail "message: $(cat "$tmp/dev.log")"
# "cuda" (a worker per visible GPU, as launch --from-env asks where CUDA_VISIBLE_DEVICES is set)
# is refused the same way by a LibTorch without CUDA; with CUDA it gets as far as the join.
"$bin" node --join 127.0.0.1:1 --device cuda --connect-timeout-s 1 >"$tmp/dev.log" 2>&1
code=$?
{ [ $code = 2 ] && grep -q -- "--device cuda: this build's LibTorch has no CUDA" "$tmp/dev.log"; } ||
  { [ $code = 1 ] && grep -q "cannot reach the coordinator" "$tmp/dev.log"; } ||
  fail "--device cuda: exit $code: $(cat "$tmp/dev.log")"
"$bin" node --join 127.0.0.1:1 --device tpu:0 >"$tmp/dev.log" 2>&1
[ $? = 2 ] || fail "--device tpu:0 must exit 2"
grep -q "unknown device .tpu:0. (cpu, cuda or cuda:K)" "$tmp/dev.log" || fail "message: $(cat "$tmp/dev.log")"
"$bin" node --join nowhere >"$tmp/bad.log" 2>&1
[ $? = 2 ] || fail "a malformed --join must exit 2"
grep -q "is not HOST:PORT" "$tmp/bad.log" || fail "message: $(cat "$tmp/bad.log")"
# A coordinator's --advertise is an address others dial: a fixed port, refused before the run
# directory is made.
for bad in nowhere here:0; do
  "$bin" coordinator -c "$cfg" --advertise "$bad" -o "$tmp/adv" >"$tmp/adv.log" 2>&1
  [ $? = 2 ] || fail "--advertise $bad must exit 2: $(cat "$tmp/adv.log")"
  grep -q -- "--advertise: .*$bad" "$tmp/adv.log" || fail "message: $(cat "$tmp/adv.log")"
  [ -e "$tmp/adv" ] && fail "--advertise $bad made a run directory"
done
unset SWARMRT_SECRET

# No secret given: the coordinator makes one, like a notebook server's token.
start_coordinator -c "$cfg" --listen 127.0.0.1:0 -o "$tmp/run"
[ -s "$tmp/run/secret" ] || fail "no secret file in the run directory"
[ "$(stat -c %a "$tmp/run/secret")" = 600 ] || fail "the secret file is not mode 600"
secret=$(cat "$tmp/run/secret")
grep -qF "$secret" "$tmp/coord.log" && fail "the secret was logged"

join() { timeout 60 "$bin" node --join "127.0.0.1:$port" --connect-timeout-s 10 "$@"; }

echo "guess" >"$tmp/wrong"
chmod 600 "$tmp/wrong"
join --secret-file "$tmp/wrong" >"$tmp/n2.log" 2>&1
[ $? = 3 ] || fail "a wrong secret must be refused (exit 3): $(cat "$tmp/n2.log")"
grep -q "refused this node: the TLS handshake failed, the two do not hold the same cluster credential" \
  "$tmp/n2.log" || fail "node-side message: $(cat "$tmp/n2.log")"

join -c "$cfg" --set model.n_layer=6 --secret-file "$tmp/run/secret" >"$tmp/n1.log" 2>&1
[ $? = 3 ] || fail "a different model must be refused (exit 3): $(cat "$tmp/n1.log")"
grep -q "refused this node: .*model.n_layer: 4 on the coordinator, 6 on the joining node" "$tmp/n1.log" \
  || fail "node-side message: $(cat "$tmp/n1.log")"

# A node started for another run (launch passes the run id it read from its coordinator) is
# refused; one with a malformed id never starts.
run_id=$(sed -n 's/^run id \([0-9a-f]\{16\}\)$/\1/p' "$tmp/coord.log")
[ -n "$run_id" ] || fail "the coordinator did not print its run id: $(cat "$tmp/coord.log")"
join --secret-file "$tmp/run/secret" --run-id 0123456789abcdef >"$tmp/n4.log" 2>&1
[ $? = 3 ] || fail "a node of another run must be refused (exit 3): $(cat "$tmp/n4.log")"
grep -q "refused this node: .*this node was started for run 0123456789abcdef, this coordinator runs $run_id" \
  "$tmp/n4.log" || fail "node-side message: $(cat "$tmp/n4.log")"
grep -q "refused node .*this node was started for run 0123456789abcdef" "$tmp/coord.log" \
  || fail "coordinator-side message: $(cat "$tmp/coord.log")"
join --secret-file "$tmp/run/secret" --run-id xyz >"$tmp/n5.log" 2>&1
[ $? = 2 ] || fail "a malformed --run-id must exit 2: $(cat "$tmp/n5.log")"
grep -q -- "--run-id 'xyz': not a run id" "$tmp/n5.log" || fail "message: $(cat "$tmp/n5.log")"

grep -q "refused node .*model.n_layer: 4 on the coordinator, 6 on the joining node" "$tmp/coord.log" \
  || fail "coordinator-side message: $(cat "$tmp/coord.log")"
# Both sides name it: the node refused the coordinator's certificate (another cluster's CA),
# the coordinator got the node's alert.
grep -q "control plane: refused a peer's certificate: .*it is not of this cluster" \
  "$tmp/n2.log" || fail "the node did not log the certificate of another cluster: $(cat "$tmp/n2.log")"
grep -q "control plane: a peer ended the TLS handshake with 'unknown CA': it does not hold this cluster's credential" \
  "$tmp/coord.log" || fail "the coordinator did not log the refusal: $(cat "$tmp/coord.log")"
grep -q "joined as node" "$tmp/coord.log" && fail "a refused node was admitted"

# A coordinator slow to answer (here: stopped until the node has tried, as a slow link or a
# busy process would be) is no refusal. CAF drops a connection whose handshake spans a heartbeat tick; the
# node says so, tries again, and joins once the coordinator answers.
kill -STOP "$coord"
join --secret-file "$tmp/run/secret" --run-id "$run_id" --workers 1 --name slowpoke >"$tmp/n3.log" 2>&1 &
slow=$!
# The coordinator answers only once the node has seen a try dropped (each one is, at CAF's next
# heartbeat tick, while the coordinator is stopped).
wait_log_of "$slow" "$tmp/n3.log" "took longer than one heartbeat interval" 60
kill -CONT "$coord"
wait_log_of "$slow" "$tmp/coord.log" "node 'slowpoke' joined" 20 || { kill -KILL "$slow"; fail "a node that waited for a stopped coordinator did not join: $(cat "$tmp/n3.log")"; }
grep -q "took longer than one heartbeat interval (250 ms) and was dropped; trying again" "$tmp/n3.log" \
  || { kill -KILL "$slow"; fail "the node did not say why it tried again: $(cat "$tmp/n3.log")"; }
kill -TERM "$slow"
wait "$slow"

kill -TERM "$coord"
wait "$coord"
code=$?
coord=""
# A run that never started did not complete: a non-zero exit, and the last line says why.
[ $code = 1 ] || fail "a coordinator stopped before its run must exit 1, exited $code: $(cat "$tmp/coord.log")"
tail -1 "$tmp/coord.log" | grep -q "the run did not complete: the coordinator stopped before the swarm was full" \
  || fail "last line: $(tail -3 "$tmp/coord.log")"
echo "ok"
