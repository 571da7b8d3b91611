#!/usr/bin/env bash
# coordinator --http against a swarm of real processes (a coordinator and two nodes on
# 127.0.0.1): no token, a wrong one and a stranger's body are refused; with the token the page,
# the JSON views, /metrics in the Prometheus format and the chart are served; a kill from the
# page's command route restarts the worker and is recorded with the caller; in headless
# Chromium the page lists every worker, draws the chart, and its kill button restarts a worker
# (tests/cli/status_browser.py); the run completes.
bin=$1 root=$2
source "$(dirname "$0")/lib.sh"
net=(--heartbeat-ms 100 --connection-timeout-ms 1000)

start_coordinator -c "$root/configs/tiny.toml" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
  -o "$tmp/run" "${net[@]}" --set "data.path=$root/data/brown.txt" --set train.steps=200 \
  --set train.eval_every=20 --set train.eval_batches=2 --set balancer.enabled=false
http_port() {
  http=$(sed -n 's|^status page on http://127.0.0.1:\([0-9]*\)/$|\1|p' "$tmp/coord.log")
  [ -n "$http" ]
}
wait_until 20 http_port || fail "no status port"
[ "$(stat -c %a "$tmp/run/http_token")" = 600 ] || fail "the token file is not 0600"
grep -q "$(cat "$tmp/run/http_token")" "$tmp/coord.log" && fail "the token was logged"
for name in a b; do join_node "$name" -w 2 "${net[@]}"; done
wait_log "$tmp/coord.log" "step 3/200" 60 || fail "the run did not reach step 3"
# Slowed, the run outlasts the requests below.
for w in stage0/worker0 stage0/worker1 stage1/worker0 stage1/worker1; do
  ctl slow "$w" 3 >/dev/null \
    || fail "slow $w"
done

python3 - "$http" "$tmp/run/http_token" <<'PY' || fail "status page checks"
import json, re, sys, time, urllib.request, urllib.error
base = "http://127.0.0.1:" + sys.argv[1]
token = open(sys.argv[2]).read().strip()

class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **k): return None
opener = urllib.request.build_opener(NoRedirect)

def call(path, token=None, body=None, cookie=None, method=None):
    req = urllib.request.Request(base + path, data=body, method=method)
    if token: req.add_header("Authorization", "Bearer " + token)
    if cookie: req.add_header("Cookie", cookie)
    if body is not None: req.add_header("Content-Type", "application/json")
    try:
        with opener.open(req, timeout=30) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)

# No token, a wrong one, a wrong cookie: 401 on every route, saying where the token is.
for path in ("/", "/metrics", "/api/nodes", "/chart.svg"):
    code, text, _ = call(path)
    assert code == 401 and "http_token" in text, (path, code, text)
    assert call(path, token="0" * len(token))[0] == 401, path
assert call("/api/nodes", cookie="swarmrt_token=" + "1" * len(token))[0] == 401
assert call("/?token=wrong")[0] == 401
assert call("/api/command", body=b'{"args":["kill","stage1/*"]}', method="POST")[0] == 401

# The page: /?token= trades the token for a cookie that opens it.
code, _, headers = call("/?token=" + token)
assert code == 303, code
cookie = headers["Set-Cookie"].split(";")[0]
assert "HttpOnly" in headers["Set-Cookie"], headers
code, page, _ = call("/", cookie=cookie)
assert code == 200 and "<title>swarmrt</title>" in page and "/api/command" in page, code

# The JSON views with the bearer token.
code, text, _ = call("/api/nodes", token=token)
nodes = json.loads(text)["nodes"]
assert code == 200 and len(nodes) == 3 and all(n["alive"] for n in nodes), text
code, text, _ = call("/api/actors", token=token)
workers = [a for a in json.loads(text)["actors"] if a["kind"] == "worker"]
assert len(workers) == 4 and all("mailbox" in w for w in workers), text
assert call("/api/nothing", token=token)[0] == 404

# /metrics: the Prometheus text format, with the step, the bytes and every worker's mailbox.
code, text, headers = call("/metrics", token=token)
assert code == 200 and headers["Content-Type"].startswith("text/plain"), (code, headers)
sample = re.compile(r'^[a-z_]+(\{([a-z_]+="[^"]*",?)+\})? (-?[0-9.]+(e[+-]?[0-9]+)?|NaN|[+-]Inf)$')
for line in text.splitlines():
    assert line.startswith("# HELP ") or line.startswith("# TYPE ") or sample.match(line), line
assert re.search(r"^swarmrt_step \d+", text, re.M), text[:500]
assert 'swarmrt_bytes_total{kind="activations"}' in text
assert text.count("swarmrt_actor_mailbox{name=\"stage") >= 4, text
assert 'swarmrt_node_up{node="node0"} 1' in text
assert text.count('swarmrt_worker_samples_per_second{name="stage') >= 4, text

