// The report library alone: a run's metrics read as series against tokens, and the gnuplot
// script of a chart (what `swarmrt plot` renders; tests/cli/plot.sh renders real runs).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "report/chart.hpp"
#include "report/prometheus.hpp"
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

// A process killed mid-write leaves a torn last line: it is named and skipped, and the records
// around it still count. A file with no step record at all is refused, naming what was skipped.
TEST(ReadRun, TornAndMalformedLinesAreNamedAndSkipped) {
  MetricsFile torn(step(1, 5.0, 1, 8) + "{\"event\":\"step\",\"loss\":\n" + "[1, 2]\n" +
                   "{\"event\":\"step\",\"loss\":2}\n" + step(2, 4.0, 2, 16) +
                   "{\"event\":\"step\",\"st");
  const auto s = read_run(torn.dir.string(), "run");
  ASSERT_EQ(s.loss.size(), 2u);
  EXPECT_EQ(s.loss[1].value, 4.0);
  ASSERT_EQ(s.skipped.size(), 4u);
  EXPECT_NE(s.skipped[0].find("metrics.jsonl:2: not a JSON record"), std::string::npos)
      << s.skipped[0];
  EXPECT_NE(s.skipped[1].find("metrics.jsonl:3: not a JSON object"), std::string::npos);
  EXPECT_NE(s.skipped[2].find("metrics.jsonl:4: a step record without a step number"),
            std::string::npos);
  EXPECT_NE(s.skipped[3].find("metrics.jsonl:6: not a JSON record"), std::string::npos);
}

TEST(ReadRun, BadInputIsNamed) {
  MetricsFile only_torn("{\"event\":\"step\",\"loss\":\n");
  try {
    read_run(only_torn.dir.string(), "run");
    FAIL() << "a file with no record was read";
  } catch (const MetricsError& e) {
    EXPECT_NE(std::string(e.what()).find("no step record"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("metrics.jsonl:1: not a JSON record"), std::string::npos)
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

// Where every run records bits per byte, losses are drawn in them (BPE and byte runs on one
// axis); where one does not, every run is drawn in nats per token.
TEST(Chart, LossesInBitsPerByteWhereEveryRunHasThem) {
  MetricsFile m(
      "{\"event\":\"step\",\"step\":1,\"tokens\":100,\"loss\":2.0,\"bpb\":1.25}\n"
      "{\"event\":\"eval\",\"step\":1,\"val_loss\":2.5,\"val_bpb\":1.5}\n");
  const auto bpe = read_run(m.dir.string(), "bpe");
  ASSERT_EQ(bpe.loss_bpb.size(), 1u);
  EXPECT_EQ(bpe.loss_bpb[0].value, 1.25);
  ASSERT_EQ(bpe.val_bpb.size(), 1u);
  EXPECT_EQ(bpe.val_bpb[0].value, 1.5);
  const auto script = chart_script({bpe}, ChartOptions{}, "x.png");
  EXPECT_NE(script.find("loss (bits/byte)"), std::string::npos);
  EXPECT_NE(script.find("$r0_loss << EOD\n100 1.25\nEOD"), std::string::npos) << script;
  EXPECT_NE(script.find("$r0_val << EOD\n100 1.5\nEOD"), std::string::npos) << script;
  RunSeries old;  // a run from before bits per byte were recorded
  old.name = "old";
  old.loss = {{100, 3.0}};
  const auto mixed = chart_script({bpe, old}, ChartOptions{}, "x.png");
  EXPECT_NE(mixed.find("loss (nats/token)"), std::string::npos);
  EXPECT_NE(mixed.find("$r0_loss << EOD\n100 2\nEOD"), std::string::npos) << mixed;
}

// /metrics from the console's answers: HELP and TYPE before each family, the step and bytes
// as numbers, labels escaped, one sample per actor and node, events counted by kind.
TEST(Prometheus, FamiliesFromTheConsolesAnswers) {
  const auto stats = nlohmann::json::parse(
      R"({"ok":true,"last_step":{"step":42,"loss":2.5,"tokens":86016,"tokens_per_s":20000.5,
          "bytes":{"activations":1000,"gradients":0},"stages":[{"stage":0,"samples_per_s":9.5}]}})");
  const auto actors = nlohmann::json::parse(
      R"({"ok":true,"actors":[{"name":"stage0/worker0@node1","kind":"worker","node":"node1",
          "mailbox":3,"handled":120,"busy_s":1.5,"restarts":1},
          {"name":"we\"ird","kind":"tracker","node":"coordinator","restarts":0}]})");
  const auto nodes = nlohmann::json::parse(
      R"({"ok":true,"nodes":[{"node":"coordinator","alive":true},{"node":"node1","alive":false}]})");
  const auto events = nlohmann::json::parse(
      R"({"ok":true,"events":[{"event":"fault"},{"event":"fault"},{"event":"eval"}]})");
  const auto text = prometheus_text(stats, actors, nodes, events);
  EXPECT_NE(text.find("# TYPE swarmrt_step gauge\nswarmrt_step 42\n"), std::string::npos) << text;
  EXPECT_NE(text.find("swarmrt_tokens_per_second 20000.5\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE swarmrt_tokens_total counter\nswarmrt_tokens_total 86016\n"),
            std::string::npos);
  EXPECT_NE(text.find("swarmrt_bytes_total{kind=\"activations\"} 1000\n"), std::string::npos);
  EXPECT_NE(text.find("swarmrt_stage_samples_per_second{stage=\"0\"} 9.5\n"), std::string::npos);
  EXPECT_NE(text.find("swarmrt_actor_mailbox{name=\"stage0/worker0@node1\",kind=\"worker\","
                      "node=\"node1\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("swarmrt_actor_restarts_total{name=\"we\\\"ird\",kind=\"tracker\","
                      "node=\"coordinator\"} 0\n"),
            std::string::npos);
  // No mailbox known for the second actor: no sample rather than a made-up one.
  EXPECT_EQ(text.find("swarmrt_actor_mailbox{name=\"we"), std::string::npos);
  EXPECT_NE(text.find("swarmrt_node_up{node=\"node1\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("swarmrt_events{event=\"fault\"} 2\n"), std::string::npos);
  // Before the first step: no step family at all, and nothing fails.
  const auto empty = prometheus_text(nlohmann::json::object(), nlohmann::json::object(),
                                     nlohmann::json::object(), nlohmann::json::object());
  EXPECT_EQ(empty.find("swarmrt_step"), std::string::npos);
}

// Spot checks of stage work (verify.fraction): the step record's tally as counters by outcome.
TEST(Prometheus, SpotChecksByOutcome) {
  const auto stats = nlohmann::json::parse(
      R"({"last_step":{"step":7,"spot_checks":{"checks":12,"agreed":10,"mismatches":2,
          "unsettled":0,"expired":1,"bans":1,"banned":[{"worker":0,"why":"x"}]}}})");
  const auto text = swarmrt::report::prometheus_text(
      stats, nlohmann::json::object(), nlohmann::json::object(), nlohmann::json::object());
  EXPECT_NE(text.find("swarmrt_spot_checks_total{outcome=\"checks\"} 12\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("swarmrt_spot_checks_total{outcome=\"mismatches\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("swarmrt_spot_checks_total{outcome=\"expired\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("swarmrt_banned_workers 1\n"), std::string::npos);
  const auto off = swarmrt::report::prometheus_text(
      nlohmann::json::parse(R"({"last_step":{"step":7}})"), nlohmann::json::object(),
      nlohmann::json::object(), nlohmann::json::object());
  EXPECT_EQ(off.find("swarmrt_spot_checks_total"), std::string::npos);
}
