#include "leader/etcd.hpp"

#include <httplib.h>
#include <openssl/evp.h>

#include <mutex>
#include <nlohmann/json.hpp>

namespace swarmrt::leader {
namespace {
using json = nlohmann::json;

std::string base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string unbase64(const std::string& in) {
  if (in.empty()) return {};
  std::string out(3 * in.size() / 4 + 1, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  if (n < 0) throw EtcdError("etcd sent a value that is not base64");
  // EVP_DecodeBlock counts the padding as zero bytes.
  size_t pad = 0;
  for (auto it = in.rbegin(); it != in.rend() && *it == '='; ++it) ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

// proto3's JSON writes 64-bit integers as strings and leaves out fields at their default.
int64_t int_of(const json& j, const char* field) {
  if (!j.contains(field)) return 0;
  const auto& v = j[field];
  return v.is_string() ? std::stoll(v.get<std::string>()) : v.get<int64_t>();
}

KeyValue key_value(const json& kv) {
  KeyValue out;
  out.value = unbase64(kv.value("value", ""));
  out.create_revision = int_of(kv, "create_revision");
  out.lease = int_of(kv, "lease");
  return out;
}

json parse(const std::string& body) {
  auto r = json::parse(body, nullptr, false);
  if (!r.is_object()) throw EtcdError("etcd answered something that is not a JSON object");
  return r;
}

// httplib's names, with what they mean for an etcd of a swarm.
std::string failure_text(httplib::Error e, bool https) {
  switch (e) {
    case httplib::Error::Read:
      // TLS 1.3 checks the client's certificate after the client's side of the handshake.
      if (https)
        return "the connection closed unanswered (the member may not take this client "
               "certificate)";
      return httplib::to_string(e);
    case httplib::Error::SSLServerVerification:
      return "its TLS certificate is not signed by the CA this process trusts (another "
             "cluster's secret, or the wrong --etcd-ca)";
    case httplib::Error::SSLConnection:
      return "the TLS handshake failed (the member may not take this client certificate)";
    default:
      return httplib::to_string(e);
  }
}

}  // namespace

struct Etcd::Connections {
  std::mutex mu;
  std::vector<std::unique_ptr<httplib::Client>> clients;  // by member; null: not open
};

Etcd::Etcd(const Etcd& o)
    : urls_(o.urls_), tls_(o.tls_), next_(o.next_), conn_(std::make_unique<Connections>()) {}
Etcd& Etcd::operator=(const Etcd& o) {
  if (this != &o) *this = Etcd(o);
  return *this;
}
Etcd::Etcd(Etcd&& o) noexcept = default;
Etcd& Etcd::operator=(Etcd&& o) noexcept = default;
Etcd::~Etcd() = default;

Etcd::Etcd(const std::string& urls, EtcdTls tls)
    : tls_(std::move(tls)), conn_(std::make_unique<Connections>()) {
  size_t at = 0;
  while (at <= urls.size()) {
    auto comma = urls.find(',', at);
    if (comma == std::string::npos) comma = urls.size();
    const auto url = urls.substr(at, comma - at);
    at = comma + 1;
    const bool http = url.rfind("http://", 0) == 0, https = url.rfind("https://", 0) == 0;
    const auto rest = url.substr(http ? 7 : https ? 8 : 0);
    if ((!http && !https) || rest.empty() || rest.find(':') == std::string::npos ||
        rest.find('/') != std::string::npos)
      throw std::invalid_argument("--etcd: '" + url +
                                  "' is not an etcd client URL (http://HOST:PORT or "
                                  "https://HOST:PORT, several joined by commas)");
    urls_.push_back(url);
  }
}

std::string Etcd::post(const std::string& path, const std::string& body) {
  std::lock_guard<std::mutex> lock(conn_->mu);
  auto& clients = conn_->clients;
  clients.resize(urls_.size());
  std::string failures;
  for (size_t i = 0; i < urls_.size(); ++i) {
    const size_t k = (next_ + i) % urls_.size();
    auto& client = clients[k];
    if (!client) {
      client = std::make_unique<httplib::Client>(urls_[k], tls_.cert, tls_.key);
      client->set_connection_timeout(2, 0);
      client->set_read_timeout(3, 0);
      client->set_write_timeout(3, 0);
      client->set_keep_alive(true);
      if (!tls_.ca.empty()) client->set_ca_cert_path(tls_.ca.c_str());
    }
    auto res = client->Post(path, body, "application/json");
    if (!res) {
      failures +=
          "; " + urls_[k] + ": " + failure_text(res.error(), urls_[k].rfind("https://", 0) == 0);
      client.reset();  // the next call to this member opens a new connection
      continue;
    }
    if (res->status != 200) {
      failures += "; " + urls_[k] + ": HTTP " + std::to_string(res->status) + " " + res->body;
      continue;
    }
    next_ = k;
    return res->body;
  }
  throw EtcdError("no etcd member answered " + path + failures);
}

int64_t Etcd::grant(int64_t ttl_s) {
  const auto r = parse(post("/v3/lease/grant", json{{"TTL", ttl_s}}.dump()));
  const auto id = int_of(r, "ID");
  if (id == 0) throw EtcdError("etcd granted no lease: " + r.value("error", r.dump()));
  return id;
}

int64_t Etcd::keepalive(int64_t lease) {
  const auto r = parse(post("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}}.dump()));
  return int_of(r.value("result", json::object()), "TTL");
}

void Etcd::revoke(int64_t lease) {
  post("/v3/lease/revoke", json{{"ID", std::to_string(lease)}}.dump());
}

Etcd::Created Etcd::create_if_absent(const std::string& key, const std::string& value,
                                     int64_t lease) {
  const auto k = base64(key);
  json put{{"key", k}, {"value", base64(value)}};
  if (lease != 0) put["lease"] = std::to_string(lease);
  const json txn{
      {"compare", json::array({{{"key", k}, {"target", "CREATE"}, {"create_revision", "0"}}})},
      {"success", json::array({{{"requestPut", put}}})},
      {"failure", json::array({{{"requestRange", {{"key", k}}}}})}};
  const auto r = parse(post("/v3/kv/txn", txn.dump()));
  Created out;
  out.won = r.value("succeeded", false);
  out.revision = int_of(r.value("header", json::object()), "revision");
  if (!out.won)
    for (const auto& resp : r.value("responses", json::array()))
      for (const auto& kv :
           resp.value("response_range", json::object()).value("kvs", json::array()))
        out.holder = key_value(kv);
  return out;
}

std::optional<KeyValue> Etcd::get(const std::string& key) {
  const auto r = parse(post("/v3/kv/range", json{{"key", base64(key)}}.dump()));
  for (const auto& kv : r.value("kvs", json::array())) return key_value(kv);
  return std::nullopt;
}

std::vector<std::pair<std::string, KeyValue>> Etcd::get_prefix(const std::string& prefix) {
  // etcd's range [key, range_end): the prefix with its last byte raised by one.
  std::string end = prefix;
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (end.empty()) throw std::invalid_argument("etcd: a prefix of only 0xff bytes");
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  const auto r =
      parse(post("/v3/kv/range", json{{"key", base64(prefix)}, {"range_end", base64(end)}}.dump()));
  std::vector<std::pair<std::string, KeyValue>> out;
  for (const auto& kv : r.value("kvs", json::array()))
    out.emplace_back(unbase64(kv.value("key", "")), key_value(kv));
  return out;
}

void Etcd::put(const std::string& key, const std::string& value, int64_t lease) {
  json put{{"key", base64(key)}, {"value", base64(value)}};
  if (lease != 0) put["lease"] = std::to_string(lease);
  post("/v3/kv/put", put.dump());
}

}  // namespace swarmrt::leader
