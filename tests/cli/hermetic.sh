#!/usr/bin/env bash
# Every test that starts swarmrt processes runs without the variables of the shell that runs
# the suite: a cluster user exports SWARMRT_SECRET (as the README says), and with it the
# coordinators took the exported secret and wrote none to the run directory, while the test
# scripts handed their nodes the run directory's file (net.console, net.status_page,
# net.balancer, net.chaos_soak and net.node_kill_links failed). Reads the suite's own
# listing (ctest --show-only=json-v1) and checks each script test unsets each variable.
set -u
build=$1
vars=(SWARMRT_SECRET RANK WORLD_SIZE MASTER_ADDR MASTER_PORT SLURM_PROCID JOB_COMPLETION_INDEX PET_NODE_RANK)
listing=$(cd "$build" && ctest --show-only=json-v1 2>/dev/null) || { echo "FAIL: ctest --show-only"; exit 1; }
echo "$listing" | node -e '
const vars = process.argv.slice(1);
const j = JSON.parse(require("fs").readFileSync(0, "utf8"));
let bad = 0, checked = 0;
for (const t of j.tests) {
  // The GoogleTest binaries run in one process and read no variable; the scripts start swarmrt.
  if (!t.command || !/\.(sh|py)$/.test(t.command[1] ?? "")) continue;
  checked++;
  const mods = (t.properties ?? []).filter((p) => p.name === "ENVIRONMENT_MODIFICATION")
    .flatMap((p) => p.value);
  for (const v of vars)
    if (!mods.includes(`${v}=unset:`)) { console.log(`FAIL: ${t.name} keeps ${v} from the shell`); bad++; }
}
if (checked < 20) { console.log(`FAIL: only ${checked} script tests listed`); process.exit(1); }
if (bad) process.exit(1);
console.log(`${checked} script tests unset ${vars.join(" ")}`);
' "${vars[@]}"
