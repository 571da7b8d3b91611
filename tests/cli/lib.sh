# What the CLI tests do the same way, sourced by each (`source "$(dirname "$0")/lib.sh"`) after
# it has read its own arguments. It gives:
#   $tmp            a private folder, removed on exit
#   pids            processes started by the test, killed by pid on exit (append with pids+=)
#   launchers       `swarmrt launch` processes: on exit each gets SIGTERM with its children,
#                   then SIGKILL a second later (append with launchers+=)
#   at_exit CMD     one more thing to undo on exit (before the kills; a network namespace)
#   fail MSG        prints FAIL and exits 1; with $fail_log set, that log's last lines too,
#                   and where the test defines on_fail, what it prints
#   py CODE ARGS    python3 -c CODE ARGS
#   wait_until S CMD...      runs CMD every 0.1 s until it succeeds, for at most S seconds
#   within S CMD...          runs CMD every second until it succeeds, for at most S seconds of
#                            wall time (for a check that reads a growing file: each takes
#                            longer than wait_until's tenth of a second assumes)
#   last_step FILE           the step of the last step record in FILE (metrics.jsonl; 0: none)
#   tbf_rate RATE BURST NS... each namespace NS's end of its veth pair ("vNS", as
#                            bridged_namespaces makes them) shaped anew by tc tbf
#   wait_log FILE PATTERN [S] wait_until the file holds the pattern (120 s)
#   wait_exit PID S           wait_until the process has ended; 1 if it still runs
#   wait_log_of PID FILE PATTERN S  wait_log, ending early when the process PID has ended
#   run_launch NAME S ARGS... `swarmrt launch ARGS`, its log in $tmp/NAME.log, waited for at
#                             most S seconds; fails if it runs on or exits non-zero
#   start_coordinator ARGS... `swarmrt coordinator ARGS` in the background, its log in
#                             $tmp/coord.log (fail_log), its pid in $coord, its control port
#                             in $port once it listens (fails after 20 s)
#   join_node NAME ARGS...    `swarmrt node --join 127.0.0.1:$port` with the run's secret,
#                             --name NAME and ARGS, its log in $tmp/NAME.log, its pid in $node
#   ns_node NAME NS ADDR JOIN one worker's node in network namespace NS, listening on ADDR,
#                             joining JOIN; its log in $tmp/NAME.log, its pid in $node
#   ctl ARGS...               `swarmrt ctl` against the coordinator with the run's secret
#   exits_with PID S CODE WHO the process ends within S seconds with exit status CODE
#   run_finished PID LOG WHO  WHO (a coordinator) ends within 300 s, status 0, its LOG
#                             holding the final validation loss
#   check_records FILE STEPS [CODE ARGS...]  FILE (metrics.jsonl) holds one step record for
#                             each of steps 1..STEPS in order; then the Python CODE checks
#                             more (see below)
# The scripts keep what makes each test itself: its config, its faults, its checks.
set -u
: "${bin:?a CLI test sets bin (the swarmrt binary) before sourcing lib.sh}"
tmp=$(mktemp -d)
# nap S: waits S seconds without starting a process. A test's wait loops poll every 0.1 s, and
# on this suite's 2 cores a `sleep` process each time (~5 ms to start) was a tenth of a core
# per waiting test. `read -t` on a FIFO held open for writing here too waits out its timeout.
mkfifo "$tmp/.nap"
exec {nap_fd}<>"$tmp/.nap"
nap() { read -r -t "$1" -u "$nap_fd" _ || true; }
pids=()
launchers=()
exit_steps=()
fail_log=""
coord="" port="" node=""

at_exit() { exit_steps+=("$*"); }

cleanup() {
  local step p
  for step in "${exit_steps[@]}"; do eval "$step"; done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  for p in "${launchers[@]}"; do
    running "$p" || continue
    pkill -TERM -P "$p" 2>/dev/null
    kill -TERM "$p" 2>/dev/null
    sleep 1
    pkill -KILL -P "$p" 2>/dev/null
    kill -KILL "$p" 2>/dev/null
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*"
  if [ -n "$fail_log" ] && [ -f "$fail_log" ]; then
    echo "--- $fail_log, last 30 lines:"
    tail -30 "$fail_log"
  fi
  if declare -F on_fail >/dev/null; then on_fail; fi
  exit 1
}

