// The chart `swarmrt plot` draws, as a gnuplot script (gnuplot-nox from Debian renders it):
// three panels against tokens trained — training and validation loss with the runs' events
// marked on the curve, the bytes each run sent by kind, and tokens/s — one colour per run.
#pragma once

#include <string>
#include <vector>

#include "report/run_series.hpp"

namespace swarmrt::report {

enum class ChartFormat { png, svg };

// From the output's extension (.png or .svg); std::invalid_argument names any other.
ChartFormat chart_format(const std::string& out);

struct ChartOptions {
  ChartFormat format = ChartFormat::png;
  std::string title = "swarmrt";
  int width = 1200, height = 1200;
  int smooth_steps = 10;  // tokens/s is averaged over this many steps
};

// The whole script: terminal, output (`output`), the series as inline data blocks, the panels.
std::string chart_script(const std::vector<RunSeries>& runs, const ChartOptions& options,
                         const std::string& output);

}  // namespace swarmrt::report
