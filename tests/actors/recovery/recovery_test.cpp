// A state from many donors (actors/recovery/): real donor and fetcher actors in one actor
// system, each donor beside an actor standing for its worker (the donor lives as long as it).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "../actor_test_util.hpp"
#include "actors/recovery/state_donor.hpp"
#include "actors/recovery/state_fetcher.hpp"
#include "messages/atoms.hpp"

namespace swarmrt::actors::recovery {
namespace {
using namespace swarmrt::atoms;
using messages::WorkerState;

constexpr uint32_t kChunk = 64 << 10;

// A state of `floats` parameters and AdamW's two moments beside them.
WorkerState state_at(int64_t step, int64_t floats, uint64_t seed) {
  at::manual_seed(seed);
  WorkerState st;
  st.step = step;
  st.source = "stage 0";
  for (int i = 0; i < 3; ++i) {
    st.params.names.push_back("p" + std::to_string(i));
    st.params.tensors.push_back(at::randn({floats / 3}));
    st.moments.names.push_back(std::to_string(i) + ".exp_avg");
    st.moments.tensors.push_back(at::randn({floats / 3}));
  }
  return st;
}

void expect_same(const WorkerState& a, const WorkerState& b) {
  EXPECT_EQ(a.step, b.step);
  ASSERT_EQ(a.params.tensors.size(), b.params.tensors.size());
  for (size_t i = 0; i < a.params.tensors.size(); ++i) {
    EXPECT_EQ(a.params.names[i], b.params.names[i]);
    EXPECT_TRUE(at::equal(a.params.tensors[i], b.params.tensors[i])) << a.params.names[i];
    EXPECT_TRUE(at::equal(a.moments.tensors[i], b.moments.tensors[i])) << a.moments.names[i];
  }
}

struct Donors {
  testing::TestSystem ts;
  caf::actor_system& sys = *ts.sys;
  std::vector<caf::actor> workers, donors;

  // A donor serving `snap` (none: holds nothing).
  caf::actor add(std::shared_ptr<const Snapshot> snap, DonorLimits limits = {}) {
    auto store = std::make_shared<SnapshotStore>();
    if (snap) store->put(std::move(snap));
    workers.push_back(
        sys.spawn([](caf::event_based_actor*) -> caf::behavior { return {[](int) {}}; }));
    donors.push_back(sys.spawn(state_donor, workers.back(), store, limits));
    return donors.back();
  }

  caf::expected<WorkerState> fetch(int64_t step, std::shared_ptr<FetchReport> report,
                                   uint32_t window = 2, std::vector<caf::actor> from = {}) {
    FetchSettings fs;
    fs.window = window;
    fs.chunk_timeout = std::chrono::seconds(5);
    fs.deadline = std::chrono::seconds(60);
    fs.who = "joiner";
    auto fetcher = sys.spawn(state_fetcher, from.empty() ? donors : from, step, fs, report);
    caf::scoped_actor self{sys};
    caf::expected<WorkerState> out = caf::make_error(caf::sec::runtime_error, "no answer");
    self->request(fetcher, std::chrono::seconds(90), fetch_state_atom::value)
        .receive([&](const WorkerState& st) { out = st; }, [&](caf::error& e) { out = e; });
    return out;
  }

