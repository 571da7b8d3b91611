// How many CPU threads torch work may use in this process.
#pragma once

namespace swarmrt::model {

// Gives `n` threads to the GEMMs: with OpenBLAS (whose pthread build keeps a pool that
// at::set_num_threads does not reach) to OpenBLAS, torch's intra-op pool keeping one; without
// it to torch's pool.
void set_compute_threads(int n);

}  // namespace swarmrt::model
