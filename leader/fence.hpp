// The fence on a run directory: when a coordinator leads a run through etcd (leader/), every
// change it makes to the run directory (a metrics record, a checkpoint moved into place)
// first asks the fence, and a leader whose lease may have lapsed writes nothing. Records then
// carry the leader's epoch, so a reader sees which leader wrote each one. Without a fence
// (every run with one coordinator) writes are always allowed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace swarmrt::leader {

// `why_not()`: empty while this process may write, else the reason it may not.
void set_write_fence(std::function<std::string()> why_not, int64_t epoch);
// The reason this process may not write now; empty when it may.
std::string write_fenced();
// The epoch of the leader this process is; 0 without a fence.
int64_t write_epoch();

}  // namespace swarmrt::leader
