// Precompiled header for the supervisors library: CAF and the tensor type parsed once.
#pragma once
#include <ATen/core/Tensor.h>
#include <spdlog/spdlog.h>
#include <caf/all.hpp>
#include <nlohmann/json.hpp>
