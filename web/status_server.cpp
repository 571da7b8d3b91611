#include "web/status_server.hpp"

#include <httplib.h>
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "messages/types.hpp"
#include "report/prometheus.hpp"

namespace swarmrt::web {
using nlohmann::json;

namespace {

constexpr size_t kMaxBody = 16 * 1024;
constexpr size_t kThreads = 8;
const std::set<std::string> kReadCommands = {"nodes", "actors", "stats", "events", "config"};
// What the page's buttons may do: the console's commands that change the swarm, not trace.
const std::set<std::string> kWriteCommands = {
    "kill",   "slow",  "drop",      "heal",       "kill-node",
    "freeze", "delay", "partition", "checkpoint", "kill-coordinator"};

std::string cookie_token(const httplib::Request& req) {
  const auto cookies = req.get_header_value("Cookie");
  const std::string key = "swarmrt_token=";
  for (size_t at = 0; (at = cookies.find(key, at)) != std::string::npos; at += key.size()) {
    if (at > 0 && cookies[at - 1] != ' ' && cookies[at - 1] != ';') continue;
    const auto start = at + key.size();
    return cookies.substr(start, cookies.find(';', start) - start);
  }
  return "";
}

bool same(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

struct StatusServer::Impl {
  StatusServerSetup setup;
  httplib::Server server;
  std::thread thread;
  std::mutex chart_mu;
  std::string chart;
  std::chrono::steady_clock::time_point chart_at{};

  bool authorized(const httplib::Request& req) const {
    const auto auth = req.get_header_value("Authorization");
    const std::string bearer = "Bearer ";
    if (auth.compare(0, bearer.size(), bearer) == 0 &&
        same(auth.substr(bearer.size()), setup.token))
      return true;
    return same(cookie_token(req), setup.token);
  }

  // One console command through the coordinator's inspector; its JSON, or an error's.
  std::string ask(const std::vector<std::string>& args, const std::string& who, bool& ok) {
    caf::scoped_actor self{*setup.system};
    std::string out;
    ok = false;
    const auto timeout = std::chrono::milliseconds(int64_t(setup.query_timeout_s * 1000) + 5000);
    self->request(setup.inspector, timeout, atoms::console_atom::value,
                  messages::ConsoleRequest{args, who, true})
        .receive(
            [&](const std::string& answer) {
              out = answer;
              ok = true;
            },
            [&](const caf::error& e) {
              out = json{{"ok", false},
                         {"error",
                          "the coordinator's inspector did not answer: " + setup.system->render(e)}}
                        .dump();
            });
    return out;
  }

  static std::string who(const httplib::Request& req) {
    return "http " + req.remote_addr + ":" + std::to_string(req.remote_port);
  }

  void routes() {
    server.set_payload_max_length(kMaxBody);
    server.set_read_timeout(std::chrono::seconds(5));
    server.set_write_timeout(std::chrono::seconds(5));
    // A pool thread serves one connection for as long as it is kept alive. A browser holds up
    // to 6 and the page polls every second, so with 4 threads and connections kept for 100
    // requests a request on a new connection waited for one to end: over 60 s under load. 8
    // threads serve a browser and a scraper at once, and a connection gives its thread back
    // after 5 requests or 1 s idle, so more clients than threads take turns.
    server.set_keep_alive_timeout(1);
    server.set_keep_alive_max_count(5);
    server.new_task_queue = [] { return new httplib::ThreadPool(kThreads); };
    // Every route needs the token; /?token=... trades it for a cookie (the page's way in).
    server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (req.path == "/" && req.has_param("token") &&
          same(req.get_param_value("token"), setup.token)) {
        res.set_header("Set-Cookie",
                       "swarmrt_token=" + setup.token + "; Path=/; HttpOnly; SameSite=Strict");
        res.set_redirect("/", 303);
        return httplib::Server::HandlerResponse::Handled;
      }
      if (authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
      spdlog::warn("rejected: status page request {} {} from {}:{} without the token", req.method,
                   req.path, req.remote_addr, req.remote_port);
      res.status = 401;
      res.set_header("WWW-Authenticate", "Bearer");
      res.set_content(
          "401: this swarm's status page needs its token (Authorization: Bearer, or "
          "open /?token=TOKEN once); the token is in " +
              setup.token_file + "\n",
          "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    });
    server.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_header("Cache-Control", "no-store");
      res.set_content(status_page_html(), "text/html; charset=utf-8");
    });
    server.Get(R"(/api/([a-z]+))", [this](const httplib::Request& req, httplib::Response& res) {
      const std::string cmd = req.matches[1];
      if (!kReadCommands.count(cmd)) {
        res.status = 404;
        res.set_content(json{{"ok", false}, {"error", "no such view: " + cmd}}.dump(),
                        "application/json");
        return;
      }
      std::vector<std::string> args{cmd};
      if (cmd == "events" && req.has_param("since")) args.push_back(req.get_param_value("since"));
      bool ok = false;
      const auto out = ask(args, who(req), ok);
      res.status = ok ? 200 : 502;
      res.set_content(out, "application/json");
    });
    server.Post("/api/command", [this](const httplib::Request& req, httplib::Response& res) {
      std::vector<std::string> args;
      try {
        const auto body = json::parse(req.body);
        args = body.at("args").get<std::vector<std::string>>();
      } catch (const std::exception&) {
        res.status = 400;
        res.set_content(
            json{{"ok", false}, {"error", "the body must be {\"args\": [\"COMMAND\", ...]}"}}
                .dump(),
            "application/json");
        return;
      }
      if (args.empty() || !kWriteCommands.count(args[0])) {
        spdlog::warn("rejected: status page command '{}' from {}: not entitled to send it",
                     args.empty() ? std::string() : args[0], who(req));
        res.status = 403;
        res.set_content(json{{"ok", false},
                             {"error",
                              "the page may run kill, slow, drop, heal, kill-node, "
                              "freeze, delay, partition, checkpoint and kill-coordinator only"}}
                            .dump(),
                        "application/json");
        return;
      }
      bool ok = false;
      const auto out = ask(args, who(req), ok);
      res.status = ok ? 200 : 502;
      res.set_content(out, "application/json");
    });
    server.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
      bool ok = false;
      auto parsed = [&](const std::string& cmd) {
        const auto text = ask({cmd}, who(req), ok);
        auto j = json::parse(text, nullptr, false);
        return j.is_discarded() ? json::object() : j;
      };
      const auto stats = parsed("stats"), actors = parsed("actors"), nodes = parsed("nodes"),
                 events = parsed("events");
      res.set_content(report::prometheus_text(stats, actors, nodes, events),
                      "text/plain; version=0.0.4");
    });
    server.Get("/chart.svg", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(chart_mu);
      const auto now = std::chrono::steady_clock::now();
      if (chart.empty() || now - chart_at > std::chrono::seconds(5)) {
        std::string error;
        auto svg = setup.chart_svg ? setup.chart_svg(error) : std::string();
        if (svg.empty() && chart.empty()) {
          res.status = 503;
          res.set_content("no chart yet: " + error + "\n", "text/plain");
          return;
        }
        if (!svg.empty()) chart = std::move(svg);
        chart_at = now;
      }
      res.set_header("Cache-Control", "no-store");
      res.set_content(chart, "image/svg+xml");
    });
  }
};

StatusServer::StatusServer(StatusServerSetup setup) : impl_(std::make_unique<Impl>()) {
  impl_->setup = std::move(setup);
  impl_->routes();
}

StatusServer::~StatusServer() {
  stop();
}

int StatusServer::start(const std::string& host, int port) {
  const int bound = port == 0 ? impl_->server.bind_to_any_port(host)
                              : (impl_->server.bind_to_port(host, port) ? port : -1);
  if (bound <= 0) throw std::runtime_error("cannot listen on " + host + ":" + std::to_string(port));
  impl_->thread = std::thread([this] { impl_->server.listen_after_bind(); });
  return bound;
}

void StatusServer::stop() {
  if (!impl_) return;
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace swarmrt::web