py() { python3 -c "$1" "${@:2}"; }

wait_until() {
  local tries=$(($1 * 10)) i
  shift
  for ((i = 0; i < tries; i++)); do
    "$@" && return 0
    nap 0.1
  done
  return 1
}

within() {
  local end=$((SECONDS + $1))
  shift
  while [ $SECONDS -lt $end ]; do
    "$@" && return 0
    nap 1
  done
  return 1
}

last_step() {
  py '
import json, sys
s = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("event") == "step": s = r["step"]
print(s)' "$1"
}

tbf_rate() {
  local rate=$1 burst=$2 n
  shift 2
  for n in "$@"; do
    ip netns exec "$n" tc qdisc change dev "v$n" root tbf rate "$rate" burst "$burst" latency 50ms ||
      fail "tbf change on $n"
  done
}

wait_log() { wait_until "${3:-120}" grep -q -- "$2" "$1" 2>/dev/null; }

running() { kill -0 "$1" 2>/dev/null; }
ended() { ! running "$1"; }
wait_exit() { wait_until "$2" ended "$1"; }
log_or_ended() { grep -q -- "$3" "$2" 2>/dev/null || ended "$1"; }
wait_log_of() {
  wait_until "$4" log_or_ended "$1" "$2" "$3"
  grep -q -- "$3" "$2" 2>/dev/null
}

# log_port FILE WHO: the port of FILE's line "WHO listening on 127.0.0.1:PORT" (empty: none yet).
log_port() { sed -n "s/^$2 listening on 127.0.0.1:\([0-9]*\)\$/\1/p" "$1"; }
# wait_port FILE WHO [S]: prints that port once the line is there (at most S seconds, 20).
wait_port() {
  local p
  for _ in $(seq 1 $((${3:-20} * 10))); do
    p=$(log_port "$1" "$2")
    [ -n "$p" ] && echo "$p" && return 0
    nap 0.1
  done
  return 1
}

listening_port() {
  port=$(log_port "$tmp/coord.log" coordinator)
  [ -n "$port" ]
}

start_coordinator() {
  "$bin" coordinator "$@" >"$tmp/coord.log" 2>&1 &
  coord=$!
  pids+=("$coord")
  fail_log="$tmp/coord.log"
  wait_until 20 listening_port || fail "the coordinator did not listen"
}

join_node() {
  local name=$1
  shift
  "$bin" node --join "127.0.0.1:$port" --secret-file "$tmp/run/secret" --name "$name" "$@" \
    >"$tmp/$name.log" 2>&1 &
  node=$!
  pids+=("$node")
}

# ns_node NAME NS ADDR JOIN: `swarmrt node --join JOIN` of one worker in network namespace NS,
# listening on ADDR, with the secret in the environment; as join_node ($tmp/NAME.log, $node).
ns_node() {
  ip netns exec "$2" "$bin" node --join "$4" --workers 1 --name "$1" --listen "$3" \
    >"$tmp/$1.log" 2>&1 &
  node=$!
  pids+=("$node")
}

# join_run JOIN RUN_ID NAME...: a node of 2 workers per NAME, joining run RUN_ID at JOIN (its
# coordinator replicas' addresses), patient for 60 s; its pid in $NAME, its log $tmp/NAME.log.
join_run() {
  local join=$1 id=$2 n
  shift 2
  for n in "$@"; do
    "$bin" node --join "$join" --run-id "$id" --workers 2 --name "$n" --connect-timeout-s 60 \
      >"$tmp/$n.log" 2>&1 &
    pids+=($!)
    eval "$n=$!"
  done
}

# nodes_ended ATTACHMENTS NAME...: each node $NAME stops within 15 s, exits 0, and served its
# workers ATTACHMENTS times (once per coordinator it attached to).
nodes_ended() {
  local want=$1 n
  shift
  for n in "$@"; do
    wait_exit "${!n}" 15 || fail "node $n did not stop"
    wait "${!n}" || fail "node $n exited with $?"
    [ "$(grep -c "serving 2 workers" "$tmp/$n.log")" = "$want" ] ||
      fail "node $n: served its workers $(grep -c "serving 2 workers" "$tmp/$n.log") times, not $want"
  done
}

