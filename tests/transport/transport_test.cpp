// Frames between two actor systems over real TCP on 127.0.0.1 (CAF middleman): a stage worker
// published by one system is fed chunks by the other. Malformed chunks are refused with a
// reason, and the worker keeps serving; a frame cut into many chunks arrives whole; tensor
// lists come back through their serialization.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <cmath>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/io/all.hpp>
#include <cstring>
#include <thread>

#include "../actors/actor_test_util.hpp"
#include "actors/runtime/runtime.hpp"
#include "actors/stage/stage_worker.hpp"
#include "messages/frame.hpp"
#include "messages/wire.hpp"
#include "transport/bulk.hpp"
#include "transport/channel.hpp"
#include "transport/delivery.hpp"
#include "transport/transport.hpp"

using namespace swarmrt;
using namespace swarmrt::atoms;
using messages::Direction;

namespace {

// The workers here are spawned on the scheduler, not detached as the runtime spawns them: a
// detached actor's thread outlives a test until the last reference to the actor is gone, and
// with two actor systems in one process the middleman may hold one past the test's end.

using swarmrt::testing::NetSystem;

messages::Frame eval_frame(const at::Tensor& ids, uint32_t index) {
  messages::MicroBatchHeader h;
  h.direction = Direction::eval;
  h.micro_batch = index;
  h.samples = static_cast<uint32_t>(ids.size(0));
  return messages::make_frame(h, {ids, ids});
}

// A stage worker of the tiny model, spawned and published by system `a` and reached from
// system `b` over 127.0.0.1: `tracker` (in a) takes what the worker reports, `sender` (in b)
// feeds it, `remote` is the worker as b sees it.
struct RemoteWorker {
  NetSystem a, b;
  caf::scoped_actor tracker{*a.sys};
  caf::scoped_actor sender{*b.sys};
  caf::actor worker, remote;
  std::string endpoint;  // the bulk server's, once started

  RemoteWorker() {
    auto ctx = std::make_shared<actors::SwarmContext>();
    ctx->config.model = {"tiny", 2, 2, 32, 16, 256};
    actors::WorkerSetup ws;
    ws.ctx = ctx;
    ws.tracker = caf::actor_cast<caf::actor>(tracker);
    ws.take_state = false;  // driven by the test, no tracker to ask
    worker = a.sys->spawn(actors::stage_worker, ws);
  }
  ~RemoteWorker() { tracker->send_exit(worker, caf::exit_reason::user_shutdown); }

  // Publishes the worker and connects b to it; with `bulk`, frames to it take the bulk link.
  void connect(bool bulk) {
    auto port = a.sys->middleman().publish(worker, 0, "127.0.0.1", true);
    ASSERT_TRUE(port) << a.sys->render(port.error());
    if (bulk) {
      endpoint = transport::start_bulk_server("127.0.0.1");
      ASSERT_FALSE(endpoint.empty());
    }
    auto r = b.sys->middleman().remote_actor("127.0.0.1", *port);
    ASSERT_TRUE(r) << b.sys->render(r.error());
    remote = *r;
    if (bulk) transport::register_endpoint(remote.node(), endpoint);
  }

  // The evaluation loss of the next frame the worker answers, or a failure after `wait`.
  // How long one eval frame of `ids` takes from its send to its loss at the tracker.
  std::chrono::steady_clock::duration time_eval(const at::Tensor& ids) {
    const auto start = std::chrono::steady_clock::now();
    transport::send_frame(sender.ptr(), remote, messages::FrameKind::microbatch,
                          eval_frame(ids, 1));
    expect_eval(1, std::chrono::seconds(60));
    return std::chrono::steady_clock::now() - start;
  }

  void expect_eval(uint32_t index, std::chrono::seconds wait = std::chrono::seconds(20)) {
    tracker->receive(
        [&](eval_loss_atom, uint64_t, uint32_t got, double loss) {
          EXPECT_EQ(got, index);
          EXPECT_TRUE(std::isfinite(loss));
        },
        caf::after(wait) >> [&] { FAIL() << "no frame " << index << " came through"; });
  }
};

}  // namespace

