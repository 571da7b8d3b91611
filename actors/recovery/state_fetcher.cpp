#include "actors/recovery/state_fetcher.hpp"

#include <spdlog/spdlog.h>

#include <cstring>

#include "messages/atoms.hpp"
#include "transport/bulk.hpp"

namespace swarmrt::actors::recovery {
using namespace swarmrt::atoms;
using Clock = std::chrono::steady_clock;
using FetcherSelf = caf::stateful_actor<fetcher_state>;

namespace {

constexpr std::chrono::milliseconds kBusyPause{500};

std::optional<size_t> donor_index(FetcherSelf* self, const caf::actor_addr& who) {
  const auto& d = self->state.donors;
  for (size_t i = 0; i < d.size(); ++i)
    if (d[i].address() == who) return i;
  return std::nullopt;
}

void finish(FetcherSelf* self) {
  auto& s = self->state;
  if (!s.promise || (!s.result && s.error.empty())) return;
  for (size_t i = 0; i < s.donors.size(); ++i)
    if (s.answered[i] && s.manifests[i]) self->send(s.donors[i], fetch_done_atom::value);
  if (s.result)
    s.promise->deliver(std::move(*s.result));
  else
    s.promise->deliver(caf::make_error(caf::sec::runtime_error, s.error));
  self->quit();
}

void fail(FetcherSelf* self, std::string why) {
  auto& s = self->state;
  if (s.result || !s.error.empty()) return;
  s.error = s.settings.who + " could not fetch its state: " + why;
  s.bytes = {};
  finish(self);
}

// The chunks each live donor has room for.
void pump(FetcherSelf* self) {
  auto& s = self->state;
  if (!s.schedule) return;
  for (size_t i = 0; i < s.donors.size(); ++i) {
    if (!s.manifests[i] || s.schedule->dropped(i)) continue;
    if (s.schedule->asked_of(i) == 0) s.last_progress[i] = Clock::now();
    while (auto c = s.schedule->next(i))
      self->send(s.donors[i], state_chunk_atom::value, s.step, *c);
  }
}

// No donor may still send what is missing: neither a live one nor one waiting for a turn.
void check_left(FetcherSelf* self) {
  auto& s = self->state;
  if (!s.schedule || s.schedule->complete()) return;
  for (size_t i = 0; i < s.donors.size(); ++i)
    if (!s.schedule->dropped(i) && (s.manifests[i] || s.busy[i])) return;
  fail(self, "every donor was lost with " + std::to_string(s.schedule->done_count()) + " of " +
                 std::to_string(s.schedule->chunks()) + " chunks in");
}

void drop(FetcherSelf* self, size_t i, const std::string& why) {
  auto& s = self->state;
  if (!s.schedule || s.schedule->dropped(i)) return;
  const size_t back = s.schedule->drop(i);
  s.busy[i] = false;
  ++s.report->donors_dropped;
  spdlog::warn("{}: drops state donor {} ({}); {} of its chunks go to the others", s.settings.who,
               i, why, back);
  pump(self);
  check_left(self);
}

void assemble(FetcherSelf* self) {
  auto& s = self->state;
  auto& r = *s.report;
  r.bytes = s.bytes.size();
  r.chunks = s.schedule->chunks();
  r.chunks_again = s.schedule->asked_again();
  r.chunks_from.clear();
  for (size_t i = 0; i < s.donors.size(); ++i) r.chunks_from.push_back(s.schedule->delivered_by(i));
  r.seconds = std::chrono::duration<double>(Clock::now() - s.started).count();
  auto st = decode_state(self->system(), s.bytes);
  s.bytes = {};
  if (!st) return fail(self, self->system().render(st.error()));
  size_t used = 0;
  for (auto n : r.chunks_from) used += n > 0;
  st->source = std::to_string(used) + " donor" + (used == 1 ? "" : "s") + " at step " +
               std::to_string(s.step);
  spdlog::info(
      "{} fetched its state ({:.1f} MiB, step {}) from {} donors in {:.2f} s; {} chunks "
      "asked again",
      s.settings.who, r.bytes / 1048576.0, s.step, used, r.seconds, r.chunks_again);
  s.result = std::move(*st);
  finish(self);
}

void on_chunk(FetcherSelf* self, const messages::Frame& frame, const caf::actor_addr& from) {
  auto& s = self->state;
  const auto i = donor_index(self, from);
  if (!i || !s.schedule || s.schedule->dropped(*i) || s.result) return;
  Chunk c;
  try {
    c = open_chunk_frame(frame);
  } catch (const std::exception& e) {
    return drop(self, *i, e.what());
  }
  const auto& m = *s.manifest;
  if (c.step != s.step || c.index >= m.crcs.size())
    return drop(self, *i,
                "a chunk of step " + std::to_string(c.step) + ", index " + std::to_string(c.index));
  const auto [offset, length] = chunk_range(m, c.index);
  const char* data = static_cast<const char*>(c.bytes.data_ptr());
  if (static_cast<uint64_t>(c.bytes.numel()) != length ||
      crc_of(data, static_cast<size_t>(length)) != m.crcs[c.index])
    return drop(self, *i, "chunk " + std::to_string(c.index) + " fails its checksum");
  if (!s.schedule->arrived(*i, c.index)) return;  // not asked of it, or in already
  std::memcpy(s.bytes.data() + offset, data, static_cast<size_t>(length));
  s.last_progress[*i] = Clock::now();
  if (s.schedule->complete()) return assemble(self);
  pump(self);
}

// The manifest most donors agree on; donors of another are dropped, never asked for a chunk.
void start_fetching(FetcherSelf* self) {
  auto& s = self->state;
  size_t best = s.donors.size(), votes = 0;
  for (size_t i = 0; i < s.donors.size(); ++i) {
    if (!s.manifests[i]) continue;
    size_t n = 0;
    for (const auto& m : s.manifests) n += m && *m == *s.manifests[i];
    if (n > votes) best = i, votes = n;
  }
  s.schedule.emplace(0, s.donors.size(), s.settings.window);
  if (best == s.donors.size()) {
    bool waiting = false;
    for (bool b : s.busy) waiting = waiting || b;
    if (!waiting) fail(self, "no donor had a snapshot of step " + std::to_string(s.step));
    s.schedule.reset();
    return;
  }
  s.manifest = *s.manifests[best];
  if (auto why = check_manifest(*s.manifest, s.settings.max_bytes); !why.empty())
    return fail(self, why);
  s.schedule.emplace(static_cast<uint32_t>(s.manifest->crcs.size()), s.donors.size(),
                     s.settings.window);
  s.bytes.resize(s.manifest->total);
  for (size_t i = 0; i < s.donors.size(); ++i)
    if (!s.busy[i] && !(s.manifests[i] && *s.manifests[i] == *s.manifest)) {
      if (s.manifests[i])
        spdlog::warn("{}: state donor {} holds another snapshot", s.settings.who, i);
      s.schedule->drop(i);
      s.manifests[i].reset();
    }
  pump(self);
}

void ask_manifest(FetcherSelf* self, size_t i) {
  auto& s = self->state;
  self->request(s.donors[i], s.settings.chunk_timeout, manifest_atom::value, s.step,
                s.settings.endpoint)
      .then(
          [=](const messages::StateManifest& m) {
            auto& s = self->state;
            s.answered[i] = true;
            s.busy[i] = false;
            s.manifests[i] = m;
            if (!s.schedule) {
              bool all = true;
              for (bool a : s.answered) all = all && a;
              if (all) start_fetching(self);
            } else if (s.manifest && m == *s.manifest && !s.schedule->dropped(i)) {
              pump(self);  // a busy donor's turn came
            } else {
              s.manifests[i].reset();
              drop(self, i, "holds another snapshot");
            }
          },
          [=](const caf::error& e) {
            auto& s = self->state;
            const auto why = self->system().render(e);
            s.answered[i] = true;
            if (why.find("busy") != std::string::npos) {
              s.busy[i] = true;
              self->delayed_send(self, kBusyPause, manifest_atom::value, static_cast<uint64_t>(i));
            } else if (s.schedule) {
              drop(self, i, why);
            }
            if (!s.schedule) {
              bool all = true;
              for (bool a : s.answered) all = all && a;
              if (all) start_fetching(self);
            }
          });
}

}  // namespace

caf::behavior state_fetcher(FetcherSelf* self, std::vector<caf::actor> donors, int64_t step,
                            FetchSettings settings, std::shared_ptr<FetchReport> report) {
  auto& s = self->state;
  s.donors = std::move(donors);
  s.step = step;
  s.settings = std::move(settings);
  s.report = report ? std::move(report) : std::make_shared<FetchReport>();
  const size_t n = s.donors.size();
  s.manifests.resize(n);
  s.answered.assign(n, false);
  s.busy.assign(n, false);
  s.last_progress.assign(n, Clock::now());
  if (n == 0) s.error = s.settings.who + " was named no donor";
  for (size_t i = 0; i < n; ++i) {
    self->monitor(s.donors[i]);
    ask_manifest(self, i);
  }
  self->set_down_handler([=](caf::down_msg& dm) {
    if (auto i = donor_index(self, dm.source)) {
      auto& s = self->state;
      s.busy[*i] = false;
      if (s.schedule) drop(self, *i, "it went down: " + self->system().render(dm.reason));
    }
  });
  self->delayed_send(self, s.settings.chunk_timeout / 4, fetch_tick_atom::value);
  self->delayed_send(self, s.settings.deadline, fetch_done_atom::value);
  return {
      [=](fetch_state_atom) -> caf::result<messages::WorkerState> {
        auto promise = self->make_response_promise<messages::WorkerState>();
        self->state.promise = promise;
        finish(self);
        return promise;
      },
      // A donor that was busy is asked again.
      [=](manifest_atom, uint64_t i) {
        auto& s = self->state;
        if (i < s.donors.size() && s.busy[i] && !(s.schedule && s.schedule->dropped(i)))
          ask_manifest(self, i);
      },
      [=](fetch_tick_atom) {
        auto& s = self->state;
        if (s.schedule)
          for (size_t i = 0; i < s.donors.size(); ++i)
            if (!s.schedule->dropped(i) && s.schedule->asked_of(i) > 0 &&
                Clock::now() - s.last_progress[i] > s.settings.chunk_timeout)
              drop(self, i,
                   "no chunk for " + std::to_string(s.settings.chunk_timeout.count()) + " ms");
        self->delayed_send(self, s.settings.chunk_timeout / 4, fetch_tick_atom::value);
      },
      [=](fetch_done_atom) {
        if (self->current_sender() == self->ctrl()) fail(self, "no whole state by the deadline");
      },
      [=](state_chunk_atom, int64_t, uint32_t index, const std::string& why) {
        if (auto i = donor_index(self, caf::actor_cast<caf::actor_addr>(self->current_sender())))
          drop(self, *i, "it refused chunk " + std::to_string(index) + ": " + why);
      },
      [=](round_atom, const messages::Frame& frame) {
        on_chunk(self, frame, caf::actor_cast<caf::actor_addr>(self->current_sender()));
      },
      [=](chunk_atom, const std::vector<uint8_t>& bytes) {
        const auto from = caf::actor_cast<caf::actor_addr>(self->current_sender());
        if (auto done = self->state.receiver.add(bytes, "a state donor"))
          on_chunk(self, done->frame, from);
      },
      [=](transport::bulk_atom, uint64_t id) {
        if (auto d = transport::claim_bulk(self, id))
          if (d->error.empty()) on_chunk(self, d->frame, d->sender.address());
      },
      [=](transport::bulk_ready_atom, uint64_t id) {
        if (auto d = transport::take_bulk(id))
          if (d->error.empty()) on_chunk(self, d->frame, d->sender.address());
      },
  };
}

}  // namespace swarmrt::actors::recovery