ctl() { "$bin" ctl "127.0.0.1:$port" --secret-file "$tmp/run/secret" "$@"; }

# slow_workers FACTOR CONSOLE...: the four workers of a 2x2 swarm compute FACTOR times slower
# (1: at full speed again), through one console (CONSOLE..., the lines on its stdin: each `ctl`
# start costs 0.7 s of CPU here). A run a script only needs to keep going while it works on it
# then outlasts the work on a loaded machine and leaves the cores to the rest of the suite.
slow_workers() {
  local factor=$1
  shift
  printf "slow %s $factor --json\n" stage0/worker0 stage0/worker1 stage1/worker0 stage1/worker1 |
    "$@" >"$tmp/slow.out" 2>&1
  [ "$(grep -c '"ok":true' "$tmp/slow.out")" = 4 ] ||
    fail "slow every worker $factor: $(cat "$tmp/slow.out")"
}

run_launch() {
  local name=$1 secs=$2 launcher
  shift 2
  "$bin" launch "$@" >"$tmp/$name.log" 2>&1 &
  launcher=$!
  launchers+=("$launcher")
  wait_exit "$launcher" "$secs" || fail "$name: launch still running after $secs s: $(tail -20 "$tmp/$name.log")"
  wait "$launcher" || fail "$name: launch exited with $?: $(tail -30 "$tmp/$name.log")"
}

# small_text_config DATA: writes $tmp/c.toml, a 2-layer, 32-wide model trained on the first
# 400 kB of DATA (copied to $tmp/text.txt) in micro-batches of 4, 1 warm-up step and 2
# validation batches; stdin adds to it: [train] keys first, then other sections.
small_text_config() {
  head -c 400000 "$1" >"$tmp/text.txt"
  {
    printf '[model]\nn_layer = 2\nn_head = 2\nn_embd = 32\nblock_size = 32\n'
    printf '[data]\npath = "%s"\n' "$tmp/text.txt"
    printf '[train]\nmicro_batch = 4\nwarmup_steps = 1\neval_batches = 2\n'
    cat
  } >"$tmp/c.toml"
}