TEST(Transport, RemoteWorkerRefusesBadChunksAndKeepsServing) {
  RemoteWorker w;
  messages::Membership m;
  m.stages = {{{0, 0, w.worker, {}}}};
  w.tracker->send(w.worker, members_atom::value, m);
  ASSERT_NO_FATAL_FAILURE(w.connect(false));
  ASSERT_NE(w.remote.node(), w.sender->node());

  auto ids = at::randint(0, 256, {2, 16}, at::kLong);
  const auto good = messages::to_chunks(eval_frame(ids, 0), messages::FrameKind::microbatch, 1);
  ASSERT_EQ(good.size(), 1u);

  auto truncated = good[0];
  truncated.resize(truncated.size() - 10);
  // The header says [2, 20] int64 tensors; the bytes behind it are [2, 16].
  messages::MicroBatchHeader lying;
  lying.direction = Direction::eval;
  lying.samples = 2;
  lying.tensors =
      messages::metas_of({at::zeros({2, 20}, at::kLong), at::zeros({2, 20}, at::kLong)});
  messages::Frame mismatched{
      messages::encode(lying),
      {ids, ids},
  };
  auto disagreeing = messages::to_chunks(mismatched, messages::FrameKind::microbatch, 2)[0];
  // A chunk that announces a 5 GiB message: refused before anything is buffered.
  auto oversized = good[0];
  const uint64_t huge = uint64_t{5} << 30;
  std::memcpy(oversized.data() + 24, &huge, sizeof(huge));

  for (const auto* bad : {&truncated, &disagreeing, &oversized})
    w.sender->send(w.remote, chunk_atom::value, *bad);
  // A good frame through the transport, and one cut into 256-byte chunks.
  transport::send_frame(w.sender.ptr(), w.remote, messages::FrameKind::microbatch,
                        eval_frame(ids, 7));
  transport::ChunkTransport small(256);
  small.send(w.sender.ptr(), w.remote, messages::FrameKind::microbatch, eval_frame(ids, 8));

  std::set<uint32_t> answered;
  for (int i = 0; i < 2; ++i)
    w.tracker->receive(
        [&](eval_loss_atom, uint64_t, uint32_t index, double loss) {
          answered.insert(index);
          EXPECT_GT(loss, 4.0);
          EXPECT_LT(loss, 7.0);
        },
        caf::after(std::chrono::seconds(20)) >> [&] { FAIL() << "the worker stopped serving"; });
  EXPECT_EQ(answered, (std::set<uint32_t>{7, 8}));
  w.tracker->request(w.worker, caf::infinite, stats_atom::value)
      .receive([&](const messages::WorkerStats& st) { EXPECT_EQ(st.rejected, 3u); },
               [&](const caf::error& e) { FAIL() << w.a.sys->render(e); });

  // Parameters cross back as a serialized tensor list, bit for bit.
  messages::TensorList local, over_tcp;
  w.tracker->request(w.worker, caf::infinite, params_atom::value)
      .receive([&](const messages::TensorList& p) { local = p; },
               [&](const caf::error& e) { FAIL() << w.a.sys->render(e); });
  w.sender->request(w.remote, std::chrono::seconds(20), params_atom::value)
      .receive([&](const messages::TensorList& p) { over_tcp = p; },
               [&](const caf::error& e) { FAIL() << w.b.sys->render(e); });
  EXPECT_TRUE(over_tcp.error.empty()) << over_tcp.error;
  ASSERT_EQ(over_tcp.names, local.names);
  ASSERT_EQ(over_tcp.tensors.size(), local.tensors.size());
  for (size_t i = 0; i < local.tensors.size(); ++i)
    EXPECT_TRUE(at::equal(over_tcp.tensors[i], local.tensors[i])) << local.names[i];
}

TEST(Transport, TensorListRoundTripAndRefusal) {
  messages::TensorList list{{"w", "b"}, {at::randn({3, 4}), at::arange(5, at::kLong)}, {}};
  auto bytes = messages::encode_tensor_list(list);
  auto back = messages::decode_tensor_list(bytes);
  ASSERT_EQ(back.names, list.names);
  EXPECT_TRUE(at::equal(back.tensors[0], list.tensors[0]));
  EXPECT_TRUE(at::equal(back.tensors[1], list.tensors[1]));
  bytes.resize(bytes.size() - 4);
  EXPECT_THROW(messages::decode_tensor_list(bytes), messages::DecodeError);
}

