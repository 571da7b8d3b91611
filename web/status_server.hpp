// `coordinator --http HOST:PORT`: the swarm's status page, its JSON and /metrics, answered
// from the coordinator's inspector (the same data and commands as `swarmrt ctl`).
//
// No open port: every request needs the token (credential::http_token of the cluster secret,
// written to RUN_DIR/http_token), as `Authorization: Bearer TOKEN` or the cookie the page
// sets when opened once as /?token=TOKEN; without it, 401. A request body over 16 KiB is
// refused (413), reads and writes time out after 5 s, four threads serve. Commands from the
// page are the console's mutating ones only (kill, slow, drop, heal, kill-node, freeze, delay,
// partition, checkpoint), recorded as console events with the caller's address.
//
//   GET  /            the page: the swarm by stage and node, live figures, events, buttons
//   GET  /api/CMD     nodes | actors | stats | events | config: the console's JSON
//   POST /api/command {"args": ["kill", "stage1/worker0"]}: the console's JSON answer
//   GET  /metrics     Prometheus text (report/prometheus.hpp)
//   GET  /chart.svg   the run's chart (loss, bytes by kind, tokens/s), redrawn at most every 5 s
#pragma once

#include <caf/all.hpp>
#include <functional>
#include <memory>
#include <string>

namespace swarmrt::web {

struct StatusServerSetup {
  caf::actor_system* system = nullptr;
  caf::actor inspector;    // the coordinator's
  std::string token;       // credential::http_token(secret)
  std::string token_file;  // where the token is, for the 401 message
  // Draws the run's chart as SVG text; empty with `error` set when it cannot.
  std::function<std::string(std::string& error)> chart_svg;
  double query_timeout_s = 10;
};

class StatusServer {
 public:
  explicit StatusServer(StatusServerSetup setup);
  ~StatusServer();  // stops the server and joins its thread
  StatusServer(const StatusServer&) = delete;
  StatusServer& operator=(const StatusServer&) = delete;

  // Binds HOST:PORT (0: a free port) and serves on a thread of its own; the bound port.
  // Throws std::runtime_error when it cannot bind.
  int start(const std::string& host, int port);
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The page (page.cpp).
const std::string& status_page_html();

}  // namespace swarmrt::web
