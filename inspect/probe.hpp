// What the console sees of one actor without asking it: messages handled, time spent on them,
// messages waiting, and (while someone traces it) the kinds of the messages it takes and sends.
//
// Every swarmrt actor is spawned as a `Probed` actor (spawn_probed below): a stateful actor whose
// enqueue and consume count into its ActorProbe. The counters are atomics, so the inspector of
// the process reads them from its own thread while the actor is busy: a worker stuck in a long
// forward still shows its growing mailbox, which asking the worker itself never could.
// (CAF 0.17's actor profiler would do this, but Debian builds CAF without it.)
#pragma once

#include <atomic>
#include <caf/all.hpp>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace swarmrt::inspect {

// One message taken ("in") or sent to an actor of this process ("out") by a traced actor.
struct TraceEntry {
  double t = 0;          // seconds since the trace began
  std::string dir;       // "in" or "out"
  std::string kind;      // the message's atom (or type); a reply is "reply"
  std::string detail;    // what the actor said of it (a frame's direction, ...)
  caf::actor_addr peer;  // the sender ("in") or the receiver ("out")
  double busy_ms = 0;    // "in": how long the actor spent on it
};

class ActorProbe {
 public:
  using Clock = std::chrono::steady_clock;

  uint64_t handled() const { return handled_.load(std::memory_order_relaxed); }
  uint64_t waiting() const {
    const auto in = enqueued_.load(std::memory_order_relaxed);
    const auto out = handled_.load(std::memory_order_relaxed);
    return in > out ? in - out : 0;
  }
  double busy_s() const { return busy_ns_.load(std::memory_order_relaxed) * 1e-9; }
  double uptime_s() const { return std::chrono::duration<double>(Clock::now() - born_).count(); }
  // A stage worker's measured samples/s (the EMA its senders' wiring also measures), published
  // by the worker so that the inspector reads it without asking; negative: none yet.
  double rate() const { return rate_.load(std::memory_order_relaxed); }
  void set_rate(double samples_per_s) { rate_.store(samples_per_s, std::memory_order_relaxed); }

  // Tracing: at most `limit` entries until `until`; take_trace() ends it and hands them over.
  void start_trace(size_t limit, Clock::time_point until);
  std::vector<TraceEntry> take_trace();
  bool tracing() const { return tracing_.load(std::memory_order_relaxed); }

  // Called by Probed only.
  void on_enqueue() { enqueued_.fetch_add(1, std::memory_order_relaxed); }
  // Records the start of a message's handling (returns whether it is traced).
  bool begin(const caf::mailbox_element& x, const caf::actor_system& sys);
  void end(Clock::time_point started, bool traced);
  void note_out(const caf::mailbox_element& x, const caf::actor_addr& receiver,
                const caf::actor_system& sys);
  void annotate(const std::string& detail);

 private:
  bool record(TraceEntry entry);
  Clock::time_point born_ = Clock::now();
  std::atomic<uint64_t> enqueued_{0};
  std::atomic<uint64_t> handled_{0};
  std::atomic<uint64_t> busy_ns_{0};
  std::atomic<bool> tracing_{false};
  std::atomic<double> rate_{-1.0};
  std::mutex mu_;
  std::vector<TraceEntry> trace_;
  size_t limit_ = 0;
  Clock::time_point trace_start_, trace_until_;
  size_t current_ = SIZE_MAX;  // the entry of the message being handled, while traced
};

// What a Probed actor offers to the inspector of its process.
class ProbeHolder {
 public:
  virtual ~ProbeHolder() = default;
  virtual ActorProbe& probe() = 0;
};

// The probe of a local actor, or nullptr (a remote handle, an actor spawned without one).
ActorProbe* probe_of(const caf::actor& handle);
ActorProbe* probe_of(const caf::strong_actor_ptr& handle);

// Called from a handler: describes the message being handled in the trace ("forward").
void annotate(const std::string& detail);

// Called from a handler: publishes the handling actor's samples/s (ActorProbe::rate).
void report_rate(double samples_per_s);

// Tells every probe whether any actor is traced (then senders are looked up per message).
void count_trace(int delta);
bool any_traced();

// The name of a message's first element: its atom, or its type.
std::string message_kind(const caf::mailbox_element& x, const caf::actor_system& sys);

namespace detail {
void set_current(ActorProbe* probe);
}

template <class State, class Base = caf::event_based_actor>
class Probed : public caf::stateful_actor<State, Base>, public ProbeHolder {
 public:
  using super = caf::stateful_actor<State, Base>;
  using behavior_type = typename Base::behavior_type;
  using init_fn = std::function<behavior_type(super*)>;

  Probed(caf::actor_config& cfg, init_fn init) : super(cfg), init_(std::move(init)) {}

  // The function and its arguments go once used, as with CAF's own function-based actors: a
  // handle among them (a roster holds every actor) must not keep anything alive.
  behavior_type make_behavior() override {
    auto init = std::move(init_);
    init_ = nullptr;
    return init(this);
  }

  void enqueue(caf::mailbox_element_ptr ptr, caf::execution_unit* eu) override {
    probe_.on_enqueue();
    super::enqueue(std::move(ptr), eu);
  }

  caf::invoke_message_result consume(caf::mailbox_element& x) override {
    const auto started = ActorProbe::Clock::now();
    const bool traced = probe_.begin(x, this->system());
    if (any_traced() && x.sender)
      if (auto* from = probe_of(x.sender); from && from != &probe_ && from->tracing())
        from->note_out(x, this->address(), this->system());
    detail::set_current(&probe_);
    auto result = super::consume(x);
    detail::set_current(nullptr);
    probe_.end(started, traced);
    return result;
  }

  ActorProbe& probe() override { return probe_; }

 private:
  init_fn init_;
  ActorProbe probe_;
};

// spawn_probed(sys, fn, args...) spawns what sys.spawn(fn, args...) would, as a Probed actor.
template <caf::spawn_options Os = caf::no_spawn_options, class State, class... Ps, class... Ts>
caf::actor spawn_probed(caf::actor_system& sys,
                        caf::behavior (*fn)(caf::stateful_actor<State>*, Ps...), Ts&&... xs) {
  using Impl = Probed<State>;
  typename Impl::init_fn init = [fn, args = std::make_tuple(std::decay_t<Ts>(xs)...)](
                                    caf::stateful_actor<State>* self) mutable {
    return std::apply([&](auto&... a) { return fn(self, a...); }, args);
  };
  return sys.spawn<Impl, Os>(std::move(init));
}

// The same for a typed actor whose function takes Handle::stateful_pointer<State>.
template <class Handle, class State, class... Ps, class... Ts>
Handle spawn_probed_typed(
    caf::actor_system& sys,
    typename Handle::behavior_type (*fn)(typename Handle::template stateful_pointer<State>, Ps...),
    Ts&&... xs) {
  using Impl = Probed<State, typename Handle::base>;
  typename Impl::init_fn init =
      [fn, args = std::make_tuple(std::decay_t<Ts>(xs)...)](typename Impl::super* self) mutable {
        return std::apply([&](auto&... a) { return fn(self, a...); }, args);
      };
  return caf::actor_cast<Handle>(sys.spawn<Impl>(std::move(init)));
}

}  // namespace swarmrt::inspect