# Scraped again once a step has closed since (polled every half second, at most 60 s: a loaded
# machine, a round or an evaluation can hold a step longer than a fixed wait): every counter is
# as large as before, the tokens and the workers' messages have grown.
def samples(text):
    counters = {l.split()[2] for l in text.splitlines() if l.startswith("# TYPE ") and l.split()[3] == "counter"}
    out = {}
    for line in text.splitlines():
        if not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = (key.split("{")[0] in counters, float(value))
    return out
first = samples(text)
deadline = time.monotonic() + 60
while True:
    time.sleep(0.5)
    second = samples(call("/metrics", token=token)[1])
    if second["swarmrt_tokens_total"][1] > first["swarmrt_tokens_total"][1] or time.monotonic() > deadline:
        break
assert any(c for c, _ in first.values()), "no counter in /metrics"
for key, (counter, value) in first.items():
    if counter and key in second:
        assert second[key][1] >= value, (key, value, second[key])
assert second["swarmrt_tokens_total"][1] > first["swarmrt_tokens_total"][1], (first, second)
grew = [k for k in first if k.startswith('swarmrt_actor_messages_total{name="stage')
        and k in second and second[k][1] > first[k][1]]
assert len(grew) >= 4, grew

# Six connections kept alive and polling, as a browser's page holds them, do not starve a
# seventh client: its request is answered (with 4 threads, each serving its connection for
# 100 requests, the chart's request from Chromium once waited over 60 s).
import http.client, threading
stop = threading.Event()
polls = [0] * 6
def poll(i):
    c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30)
    while not stop.is_set():
        c.request("GET", "/api/nodes", headers={"Authorization": "Bearer " + token})
        r = c.getresponse()
        r.read()
        assert r.status == 200, r.status
        polls[i] += 1
        time.sleep(0.2)
pollers = [threading.Thread(target=poll, args=(i,), daemon=True) for i in range(6)]
for t in pollers: t.start()
deadline = time.monotonic() + 30
while min(polls) < 2 and time.monotonic() < deadline: time.sleep(0.1)
assert min(polls) >= 2, f"polls per connection: {polls}"
req = urllib.request.Request(base + "/api/stats", headers={"Authorization": "Bearer " + token})
with urllib.request.urlopen(req, timeout=20) as r:
    assert r.status == 200, r.status
stop.set()
for t in pollers: t.join(30)

# Commands: a body too large, a command the page may not run, a malformed body.
assert call("/api/command", token=token, body=b"x" * (64 * 1024), method="POST")[0] == 413
code, text, _ = call("/api/command", token=token, body=b'{"args":["trace","tracker"]}', method="POST")
assert code == 403, (code, text)
assert call("/api/command", token=token, body=b'{"args":', method="POST")[0] == 400
code, text, _ = call("/api/command", token=token, body=b'{"args":["kill","stage1/worker0"]}', method="POST")
assert code == 200 and json.loads(text)["ok"], text
# Restarted by its supervisor, and the kill recorded with the caller's address.
for _ in range(100):
    actors = json.loads(call("/api/actors", token=token)[1])["actors"]
    if any(a["name"].startswith("stage1/worker0") and a["restarts"] >= 1 for a in actors): break
    time.sleep(0.2)
else:
    raise AssertionError("stage1/worker0 was not restarted")
events = json.loads(call("/api/events", token=token)[1])["events"]
assert any(e.get("event") == "console" and e.get("console", "").startswith("http 127.0.0.1:")
           and "kill" in e.get("command", "") for e in events), events

# The chart, drawn by gnuplot from the run's metrics.
for _ in range(50):
    code, svg, _ = call("/chart.svg", token=token)
    if code == 200: break
    time.sleep(0.5)
assert code == 200 and "<svg" in svg and "tokens trained" in svg, (code, svg[:300])
PY

# The same page in a real browser: headless Chromium (Debian's chromium, installed by the
# scripts) shows every worker and the chart, and its kill button restarts a worker.
chromium=$(command -v chromium) || fail "chromium is not installed (scripts/common.sh installs it)"
python3 "$(dirname "$0")/status_browser.py" "$chromium" "http://127.0.0.1:$http" \
  "$tmp/run/http_token" "$tmp/run" 4 || fail "the page in headless Chromium"

# Healed, the run completes.
ctl heal all >/dev/null || fail "heal"
wait_exit "$coord" 180
wait "$coord" || fail "coordinator exited with $?"
grep -q "final validation loss" "$tmp/coord.log" || fail "the run did not complete"
echo "ok: status page, JSON views, /metrics and commands behind the token"
