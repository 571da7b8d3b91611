#include "transport/bulk.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "transport/buffer_pool.hpp"
#include "transport/channel.hpp"
#include "transport/credential.hpp"

namespace swarmrt::transport {
namespace {

// ---- the inbox: payloads and the actors waiting for them -------------------------------
struct Entry {
  std::optional<BulkDelivery> delivery;  // the bytes have come (or were refused)
  caf::actor waiter;                     // an actor has the CAF message and waits
  caf::actor sender;
  std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
};

struct Inbox {
  std::mutex mutex;
  std::unordered_map<uint64_t, Entry> entries;
  std::chrono::steady_clock::time_point swept = std::chrono::steady_clock::now();
};
Inbox& inbox() {
  static Inbox* i = new Inbox;  // never destroyed: reader threads may outlive main
  return *i;
}

// Half of a frame whose other half never came (a sender that died between its bytes and its
// CAF message, or the other way round) expires: the inbox stays bounded, and the micro-batch
// it belonged to is re-run by the tracker's timeout like any lost hop. Called with the lock.
constexpr auto kEntryTtl = std::chrono::seconds(120);
constexpr size_t kMaxEntries = 4096;
void sweep(Inbox& in) {
  const auto now = std::chrono::steady_clock::now();
  if (now - in.swept < std::chrono::seconds(5) && in.entries.size() < kMaxEntries) return;
  in.swept = now;
  const auto ttl = in.entries.size() < kMaxEntries ? kEntryTtl : std::chrono::seconds(5);
  size_t expired = 0;
  for (auto it = in.entries.begin(); it != in.entries.end();)
    if (now - it->second.since > ttl) {
      it = in.entries.erase(it);
      ++expired;
    } else {
      ++it;
    }
  if (expired > 0) spdlog::warn("frame link: {} half-arrived frame(s) expired unclaimed", expired);
}

void arrived(uint64_t id, BulkDelivery d) {
  auto& in = inbox();
  caf::actor wake;
  {
    std::lock_guard<std::mutex> lock(in.mutex);
    sweep(in);
    auto& e = in.entries[id];
    e.delivery = std::move(d);
    wake = e.waiter;
  }
  if (wake) caf::anon_send(wake, bulk_ready_atom::value, id);
}

// ---- the listening end --------------------------------------------------------------------
struct Server {
  std::mutex mutex;
  std::string endpoint;
  bool started = false;
};
Server& server() {
  static Server* s = new Server;
  return *s;
}

// One thread per incoming connection. Chunks of one message come in order (one writer thread
// per link sends whole messages), and each slice is read straight into the message's buffer;
// the tensors of the decoded frame are views of that buffer. A refused chunk ends the
// connection (the stream cannot be trusted after it); the message it belonged to is delivered
// as refused, so its receiver counts it and goes on.
// Bounds of the listening end against any byte stream (architecture §8): connections still proving
// the credential, and all connections, are capped; a handshake waits at most kHandshake.
constexpr int kMaxHandshaking = 32;
constexpr int kMaxConnections = 512;
constexpr std::chrono::milliseconds kHandshake{5000};
std::atomic<int> g_handshaking{0};
std::atomic<int> g_connections{0};
std::atomic<uint64_t> g_refused{0};
std::atomic<uint64_t> g_encrypted{0};
std::atomic<uint64_t> g_max_message{messages::kDefaultMaxMessage};

// Refusals are logged, but a flood of them is not: the first few, then every 100th.
void log_refusal(const std::string& why) {
  const auto n = ++g_refused;
  if (n <= 5 || n % 100 == 0)
    spdlog::warn("frame link refused a connection ({} so far): {}", n, why);
}

void serve_connection(int fd) {
  struct Count {
    ~Count() { --g_connections; }
  } count;
  Channel channel(fd, false, kHandshake);
  --g_handshaking;
  if (!channel.ok()) return log_refusal(channel.error());
  uint8_t head[messages::kChunkPrefix];
  std::shared_ptr<uint8_t> buffer;
  messages::ChunkPrefix current;
  uint64_t received = 0;
  for (;;) {
    if (!channel.read_all(head, sizeof(head))) break;
    messages::ChunkPrefix c;
    std::string why;
    try {
      c = messages::parse_chunk_prefix(head);
    } catch (const messages::DecodeError& e) {
      why = e.what();
    }
    if (why.empty()) {
      if (c.length > messages::kDefaultMaxChunk - messages::kChunkPrefix)
        why = "chunk of " + std::to_string(c.length) + " bytes exceeds the chunk limit";
      else if (c.total > g_max_message.load())
        why = "message of " + std::to_string(c.total) + " bytes exceeds the limit of " +
              std::to_string(g_max_message.load()) + " (transport.max_message_mib)";
      else if (c.count == 0 || c.index >= c.count)
        why = "chunk index out of range";
      else if (c.offset > c.total || c.length > c.total - c.offset)
        why = "slice lies outside the message";
      else if (c.index == 0
                   ? (buffer != nullptr)
                   : (!buffer || c.message_id != current.message_id || c.count != current.count ||
                      c.total != current.total || c.offset != received))
        why = "chunk out of order";
    }
    if (!why.empty()) {
      spdlog::warn("bulk link refused a chunk: {}; closing the link", why);
      arrived(c.message_id, BulkDelivery{{}, {}, {}, why});
      break;
    }
    if (c.index == 0) {
      current = c;
      received = 0;
      buffer = acquire_buffer(static_cast<size_t>(c.total));
    }
    if (!channel.read_all(buffer.get() + c.offset, c.length)) break;
    received += c.length;
    if (c.index + 1 < c.count) continue;
    if (received != current.total) {
      arrived(c.message_id, BulkDelivery{{}, {}, {}, "chunks end before the message does"});
      break;
    }
    try {
      auto done = messages::decode_message(buffer.get(), static_cast<size_t>(current.total),
                                           std::static_pointer_cast<void>(buffer));
      arrived(c.message_id, BulkDelivery{done.kind, std::move(done.frame), {}, {}});
    } catch (const messages::DecodeError& e) {
      spdlog::warn("bulk link refused a message: {}", e.what());
      arrived(c.message_id, BulkDelivery{{}, {}, {}, e.what()});
    }
    buffer.reset();
  }
}

// ---- the sending end: one connection and writer thread per peer endpoint -------------------
struct Link {
  std::unique_ptr<Channel> channel;
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::unique_ptr<messages::ChunkPlan>> queue;
  bool broken = false;
};

std::atomic<int64_t> g_link_delay_us{0};
std::atomic<int64_t> g_link_bytes_per_s{0};

// Writes `n` bytes, no faster than the link cap: in slices of at most 64 KiB, each sent when
// the link's previous bytes would have left a line of that rate (`free_at`).
bool paced_write(Channel& channel, const void* buf, size_t n,
                 std::chrono::steady_clock::time_point& free_at) {
  const int64_t rate = g_link_bytes_per_s.load();
  if (rate <= 0) return channel.write_all(buf, n);
  const auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    const size_t part = std::min<size_t>(n, 64 * 1024);
    const auto now = std::chrono::steady_clock::now();
    if (free_at < now) free_at = now;
    std::this_thread::sleep_until(free_at);
    if (!channel.write_all(p, part)) return false;
    free_at += std::chrono::nanoseconds(static_cast<int64_t>(part) * 1'000'000'000 / rate);
    p += part;
    n -= part;
  }
  return true;
}

// Writes each chunk's prefix and then its slices straight from the tensors' memory.
void write_loop(std::shared_ptr<Link> link, std::string endpoint) {
  auto free_at = std::chrono::steady_clock::now();
  for (;;) {
    std::unique_ptr<messages::ChunkPlan> plan;
    {
      std::unique_lock<std::mutex> lock(link->mutex);
      link->ready.wait(lock, [&] { return !link->queue.empty(); });
      plan = std::move(link->queue.front());
      link->queue.pop_front();
    }
    if (const auto delay = g_link_delay_us.load(); delay > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(delay));
    for (const auto& c : plan->chunks) {
      bool ok = paced_write(*link->channel, c.prefix.data(), c.prefix.size(), free_at);
      for (const auto& slice : c.slices)
        ok = ok && paced_write(*link->channel, slice.data, slice.size, free_at);
      if (!ok) {
        spdlog::warn("bulk link to {} broke: {}", endpoint, std::strerror(errno));
        std::lock_guard<std::mutex> lock(link->mutex);
        link->broken = true;
        return;
      }
    }
  }
}

int connect_to(const std::string& endpoint) {
  const auto colon = endpoint.rfind(':');
  if (colon == std::string::npos) return -1;
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(endpoint.substr(0, colon).c_str(), endpoint.substr(colon + 1).c_str(), &hints,
                  &res) != 0)
    return -1;
  int fd = socket(res->ai_family, SOCK_STREAM, 0);
  if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    ::close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd >= 0) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return fd;
}

