// Prints what one pod of deploy/k8s's Indexed Job would run, so a test can run it here:
// line 1 the container's command as one shell string, then NAME=VALUE for each variable the
// pod gets (Kubernetes' own JOB_COMPLETION_INDEX, the manifest's values, and the downward
// API's fields: the pod's IP as POD_IP_VALUE below, requests.cpu from the container).
// Usage: node pod_command.mjs FILE.yaml INDEX POD_IP_VALUE
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const modules = process.env.NODE_TOOLS ?? path.join(here, "node_modules");
const yaml = (await import(path.join(modules, "js-yaml/dist/js-yaml.mjs"))).default;
const [file, index, podIp] = process.argv.slice(2);
const job = yaml.loadAll(fs.readFileSync(file, "utf8")).find((d) => d && d.kind === "Job");
if (!job) throw new Error(`${file}: no Job`);
if (job.spec.completionMode !== "Indexed") throw new Error(`${file}: the Job is not Indexed`);
const c = job.spec.template.spec.containers[0];
const argv = [...(c.command ?? []), ...(c.args ?? [])];
if (argv[0] !== "/bin/sh" || argv[1] !== "-c" || argv.length !== 3)
  throw new Error(`${file}: expected command /bin/sh -c with one script, got ${JSON.stringify(argv)}`);
console.log(argv[2].replace(/\n/g, " "));
console.log(`JOB_COMPLETION_INDEX=${index}`);
const cpu = (q) => Math.ceil(q.endsWith("m") ? Number(q.slice(0, -1)) / 1000 : Number(q));
for (const e of c.env ?? []) {
  let v = e.value;
  if (e.valueFrom?.fieldRef?.fieldPath === "status.podIP") v = podIp;
  else if (e.valueFrom?.resourceFieldRef) {
    const r = e.valueFrom.resourceFieldRef;
    const [kind, res] = r.resource.split(".");
    if (res !== "cpu" || (r.divisor ?? "1") !== "1") throw new Error(`${e.name}: ${r.resource}`);
    v = String(cpu(String(c.resources[kind === "requests" ? "requests" : "limits"].cpu)));
  }
  if (v === undefined) throw new Error(`${e.name}: a value this test cannot resolve`);
  console.log(`${e.name}=${v}`);
}
