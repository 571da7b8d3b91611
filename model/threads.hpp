// How many CPU threads torch work may use in this process.
#pragma once

namespace swarmrt::model {

// Sets torch's intra-op threads and OpenBLAS's own pool (the pthread build of OpenBLAS keeps
// a separate pool that at::set_num_threads does not reach) to `n`.
void set_compute_threads(int n);

}  // namespace swarmrt::model
