// Checks Kubernetes manifests against the API they name, with the types of the
// kubernetes-models package (generated from Kubernetes' OpenAPI definitions):
//   1. each document parses as YAML and names an apiVersion/kind this checker knows;
//   2. its values pass the API's schema (types, enums, formats: the package's validate());
//   3. it names only fields of that API: every document becomes a typed TypeScript literal,
//      and tsc's excess-property check refuses any field the API does not have.
// Usage: node check_manifests.mjs FILE.yaml...   (exit 1 with one line per problem)
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import yaml from "js-yaml";

const here = path.dirname(fileURLToPath(import.meta.url));
const modules = process.env.NODE_TOOLS ?? path.join(here, "node_modules");
const known = {
  "v1/Service": "kubernetes-models/v1/Service",
  "v1/Secret": "kubernetes-models/v1/Secret",
  "v1/ConfigMap": "kubernetes-models/v1/ConfigMap",
  "v1/PersistentVolumeClaim": "kubernetes-models/v1/PersistentVolumeClaim",
  "batch/v1/Job": "kubernetes-models/batch/v1/Job",
};

const problems = [];
const typed = [];
for (const file of process.argv.slice(2)) {
  let docs;
  try {
    docs = yaml.loadAll(fs.readFileSync(file, "utf8"));
  } catch (e) {
    problems.push(`${file}: not YAML: ${e.message}`);
    continue;
  }
  docs.forEach((doc, i) => {
    const where = `${file} document ${i + 1}`;
    if (doc === null || typeof doc !== "object") return problems.push(`${where}: not an object`);
    const key = `${doc.apiVersion}/${doc.kind}`;
    if (!known[key]) return problems.push(`${where}: unknown apiVersion/kind ${key}`);
    typed.push({ where, key, doc });
  });
}

for (const t of typed) {
  const mod = await import(path.join(modules, known[t.key] + ".js"));
  const Model = mod[t.doc.kind];
  try {
    new Model(t.doc).validate();
  } catch (e) {
    problems.push(`${t.where} (${t.key}): ${e.message}`);
  }
}

if (typed.length > 0) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "k8s-check-"));
  const lines = [];
  typed.forEach((t, i) => {
    const type = "I" + t.doc.kind;
    lines.push(`import type { ${type} as T${i} } from "${path.join(modules, known[t.key])}";`);
    lines.push(`// ${t.where}`);
    lines.push(`export const d${i}: T${i} = ${JSON.stringify(t.doc, null, 1)};`);
  });
  const source = path.join(dir, "manifests.ts");
  fs.writeFileSync(source, lines.join("\n") + "\n");
  try {
    execFileSync(
      process.execPath,
      [path.join(modules, "typescript/bin/tsc"), "--noEmit", "--strict", "--skipLibCheck",
       "--target", "es2020", "--module", "esnext", "--moduleResolution", "bundler", source],
      { encoding: "utf8" });
  } catch (e) {
    // Name the document each error falls in.
    const text = fs.readFileSync(source, "utf8").split("\n");
    for (const line of (e.stdout || e.message).split("\n").filter((l) => l.trim())) {
      const m = line.match(/manifests\.ts\((\d+),/);
      let where = "";
      if (m) {
        for (let n = Number(m[1]) - 1; n >= 0; n--)
          if (text[n].startsWith("// ")) { where = text[n].slice(3) + ": "; break; }
      }
      problems.push(where + line.replace(/^.*manifests\.ts\(\d+,\d+\): /, ""));
    }
  }
  fs.rmSync(dir, { recursive: true, force: true });
}

for (const p of problems) console.log(p);
if (problems.length) process.exit(1);
console.log(`${typed.length} documents match their APIs`);
