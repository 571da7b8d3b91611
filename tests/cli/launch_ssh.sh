#!/usr/bin/env bash
# swarmrt launch --hostfile starts its nodes over ssh: here against an sshd this test starts
# on 127.0.0.1 with a throwaway host key and user key. Two hostfile lines, one node each,
# train diloco-swarm 2x2 for a few steps. sshd and the launcher are stopped by pid.
bin=$1 root=$2
source "$(dirname "$0")/lib.sh"
sshd_bin=$(command -v sshd || echo /usr/sbin/sshd)
[ -x "$sshd_bin" ] || { echo "FAIL: sshd is not installed (scripts/test.sh installs openssh-server)"; exit 1; }
sshd_pid=""
at_exit '[ -n "$sshd_pid" ] && kill -TERM "$sshd_pid" 2>/dev/null'

ssh-keygen -q -t ed25519 -N '' -f "$tmp/host_key" || fail "host key"
ssh-keygen -q -t ed25519 -N '' -f "$tmp/id" || fail "user key"
cp "$tmp/id.pub" "$tmp/authorized_keys"
chmod 600 "$tmp/authorized_keys"
mkdir -p /run/sshd
for _ in $(seq 1 20); do
  port=$((20000 + RANDOM % 40000))
  cat >"$tmp/sshd_config" <<CONF
Port $port
ListenAddress 127.0.0.1
HostKey $tmp/host_key
AuthorizedKeysFile $tmp/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile $tmp/sshd.pid
CONF
  "$sshd_bin" -D -e -f "$tmp/sshd_config" 2>"$tmp/sshd.log" &
  sshd_pid=$!
  wait_log_of "$sshd_pid" "$tmp/sshd.log" "Server listening" 5 && break
  kill "$sshd_pid" 2>/dev/null
  sshd_pid=""
done
[ -n "$sshd_pid" ] || fail "sshd did not start: $(cat "$tmp/sshd.log")"

cat >"$tmp/hosts" <<HOSTS
# two nodes on this machine, reached over ssh
127.0.0.1 workers=2 port=$port identity=$tmp/id
127.0.0.1 workers=2 port=$port identity=$tmp/id   # the second line: a second node
HOSTS
echo hostfile-test >"$tmp/secret"
chmod 600 "$tmp/secret"
run_launch launch 240 --hostfile "$tmp/hosts" -c "$root/configs/tiny.toml" --listen 127.0.0.1:0 \
  --ssh-option StrictHostKeyChecking=no --ssh-option UserKnownHostsFile=/dev/null \
  --ssh-option LogLevel=ERROR --secret-file "$tmp/secret" \
  --set train.steps=6 --set train.eval_every=0 --set train.eval_batches=2 \
  --set diloco.inner_steps=3 -o "$tmp/run"
grep -q "^\[127.0.0.1\] .*serving 2 workers" "$tmp/launch.log" || fail "first ssh node: $(cat "$tmp/launch.log")"
grep -q "^\[127.0.0.1#2\] .*serving 2 workers" "$tmp/launch.log" || fail "second ssh node"
grep -q "final validation loss" "$tmp/launch.log" || fail "no final loss: $(tail -20 "$tmp/launch.log")"
grep -q "Accepted publickey" "$tmp/sshd.log" || fail "the nodes did not come through this sshd"
grep -q "hostfile-test" "$tmp/launch.log" && fail "the secret leaked into the log"
echo "ok"
