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
#include <vector>

#include "credential/credential.hpp"
#include "policy/hop_choice.hpp"
#include "transport/buffer_pool.hpp"
#include "transport/bulk_inbox.hpp"
#include "transport/channel.hpp"
#include "transport/delivery.hpp"

namespace swarmrt::transport {
namespace {

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
  // A message's envelope (kEnvelope bytes) comes before its first chunk's prefix.
  uint8_t head[kEnvelope + messages::kChunkPrefix];
  std::shared_ptr<uint8_t> buffer;
  messages::ChunkPrefix current;
  uint64_t received = 0;
  Envelope direct;  // the current message's receiver, when the link names it
  for (;;) {
    const size_t envelope = buffer ? 0 : kEnvelope;
    if (!channel.read_all(head + kEnvelope - envelope, envelope + messages::kChunkPrefix)) break;
    if (envelope > 0) {
      std::memcpy(&direct.actor, head, 8);
      std::memcpy(&direct.node, head + 8, 8);
    }
    messages::ChunkPrefix c;
    std::string why;
    try {
      c = messages::parse_chunk_prefix(head + kEnvelope);
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
      arrived(c.message_id, BulkDelivery{{}, {}, {}, why}, direct);
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
      arrived(c.message_id, BulkDelivery{{}, {}, {}, "chunks end before the message does"}, direct);
      break;
    }
    try {
      auto done = messages::decode_message(buffer.get(), static_cast<size_t>(current.total),
                                           std::static_pointer_cast<void>(buffer));
      arrived(c.message_id, BulkDelivery{done.kind, std::move(done.frame), {}, {}}, direct);
    } catch (const messages::DecodeError& e) {
      spdlog::warn("bulk link refused a message: {}", e.what());
      arrived(c.message_id, BulkDelivery{{}, {}, {}, e.what()}, direct);
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

// Every byte of a message in order: each chunk's prefix and then its slices, straight from the
// header's and the tensors' memory.
std::vector<iovec> message_iovecs(const messages::ChunkPlan& plan) {
  std::vector<iovec> iov;
  for (const auto& c : plan.chunks) {
    iov.push_back({const_cast<uint8_t*>(c.prefix.data()), c.prefix.size()});
    for (const auto& slice : c.slices)
      if (slice.size > 0) iov.push_back({const_cast<uint8_t*>(slice.data), slice.size});
  }
  return iov;
}

// A message in one vectored write, or slice by slice behind the pacing of a capped link.
bool write_message(Channel& channel, const messages::ChunkPlan& plan,
                   std::chrono::steady_clock::time_point& free_at) {
  if (g_link_bytes_per_s.load() <= 0) {
    const auto iov = message_iovecs(plan);
    return channel.write_all(iov.data(), static_cast<int>(iov.size()));
  }
  for (const auto& c : plan.chunks) {
    bool ok = paced_write(channel, c.prefix.data(), c.prefix.size(), free_at);
    for (const auto& slice : c.slices)
      ok = ok && paced_write(channel, slice.data, slice.size, free_at);
    if (!ok) return false;
  }
  return true;
}

uint64_t message_bytes(const messages::ChunkPlan& plan) {
  uint64_t bytes = 0;
  for (const auto& c : plan.chunks) bytes += c.bytes;
  return bytes;
}

// Writes the link's messages in order as they are queued. With swarm.compression = auto it
// also times each one's delivery (DeliveryTimer), waking for that while the queue is empty.
void write_loop(std::shared_ptr<Link> link, std::string endpoint) {
  auto free_at = std::chrono::steady_clock::now();
  DeliveryTimer timer(link->channel->fd(), endpoint);
  std::chrono::microseconds nap{0};
  for (;;) {
    std::unique_ptr<messages::ChunkPlan> plan;
    {
      std::unique_lock<std::mutex> lock(link->mutex);
      const auto queued = [&] { return !link->queue.empty(); };
      if (nap.count() == 0)
        link->ready.wait(lock, queued);
      else
        link->ready.wait_for(lock, nap, queued);
      if (queued()) {
        plan = std::move(link->queue.front());
        link->queue.pop_front();
      }
    }
    if (plan) {
      if (const auto delay = g_link_delay_us.load(); delay > 0)
        std::this_thread::sleep_for(std::chrono::microseconds(delay));
      const auto started = std::chrono::steady_clock::now();
      if (!write_message(*link->channel, *plan, free_at)) {
        spdlog::warn("bulk link to {} broke: {}", endpoint, std::strerror(errno));
        std::lock_guard<std::mutex> lock(link->mutex);
        link->broken = true;
        return;
      }
      if (measuring_links()) timer.sent(message_bytes(*plan), started);
    }
    nap = timer.poll();
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
  // Where each node's frame link listens, and its envelope fingerprint (computed once: a
  // frame's envelope needs it on every send).
  struct Peer {
    std::string endpoint;
    uint64_t fingerprint = 0;
  };
  std::map<caf::node_id, Peer> peers;
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
  auto& peer = ls.peers[node];
  if (peer.fingerprint == 0) peer.fingerprint = node_fingerprint(node);
  peer.endpoint = endpoint;
}

namespace {
std::optional<Links::Peer> peer_of(const caf::node_id& node) {
  auto& ls = links();
  std::lock_guard<std::mutex> lock(ls.mutex);
  auto it = ls.peers.find(node);
  if (it == ls.peers.end()) return std::nullopt;
  return it->second;
}
}  // namespace

std::optional<std::string> endpoint_of(const caf::node_id& node) {
  auto peer = peer_of(node);
  if (!peer) return std::nullopt;
  return peer->endpoint;
}

double link_bytes_per_s(const caf::node_id& node) {
  auto peer = peer_of(node);
  return peer ? delivered_bytes_per_s(peer->endpoint) : 0;
}

double link_seconds_for(const caf::node_id& node, uint64_t bytes) {
  auto peer = peer_of(node);
  return peer ? delivery_seconds(peer->endpoint, bytes) : -1;
}

void BulkTransport::send(caf::local_actor* self, const caf::actor& to, messages::FrameKind kind,
                         messages::Frame frame) {
  const auto peer = peer_of(to.node());
  auto link = peer ? link_to(peer->endpoint) : nullptr;
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
  // A micro-batch frame names its receiver in its envelope and the receiving link's reader
  // delivers it (the frame says where it came from: its route); a round frame is announced
  // over CAF, so its receiver knows who to answer.
  const bool direct = kind == messages::FrameKind::microbatch;
  const Envelope to_actor = direct ? Envelope{to.id(), peer->fingerprint} : Envelope{};
  auto& head = plan->chunks.front().prefix;
  head.insert(head.begin(), kEnvelope, 0);
  std::memcpy(head.data(), &to_actor.actor, 8);
  std::memcpy(head.data() + 8, &to_actor.node, 8);
  plan->chunks.front().bytes += kEnvelope;
  {
    std::lock_guard<std::mutex> lock(link->mutex);
    link->queue.push_back(std::move(plan));
  }
  link->ready.notify_one();
  if (!direct) caf::unsafe_send_as(self, to, bulk_atom::value, id);
}

}  // namespace swarmrt::transport
