// The devices a node may put its workers on, as it names them in its join request. The node
// checks its --device with this rule before it joins and the directory checks the request
// with it again: two rules once disagreed, and the directory refused "cuda" (one GPU per
// worker in turn, what launch --from-env asks for on a GPU task) that the node accepted.
#pragma once

#include <string>

namespace swarmrt::messages {

// Empty when `device` is "cpu", "cuda" or "cuda:K" (K decimal digits); else why not.
std::string device_name_problem(const std::string& device);

}  // namespace swarmrt::messages
