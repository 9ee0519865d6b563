// `snug plot-memory FILE.json -o FILE.svg`: live memory over one step of a memory timeline
// (`--memory-timeline` of train or plan), stacked by category (report/memory_plot.h). SVG only:
// a PNG needs a rasterizer this build does not link, so asking for one is a command-line error
// that says how to get one.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/number_flag.h"
#include "core/error.h"
#include "io/excerpt.h"
#include "io/json_input.h"
#include "io/output_file.h"
#include "report/memory_plot.h"
#include "report/memory_timeline.h"

namespace snug::cli {

namespace {

bool ends_with_ignoring_case(const std::string& s, const std::string& suffix) {
  if (s.size() < suffix.size()) return false;
  std::string tail = s.substr(s.size() - suffix.size());
  for (auto& ch : tail) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return tail == suffix;
}

struct PlotArgs {
  std::string input, output, title;
  int64_t step = -1;
};

int run_plot(const PlotArgs& a) {
  const nlohmann::json j =
      parse_json_input(read_input_file(a.input, "memory timeline '" + a.input + "'"), a.input);
  const Timeline t = parse_timeline_json(j, a.input);
  MemoryPlotOptions o;
  o.step = a.step;
  o.title = a.title;
  const std::string svg = memory_timeline_svg(t, o);
  write_output_file(a.output, svg, "'" + a.output + "'");
  // peak_phase is the file's: quoted as an excerpt, as messages quote input.
  std::printf("wrote %s (%zu events, peak %s during '%s')\n", a.output.c_str(), t.events.size(),
              format_bytes(t.peak_bytes).c_str(), excerpt(t.peak_phase).c_str());
  return 0;
}

}  // namespace

Command add_plot_memory_command(CLI::App& app) {
  const auto [sub, a] = add_subcommand<PlotArgs>(
      app, "plot-memory", "Draw a --memory-timeline JSON: live memory over one step by category");
  sub->add_option("timeline", a->input, "Memory timeline JSON (train/plan --memory-timeline)")
      ->required();
  sub->add_option("-o,--output", a->output, "Output image (.svg)")
      ->required()
      ->check(CLI::Validator(
          [](std::string& path) -> std::string {
            if (ends_with_ignoring_case(path, ".svg")) return {};
            if (ends_with_ignoring_case(path, ".png"))
              return "PNG output is not supported by this build (no rasterizer linked): write "
                     ".svg, then convert it if you need a PNG (e.g. rsvg-convert in.svg -o "
                     "out.png)";
            return "the output must end in .svg";
          },
          "FILE.svg"));
  add_number_flag(sub, "--step", a->step, NumberRange::integer(0, kMaxFlagCount),
                  "Optimizer step to draw (default: the last one)");
  sub->add_option("--title", a->title, "Plot title");
  return {sub, [a = a] { return run_plot(*a); }};
}

}  // namespace snug::cli