struct Links {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<Link>> by_endpoint;
  std::map<caf::node_id, std::string> endpoints;
};
Links& links() {
  static Links* l = new Links;
  return *l;
}

std::shared_ptr<Link> link_to(const std::string& endpoint) {
  auto& ls = links();
  std::lock_guard<std::mutex> lock(ls.mutex);
  auto& link = ls.by_endpoint[endpoint];
  if (link) {
    std::lock_guard<std::mutex> l(link->mutex);
    if (!link->broken) return link;
  }
  link = std::make_shared<Link>();
  const int fd = connect_to(endpoint);
  if (fd < 0) {
    spdlog::warn("bulk link: cannot connect to {}; frames go over CAF", endpoint);
    link->broken = true;
    return link;
  }
  // Both sides prove they hold the cluster credential before any frame is written, and
  // agree on encryption (transport.encrypt).
  link->channel = std::make_unique<Channel>(fd, true, kHandshake);
  if (!link->channel->ok()) {
    spdlog::error("frame link to {} refused: {}; frames go over CAF", endpoint,
                  link->channel->error());
    link->broken = true;
    return link;
  }
  if (link->channel->encrypted()) ++g_encrypted;
  std::thread(write_loop, link, endpoint).detach();
  return link;
}

uint64_t next_id() {
  static std::atomic<uint64_t> next{std::random_device{}() * 0x9E3779B97F4A7C15ull};
  return next.fetch_add(1);
}

}  // namespace

