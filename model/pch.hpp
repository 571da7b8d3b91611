// Precompiled header for translation units that see LibTorch: parsing these once per target
// instead of once per file is most of the build time on a 2-core machine.
#pragma once
#include <ATen/ATen.h>
#include <spdlog/spdlog.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/optim/adamw.h>
#include <nlohmann/json.hpp>