TEST(Transport, BulkLinkCarriesFramesAndClosesOnABadStream) {
  RemoteWorker w;
  ASSERT_NO_FATAL_FAILURE(w.connect(true));

  // Garbage on the bulk port: it is no credential, so the link is closed after the server's
  // own challenge (magic and nonce), before any frame is read.
  {
    const auto colon = w.endpoint.rfind(':');
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(std::stoi(w.endpoint.substr(colon + 1))));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    std::vector<uint8_t> junk(messages::kChunkPrefix, 0xAB);
    ASSERT_EQ(write(fd, junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
    std::string got;
    char buf[256];
    ssize_t r;
    while ((r = read(fd, buf, sizeof(buf))) > 0) got.append(buf, static_cast<size_t>(r));
    // Closed: an orderly end, or a reset (the server did not read all the junk before it closed).
    EXPECT_TRUE(r == 0 || (r < 0 && errno == ECONNRESET))
        << "the server kept a stream it could not parse: " << std::strerror(errno);
    EXPECT_LE(got.size(), 40u) << "nothing but its challenge";
    close(fd);
  }

  EXPECT_STREQ(transport::for_peer(w.sender.ptr(), w.remote).name(), "bulk");
  auto ids = at::randint(0, 256, {2, 16}, at::kLong);
  transport::send_frame(w.sender.ptr(), w.remote, messages::FrameKind::microbatch,
                        eval_frame(ids, 3));
  w.expect_eval(3);
}

// transport.encrypt = "on": the frame link goes inside TLS 1.3 after the credential handshake
// (the default, "auto", leaves loopback links plain), and frames arrive as they do in clear.
TEST(Transport, BulkLinkCarriesFramesInsideTls) {
  transport::set_encrypt_mode(transport::EncryptMode::on);
  RemoteWorker w;
  ASSERT_NO_FATAL_FAILURE(w.connect(true));
  const auto before = transport::encrypted_links();
  for (uint32_t i = 0; i < 3; ++i) {
    auto ids = at::randint(0, 256, {2, 16}, at::kLong);
    transport::send_frame(w.sender.ptr(), w.remote, messages::FrameKind::microbatch,
                          eval_frame(ids, i));
    w.expect_eval(i);
  }
  EXPECT_EQ(transport::encrypted_links(), before + 1);
  transport::set_encrypt_mode(transport::EncryptMode::automatic);
}

TEST(Transport, ChaosLinkDelayHoldsEveryFrameBack) {
  RemoteWorker w;
  ASSERT_NO_FATAL_FAILURE(w.connect(true));
  // Injected delay is behaviour, not speed: a frame must not arrive before it has passed.
  transport::set_link_delay(300);
  const auto waited = w.time_eval(at::randint(0, 256, {2, 16}, at::kLong));
  transport::set_link_delay(0);
  EXPECT_GE(waited, std::chrono::milliseconds(300));
}

TEST(Transport, ChaosLinkBandwidthCapPacesTheBytes) {
  RemoteWorker w;
  ASSERT_NO_FATAL_FAILURE(w.connect(true));
  // 1 MiB (token ids and targets) through a 4 Mbit/s (0.5 MB/s) link: it cannot arrive in less than
  // about 2 s (the first 64 KiB slice leaves at once). A bound below, never one above.
  transport::set_link_bandwidth(4);
  const auto waited = w.time_eval(at::randint(0, 256, {4096, 16}, at::kLong));
  transport::set_link_bandwidth(0);
  EXPECT_GE(waited, std::chrono::milliseconds(1800));
}

// swarm.compression = auto's measurement: a frame link times each message from its first byte
// to its last acknowledged (transport/delivery.hpp), and only while measuring is on. Through a
// 8 Mbit/s (1 MB/s) cap, 262 kB cannot be delivered faster than its last 198 kB leave (the
// first 64 KiB slice leaves at once): at most 1.33 MB/s. The bound below is 5x under the cap,
// for a loaded machine.
TEST(Transport, AFrameLinkMeasuresWhatItDeliversOnlyWhenAsked) {
  RemoteWorker w;
  ASSERT_NO_FATAL_FAILURE(w.connect(true));
  const auto ids = at::randint(0, 256, {1024, 16}, at::kLong);  // 2 x 131 kB a frame
  transport::measure_links(false);
  transport::set_link_bandwidth(8);
  w.time_eval(ids);
  EXPECT_EQ(transport::link_bytes_per_s(w.remote.node()), 0) << "measured while off";
  transport::measure_links(true);
  for (int i = 0; i < 3; ++i) w.time_eval(ids);
  double rate = 0;
  for (int i = 0; i < 50 && rate == 0; ++i) {
    rate = transport::link_bytes_per_s(w.remote.node());
    if (rate == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  transport::measure_links(false);
  transport::set_link_bandwidth(0);
  EXPECT_GT(rate, 0.2e6);
  EXPECT_LT(rate, 1.4e6);
}

// Every message is timed, also one written while the one before it is still on its way: four
// frames queued at once through an 8 Mbit/s cap each count (a link timed only when idle would
// see the last alone, and a busy link's rate never).
TEST(Transport, AFrameLinkTimesMessagesQueuedBehindOthers) {
  RemoteWorker w;
  ASSERT_NO_FATAL_FAILURE(w.connect(true));
  const auto ids = at::randint(0, 256, {1024, 16}, at::kLong);
  transport::measure_links(true);
  transport::set_link_bandwidth(8);
  for (uint32_t i = 1; i <= 4; ++i)
    transport::send_frame(w.sender.ptr(), w.remote, messages::FrameKind::microbatch,
                          eval_frame(ids, i));
  for (uint32_t i = 1; i <= 4; ++i) w.expect_eval(i, std::chrono::seconds(60));
  size_t timed = 0;
  for (int i = 0; i < 50 && timed < 4; ++i) {
    timed = transport::delivery_samples(w.endpoint);
    if (timed < 4) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double rate = transport::link_bytes_per_s(w.remote.node());
  transport::measure_links(false);
  transport::set_link_bandwidth(0);
  EXPECT_EQ(timed, 4u);
  EXPECT_GT(rate, 0.2e6);
  EXPECT_LT(rate, 1.4e6);
}
