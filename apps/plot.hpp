// Drawing a chart of runs with gnuplot (plot_command.cpp): `swarmrt plot` and the status page.
#pragma once

#include <string>
#include <vector>

#include "report/chart.hpp"

namespace swarmrt::apps {

// Renders `series` into `out` (its format from options) through gnuplot: drawn into a
// temporary file beside it and renamed over it on success. "" when done, else why not (and
// `out` is left as it was). `script_out`, if set, keeps the gnuplot script.
std::string render_chart(const std::vector<report::RunSeries>& series,
                         const report::ChartOptions& options, const std::string& out,
                         const std::string& script_out = "");

}  // namespace swarmrt::apps
