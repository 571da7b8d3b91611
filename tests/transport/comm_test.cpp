// The TCP communicator over 127.0.0.1, the CPU backend of the communicator interface the
// NCCL one shares: every dtype both ways over a two-rank link, an all-reduce over three ranks,
// and the ways a link goes wrong (a malformed id, a tensor that disagrees with its header, a
// peer that is gone, a rank that never joins), each a CommError that says what happened.
#include <ATen/ATen.h>
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sstream>
#include <thread>

#include "messages/frame.hpp"
#include "transport/buffer_pool.hpp"
#include "transport/channel.hpp"
#include "transport/comm.hpp"
#include "transport/tcp_comm.hpp"

using namespace swarmrt;
using transport::CommError;
using transport::CommOptions;

namespace {

CommOptions quick(double timeout_s = 10) {
  CommOptions o;
  o.timeout_s = timeout_s;
  return o;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const CommError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(TcpComm, EveryDtypeTravelsBothWaysBitForBit) {
  auto [root, id] = transport::create_comm("tcp", 2, quick());
  auto other = transport::join_comm("tcp", id, 2, 1, quick());
  EXPECT_STREQ(root->backend(), "tcp");
  EXPECT_EQ(other->rank(), 1);
  std::vector<at::Tensor> ts = {at::randn({3, 5}), at::randn({7}).to(at::kBFloat16),
                                at::randn({2, 2, 2}).to(at::kHalf),
                                at::randint(0, 256, {4, 9}, at::kLong),
                                at::randn({1024, 1024})};  // 4 MiB, more than a socket buffer holds
  for (const auto& t : ts) root->send(t, 1);
  for (const auto& t : ts) {
    auto got = other->recv(messages::meta_of(t), 0);
    EXPECT_TRUE(at::equal(got, t)) << c10::toString(t.scalar_type());
  }
  // Back the other way, non-contiguous: sent as its contiguous copy.
  auto back = at::randn({6, 4}).t();
  other->send(back, 0);
  EXPECT_TRUE(at::equal(root->recv(messages::meta_of(back), 1), back));
}

TEST(TcpComm, AFrameGoesAsHeaderAndTensors) {
  auto [root, id] = transport::create_comm("tcp", 2, quick());
  auto other = transport::join_comm("tcp", id, 2, 1, quick());
  messages::MicroBatchHeader h;
  h.step = 3;
  h.micro_batch = 2;
  h.samples = 4;
  auto frame =
      messages::make_frame(h, {at::randn({4, 8, 16}), at::randint(0, 256, {4, 8}, at::kLong)});
  transport::send_frame_tensors(*root, frame, 1);
  auto got = transport::receive_frame(*other, 0, messages::FrameKind::microbatch, frame.header);
  ASSERT_EQ(got.tensors.size(), 2u);
  EXPECT_EQ(messages::open_frame(got).step, 3u);
  EXPECT_TRUE(at::equal(got.tensors[0], frame.tensors[0]));
  EXPECT_TRUE(at::equal(got.tensors[1], frame.tensors[1]));
}

TEST(TcpComm, AllReduceSumsOverThreeRanksAndEveryRankGetsTheSameBits) {
  auto [root, id] = transport::create_comm("tcp", 3, quick());
  auto r1 = transport::join_comm("tcp", id, 3, 1, quick());
  auto r2 = transport::join_comm("tcp", id, 3, 2, quick());
  std::vector<at::Tensor> x = {at::randn({100}), at::randn({100}), at::randn({100})};
  const auto expected = x[0] + x[1] + x[2];
  std::vector<at::Tensor> got = {x[0].clone(), x[1].clone(), x[2].clone()};
  std::thread t1([&] { r1->all_reduce_sum(got[1]); });
  std::thread t2([&] { r2->all_reduce_sum(got[2]); });
  root->all_reduce_sum(got[0]);
  t1.join();
  t2.join();
  EXPECT_TRUE(at::allclose(got[0], expected, 1e-6, 1e-6));
  EXPECT_TRUE(at::equal(got[0], got[1]));
  EXPECT_TRUE(at::equal(got[0], got[2]));
}

TEST(TcpComm, AMalformedIdOrRankIsRefused) {
  EXPECT_NE(error_of([] {
              transport::join_comm("tcp", {1, 2, 3}, 2, 1, quick());
            }).find("malformed id"),
            std::string::npos);
  auto [root, id] = transport::create_comm("tcp", 2, quick());
  EXPECT_NE(error_of([&] { transport::join_comm("tcp", id, 2, 0, quick()); }).find("cannot join"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              transport::create_comm("carrier-pigeon", 2, quick());
            }).find("'carrier-pigeon' is not built"),
            std::string::npos);
}

TEST(TcpComm, ATensorThatDisagreesWithItsHeaderIsRefused) {
  auto [root, id] = transport::create_comm("tcp", 2, quick());
  auto other = transport::join_comm("tcp", id, 2, 1, quick());
  root->send(at::randn({10}), 1);
  auto meta = messages::meta_of(at::randn({12}));  // the header says 12 floats
  const auto why = error_of([&] { other->recv(meta, 0); });
  EXPECT_NE(why.find("40 bytes"), std::string::npos) << why;
  EXPECT_NE(why.find("48 bytes"), std::string::npos) << why;
  // The stream is out of step after that: the link says so from now on.
  EXPECT_FALSE(error_of([&] { other->recv(meta, 0); }).empty());
}

TEST(TcpComm, APeerThatIsGoneIsAnErrorNotAHang) {
  auto [root, id] = transport::create_comm("tcp", 2, quick());
  auto other = transport::join_comm("tcp", id, 2, 1, quick());
  other->send(at::ones({1}), 0);
  EXPECT_TRUE(at::equal(root->recv(messages::meta_of(at::ones({1})), 1), at::ones({1})));
  other.reset();  // the peer's process is gone
  const auto why = error_of([&] { root->recv(messages::meta_of(at::ones({4})), 1); });
  EXPECT_NE(why.find("closed the connection"), std::string::npos) << why;
}

// The communicator's port admits only holders of the cluster credential: a connection that
// sends anything else (here: a forged hello with the right token, which travels in the id) is
// refused before its hello is read, and the real rank still joins.
TEST(TcpComm, AStrangerOnThePortIsRefusedAndTheRankStillJoins) {
  auto [root, id] = transport::create_comm("tcp", 2, quick());
  const std::string text(id.begin(), id.end());  // "swarmrt-tcp-comm 2 HOST PORT TOKEN"
  std::istringstream in(text.substr(std::string("swarmrt-tcp-comm 2 ").size()));
  std::string host, token;
  int port = 0;
  in >> host >> port >> token;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  struct {
    uint32_t magic = 0x4d435753, rank = 1;
    uint64_t token;
  } hello;
  hello.token = std::stoull(token, nullptr, 16);
  ASSERT_EQ(::send(fd, &hello, sizeof(hello), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(hello)));
  char b;
  EXPECT_EQ(::recv(fd, &b, 1, MSG_WAITALL), 1);  // the challenge, then the refusal
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[256];
  ssize_t r;
  while ((r = ::recv(fd, buf, sizeof(buf), 0)) > 0) {
  }
  EXPECT_EQ(r, 0) << "the stranger's connection must be closed";
  ::close(fd);
  auto other = transport::join_comm("tcp", id, 2, 1, quick());
  other->send(at::ones({3}), 0);
  EXPECT_TRUE(at::equal(root->recv(messages::meta_of(at::ones({3})), 1), at::ones({3})));
}

// transport.encrypt = on: the communicator's links run inside TLS 1.3 (one link per direction,
// so that the writer thread and a receiving caller never share a TLS session), and tensors
// still arrive bit for bit, an all-reduce over three ranks included.
TEST(TcpComm, WithEncryptOnEveryLinkIsTlsAndTensorsArriveBitForBit) {
  transport::set_encrypt_mode(transport::EncryptMode::on);
  transport::TcpComm root(3, quick());
  transport::TcpComm r1(root.id(), 3, 1, quick());
  transport::TcpComm r2(root.id(), 3, 2, quick());
  const auto big = at::randn({1024, 1024});  // 4 MiB: many TLS records
  root.send(big, 1);
  r2.send(big * 2, 0);
  EXPECT_TRUE(at::equal(r1.recv(messages::meta_of(big), 0), big));
  EXPECT_TRUE(at::equal(root.recv(messages::meta_of(big), 2), big * 2));
  std::vector<at::Tensor> x = {at::randn({100}), at::randn({100}), at::randn({100})};
  std::vector<at::Tensor> got = {x[0].clone(), x[1].clone(), x[2].clone()};
  std::thread t1([&] { r1.all_reduce_sum(got[1]); });
  std::thread t2([&] { r2.all_reduce_sum(got[2]); });
  root.all_reduce_sum(got[0]);
  t1.join();
  t2.join();
  EXPECT_TRUE(at::allclose(got[0], x[0] + x[1] + x[2], 1e-6, 1e-6));
  EXPECT_TRUE(at::equal(got[0], got[1]));
  EXPECT_TRUE(at::equal(got[0], got[2]));
  EXPECT_EQ(root.encrypted_links(), 4);  // two per joined rank
  EXPECT_EQ(r1.encrypted_links(), 2);
  transport::set_encrypt_mode(transport::EncryptMode::automatic);
  // On loopback, auto stays plain.
  transport::TcpComm plain_root(2, quick());
  transport::TcpComm plain_other(plain_root.id(), 2, 1, quick());
  plain_other.send(at::ones({2}), 0);
  EXPECT_TRUE(at::equal(plain_root.recv(messages::meta_of(at::ones({2})), 1), at::ones({2})));
  EXPECT_EQ(plain_root.encrypted_links(), 0);
}

TEST(TcpComm, ARankThatNeverJoinsTimesOut) {
  auto [root, id] = transport::create_comm("tcp", 2, quick(0.5));
  const auto why = error_of([&] { root->recv(messages::meta_of(at::ones({1})), 1); });
  EXPECT_NE(why.find("0 of 1 ranks joined"), std::string::npos) << why;
}

// Received tensors live in pooled buffers: tensors held at once never share one, and each
// keeps its own bytes while later ones arrive into buffers freed before.
TEST(TcpComm, ReceivedTensorsKeepTheirBytesWhileBuffersAreReused) {
  auto [root, id] = transport::create_comm("tcp", 2, quick());
  auto other = transport::join_comm("tcp", id, 2, 1, quick());
  const auto meta = messages::meta_of(at::empty({1 << 16}));
  std::vector<at::Tensor> sent, held;
  for (int i = 0; i < 6; ++i) {
    sent.push_back(at::full({1 << 16}, static_cast<float>(i)));
    root->send(sent.back(), 1);
  }
  for (int i = 0; i < 6; ++i) {
    auto t = other->recv(meta, 0);
    if (i % 2 == 0) held.push_back(t);  // the odd ones go back to the pool at once
  }
  ASSERT_EQ(held.size(), 3u);
  for (size_t k = 0; k < held.size(); ++k) {
    EXPECT_TRUE(at::equal(held[k], sent[2 * k])) << "tensor " << 2 * k;
    for (size_t j = k + 1; j < held.size(); ++j) EXPECT_NE(held[k].data_ptr(), held[j].data_ptr());
  }
}

TEST(BufferPool, AFreedBufferIsReusedAndALiveOneIsNot) {
  auto a = transport::acquire_buffer(1 << 20);
  auto b = transport::acquire_buffer(1 << 20);
  EXPECT_NE(a.get(), b.get());
  const auto* freed = a.get();
  a.reset();
  auto c = transport::acquire_buffer(1 << 20);
  EXPECT_EQ(c.get(), freed);
  // A free buffer more than twice the size asked for is not handed out for it.
  c.reset();
  auto small = transport::acquire_buffer(1 << 10);
  EXPECT_NE(small.get(), freed);
  auto t = transport::pooled_empty({3, 5}, at::kLong);
  EXPECT_EQ(t.numel(), 15);
  EXPECT_EQ(t.scalar_type(), at::kLong);
  t.fill_(7);
  EXPECT_EQ(t.sum().item<int64_t>(), 105);
}
