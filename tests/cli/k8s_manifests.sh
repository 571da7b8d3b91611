#!/usr/bin/env bash
# deploy/k8s: every document matches the Kubernetes API it names (schema and field names,
# tests/deploy/check_manifests.mjs), and the command the Job's pods run is the one
# launch --from-env's tests exercise: pod 0 becomes the coordinator, pod 1 a node with one
# worker per requested CPU joining pod 0's DNS name, both of one run; an index past the
# world is refused; a run directory with a checkpoint makes the pods resume. Each pod's
# command runs here with --dry-run, with the manifest's variables (and the downward API's
# values) and its paths moved under a temporary directory.
bin=$1 root=$2
source "$(dirname "$0")/lib.sh"
tools=$root/tests/deploy
[ -d "$tools/node_modules/kubernetes-models" ] ||
  fail "the manifest checker's npm packages are missing: ./scripts/test.sh installs them"
manifest=$root/deploy/k8s/swarmrt.yaml

node "$tools/check_manifests.mjs" "$root"/deploy/k8s/*.yaml >"$tmp/check.log" 2>&1 ||
  fail "deploy/k8s does not match the Kubernetes API: $(cat "$tmp/check.log")"
cat "$tmp/check.log"
# The checker refuses what it must: a field the API lacks, a value of the wrong type.
sed -e 's/^      subdomain: swarmrt$/      subdomain: swarmrt\n      hostNetwork2: true/' \
  -e 's/^  completions: 3$/  completions: "3"/' "$manifest" >"$tmp/bad.yaml"
node "$tools/check_manifests.mjs" "$tmp/bad.yaml" >"$tmp/bad.log" 2>&1 && fail "a bad manifest passed"
grep -q "hostNetwork2" "$tmp/bad.log" || fail "an unknown field passed: $(cat "$tmp/bad.log")"
grep -q "completions must be integer" "$tmp/bad.log" || fail "a wrong type passed: $(cat "$tmp/bad.log")"

mkdir -p "$tmp/bin" "$tmp/etc/swarmrt/config" "$tmp/etc/swarmrt/secret" "$tmp/runs"
ln -s "$bin" "$tmp/bin/swarmrt"
cp "$root/configs/tiny.toml" "$tmp/etc/swarmrt/config/run.toml"
(umask 077 && echo k8s-test-secret >"$tmp/etc/swarmrt/secret/secret")
# pod INDEX: runs the pod's command with --dry-run; its output in $tmp/pod.INDEX.
pod() {
  node "$tools/pod_command.mjs" "$manifest" "$1" 10.0.0.7 >"$tmp/pod.$1.spec" || fail "pod $1's spec"
  local script
  script=$(head -1 "$tmp/pod.$1.spec" | sed -e "s#/etc/swarmrt#$tmp/etc/swarmrt#g" -e "s#/runs#$tmp/runs#g")
  mapfile -t vars < <(tail -n +2 "$tmp/pod.$1.spec")
  env -i PATH="$tmp/bin:/usr/bin:/bin" HOME="$tmp" "${vars[@]}" /bin/sh -c "$script --dry-run" \
    >"$tmp/pod.$1" 2>&1
}
pod 0 || fail "pod 0: $(cat "$tmp/pod.0")"
grep -q -- "-> coordinator on swarmrt-0.swarmrt:29500" "$tmp/pod.0" || fail "pod 0: $(cat "$tmp/pod.0")"
grep -q "would run: swarmrt coordinator --config $tmp/etc/swarmrt/config/run.toml --listen swarmrt-0.swarmrt:29500 --run-id [0-9a-f]\{16\} --out $tmp/runs/swarm " "$tmp/pod.0" ||
  fail "pod 0's command: $(cat "$tmp/pod.0")"
grep -q -- "--resume" "$tmp/pod.0" && fail "pod 0 resumes a run that has no checkpoint"
pod 1 || fail "pod 1: $(cat "$tmp/pod.1")"
grep -q -- "-> node with 2 workers joining swarmrt-0.swarmrt:29500" "$tmp/pod.1" ||
  fail "pod 1: $(cat "$tmp/pod.1")"
grep -q "would run: swarmrt node --join swarmrt-0.swarmrt:29500 --workers 2 --name kubernetes-rank1 --listen 10.0.0.7 " "$tmp/pod.1" ||
  fail "pod 1's command: $(cat "$tmp/pod.1")"
id0=$(sed -n 's/.*run id \([0-9a-f]*\)$/\1/p' "$tmp/pod.0")
id1=$(sed -n 's/.*run id \([0-9a-f]*\)$/\1/p' "$tmp/pod.1")
[ -n "$id0" ] && [ "$id0" = "$id1" ] || fail "pods 0 and 1 are not of one run: '$id0' '$id1'"
grep -q "k8s-test-secret" "$tmp/pod.0" "$tmp/pod.1" && fail "the secret shows in the output"
pod 3 && fail "pod 3 of 3 was not refused: $(cat "$tmp/pod.3")"
grep -q "JOB_COMPLETION_INDEX=3 is not below the world size 3" "$tmp/pod.3" || fail "pod 3: $(cat "$tmp/pod.3")"
mkdir -p "$tmp/runs/swarm/checkpoints" && : >"$tmp/runs/swarm/checkpoints/step_00000010.ckpt"
pod 0 || fail "pod 0 with a checkpoint: $(cat "$tmp/pod.0")"
grep -q "would run: swarmrt coordinator .* --resume" "$tmp/pod.0" || fail "pod 0 does not resume: $(cat "$tmp/pod.0")"
echo "ok"
