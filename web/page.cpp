// The status page: one HTML document with its script and style, served from memory. It polls
// the JSON routes every second and the chart every five (no library, nothing fetched from
// elsewhere). Every value from the swarm is put in the page as text, never as markup.
#include "web/status_server.hpp"

namespace swarmrt::web {

const std::string& status_page_html() {
  static const std::string page = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>swarmrt</title>
<style>
body{font:14px system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:18px;margin:0 0 8px} h2{font-size:15px;margin:16px 0 6px}
#figures span{margin-right:18px} #status{color:#888}
.stages{display:flex;gap:12px;flex-wrap:wrap}
.stage{border:1px solid #ccc;border-radius:6px;padding:8px;min-width:220px}
.worker{border-radius:4px;padding:4px 6px;margin:4px 0;background:#e8f4e8}
.worker.busy{background:#fff2cc} .worker.dead{background:#f4d6d6}
.worker button{font-size:11px;margin-left:3px}
table{border-collapse:collapse} td,th{padding:2px 8px;border-bottom:1px solid #eee;text-align:left}
#events{max-height:260px;overflow:auto;font:12px monospace}
img{max-width:100%;border:1px solid #eee}
</style></head><body>
<h1>swarmrt <span id="status">connecting…</span></h1>
<div id="figures"></div>
<h2>Stages and workers</h2><div class="stages" id="stages"></div>
<h2>Nodes</h2><table id="nodes"></table>
<h2>Coordinators</h2><table id="coordinators"></table>
<h2>Loss, bytes by kind, tokens/s</h2><img id="chart" alt="the run's chart">
<h2>Events</h2><div id="events"></div>
<script>
"use strict";
const el = (tag, text, cls) => { const e = document.createElement(tag);
  if (text !== undefined) e.textContent = String(text); if (cls) e.className = cls; return e; };
async function get(path) { const r = await fetch(path, {cache: "no-store"});
  if (!r.ok) throw new Error(path + ": " + r.status); return r.json(); }
async function command(args) {
  if (!confirm(args.join(" ") + "?")) return;
  const r = await fetch("/api/command", {method: "POST", headers: {"Content-Type": "application/json"},
                                         body: JSON.stringify({args})});
  const j = await r.json(); if (!j.ok) alert(j.error || JSON.stringify(j)); refresh();
}
function button(label, args) { const b = el("button", label); b.onclick = () => command(args); return b; }
function figures(stats) {
  const f = document.getElementById("figures"); f.replaceChildren();
  const s = stats.last_step || {};
  const put = (k, v) => f.appendChild(el("span", k + " " + v));
  if (s.step === undefined) { put("step", "—"); return; }
  put("step", s.step); put("loss (nats/token)", Number(s.loss).toFixed(4));
  if (typeof s.bpb === "number") put("bits/byte", s.bpb.toFixed(4));
  put("tokens/s", Math.round(s.tokens_per_s)); put("tokens", s.tokens);
  if (s.sync_bytes !== undefined) put("sync bytes (step)", Math.round(s.sync_bytes));
  for (const st of s.stages || []) put("stage " + st.stage + " samples/s", Number(st.samples_per_s).toFixed(1));
  for (const h of s.hop_encodings || [])
    put((h.encoding.startsWith("topk") ? "rounds" : "hops") + " of worker " + h.worker + " to " + h.to, h.encoding + " (" + Number(h.mbit_s).toFixed(1) + " Mbit/s)");
  const c = s.spot_checks;
  if (c) {
    put("spot checks", c.checks + " (" + c.mismatches + " mismatched, " + c.bans + " banned)");
    for (const b of c.banned || []) put("banned worker " + b.worker, b.why);
  }
}
function stages(actors) {
  const box = document.getElementById("stages"); box.replaceChildren();
  const by = {};
  for (const a of actors.actors || []) if (a.kind === "worker") (by[a.stage] = by[a.stage] || []).push(a);
  for (const k of Object.keys(by).sort((a, b) => a - b)) {
    const s = el("div", undefined, "stage"); s.appendChild(el("b", "stage " + k));
    for (const w of by[k].sort((a, b) => a.name.localeCompare(b.name))) {
      const rate = w.samples_per_s === undefined ? "" : " · " + Number(w.samples_per_s).toFixed(1) + " samples/s";
      const d = el("div", w.name + " · " + w.node + rate + " · mailbox " + (w.mailbox ?? "?") +
                   " · restarts " + w.restarts,
                   "worker" + (w.state !== "alive" ? " dead" : (w.mailbox > 4 ? " busy" : "")));
      const base = w.name.split("@")[0];
      d.appendChild(button("kill", ["kill", base])); d.appendChild(button("slow ×4", ["slow", base, "4"]));
      d.appendChild(button("heal", ["heal", base]));
      s.appendChild(d);
    }
    box.appendChild(s);
  }
}
function nodes(n) {
  const t = document.getElementById("nodes"); t.replaceChildren();
  const head = el("tr"); for (const h of ["node", "alive", "workers", "threads", "RSS MB", "CPU s", ""]) head.appendChild(el("th", h));
  t.appendChild(head);
  for (const r of n.nodes || []) {
    const tr = el("tr");
    // /api/nodes gives each node's worker count, its resident memory in MB and its CPU seconds.
    const fixed = (v, digits) => typeof v === "number" ? v.toFixed(digits) : "";
    for (const v of [r.node, r.alive ? "yes" : "no", r.workers ?? "", r.threads ?? "", fixed(r.rss_mb, 0), fixed(r.cpu_s, 1)]) tr.appendChild(el("td", v));
    const td = el("td"); if (r.alive && r.node !== "coordinator") td.appendChild(button("kill node", ["kill-node", r.node]));
    tr.appendChild(td); t.appendChild(tr);
  }
  // The coordinator replicas: the leader can be killed from here once a standby stands behind it.
  const c = document.getElementById("coordinators"); c.replaceChildren();
  const ch = el("tr"); for (const h of ["role", "epoch", "pid", "address", "host", ""]) ch.appendChild(el("th", h));
  c.appendChild(ch);
  const standbys = (n.coordinators || []).filter(r => r.role === "standby").length;
  for (const r of n.coordinators || []) {
    const tr = el("tr");
    for (const v of [r.role, r.epoch ?? "-", r.pid ?? "", r.address ?? "", r.host ?? ""]) tr.appendChild(el("td", String(v)));
    const td = el("td"); if (r.role === "leader" && standbys > 0) td.appendChild(button("kill leader", ["kill-coordinator"]));
    tr.appendChild(td); c.appendChild(tr);
  }
}
function events(e) {
  const box = document.getElementById("events"); box.replaceChildren();
  for (const x of (e.events || []).slice(-40).reverse()) {
    const copy = Object.assign({}, x); delete copy.seq;
    const when = x.wall ? new Date(x.wall * 1000).toLocaleTimeString() + " " : "";
    delete copy.wall; box.appendChild(el("div", when + JSON.stringify(copy)));
  }
}
async function refresh() {
  try {
    const [s, a, n, e] = await Promise.all([get("/api/stats"), get("/api/actors"), get("/api/nodes"), get("/api/events")]);
    figures(s); stages(a); nodes(n); events(e);
    document.getElementById("status").textContent = "live, " + new Date().toLocaleTimeString();
  } catch (err) { document.getElementById("status").textContent = "not reachable: " + err.message; }
}
function chart() { document.getElementById("chart").src = "/chart.svg?t=" + Date.now(); }
refresh(); chart(); setInterval(refresh, 1000); setInterval(chart, 5000);
</script></body></html>
)HTML";
  return page;
}

}  // namespace swarmrt::web