void set_max_message(uint64_t bytes) {
  g_max_message = bytes;
}

uint64_t max_message() {
  return g_max_message.load();
}

uint64_t refused_connections() {
  return g_refused.load();
}

uint64_t encrypted_links() {
  return g_encrypted.load();
}

void set_link_delay(double ms) {
  g_link_delay_us = static_cast<int64_t>(ms * 1000);
}

void set_link_bandwidth(double mbit_s) {
  g_link_bytes_per_s = static_cast<int64_t>(mbit_s * 1e6 / 8);
}

std::chrono::microseconds paced_delay(const caf::node_id& self, const caf::node_id& peer,
                                      uint64_t bytes) {
  const int64_t rate = g_link_bytes_per_s.load();
  if (rate <= 0 || peer == self) return std::chrono::microseconds(0);
  static std::mutex mutex;
  static std::map<caf::node_id, std::chrono::steady_clock::time_point> free_at;
  std::lock_guard<std::mutex> lock(mutex);
  const auto now = std::chrono::steady_clock::now();
  auto& at = free_at[peer];
  if (at < now) at = now;
  at += std::chrono::nanoseconds(static_cast<int64_t>(bytes) * 1'000'000'000 / rate);
  return std::chrono::duration_cast<std::chrono::microseconds>(at - now);
}

std::string start_bulk_server(const std::string& host) {
  auto& s = server();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.started) return s.endpoint;
  s.started = true;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (host == "0.0.0.0") {
    a.sin_addr.s_addr = htonl(INADDR_ANY);
  } else if (host == "localhost") {
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  } else if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    spdlog::warn("bulk link: '{}' is not an IPv4 address; frames go over CAF", host);
    ::close(fd);
    return {};
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    spdlog::warn("bulk link: cannot listen on {}: {}; frames go over CAF", host,
                 std::strerror(errno));
    ::close(fd);
    return {};
  }
  s.endpoint = (host == "localhost" ? "127.0.0.1" : host) + ":" + std::to_string(ntohs(a.sin_port));
  std::thread([fd] {
    for (;;) {
      int c = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        // Out of descriptors or memory: back off and keep serving; never stop accepting.
        spdlog::warn("frame link: accept failed: {}; retrying", std::strerror(errno));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      if (g_handshaking.load() >= kMaxHandshaking || g_connections.load() >= kMaxConnections) {
        log_refusal("too many connections (" + std::to_string(g_connections.load()) + ", " +
                    std::to_string(g_handshaking.load()) + " still proving the credential)");
        ::close(c);
        continue;
      }
      ++g_handshaking;
      ++g_connections;
      int one = 1;
      setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      try {
        std::thread(serve_connection, c).detach();
      } catch (const std::system_error& e) {  // no thread to be had: refuse, keep serving
        --g_handshaking;
        --g_connections;
        ::close(c);
        log_refusal(std::string("cannot start a thread: ") + e.what());
      }
    }
  }).detach();
  return s.endpoint;
}

