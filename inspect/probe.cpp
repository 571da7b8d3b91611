#include "inspect/probe.hpp"

#include <caf/type_nr.hpp>

namespace swarmrt::inspect {
namespace {
std::atomic<int> traced_actors{0};
thread_local ActorProbe* current_probe = nullptr;
}  // namespace

void count_trace(int delta) {
  traced_actors.fetch_add(delta, std::memory_order_relaxed);
}
bool any_traced() {
  return traced_actors.load(std::memory_order_relaxed) > 0;
}

void detail::set_current(ActorProbe* probe) {
  current_probe = probe;
}

void report_rate(double samples_per_s) {
  if (current_probe) current_probe->set_rate(samples_per_s);
}

void annotate(const std::string& detail) {
  if (current_probe && current_probe->tracing()) current_probe->annotate(detail);
}

ActorProbe* probe_of(const caf::strong_actor_ptr& handle) {
  if (!handle) return nullptr;
  // A proxy of a remote actor is no ProbeHolder: nullptr.
  auto* holder = dynamic_cast<ProbeHolder*>(handle->get());
  return holder ? &holder->probe() : nullptr;
}

ActorProbe* probe_of(const caf::actor& handle) {
  return probe_of(caf::actor_cast<caf::strong_actor_ptr>(handle));
}

std::string message_kind(const caf::mailbox_element& x, const caf::actor_system& sys) {
  const auto& content = x.content();
  std::string kind;
  if (content.size() == 0) {
    kind = "()";
  } else if (content.type(0).first == caf::type_nr<caf::atom_value>::value) {
    kind = caf::to_string(content.get_as<caf::atom_value>(0));
  } else if (const auto nr = content.type(0).first; nr != 0) {
    kind = caf::numbered_type_names[nr - 1];
  } else {
    kind = sys.types().portable_name(content.type(0));
  }
  return x.mid.is_response() ? "reply " + kind : kind;
}

void ActorProbe::start_trace(size_t limit, Clock::time_point until) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!tracing_) count_trace(1);
  trace_.clear();
  current_ = SIZE_MAX;
  limit_ = limit;
  trace_start_ = Clock::now();
  trace_until_ = until;
  tracing_ = true;
}

std::vector<TraceEntry> ActorProbe::take_trace() {
  std::lock_guard<std::mutex> lock(mu_);
  if (tracing_) count_trace(-1);
  tracing_ = false;
  current_ = SIZE_MAX;
  return std::move(trace_);
}

// Under mu_. False once the trace is full or past its end: it then stops by itself, so a
// console that vanished mid-trace leaves no cost behind.
bool ActorProbe::record(TraceEntry entry) {
  const auto now = Clock::now();
  if (trace_.size() >= limit_ || now > trace_until_) {
    if (tracing_) count_trace(-1);
    tracing_ = false;
    return false;
  }
  entry.t = std::chrono::duration<double>(now - trace_start_).count();
  trace_.push_back(std::move(entry));
  return true;
}

bool ActorProbe::begin(const caf::mailbox_element& x, const caf::actor_system& sys) {
  if (!tracing()) return false;
  TraceEntry e;
  e.dir = "in";
  e.kind = message_kind(x, sys);
  if (x.sender) e.peer = x.sender->address();
  std::lock_guard<std::mutex> lock(mu_);
  if (!tracing_ || !record(std::move(e))) return false;
  current_ = trace_.size() - 1;
  return true;
}

void ActorProbe::end(Clock::time_point started, bool traced) {
  const auto took = Clock::now() - started;
  busy_ns_.fetch_add(
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(took).count()),
      std::memory_order_relaxed);
  handled_.fetch_add(1, std::memory_order_relaxed);
  if (!traced) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (current_ < trace_.size())
    trace_[current_].busy_ms = std::chrono::duration<double, std::milli>(took).count();
  current_ = SIZE_MAX;
}

void ActorProbe::note_out(const caf::mailbox_element& x, const caf::actor_addr& receiver,
                          const caf::actor_system& sys) {
  TraceEntry e;
  e.dir = "out";
  e.kind = message_kind(x, sys);
  e.peer = receiver;
  std::lock_guard<std::mutex> lock(mu_);
  if (tracing_) record(std::move(e));
}

void ActorProbe::annotate(const std::string& detail) {
  std::lock_guard<std::mutex> lock(mu_);
  if (current_ < trace_.size()) trace_[current_].detail = detail;
}

}  // namespace swarmrt::inspect