  ~Donors() {
    for (auto& w : workers) caf::anon_send_exit(w, caf::exit_reason::kill);
  }
};

TEST(StateSnapshot, ChunksCoverTheBytesAndEachCarriesItsChecksum) {
  testing::TestSystem ts;
  const auto snap = make_snapshot(*ts.sys, state_at(5, 300000, 1), kChunk);
  const auto& m = snap->manifest;
  EXPECT_EQ(m.step, 5);
  EXPECT_EQ(m.total, snap->bytes.size());
  ASSERT_EQ(m.crcs.size(), (m.total + kChunk - 1) / kChunk);
  EXPECT_GT(m.crcs.size(), 10u);
  EXPECT_EQ(check_manifest(m, m.total), "");
  EXPECT_NE(check_manifest(m, m.total - 1), "");  // over the message limit
  auto short_list = m;
  short_list.crcs.pop_back();
  EXPECT_NE(check_manifest(short_list, m.total), "");
  const auto [off, len] = chunk_range(m, static_cast<uint32_t>(m.crcs.size() - 1));
  EXPECT_EQ(off + len, m.total);
  // Equal states give equal manifests; another state does not.
  EXPECT_EQ(make_snapshot(*ts.sys, state_at(5, 300000, 1), kChunk)->manifest, m);
  EXPECT_FALSE(make_snapshot(*ts.sys, state_at(5, 300000, 2), kChunk)->manifest == m);
  auto back = decode_state(*ts.sys, snap->bytes);
  ASSERT_TRUE(back) << ts.sys->render(back.error());
  expect_same(*back, state_at(5, 300000, 1));
  // A chunk frame carries its step and index and refuses what is not one.
  auto frame = chunk_frame(5, 3, snap->bytes.data(), 100);
  const auto c = open_chunk_frame(frame);
  EXPECT_EQ(c.step, 5);
  EXPECT_EQ(c.index, 3u);
  EXPECT_EQ(c.bytes.numel(), 100);
  frame.tensors[0] = at::zeros({100}, at::kFloat);
  EXPECT_THROW(open_chunk_frame(frame), messages::DecodeError);
}

TEST(StateFromDonors, AJoinerAssemblesTheStateFromEveryDonorAtOnce) {
  Donors d;
  const auto want = state_at(7, 600000, 3);
  const auto snap = make_snapshot(d.sys, want, kChunk);
  for (int i = 0; i < 3; ++i) d.add(snap);
  auto report = std::make_shared<FetchReport>();
  auto got = d.fetch(7, report);
  ASSERT_TRUE(got) << d.sys.render(got.error());
  expect_same(*got, want);
  EXPECT_EQ(report->bytes, snap->manifest.total);
  EXPECT_EQ(report->chunks, snap->manifest.crcs.size());
  ASSERT_EQ(report->chunks_from.size(), 3u);
  uint64_t sum = 0;
  for (auto n : report->chunks_from) {
    EXPECT_GT(n, 0u);  // every donor sent a share
    sum += n;
  }
  EXPECT_EQ(sum, report->chunks);
  EXPECT_EQ(report->chunks_again, 0u);
  EXPECT_EQ(got->source, "3 donors at step 7");
}

TEST(StateFromDonors, ADonorKilledMidTransferIsDroppedAndOnlyItsUnfinishedChunksComeAgain) {
  Donors d;
  const auto want = state_at(7, 600000, 4);
  const auto snap = make_snapshot(d.sys, want, kChunk);
  d.add(snap);
  d.add(snap);
  // It ends as killed once it has sent 1 chunk, fewer than the window of 2 it is asked for at
  // the start: one chunk asked of it is always left, which no other donor may send before it
  // is dropped. (Dying after 3, a donor the scheduler ran late could be asked for no more than
  // those 3 while the others sent the rest, and the fetch ended before its death was noticed:
  // once in a loaded suite.)
  DonorLimits dies;
  dies.die_after_chunks = 1;
  d.add(snap, dies);
  auto report = std::make_shared<FetchReport>();
  const uint32_t window = 2;
  auto got = d.fetch(7, report, window);
  ASSERT_TRUE(got) << d.sys.render(got.error());
  expect_same(*got, want);
  EXPECT_EQ(report->donors_dropped, 1u);
  EXPECT_EQ(report->chunks_from[2], 1u);
  EXPECT_GE(report->chunks_again, 1u);
  EXPECT_LE(report->chunks_again, window);  // what it had been asked and not sent
  EXPECT_EQ(report->chunks_from[0] + report->chunks_from[1] + 1, report->chunks);
}

TEST(StateFromDonors, AChunkThatFailsItsChecksumDropsItsDonorAndComesFromAnother) {
  Donors d;
  const auto want = state_at(7, 600000, 5);
  const auto snap = make_snapshot(d.sys, want, kChunk);
  auto bad = std::make_shared<Snapshot>(*snap);  // the same manifest, other bytes
  for (size_t off = 10; off < bad->bytes.size(); off += kChunk) bad->bytes[off] ^= 0x5a;
  d.add(snap);
  d.add(bad);
  d.add(snap);
  auto report = std::make_shared<FetchReport>();
  auto got = d.fetch(7, report);
  ASSERT_TRUE(got) << d.sys.render(got.error());
  expect_same(*got, want);
  EXPECT_EQ(report->chunks_from[1], 0u);
  EXPECT_EQ(report->donors_dropped, 1u);
}

TEST(StateFromDonors, DonorsOfAnotherStepOrAnotherStateAreNeverAskedForAChunk) {
  Donors d;
  const auto want = state_at(7, 300000, 6);
  const auto snap = make_snapshot(d.sys, want, kChunk);
  d.add(make_snapshot(d.sys, state_at(6, 300000, 6), kChunk));  // a step behind
  d.add(snap);
  d.add(make_snapshot(d.sys, state_at(7, 300000, 9), kChunk));  // the same step, other bytes
  d.add(snap);
  d.add(nullptr);  // holds nothing
  auto report = std::make_shared<FetchReport>();
  auto got = d.fetch(7, report);
  ASSERT_TRUE(got) << d.sys.render(got.error());
  expect_same(*got, want);
  EXPECT_EQ(report->chunks_from[0], 0u);
  EXPECT_EQ(report->chunks_from[2], 0u);
  EXPECT_EQ(report->chunks_from[4], 0u);
  EXPECT_EQ(report->chunks_from[1] + report->chunks_from[3], report->chunks);
}

TEST(StateFromDonors, EightJoinersAtOnceOnOneDonorServingTwoAtATimeAllComplete) {
  Donors d;
  const auto want = state_at(3, 200000, 7);
  DonorLimits two;
  two.max_joiners = 2;
  d.add(make_snapshot(d.sys, want, kChunk), two);
  FetchSettings fs;
  fs.window = 2;
  fs.chunk_timeout = std::chrono::seconds(5);
  fs.deadline = std::chrono::seconds(60);
  fs.who = "joiner";
  std::vector<caf::actor> fetchers;
  for (int i = 0; i < 8; ++i)
    fetchers.push_back(d.sys.spawn(state_fetcher, d.donors, int64_t{3}, fs, nullptr));
  caf::scoped_actor self{d.sys};
  for (auto& f : fetchers) self->send(f, fetch_state_atom::value);
  size_t done = 0;
  for (int i = 0; i < 8; ++i)
    self->receive(
        [&](const WorkerState& st) {
          expect_same(st, want);
          ++done;
        },
        [&](caf::error& e) { ADD_FAILURE() << d.sys.render(e); },
        caf::after(std::chrono::seconds(60)) >> [&] { ADD_FAILURE() << "a joiner waits"; });
  EXPECT_EQ(done, 8u);
}

TEST(StateFromDonors, ADonorServesAtMostMaxJoinersAndTheNextTakesItsTurnWhenOneIsDone) {
  Donors d;
  const auto want = state_at(3, 200000, 10);
  DonorLimits one;
  one.max_joiners = 1;
  auto donor = d.add(make_snapshot(d.sys, want, kChunk), one);
  caf::scoped_actor first{d.sys};
  std::optional<messages::StateManifest> m;
  first->request(donor, std::chrono::seconds(5), manifest_atom::value, int64_t{3}, std::string())
      .receive([&](const messages::StateManifest& x) { m = x; },
               [&](caf::error& e) { FAIL() << d.sys.render(e); });
  ASSERT_TRUE(m);  // `first` is the donor's one joiner now
  // Neither a manifest of another step nor a second joiner is given.
  first->request(donor, std::chrono::seconds(5), manifest_atom::value, int64_t{2}, std::string())
      .receive([&](const messages::StateManifest&) { ADD_FAILURE() << "a manifest of step 2"; },
               [&](caf::error& e) {
                 EXPECT_NE(d.sys.render(e).find("no snapshot of step 2"), std::string::npos);
               });
  FetchSettings fs;
  fs.chunk_timeout = std::chrono::seconds(5);
  fs.deadline = std::chrono::seconds(60);
  fs.who = "second";
  auto fetcher = d.sys.spawn(state_fetcher, d.donors, int64_t{3}, fs, nullptr);
  caf::scoped_actor self{d.sys};
  self->send(fetcher, fetch_state_atom::value);
  bool early = false;
  self->receive([&](const WorkerState&) { early = true; }, [&](caf::error&) { early = true; },
                caf::after(std::chrono::milliseconds(1500)) >> [] {});
  EXPECT_FALSE(early) << "a second joiner was served while the first held the only turn";
  first->send(donor, fetch_done_atom::value);
  bool done = false;
  self->receive(
      [&](const WorkerState& st) {
        expect_same(st, want);
        done = true;
      },
      [&](caf::error& e) { ADD_FAILURE() << d.sys.render(e); },
      caf::after(std::chrono::seconds(20)) >> [] {});
  EXPECT_TRUE(done);
}

TEST(StateFromDonors, WithEveryDonorLostTheFetchFailsSayingHowFarItGot) {
  Donors d;
  const auto snap = make_snapshot(d.sys, state_at(7, 600000, 8), kChunk);
  DonorLimits dies;
  dies.die_after_chunks = 2;
  d.add(snap, dies);
  d.add(snap, dies);
  auto got = d.fetch(7, std::make_shared<FetchReport>());
  ASSERT_FALSE(got);
  const auto why = d.sys.render(got.error());
  EXPECT_NE(why.find("every donor was lost with 4 of"), std::string::npos) << why;
}

}  // namespace
}  // namespace swarmrt::actors::recovery