std::string bulk_endpoint() {
  auto& s = server();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.endpoint;
}

void register_endpoint(const caf::node_id& node, const std::string& endpoint) {
  if (endpoint.empty()) return;
  auto& ls = links();
  std::lock_guard<std::mutex> lock(ls.mutex);
  ls.endpoints[node] = endpoint;
}

std::optional<std::string> endpoint_of(const caf::node_id& node) {
  auto& ls = links();
  std::lock_guard<std::mutex> lock(ls.mutex);
  auto it = ls.endpoints.find(node);
  if (it == ls.endpoints.end()) return std::nullopt;
  return it->second;
}

void BulkTransport::send(caf::local_actor* self, const caf::actor& to, messages::FrameKind kind,
                         messages::Frame frame) {
  auto endpoint = endpoint_of(to.node());
  auto link = endpoint ? link_to(*endpoint) : nullptr;
  bool usable = false;
  if (link) {
    std::lock_guard<std::mutex> lock(link->mutex);
    usable = !link->broken;
  }
  if (!usable) {
    static ChunkTransport chunks;
    return chunks.send(self, to, kind, std::move(frame));
  }
  const uint64_t id = next_id();
  // The writer thread sends from the tensors' memory after send returns. Micro-batch tensors
  // are never written again; a DiLoCo group updates θ in place at its next round, so round
  // frames are copied first.
  if (kind == messages::FrameKind::round)
    for (auto& t : frame.tensors) t = t.clone();
  auto plan = messages::plan_chunks(frame, kind, id);
  {
    std::lock_guard<std::mutex> lock(link->mutex);
    link->queue.push_back(std::move(plan));
  }
  link->ready.notify_one();
  caf::unsafe_send_as(self, to, bulk_atom::value, id);
}

std::optional<BulkDelivery> claim_bulk(caf::local_actor* self, uint64_t id) {
  auto& in = inbox();
  std::lock_guard<std::mutex> lock(in.mutex);
  sweep(in);
  auto& e = in.entries[id];
  auto sender = caf::actor_cast<caf::actor>(self->current_sender());
  if (e.delivery) {
    auto d = std::move(*e.delivery);
    d.sender = sender;
    in.entries.erase(id);
    return d;
  }
  e.waiter = caf::actor_cast<caf::actor>(self);
  e.sender = sender;
  return std::nullopt;
}

std::optional<BulkDelivery> take_bulk(uint64_t id) {
  auto& in = inbox();
  std::lock_guard<std::mutex> lock(in.mutex);
  auto it = in.entries.find(id);
  if (it == in.entries.end() || !it->second.delivery) return std::nullopt;
  auto d = std::move(*it->second.delivery);
  d.sender = it->second.sender;
  in.entries.erase(it);
  return d;
}

}  // namespace swarmrt::transport
