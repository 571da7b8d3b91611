"""Drives headless Chromium through the DevTools protocol (over --remote-debugging-pipe, so no
port is opened and only the standard library is needed) against a live status page:
  1. without the token, the page and /metrics answer 401;
  2. with it, the swarm diagram lists every worker with its samples/s, and the chart's loss
     curve has points;
  3. clicking a worker's kill button (and accepting the page's confirm dialog) restarts it:
     the page shows the worker with one more restart, and metrics.jsonl records the console
     kill with the page's address and the worker's restart.
Usage: status_browser.py CHROMIUM BASE_URL TOKEN_FILE RUN_DIR WORKERS
Exits 0 when every check holds, 1 with the failed check named."""
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time

chromium, base, token_file, run_dir, workers = sys.argv[1:6]
token = open(token_file).read().strip()
workers = int(workers)
DEADLINE_S = 60  # every wait below is bounded by this


def fail(msg):
    print("FAIL:", msg, flush=True)
    sys.exit(1)


class Browser:
    def __init__(self):
        self.profile = tempfile.mkdtemp(prefix="swarmrt-chromium-")
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        def child_fds():
            # Chromium reads commands on fd 3 and writes answers and events on fd 4. Copied
            # above the low numbers first, so that neither dup2 overwrites the other's source.
            r, w = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-dev-shm-usage", "--remote-debugging-pipe",
             f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3, 4), preexec_fn=child_fds)
        os.close(to_child_r)
        os.close(from_child_w)
        self.buf = b""
        self.next_id = 0
        self.session = None
        self.dialogs = 0

    def send(self, method, params=None, session=True):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.to_child, json.dumps(msg).encode() + b"\0")
        return self.next_id

    def read(self, timeout):
        end = time.time() + timeout
        while b"\0" not in self.buf:
            left = end - time.time()
            if left <= 0:
                fail("chromium did not answer in time")
            r, _, _ = select.select([self.from_child], [], [], left)
            if r:
                chunk = os.read(self.from_child, 1 << 20)
                if not chunk:
                    fail("chromium closed its pipe (exit %s)" % self.proc.poll())
                self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=True, timeout=DEADLINE_S):
        want = self.send(method, params, session)
        while True:
            m = self.read(timeout)
            if m.get("method") == "Page.javascriptDialogOpening":
                # The page asks "kill stage1/worker0?" before it sends the command: accept it,
                # as a user would.
                self.dialogs += 1
                self.send("Page.handleJavaScriptDialog", {"accept": True})
            if m.get("id") == want:
                if "error" in m:
                    fail(f"{method}: {m['error']}")
                return m.get("result", {})

    def open_page(self):
        targets = self.call("Target.getTargets", session=False)["targetInfos"]
        page = next((t for t in targets if t["type"] == "page"), None)
        if not page:
            page = {"targetId": self.call("Target.createTarget", {"url": "about:blank"},
                                          session=False)["targetId"]}
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": page["targetId"], "flatten": True},
                                 session=False)["sessionId"]
        self.call("Page.enable")
        self.call("Runtime.enable")

    def navigate(self, url):
        self.call("Page.navigate", {"url": url})
        self.wait("document.readyState === 'complete'", "the page to load")

    def eval(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            fail(f"{expr!r} threw: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait(self, expr, what):
        end = time.time() + DEADLINE_S
        while time.time() < end:
            if self.eval(expr):
                return
            time.sleep(0.25)
        fail(f"waited {DEADLINE_S} s for {what}")

    def close(self):
        try:
            self.send("Browser.close", session=False)
            self.proc.wait(timeout=10)
        except Exception:
            pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        subprocess.run(["rm", "-rf", self.profile])


b = Browser()
try:
    b.open_page()
    # 1. No token: 401 for the page and for /metrics (the browser holds no cookie yet).
    for path in ("/", "/metrics"):
        b.navigate(base + path)
        text = b.eval("document.body ? document.body.innerText : ''")
        if not text.startswith("401"):
            fail(f"{path} without the token answered {text[:120]!r}, not 401")
    print("ok: / and /metrics answer 401 without the token", flush=True)

    # 2. With the token: every worker in the diagram, and a chart with points.
    b.navigate(f"{base}/?token={token}")
    b.wait(f"document.querySelectorAll('#stages .worker').length === {workers}",
           f"{workers} workers in the diagram")
    # Each worker's measured throughput, once it has taken micro-batches.
    b.wait("[...document.querySelectorAll('#stages .worker')].every(d => / [0-9.]+ samples\\/s /.test(d.firstChild.textContent))",
           "every worker's samples/s in the diagram")
    names = b.eval("[...document.querySelectorAll('#stages .worker')].map(d => d.firstChild.textContent)")
    print("ok: the diagram lists", len(names), "workers:", "; ".join(names),
          flush=True)
    b.wait("document.getElementById('chart').complete && document.getElementById('chart').naturalWidth > 0",
           "the chart to be drawn")
    # gnuplot's SVG draws each curve as a path; the loss curve has one point per step.
    points = b.eval("""fetch('/chart.svg', {cache: 'no-store'}).then(r => r.text()).then(t => {
        const doc = new DOMParser().parseFromString(t, 'image/svg+xml');
        return Math.max(0, ...[...doc.querySelectorAll('path')].map(p =>
            ((p.getAttribute('d') || '').match(/L/g) || []).length)); })""")
    if not points or points < 5:
        fail(f"the chart's longest curve has {points} points")
    print(f"ok: the chart shows a curve of {points} points", flush=True)

    # The nodes table against the swarm: each node's workers cell counts the workers the
    # diagram places on it (name@node), RSS is whole megabytes and CPU seconds one decimal.
    where = {}
    for n in names:
        node = n.split(" · ")[0].split("@")[1]
        where[node] = where.get(node, 0) + 1
    b.wait("document.querySelectorAll('#nodes tr').length > 1", "the nodes table")
    rows = b.eval("[...document.querySelectorAll('#nodes tr')].slice(1).map(tr => [...tr.cells].map(c => c.textContent))")
    for node, alive, count, threads, rss, cpu, _ in rows:
        if count != str(where.get(node, 0)):
            fail(f"the nodes table gives {node} {count!r} workers; the diagram places {where.get(node, 0)} there")
        if not re.fullmatch(r"[1-9][0-9]*", rss) or not re.fullmatch(r"[0-9]+\.[0-9]", cpu):
            fail(f"the nodes table shows {node}'s RSS as {rss!r} MB and CPU as {cpu!r} s")
    if sorted(r[0] for r in rows if r[2] != "0") != sorted(where):
        fail(f"nodes with workers on the page {rows} against the diagram's {where}")
    print("ok: the nodes table:", "; ".join(f"{r[0]} {r[2]} workers, {r[4]} MB" for r in rows), flush=True)
    # Bytes in the chart are the swarm's: the nodes' workers send the input gradients of
    # stage 1 to stage 0, and the coordinator's own actors send none.
    b.wait("""fetch('/chart.svg', {cache: 'no-store'}).then(r => r.text()).then(t => /[^_]gradients/.test(t))""",
           "the chart's bytes panel to show the nodes' gradients")
    print("ok: the chart's bytes panel shows the gradients the nodes sent", flush=True)

    # 3. Click the kill button of stage 1's first worker and accept the confirm dialog.
    def records():
        recs = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl")) if l.strip()]
        kills = [r for r in recs if r.get("event") == "console"
                 and r.get("console", "").startswith("http 127.0.0.1:")
                 and r.get("command", "").startswith("kill " + base_name)]
        restarts = [r for r in recs if r.get("event") == "recovered" and r.get("kind") == "restart"]
        return kills, restarts

    victim = sorted(n.split(" · ")[0] for n in names if n.startswith("stage1/"))[0]
    base_name = victim.split("@")[0]
    row = f"[...document.querySelectorAll('#stages .worker')].find(d => d.firstChild.textContent.startsWith('{victim} '))"
    restarts = b.eval(f"Number(({row}).firstChild.textContent.match(/restarts (\\d+)/)[1])")
    kills_before, restarts_before = map(len, records())
    b.eval(f"({row}).querySelector('button').click(), true")
    b.wait(f"(() => {{ const r = {row}; return r && Number(r.firstChild.textContent.match(/restarts (\\d+)/)[1]) > {restarts}; }})()",
           f"{victim} to show a restart on the page")
    if b.dialogs < 1:
        fail("the kill button did not ask for confirmation")
    print(f"ok: clicking kill on {victim} restarted it (restarts {restarts} -> more, seen on the page)",
          flush=True)

    # ... and in metrics.jsonl: the console kill from the page's address, and the restart.
    end = time.time() + DEADLINE_S
    while time.time() < end:
        kills, restarts_now = records()
        if len(kills) > kills_before and len(restarts_now) > restarts_before:
            print("ok: metrics.jsonl records", json.dumps(kills[-1]), "and a restart", flush=True)
            break
        time.sleep(0.5)
    else:
        kills, restarts_now = records()
        recs = [l.strip() for l in open(os.path.join(run_dir, "metrics.jsonl"))
                if '"console"' in l or '"recovered"' in l or '"fault"' in l]
        print("\n".join(recs[-12:]))
        fail(f"metrics.jsonl: {len(kills)} console kills of {base_name} from the page (before the "
             f"click {kills_before}), {len(restarts_now)} restarts (before {restarts_before})")
finally:
    b.close()
print("PASS", flush=True)
