#include "report/memory_plot.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "core/error.h"
#include "io/svg.h"

namespace snug {

namespace {

// Tableau 10, one colour per category in report order.
constexpr std::array<const char*, 8> kCategoryColors = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                                        "#59a14f", "#edc948", "#b07aa1", "#ff9da7"};
static_assert(kCategoryColors.size() >= static_cast<size_t>(kNumCategories));

struct PhaseStyle {
  const char* name;
  const char* fill;
};
constexpr PhaseStyle kPhases[] = {{"forward", "#e8f0fb"},
                                  {"backward", "#fdf0e3"},
                                  {"optimizer", "#e9f5e6"},
                                  {"setup", "#f2f2f2"},
                                  {"other", "#f2f2f2"}};

const char* phase_fill(const std::string& phase) {
  for (const PhaseStyle& p : kPhases)
    if (phase == p.name) return p.fill;
  return "#f2f2f2";
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// A tick spacing of 1, 2, 2.5 or 5 times a power of ten giving at most about 6 ticks up to `top`.
double tick_step(double top) {
  if (top <= 0) return 1;
  const double raw = top / 6.0;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

struct Sample {
  ByCategory live{};
  int64_t total = 0;
};

}  // namespace

std::string memory_timeline_svg(const Timeline& t, const MemoryPlotOptions& opts) {
  std::set<int64_t> steps;
  for (const TimelineEvent& e : t.events) steps.insert(e.step);
  const int64_t step = opts.step >= 0 ? opts.step : (steps.empty() ? 0 : *steps.rbegin());
  if (!steps.count(step)) {
    // The first few steps and the count: a timeline read from a file can hold any number.
    constexpr size_t kListed = 8;
    std::string have;
    size_t listed = 0;
    for (int64_t s : steps) {
      if (listed++ == kListed) {
        have += ", ... (" + std::to_string(steps.size()) + " steps)";
        break;
      }
      have += (have.empty() ? "" : ", ") + std::to_string(s);
    }
    throw Error(detail::concat(t.source.empty() ? "" : t.source + ": ",
                               "memory timeline has no events in step ", step,
                               " (steps present: ", have.empty() ? "none" : have, ")"));
  }

  // The state before the step, then after each of its events.
  Sample state;
  std::vector<Sample> samples;
  std::vector<const TimelineEvent*> step_events;
  for (const TimelineEvent& e : t.events) {
    if (e.step == step) {
      if (samples.empty()) samples.push_back(state);
      step_events.push_back(&e);
    }
    state.live[static_cast<int>(e.category)] += e.delta;
    state.total += e.delta;
    if (e.step == step) samples.push_back(state);
  }
  const int64_t n = static_cast<int64_t>(step_events.size());
  size_t peak_i = 0;
  for (size_t i = 0; i < samples.size(); ++i)
    if (samples[i].total > samples[peak_i].total) peak_i = i;
  const Sample& peak = samples[peak_i];

  // Geometry.
  const double W = 1000, H = 560, left = 90, right = 230, top = 60, bottom = 70;
  const double pw = W - left - right, ph = H - top - bottom;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const bool use_gib = static_cast<double>(peak.total) >= 2 * gib;
  const double unit = use_gib ? gib : 1024.0 * 1024.0;
  const char* unit_name = use_gib ? "GiB" : "MiB";
  const double ymax_units = std::max(static_cast<double>(peak.total) / unit * 1.08, 1e-9);
  const double ystep = tick_step(ymax_units);
  const double ytop = std::ceil(ymax_units / ystep) * ystep;
  auto X = [&](double k) { return left + pw * k / static_cast<double>(std::max<int64_t>(n, 1)); };
  auto Y = [&](double bytes) { return top + ph * (1.0 - bytes / unit / ytop); };

  // Columns: every event when they fit, else one per pixel keeping its highest-total moment.
  std::vector<std::pair<double, const Sample*>> cols;  // x in event units, state
  cols.emplace_back(0.0, &samples[0]);
  const int64_t max_cols = static_cast<int64_t>(pw);
  if (n <= max_cols) {
    for (int64_t k = 1; k <= n; ++k) cols.emplace_back(static_cast<double>(k), &samples[k]);
  } else {
    for (int64_t c = 0; c < max_cols; ++c) {
      const int64_t a = 1 + c * n / max_cols, b = 1 + (c + 1) * n / max_cols;
      size_t best = static_cast<size_t>(a);
      for (int64_t k = a; k < b; ++k)
        if (samples[k].total > samples[best].total) best = static_cast<size_t>(k);
      cols.emplace_back(static_cast<double>(b - 1), &samples[best]);
    }
  }

  std::ostringstream os;
  os << svg_open(static_cast<int>(W), static_cast<int>(H));
  os << "<rect width=\"" << W << "\" height=\"" << H << "\" fill=\"white\"/>\n";
  std::string title = opts.title;
  if (title.empty())
    title =
        detail::concat(t.run.empty() ? "" : t.run + ": ", "live memory by category, step ", step);
  os << "<text x=\"" << W / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"16\">"
     << xml_escape(title) << "</text>\n";

  // Phase spans (contiguous runs of one phase), labelled above the plot.
  for (int64_t a = 0; a < n;) {
    int64_t b = a;
    while (b < n && step_events[b]->phase == step_events[a]->phase) ++b;
    const std::string& ph_name = step_events[a]->phase;
    os << "<rect x=\"" << num(X(static_cast<double>(a))) << "\" y=\"" << top << "\" width=\""
       << num(X(static_cast<double>(b)) - X(static_cast<double>(a))) << "\" height=\"" << ph
       << "\" fill=\"" << phase_fill(ph_name) << "\"/>\n";
    if (X(static_cast<double>(b)) - X(static_cast<double>(a)) > 40)
      os << "<text x=\"" << num((X(static_cast<double>(a)) + X(static_cast<double>(b))) / 2)
         << "\" y=\"" << top - 6 << "\" text-anchor=\"middle\" fill=\"#555\">"
         << xml_escape(ph_name) << "</text>\n";
    a = b;
  }

  // Gridlines and y ticks.
  for (double v = 0; v <= ytop + 1e-9; v += ystep) {
    const double y = top + ph * (1.0 - v / ytop);
    os << "<line x1=\"" << left << "\" x2=\"" << left + pw << "\" y1=\"" << num(y) << "\" y2=\""
       << num(y) << "\" stroke=\"#ddd\"/>\n";
    char lab[32];
    std::snprintf(lab, sizeof lab, ystep < 1 ? "%.1f" : "%.0f", v);
    os << "<text x=\"" << left - 8 << "\" y=\"" << num(y + 4) << "\" text-anchor=\"end\">" << lab
       << "</text>\n";
  }

  // Stacked bands: category i fills between the sum of categories < i and <= i (stairs).
  for (int ci = 0; ci < kNumCategories; ++ci) {
    bool present = false;
    for (const auto& [x, s] : cols) present = present || s->live[ci] > 0;
    if (!present) continue;
    auto level = [&](const Sample& s, int upto) {
      double sum = 0;
      for (int k = 0; k <= upto; ++k) sum += static_cast<double>(s.live[k]);
      return sum;
    };
    std::ostringstream pts;
    for (size_t i = 0; i < cols.size(); ++i) {
      if (i > 0)
        pts << num(X(cols[i].first)) << "," << num(Y(level(*cols[i - 1].second, ci))) << " ";
      pts << num(X(cols[i].first)) << "," << num(Y(level(*cols[i].second, ci))) << " ";
    }
    pts << num(X(static_cast<double>(n))) << "," << num(Y(level(*cols.back().second, ci))) << " ";
    pts << num(X(static_cast<double>(n))) << "," << num(Y(level(*cols.back().second, ci - 1)))
        << " ";
    for (size_t i = cols.size(); i-- > 0;) {
      pts << num(X(cols[i].first)) << "," << num(Y(level(*cols[i].second, ci - 1))) << " ";
      if (i > 0)
        pts << num(X(cols[i].first)) << "," << num(Y(level(*cols[i - 1].second, ci - 1))) << " ";
    }
    os << "<polygon fill=\"" << kCategoryColors[ci] << "\" stroke=\"none\" points=\"" << pts.str()
       << "\"/>\n";
  }

  // The step's peak.
  const double py = Y(static_cast<double>(peak.total));
  os << "<line x1=\"" << left << "\" x2=\"" << left + pw << "\" y1=\"" << num(py) << "\" y2=\""
     << num(py) << "\" stroke=\"#222\" stroke-dasharray=\"5,4\"/>\n";
  const std::string peak_label =
      peak_i > 0 ? step_events[peak_i - 1]->label : step_events.front()->label;
  os << "<text x=\"" << left + 6 << "\" y=\"" << num(py - 6) << "\" fill=\"#222\">peak "
     << xml_escape(format_bytes(peak.total)) << " during '" << xml_escape(peak_label) << "'"
     << (peak.total == t.peak_bytes ? " (the run's peak)" : "") << "</text>\n";

  // Axes and their labels.
  os << "<line x1=\"" << left << "\" x2=\"" << left << "\" y1=\"" << top << "\" y2=\"" << top + ph
     << "\" stroke=\"#222\"/>\n";
  os << "<line x1=\"" << left << "\" x2=\"" << left + pw << "\" y1=\"" << top + ph << "\" y2=\""
     << top + ph << "\" stroke=\"#222\"/>\n";
  // Event numbers are whole: ticks at least 1 apart and on integers.
  const double xstep = std::max(1.0, std::ceil(tick_step(static_cast<double>(n))));
  for (double v = 0; v <= static_cast<double>(n) + 1e-9; v += xstep) {
    os << "<text x=\"" << num(X(v)) << "\" y=\"" << top + ph + 16 << "\" text-anchor=\"middle\">"
       << static_cast<int64_t>(v) << "</text>\n";
  }
  os << "<text x=\"" << left + pw / 2 << "\" y=\"" << H - 22 << "\" text-anchor=\"middle\">"
     << "allocations and frees of step " << step << ", in order (" << n << " events)</text>\n";
  os << "<text transform=\"translate(24," << top + ph / 2
     << ") rotate(-90)\" text-anchor=\"middle\">live memory (" << unit_name << ")</text>\n";

  // Legend: each category's bytes at the step's peak.
  double ly = top + 10;
  os << "<text x=\"" << left + pw + 20 << "\" y=\"" << ly << "\" font-weight=\"bold\">"
     << "at the peak</text>\n";
  ly += 10;
  for (int ci = kNumCategories - 1; ci >= 0; --ci) {
    bool present = false;
    for (const auto& [x, s] : cols) present = present || s->live[ci] > 0;
    if (!present) continue;
    os << "<rect x=\"" << left + pw + 20 << "\" y=\"" << ly << "\" width=\"14\" height=\"14\" "
       << "fill=\"" << kCategoryColors[ci] << "\"/>\n";
    os << "<text x=\"" << left + pw + 40 << "\" y=\"" << ly + 11 << "\">"
       << category_name(category_at(ci)) << " " << xml_escape(format_bytes(peak.live[ci]))
       << "</text>\n";
    ly += 22;
  }
  ly += 8;
  for (const PhaseStyle& p : kPhases) {
    bool present = false;
    for (const TimelineEvent* e : step_events) present = present || e->phase == p.name;
    if (!present) continue;
    os << "<rect x=\"" << left + pw + 20 << "\" y=\"" << ly << "\" width=\"14\" height=\"14\" "
       << "fill=\"" << p.fill << "\" stroke=\"#bbb\"/>\n";
    os << "<text x=\"" << left + pw + 40 << "\" y=\"" << ly + 11 << "\">" << p.name
       << " (phase)</text>\n";
    ly += 22;
  }
  os << "</svg>\n";
  return os.str();
}

}  // namespace snug
