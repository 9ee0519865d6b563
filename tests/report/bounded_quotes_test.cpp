// A memory timeline that `snug plot-memory` reads is untrusted (issue 29, item 6): a megabyte
// action or category is quoted as a short excerpt, and a timeline of 100000 steps lists a few of
// them, in refusals that name the file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "report/memory_plot.h"
#include "report/memory_timeline.h"
#include "support/bounded_quote.h"

namespace snug::test {
namespace {
namespace report_bounded_quotes_test {

using nlohmann::json;

json event(int64_t seq, int64_t step) {
  return {{"seq", seq},   {"action", "alloc"},  {"category", "weights"}, {"bytes", 4},
          {"step", step}, {"phase", "forward"}, {"live_bytes", 4}};
}

json timeline(const json& events) {
  return {{"format", "snug-memory-timeline"}, {"peak_bytes", 4}, {"events", events}};
}

TEST(BoundedQuotes, MemoryTimelineActionsCategoriesAndSteps) {
  const std::string big = megabyte();
  json e = event(0, 1);
  e["action"] = big;
  EXPECT_TRUE(
      refuses_bounded([&] { (void)parse_timeline_json(timeline(json::array({e})), "t.json"); },
                      {"t.json", "event 0", "action", "'xxxx"}));
  e = event(0, 1);
  e["category"] = big;
  EXPECT_TRUE(
      refuses_bounded([&] { (void)parse_timeline_json(timeline(json::array({e})), "t.json"); },
                      {"t.json", "event 0", "category 'xxxx"}));

  json many = json::array();
  for (int64_t i = 0; i < 100000; ++i) many.push_back(event(i, 1000003 * (i + 1)));
  const Timeline t = parse_timeline_json(timeline(many), "t.json");
  MemoryPlotOptions o;
  o.step = 5;
  EXPECT_TRUE(
      refuses_bounded([&] { (void)memory_timeline_svg(t, o); },
                      {"t.json", "no events in step 5", "1000003, 2000006", "100000 steps"}));
}

}  // namespace report_bounded_quotes_test
}  // namespace
}  // namespace snug::test
