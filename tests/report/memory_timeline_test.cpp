// The memory timeline (report/memory_timeline.h) and its plot (report/memory_plot.h).
#include "report/memory_timeline.h"

#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "plan/what_if.h"
#include "report/memory_plot.h"

namespace snug {
namespace {
namespace memory_timeline_test {

MemoryEvent ev(int64_t bytes, Category c, int64_t live, const char* phase) {
  return {0.0, bytes, c, live, phase};
}

TEST(MemoryTimeline, PhasesFromLabels) {
  EXPECT_EQ(timeline_phase("forward h.3"), "forward");
  EXPECT_EQ(timeline_phase("recompute h.3"), "backward");
  EXPECT_EQ(timeline_phase("backward lm_head"), "backward");
  EXPECT_EQ(timeline_phase("step 12 optimizer"), "optimizer");
  EXPECT_EQ(timeline_phase("init weights"), "setup");
  EXPECT_EQ(timeline_phase(""), "setup");
  EXPECT_EQ(timeline_phase("something"), "other");
}

TEST(MemoryTimeline, StepsComeFromTheNextStepLabelSoResumedRunsNumberRight) {
  const std::vector<MemoryEvent> events = {
      ev(100, Category::weights, 100, "init weights"),
      ev(10, Category::activations, 110, "forward h.0"),
      ev(-10, Category::activations, 100, "backward h.0"),
      ev(100, Category::gradients, 200, "backward h.0"),
      ev(200, Category::optimizer_state, 400, "step 8 optimizer"),
      ev(-100, Category::gradients, 300, "step 8 optimizer"),
      ev(10, Category::activations, 310, "forward h.0"),
  };
  const std::vector<TimelineEvent> t = annotate_timeline(events);
  ASSERT_EQ(t.size(), events.size());
  const int64_t steps[] = {0, 8, 8, 8, 8, 8, 9};
  const char* phases[] = {"setup",     "forward",   "backward", "backward",
                          "optimizer", "optimizer", "forward"};
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i].seq, static_cast<int64_t>(i));
    EXPECT_EQ(t[i].step, steps[i]) << i;
    EXPECT_EQ(t[i].phase, phases[i]) << i;
  }
}

TEST(MemoryTimeline, DryRunTimelineBalancesAndPeaksAtTheReportsPeak) {
  TrainingArguments a;
  a.per_device_train_batch_size = 4;
  a.seq_len = 64;
  a.gradient_checkpointing = true;
  std::vector<MemoryEvent> events;
  const MemoryStats mem = dry_run(a, &events);
  const nlohmann::json j = timeline_json(events, mem, "meta");
  EXPECT_EQ(j["peak_bytes"], mem.peak_total);
  EXPECT_EQ(j["steps"], 2);
  std::map<std::string, int64_t> net;
  int64_t max_live = 0, live = 0;
  std::map<std::string, int> phases;
  std::map<int64_t, int64_t> open_blocks;  // block -> bytes: each free ends one allocation
  int64_t next_block = 1;
  for (const auto& e : j["events"]) {
    const int64_t b = e["bytes"].get<int64_t>();
    ASSERT_GE(b, 0);
    const int64_t d = e["action"] == "alloc" ? b : -b;
    const int64_t block = e["block"].get<int64_t>();
    if (d >= 0 && e["action"] == "alloc") {
      EXPECT_EQ(block, next_block++);  // numbered in allocation order
      open_blocks[block] = b;
    } else {
      ASSERT_EQ(open_blocks.count(block), 1u) << "a free of block " << block << " never made";
      EXPECT_EQ(open_blocks[block], b);
      open_blocks.erase(block);
    }
    net[e["category"].get<std::string>()] += d;
    live += d;
    EXPECT_EQ(e["live_bytes"].get<int64_t>(), live);
    max_live = std::max(max_live, live);
    ++phases[e["phase"].get<std::string>()];
  }
  EXPECT_EQ(max_live, mem.peak_total);
  // Allocations minus frees per category are what is still live at the end.
  for (int i = 0; i < kNumCategories; ++i)
    EXPECT_EQ(net[category_name(category_at(i))], mem.live[i]) << category_name(category_at(i));
  EXPECT_EQ(net["activations"], 0);
  EXPECT_EQ(net["gradients"], 0);
  EXPECT_GT(phases["forward"], 0);
  EXPECT_GT(phases["backward"], 0);
  EXPECT_GT(phases["optimizer"], 0);
  EXPECT_GT(phases["setup"], 0);

  // Round trip and plot.
  const Timeline t = parse_timeline_json(j, "test");
  EXPECT_EQ(t.events.size(), events.size());
  EXPECT_EQ(t.events.back().block, events.back().block);
  const std::string svg = memory_timeline_svg(t, {});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("step 2"), std::string::npos);
  EXPECT_NE(svg.find("live memory (MiB)"), std::string::npos);
  EXPECT_NE(svg.find("optimizer_state"), std::string::npos);
  EXPECT_NE(svg.find("(the run's peak)"), std::string::npos);
  MemoryPlotOptions o;
  o.step = 5;
  EXPECT_THROW(memory_timeline_svg(t, o), Error);
}

TEST(MemoryTimeline, RejectsWhatIsNotATimeline) {
  EXPECT_THROW(parse_timeline_json(nlohmann::json{{"events", nlohmann::json::array()}}, "x.json"),
               Error);
}

}  // namespace memory_timeline_test
}  // namespace
}  // namespace snug