# bridged_namespaces HUB RATE NAME=ADDR...: network namespace HUB with a bridge, and one
# namespace per NAME joined to it by a veth pair (NAME's end "vNAME", the hub's "pNAME"), NAME
# at ADDR/24; with RATE (e.g. 100mbit; "" for none) each NAME's end shaped by tc tbf. Every
# namespace is removed on exit. Needs root and iproute2.
bridged_namespaces() {
  local hub=$1 rate=$2 spec n a
  shift 2
  [ "$(id -u)" = 0 ] || fail "needs root for network namespaces"
  command -v ip >/dev/null && command -v tc >/dev/null || fail "needs iproute2"
  at_exit "ip netns del $hub 2>/dev/null"
  ip netns add "$hub" || fail "cannot create namespaces"
  ip netns exec "$hub" ip link add br0 type bridge || fail "bridge"
  ip netns exec "$hub" ip link set br0 up
  for spec in "$@"; do
    n=${spec%%=*} a=${spec#*=}
    at_exit "ip netns del $n 2>/dev/null"
    ip netns add "$n" || fail "namespace $n"
    ip link add "v$n" netns "$n" type veth peer name "p$n" netns "$hub" || fail "veth for $n"
    ip netns exec "$hub" ip link set "p$n" master br0
    ip netns exec "$hub" ip link set "p$n" up
    ip netns exec "$n" ip link set lo up
    ip netns exec "$n" ip addr add "$a/24" dev "v$n"
    ip netns exec "$n" ip link set "v$n" up
    if [ -n "$rate" ]; then
      ip netns exec "$n" tc qdisc add dev "v$n" root tbf rate "$rate" burst 128kb latency 50ms ||
        fail "tbf on $n"
    fi
  done
}

# free_port: a TCP port on 127.0.0.1 nothing listens on now.
free_port() { py 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start_etcd: a one-member etcd of the test's own (start_etcd_cluster 1), its client URL in
# $etcd_url and pid in $etcd_pid.
start_etcd() {
  start_etcd_cluster 1
  etcd_pid=${etcd_pids[0]}
}

# replicas_test NAME: what a test of coordinator replicas starts with: a secret of its own in
# SWARMRT_SECRET (NAME-test; no SWARMRT_SECRET_FILE from outside) and an etcd of its own
# (start_etcd).
replicas_test() {
  export SWARMRT_SECRET=$1-test
  unset SWARMRT_SECRET_FILE
  start_etcd
}

# run_with_standby NAME SETTINGS...: two coordinator replicas of run NAME (configs/tiny.toml
# with SETTINGS, on the test's etcd: a leads, b stands by, lease 2 s) and one node of 2
# workers that knows both; waits for the node's end (300 s), then for both replicas' (the
# leader prints the run's last line after its nodes have stopped; the standby can end first,
# once the run is recorded as completed). Logs: $tmp/NAME-a.log, NAME-b.log, NAME-n.log.
run_with_standby() {
  local name=$1 id pa pb n r a b
  shift
  id=$(printf '%016x' $((RANDOM * 32768 + RANDOM + 1)))
  pa=$(free_port) pb=$(free_port)
  for r in a:$pa b:$pb; do
    "$bin" coordinator -c "$root/configs/tiny.toml" --listen "127.0.0.1:${r#*:}" -o "$tmp/$name" \
      --etcd "$etcd_url" --lease-ttl-s 2 --run-id "$id" "$@" >"$tmp/$name-${r%%:*}.log" 2>&1 &
    pids+=($!)
    [ "${r%%:*}" = a ] && { a=$!; wait_log "$tmp/$name-a.log" "leading run" 30 || fail "$name: no leader"; }
  done
  b=$!
  "$bin" node --join "127.0.0.1:$pa,127.0.0.1:$pb" --run-id "$id" --workers 2 --name n \
    --connect-timeout-s 60 >"$tmp/$name-n.log" 2>&1 &
  n=$!
  pids+=("$n")
  wait_exit "$n" 300 || fail "$name: the node still runs after 300 s"
  wait "$n" || fail "$name: the node exited with $?"
  wait_exit "$a" 30
  wait_exit "$b" 30
}

# etcd_tls DIR HOST...: `swarmrt tls` certificates from $SWARMRT_SECRET for etcd members at
# HOST... in DIR (ca.pem, cert.pem, key.pem). etcd_tls_flags DIR: the etcd flags that make its
# client and peer ports take only mutual TLS with those (no open port, loopback too).
etcd_tls() {
  local dir=$1
  shift
  local hosts
  hosts=$(IFS=,; echo "$*")
  "$bin" tls --out "$dir" --host "$hosts" >/dev/null || fail "swarmrt tls --out $dir failed"
}
etcd_tls_flags() {
  echo --client-cert-auth --trusted-ca-file "$1/ca.pem" --cert-file "$1/cert.pem" \
    --key-file "$1/key.pem" --peer-client-cert-auth --peer-trusted-ca-file "$1/ca.pem" \
    --peer-cert-file "$1/cert.pem" --peer-key-file "$1/key.pem"
}

# etcd_get URL KEY [CA CERT KEYFILE]: prints the value of KEY in the etcd member at URL, asking
# over https with CA (empty: the member's certificate is not checked) and the client
# certificate CERT/KEYFILE (empty: none shown); fails (non-zero, the reason on stderr) when the
# member does not answer or refuses.
etcd_get() {
  py '
import base64, json, ssl, sys, urllib.request as u
url, key, ca, cert, keyfile = (sys.argv[1:] + [""] * 5)[:5]
ctx = None
if url.startswith("https://"):
    ctx = ssl.create_default_context(cafile=ca or None)
    if not ca:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(cert, keyfile)
body = json.dumps({"key": base64.b64encode(key.encode()).decode()}).encode()
try:
    r = json.load(u.urlopen(u.Request(url + "/v3/kv/range", data=body), timeout=3, context=ctx))
except Exception as e:
    sys.exit(f"etcd at {url} refused or did not answer: {e}")
kvs = r.get("kvs", [])
print(base64.b64decode(kvs[0].get("value", "")).decode() if kvs else "")
' "$@"
}

# start_etcd_cluster N: an N-member etcd on loopback (members e1..eN, data in $tmp/eK) whose
# ports take only mutual TLS with the cluster's certificates ($tmp/etcd-tls, from
# $SWARMRT_SECRET), their https client URLs comma-joined in $etcd_url and pids in the array
# etcd_pids, once every member answers (fails after 30 s).
start_etcd_cluster() {
  local n=$1 k cluster="" clients=() peers=()
  command -v etcd >/dev/null || fail "needs etcd (Debian's etcd-server; scripts/test.sh installs it)"
  [ -n "${SWARMRT_SECRET:-}" ] || fail "start_etcd_cluster needs SWARMRT_SECRET set"
  etcd_tls "$tmp/etcd-tls" 127.0.0.1
  for k in $(seq 1 "$n"); do
    clients+=("$(free_port)") peers+=("$(free_port)")
    cluster+="${cluster:+,}e$k=https://127.0.0.1:${peers[$((k - 1))]}"
  done
  etcd_pids=() etcd_url=""
  for k in $(seq 1 "$n"); do
    # shellcheck disable=SC2046
    etcd --name "e$k" --data-dir "$tmp/e$k" \
      --listen-client-urls "https://127.0.0.1:${clients[$((k - 1))]}" \
      --advertise-client-urls "https://127.0.0.1:${clients[$((k - 1))]}" \
      --listen-peer-urls "https://127.0.0.1:${peers[$((k - 1))]}" \
      --initial-advertise-peer-urls "https://127.0.0.1:${peers[$((k - 1))]}" \
      --initial-cluster "$cluster" --initial-cluster-state new \
      $(etcd_tls_flags "$tmp/etcd-tls") >"$tmp/e$k.log" 2>&1 &
    etcd_pids+=($!)
    pids+=($!)
    etcd_url+="${etcd_url:+,}https://127.0.0.1:${clients[$((k - 1))]}"
  done
  for k in $(seq 1 "$n"); do
    wait_until 30 etcd_get "https://127.0.0.1:${clients[$((k - 1))]}" /swarmrt/ping \
      "$tmp/etcd-tls/ca.pem" "$tmp/etcd-tls/cert.pem" "$tmp/etcd-tls/key.pem" 2>/dev/null >/dev/null ||
      fail "etcd member e$k did not answer: $(tail -5 "$tmp/e$k.log")"
  done
}

# exits_with PID S CODE WHO: fails unless the process ends within S seconds with status CODE.
exits_with() {
  local code
  wait_exit "$1" "$2" || fail "$4 still runs after $2 s"
  wait "$1"
  code=$?
  [ "$code" = "$3" ] || fail "$4 exited $code, not $3"
}

run_finished() {
  exits_with "$1" 300 0 "$3"
  grep -q "final validation loss" "$2" || fail "$3 did not complete the run: $(tail -5 "$2")"
}

# check_records FILE STEPS [CODE ARGS...]: one step record per step, 1..STEPS in order, then
# CODE with these names: records (FILE's, parsed), steps (the step records' numbers),
# argv (ARGS), of(event, kind) (the records of that event and kind), late_records() (records of
# an older leader's epoch after the newest epoch first wrote: what fencing forbids).
check_records() {
  local file=$1 steps=$2 code=${3:-}
  shift 2
  [ $# -gt 0 ] && shift
  py "
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
steps = [r['step'] for r in records if r.get('event') == 'step']
assert steps == list(range(1, int(sys.argv[2]) + 1)), f'step records: {steps}'
argv = sys.argv[3:]
def of(event, kind=None):
    return [r for r in records if r.get('event') == event and kind in (None, r.get('kind'))]
def late_records():
    new = max(r['epoch'] for r in records if 'epoch' in r)
    first_new = next(i for i, r in enumerate(records) if r.get('epoch') == new)
    return [r for r in records[first_new:] if r.get('epoch') != new]
$code" "$file" "$steps" "$@"
}
