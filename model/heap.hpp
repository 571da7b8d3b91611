// How a training process's heap gives memory back to the kernel.
#pragma once

namespace swarmrt::model {

// glibc hands a thread's freed memory back to the kernel as soon as 128 KiB of it lies free at
// the top of the heap (and maps anything above the threshold afresh), so a worker that
// receives hop tensors in one process and frees them in another pattern than it allocates
// pays a page fault per page of every hop: a 2-process pipeline spent 8% of its time in the
// kernel that way, and kept 0.84x of one process's tokens/s instead of 0.92x
// (docs/results.md). A training process reuses the same sizes every step, so it keeps what it
// freed, up to 64 MiB a heap. The MALLOC_*_ environment variables still decide when set.
// Every swarmrt process and the runtime benchmarks call this first.
void keep_freed_memory();

}  // namespace swarmrt::model
