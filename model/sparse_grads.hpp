// Sparse gradients for DiLoCo's synchronous warm-up (diloco.warmup_compress = topk; the
// gradient analogue of the sparse rounds in topk.hpp, after Deep Gradient Compression, Lin et
// al. 2018, and SparseLoCo's all-gather of sparse contributions).
//
// Each step every worker sends, for each of its P gradients g, the top-k encoding of g + e,
// where e is what its earlier steps left unsent (the error feedback); e becomes g + e − ĝ. The
// averager checks each worker's P wires and answers every worker with all of them, in worker
// order, and the factor that makes their sum the mean over the step's samples. Each worker
// decodes and sums them itself: the same wires in the same order give every worker the same
// gradient bit for bit, so the replicas stay equal, and no second encoding (of the sum) loses
// anything. With n workers a step moves n wires up and n² down: n = 2 sends 6 wires of
// ⌈density·chunk⌉ values at (⌈log2 chunk⌉ + bits) bits each per chunk, against float32's 4
// whole gradients.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "model/topk.hpp"

namespace swarmrt::model {

TopK warmup_topk(const config::DilocoConfig& d);

// One worker's P wires for its gradients `grads` (any shapes), updating `residual` (one per
// gradient; empty or undefined: zeros). A gradient with a NaN or Inf leaves its residual as it
// was: its wire says so in its range, and the averager refuses it.
std::vector<at::Tensor> encode_sparse_grads(const std::vector<at::Tensor>& grads,
                                            std::vector<at::Tensor>& residual, const TopK& t);

// Checks one worker's wires before the averager relays them: P of them, each a top-k wire of
// the values the first accepted worker's had (`numels`, filled from this one when empty).
// Returns what is wrong, or "".
std::string check_sparse_grads(const std::vector<at::Tensor>& wires, const TopK& t,
                               std::vector<int64_t>& numels);

// The averager's answer: the scale (one float32; frames carry no doubles), then each
// worker's P wires.
std::vector<at::Tensor> sparse_answer(double scale,
                                      const std::vector<const std::vector<at::Tensor>*>& wires);

// A worker's gradients from the averager's answer: scale · the sum of every worker's decoded
// wires, each in the shape of `like`'s tensor. std::invalid_argument naming what is wrong.
std::vector<at::Tensor> sum_sparse_answer(const std::vector<at::Tensor>& answer, const TopK& t,
                                          const std::vector<at::Tensor>& like);

}  // namespace swarmrt::model
