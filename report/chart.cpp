#include "report/chart.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>

namespace swarmrt::report {

ChartFormat chart_format(const std::string& out) {
  auto ends = [&](const std::string& ext) {
    return out.size() > ext.size() && out.compare(out.size() - ext.size(), ext.size(), ext) == 0;
  };
  if (ends(".png")) return ChartFormat::png;
  if (ends(".svg")) return ChartFormat::svg;
  throw std::invalid_argument("--out " + out + ": the chart is written as .png or .svg");
}

namespace {

// A gnuplot string literal: in double quotes, with backslashes and quotes escaped.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n' || c == '\r') c = ' ';
    out += c;
  }
  return out + "\"";
}

void block(std::ostringstream& os, const std::string& name, const std::vector<Point>& points) {
  os << '$' << name << " << EOD\n";
  char buf[64];
  for (const auto& p : points) {
    std::snprintf(buf, sizeof buf, "%.9g %.9g\n", p.tokens, p.value);
    os << buf;
  }
  os << "EOD\n";
}

// The training loss at `tokens` (the last step at or before it): where an event sits.
double loss_at(const std::vector<Point>& loss, double tokens) {
  auto it = std::upper_bound(loss.begin(), loss.end(), tokens,
                             [](double t, const Point& p) { return t < p.tokens; });
  return it == loss.begin() ? loss.front().value : std::prev(it)->value;
}

std::vector<Point> moving_average(const std::vector<Point>& v, int n) {
  std::vector<Point> out;
  double sum = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    sum += v[i].value;
    if (i >= static_cast<size_t>(n)) sum -= v[i - n].value;
    const size_t count = std::min(i + 1, static_cast<size_t>(n));
    out.push_back({v[i].tokens, sum / static_cast<double>(count)});
  }
  return out;
}

// One plot command from its clauses; a panel with none says so instead of failing.
void plot(std::ostringstream& os, const std::vector<std::string>& clauses) {
  if (clauses.empty()) {
    os << "set label 1 \"no data\" at graph 0.5, graph 0.5 center\n"
       << "plot [0:1] [0:1] NaN notitle\nunset label 1\n";
    return;
  }
  os << "plot ";
  for (size_t i = 0; i < clauses.size(); ++i) os << (i ? ", \\\n     " : "") << clauses[i];
  os << "\n";
}

const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                          "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

struct Marker {
  int point_type;
  const char* colour;
};
const std::map<std::string, Marker> kMarkers = {{"fault", {7, "#d62728"}},
                                                {"recovered", {9, "#2ca02c"}},
                                                {"rejected", {5, "#ff7f0e"}},
                                                {"rebalance", {13, "#1f77b4"}}};

}  // namespace

std::string chart_script(const std::vector<RunSeries>& runs, const ChartOptions& o,
                         const std::string& output) {
  std::ostringstream os;
  if (o.format == ChartFormat::png)
    os << "set terminal pngcairo size " << o.width << "," << o.height
       << " noenhanced font \"sans,10\"\n";
  else
    os << "set terminal svg size " << o.width << "," << o.height
       << " noenhanced font \"sans,10\" background \"white\"\n";
  os << "set output " << quoted(output) << "\n";

  // Bits per byte where every run records them (a BPE run and a byte run then share one
  // axis); nats per token otherwise (older runs, shards whose text size is unknown).
  const bool bpb = std::all_of(runs.begin(), runs.end(), [](const RunSeries& r) {
    return !r.loss.empty() && r.loss_bpb.size() == r.loss.size() &&
           r.val_bpb.size() == r.val_loss.size();
  });
  std::vector<std::string> loss, bytes, speed;
  std::map<std::string, bool> marker_named;
  for (size_t r = 0; r < runs.size(); ++r) {
    RunSeries run = runs[r];
    if (bpb) {
      run.loss = run.loss_bpb;
      run.val_loss = run.val_bpb;
    }
    const std::string id = "r" + std::to_string(r);
    const std::string colour = std::string("lc rgb \"") + kColours[r % 8] + "\"";
    block(os, id + "_loss", run.loss);
    loss.push_back("$" + id + "_loss using 1:2 with lines lw 1 " + colour + " title " +
                   quoted(run.name + " train"));
    if (!run.val_loss.empty()) {
      block(os, id + "_val", run.val_loss);
      loss.push_back("$" + id + "_val using 1:2 with linespoints lw 2 pt 6 dt 2 " + colour +
                     " title " + quoted(run.name + " validation"));
    }
    // Events on the loss curve, one marker per kind of event (named once in the key).
    std::map<std::string, std::vector<Point>> by_event;
    for (const auto& e : run.events)
      by_event[e.event].push_back({e.tokens, loss_at(run.loss, e.tokens)});
    for (const auto& [event, points] : by_event) {
      const auto m = kMarkers.count(event) ? kMarkers.at(event) : Marker{3, "#000000"};
      block(os, id + "_" + event, points);
      const bool first = !marker_named[event];
      marker_named[event] = true;
      loss.push_back("$" + id + "_" + event + " using 1:2 with points pt " +
                     std::to_string(m.point_type) + " ps 1.6 lc rgb \"" + m.colour + "\" " +
                     (first ? "title " + quoted(event) : std::string("notitle")));
    }
    int dash = 1;
    for (const auto& [kind, points] : run.bytes) {
      if (std::all_of(points.begin(), points.end(), [](const Point& p) { return p.value == 0; }))
        continue;  // a kind this run never sent
      std::vector<Point> mb;
      for (const auto& p : points) mb.push_back({p.tokens, p.value / 1e6});
      block(os, id + "_bytes_" + kind, mb);
      bytes.push_back("$" + id + "_bytes_" + kind + " using 1:2 with lines lw 2 dt " +
                      std::to_string(dash++) + " " + colour + " title " +
                      quoted(run.name + " " + kind));
    }
    if (!run.tokens_per_s.empty()) {
      block(os, id + "_speed", moving_average(run.tokens_per_s, std::max(1, o.smooth_steps)));
      speed.push_back("$" + id + "_speed using 1:2 with lines lw 2 " + colour + " title " +
                      quoted(run.name));
    }
  }

  os << "set multiplot layout 3,1 title " << quoted(o.title) << "\n"
     << "set grid\nset key outside right top\nset xlabel \"tokens trained\"\n"
     << "set format x \"%.1s%c\"\nset lmargin 12\nset rmargin 38\n";
  os << (bpb ? "set ylabel \"loss (bits/byte)\"\n" : "set ylabel \"loss (nats/token)\"\n");
  plot(os, loss);
  os << "set ylabel \"MB sent (cumulative)\"\n";
  plot(os, bytes);
  os << "set ylabel \"tokens/s (" << o.smooth_steps << "-step average)\"\n";
  plot(os, speed);
  os << "unset multiplot\nset output\n";
  return os.str();
}

}  // namespace swarmrt::report
