// The report library alone: a run's metrics read as series against tokens, and the gnuplot
// script of a chart (what `swarmrt plot` renders; tests/cli/plot.sh renders real runs).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "report/chart.hpp"
#include "report/run_series.hpp"

using namespace swarmrt::report;
namespace fs = std::filesystem;

namespace {

struct MetricsFile {
  fs::path dir;
  explicit MetricsFile(const std::string& text) {
    dir = fs::temp_directory_path() /
          ("swarmrt-report-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
           "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
    std::ofstream(dir / "metrics.jsonl") << text;
  }
  ~MetricsFile() { fs::remove_all(dir); }
};

std::string step(int n, double loss, double wall, double gradients) {
  return "{\"event\":\"step\",\"step\":" + std::to_string(n) +
         ",\"tokens\":" + std::to_string(n * 100) + ",\"loss\":" + std::to_string(loss) +
         ",\"tokens_per_s\":" + std::to_string(1000 + n) + ",\"wall\":" + std::to_string(wall) +
         ",\"bytes\":{\"gradients\":" + std::to_string(gradients) + ",\"parameters\":0}}\n";
}

}  // namespace

// Loss, tokens/s and bytes by kind at each step's tokens; the validation loss at its step's
// tokens; an event at the tokens of the last step that ended before it.
TEST(ReadRun, SeriesAgainstTokensAndEventsAtTheStepBefore) {
  MetricsFile m(
      step(1, 5.0, 10.0, 8) + step(2, 4.0, 11.0, 16) +
      "{\"event\":\"fault\",\"kind\":\"worker\",\"actor\":\"stage1/worker0\",\"wall\":11.5}\n"
      "{\"event\":\"eval\",\"step\":2,\"val_loss\":4.5,\"wall\":11.6}\n" +
      step(3, 3.0, 12.0, 24) +
      "{\"event\":\"recovered\",\"kind\":\"restart\",\"wall\":12.5}\n"
      "{\"event\":\"console\",\"command\":\"kill\",\"wall\":12.6}\n");
  const auto s = read_run(m.dir.string(), "run");
  ASSERT_EQ(s.loss.size(), 3u);
  EXPECT_EQ(s.loss[1].tokens, 200);
  EXPECT_EQ(s.loss[2].value, 3.0);
  ASSERT_EQ(s.val_loss.size(), 1u);
  EXPECT_EQ(s.val_loss[0].tokens, 200);
  EXPECT_EQ(s.val_loss[0].value, 4.5);
  ASSERT_EQ(s.bytes.at("gradients").size(), 3u);
  EXPECT_EQ(s.bytes.at("gradients")[2].value, 24);
  EXPECT_EQ(s.tokens_per_s[0].value, 1001);
  ASSERT_EQ(s.events.size(), 2u);  // the console record is not one of the marked events
  EXPECT_EQ(s.events[0].event, "fault");
  EXPECT_EQ(s.events[0].tokens, 200);
  EXPECT_EQ(s.events[0].what, "worker stage1/worker0");
  EXPECT_EQ(s.events[1].event, "recovered");
  EXPECT_EQ(s.events[1].tokens, 300);
}

// A run resumed from step 1 after reaching step 3: its steps 2 and 3 replace the first ones.
TEST(ReadRun, ResumedStepsReplaceTheSupersededOnes) {
  MetricsFile m(step(1, 5.0, 1, 8) + step(2, 4.0, 2, 16) + step(3, 3.0, 3, 24) +
                step(2, 4.5, 10, 16) + step(3, 3.5, 11, 24));
  const auto s = read_run((m.dir / "metrics.jsonl").string(), "run");
  ASSERT_EQ(s.loss.size(), 3u);
  EXPECT_EQ(s.loss[1].value, 4.5);
  EXPECT_EQ(s.loss[2].value, 3.5);
  EXPECT_EQ(s.bytes.at("gradients").size(), 3u);
}

TEST(ReadRun, BadInputIsNamed) {
  MetricsFile bad(step(1, 5.0, 1, 8) + "{\"event\":\"step\",\"loss\":\n");
  try {
    read_run(bad.dir.string(), "run");
    FAIL() << "a truncated record was read";
  } catch (const MetricsError& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.jsonl:2: not a JSON record"), std::string::npos)
        << e.what();
  }
  MetricsFile no_step("{\"event\":\"step\",\"loss\":2}\n");
  EXPECT_THROW(read_run(no_step.dir.string(), "run"), MetricsError);
  MetricsFile empty("");
  try {
    read_run(empty.dir.string(), "run");
    FAIL() << "an empty run was read";
  } catch (const MetricsError& e) {
    EXPECT_NE(std::string(e.what()).find("no step record"), std::string::npos) << e.what();
  }
  try {
    read_run("/nonexistent/run", "run");
    FAIL() << "a missing run was read";
  } catch (const MetricsError& e) {
    EXPECT_NE(std::string(e.what()).find("no such file"), std::string::npos) << e.what();
  }
}

// Every run is in the key (train, validation and its bytes by kind sent), each kind of event
// is named once however many runs have it, a kind never sent is left out, and the output's
// name is quoted as a gnuplot string.
TEST(Chart, ScriptNamesEveryRunAndMarksEvents) {
  RunSeries a, b;
  a.name = "swarm";
  a.loss = {{100, 5}, {200, 4}};
  a.val_loss = {{200, 4.5}};
  a.bytes["gradients"] = {{100, 1e6}, {200, 2e6}};
  a.bytes["parameters"] = {{100, 0}, {200, 0}};
  a.tokens_per_s = {{100, 1000}, {200, 1100}};
  a.events = {{150, "fault", "worker"}};
  b = a;
  b.name = "diloco \"H=8\"";
  b.val_loss.clear();
  const auto script = chart_script({a, b}, ChartOptions{}, "/tmp/out \"x\".png");
  EXPECT_NE(script.find("set terminal pngcairo"), std::string::npos);
  EXPECT_NE(script.find("set output \"/tmp/out \\\"x\\\".png\""), std::string::npos);
  EXPECT_NE(script.find("title \"swarm train\""), std::string::npos);
  EXPECT_NE(script.find("title \"swarm validation\""), std::string::npos);
  EXPECT_NE(script.find("title \"diloco \\\"H=8\\\" train\""), std::string::npos);
  EXPECT_EQ(script.find("diloco \\\"H=8\\\" validation"), std::string::npos);
  EXPECT_NE(script.find("title \"swarm gradients\""), std::string::npos);
  EXPECT_EQ(script.find("swarm parameters"), std::string::npos);
  size_t faults = 0;
  for (size_t at = 0; (at = script.find("title \"fault\"", at)) != std::string::npos; ++at)
    ++faults;
  EXPECT_EQ(faults, 1u);
  // The event sits on the loss curve: at 150 tokens the last step's loss was 5.
  EXPECT_NE(script.find("$r0_fault << EOD\n150 5\nEOD"), std::string::npos) << script;
  ChartOptions svg;
  svg.format = ChartFormat::svg;
  EXPECT_NE(chart_script({a}, svg, "x.svg").find("set terminal svg"), std::string::npos);
  EXPECT_EQ(chart_format("a.png"), ChartFormat::png);
  EXPECT_EQ(chart_format("dir/a.svg"), ChartFormat::svg);
  EXPECT_THROW(chart_format("a.jpg"), std::invalid_argument);
  EXPECT_THROW(chart_format(".png"), std::invalid_argument);
}
