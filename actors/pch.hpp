// Precompiled header for the actor library: LibTorch and CAF parsed once per target.
#pragma once
#include <ATen/ATen.h>
#include <spdlog/spdlog.h>
#include <torch/nn/module.h>
#include <torch/optim/adamw.h>
#include <caf/all.hpp>
#include <nlohmann/json.hpp>
