// The CPU communicator: ranks 1..N-1 each hold two connections to rank 0, which listens, one
// per direction. Both are authenticated channels (channel.hpp: the cluster credential first,
// then TLS 1.3 by transport.encrypt); one per direction because the writer thread and a
// receiving caller must never share a TLS session. The id names rank 0's address and a random
// token that every joiner presents. Each tensor goes as a 16-byte prelude (magic, dtype, byte
// count) and its raw bytes, written by the communicator's own thread, so a send never blocks
// the actor that makes it; a receive checks the prelude against what the header promised. Send and
// receive work between rank 0 and any other rank (a stage-pair link has two ranks); the all-reduce
// gathers at rank 0 and sends the sum back, adding in rank order, so every rank gets the same bits.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "transport/channel.hpp"
#include "transport/comm.hpp"

namespace swarmrt::transport {

class TcpComm final : public Comm {
 public:
  // Rank 0: listens on `options.host`; id() is what the others join with.
  TcpComm(int ranks, const CommOptions& options);
  // Rank `rank` (1..ranks-1) of the communicator `id`.
  TcpComm(const std::vector<uint8_t>& id, int ranks, int rank, const CommOptions& options);
  ~TcpComm() override;
  TcpComm(const TcpComm&) = delete;
  TcpComm& operator=(const TcpComm&) = delete;

  std::vector<uint8_t> id() const;
  const char* backend() const override { return "tcp"; }
  int rank() const override { return rank_; }
  int ranks() const override { return ranks_; }
  void send(const at::Tensor& t, int peer) override;
  at::Tensor recv(const messages::TensorMeta& meta, int peer) override;
  void all_reduce_sum(at::Tensor& t) override;
  // How many of this rank's links run inside TLS.
  int encrypted_links() const;

 private:
  void accept_ranks();
  void connect_to_root(const std::string& host, uint16_t port);
  void write_loop();
  Channel& link_for(int peer, bool sending);  // waits until connected; throws CommError
  void fail(const std::string& why);

  int ranks_;
  int rank_;
  double timeout_s_;
  uint64_t token_ = 0;
  std::string endpoint_;  // rank 0's "host:port"
  int listen_fd_ = -1;
  // Per rank; null where there is no link. `in_` is read by the receiving caller, `out_`
  // written by the writer thread.
  std::vector<std::unique_ptr<Channel>> in_, out_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool ready_ = false;
  bool stopping_ = false;
  std::string error_;  // set once: every later call throws it
  std::deque<std::pair<int, at::Tensor>> queue_;
  std::thread setup_;
  std::thread writer_;
};

}  // namespace swarmrt::transport
