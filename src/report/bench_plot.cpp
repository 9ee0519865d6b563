#include "report/bench_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "io/svg.h"

namespace snug {

std::vector<int> used_categories(const std::vector<PeakBar>& bars) {
  std::vector<int> used;
  for (int i = 0; i < kNumCategories; ++i)
    for (const PeakBar& r : bars)
      if (r.available && (r.memory.peak_by_category[i] > 0 || r.memory.max_by_category[i] > 0)) {
        used.push_back(i);
        break;
      }
  return used;
}

std::string peak_memory_svg(const std::vector<PeakBar>& rows, std::optional<int64_t> capacity,
                            const std::string& title) {
  static constexpr const char* kColors[kNumCategories] = {
      "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f"};
  const std::vector<int> cats = used_categories(rows);
  // Bars: the peak split by category; an OOM row shows what it needs, outlined in red.
  auto bar_total = [](const PeakBar& r) {
    return r.out_of_memory ? r.need_bytes : r.memory.peak_total;
  };
  int64_t ymax_bytes = 1;
  for (const PeakBar& r : rows)
    if (r.available) ymax_bytes = std::max(ymax_bytes, bar_total(r));
  const bool show_capacity = capacity && *capacity <= 2 * ymax_bytes;
  if (show_capacity) ymax_bytes = std::max(ymax_bytes, *capacity);
  // A round tick step in MiB giving 4 to 10 ticks.
  const double ymax = mib(ymax_bytes);
  double step = std::pow(10.0, std::floor(std::log10(ymax)));
  while (ymax / step < 4) step /= 2;
  while (ymax / step > 10) step *= 2;
  const double top_mb = std::ceil(ymax / step) * step;

  const int n = static_cast<int>(rows.size());
  const int bar_w = 46, gap = 34, left = 80, top = 60, plot_h = 320, legend_w = 170;
  const int plot_w = n * (bar_w + gap) + gap;
  const int title_w = left + 9 * static_cast<int>(title.size());
  const int width = std::max(left + plot_w + legend_w, title_w), height = top + plot_h + 100;
  auto y_of = [&](double mb) { return top + plot_h - mb / top_mb * plot_h; };

  std::ostringstream os;
  char buf[512];
  os << svg_open(width, height);
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  std::snprintf(buf, sizeof buf,
                "<text x=\"%d\" y=\"28\" font-size=\"15\" font-weight=\"bold\">%s</text>\n", left,
                xml_escape(title).c_str());
  os << buf;
  // Axis, grid and ticks.
  for (double t = 0; t <= top_mb + step / 2; t += step) {
    const double y = y_of(t);
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
                  "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                  left, y, left + plot_w, y, left - 6, y + 4, t);
    os << buf;
  }
  std::snprintf(buf, sizeof buf,
                "<text x=\"18\" y=\"%d\" transform=\"rotate(-90 18 %d)\" "
                "text-anchor=\"middle\">Memory occupied (MiB)</text>\n",
                top + plot_h / 2, top + plot_h / 2);
  os << buf;
  std::snprintf(buf, sizeof buf,
                "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n"
                "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n",
                left, top, left, top + plot_h, left, top + plot_h, left + plot_w, top + plot_h);
  os << buf;
  // Bars.
  for (int i = 0; i < n; ++i) {
    const PeakBar& r = rows[i];
    const int x = left + gap + i * (bar_w + gap);
    const int cx = x + bar_w / 2;
    const int ly = top + plot_h + 14;
    std::snprintf(buf, sizeof buf,
                  "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" transform=\"rotate(-35 %d %d)\">"
                  "%s</text>\n",
                  cx + 4, ly, cx + 4, ly, xml_escape(r.name).c_str());
    os << buf;
    if (!r.available) {
      std::snprintf(buf, sizeof buf,
                    "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#888\">n/a</text>\n", cx,
                    top + plot_h - 6);
      os << buf;
      continue;
    }
    os << "<g><title>" << xml_escape(r.name + " (" + r.description + "): ");
    if (r.out_of_memory)
      os << xml_escape(r.note);
    else
      os << format_bytes(r.memory.peak_total) << " at peak";
    os << "</title>\n";
    if (r.out_of_memory) {
      const double y = y_of(mib(r.need_bytes));
      std::snprintf(buf, sizeof buf,
                    "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"none\" "
                    "stroke=\"#d62728\" stroke-width=\"2\" stroke-dasharray=\"4 3\"/>\n"
                    "<text x=\"%d\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#d62728\" "
                    "font-weight=\"bold\">OOM</text>\n"
                    "<text x=\"%d\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#d62728\" "
                    "font-size=\"11\">needs %.1f</text>\n",
                    x, y, bar_w, top + plot_h - y, cx, y - 18, cx, y - 5, mib(r.need_bytes));
      os << buf;
    } else {
      double base_mb = 0;
      for (int c : cats) {
        const double h_mb = mib(r.memory.peak_by_category[c]);
        if (h_mb <= 0) continue;
        const double y1 = y_of(base_mb + h_mb), y0 = y_of(base_mb);
        std::snprintf(buf, sizeof buf,
                      "<rect x=\"%d\" y=\"%.2f\" width=\"%d\" height=\"%.2f\" fill=\"%s\"/>\n", x,
                      y1, bar_w, y0 - y1, kColors[c]);
        os << buf;
        base_mb += h_mb;
      }
      std::snprintf(buf, sizeof buf,
                    "<text x=\"%d\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\">%.1f"
                    "</text>\n",
                    cx, y_of(base_mb) - 5, mib(r.memory.peak_total));
      os << buf;
    }
    os << "</g>\n";
  }
  if (show_capacity) {
    const double y = y_of(mib(*capacity));
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#d62728\" "
                  "stroke-dasharray=\"6 4\"/>\n"
                  "<text x=\"%d\" y=\"%.1f\" fill=\"#d62728\">capacity %s</text>\n",
                  left, y, left + plot_w, y, left + 6, y - 4,
                  xml_escape(format_bytes(*capacity)).c_str());
    os << buf;
  }
  // Legend, top category first (as the bars stack).
  int ly = top + 10;
  for (auto it = cats.rbegin(); it != cats.rend(); ++it) {
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>\n"
                  "<text x=\"%d\" y=\"%d\">%s</text>\n",
                  left + plot_w + 20, ly, kColors[*it], left + plot_w + 38, ly + 10,
                  category_name(category_at(*it)));
    os << buf;
    ly += 20;
  }
  os << "</svg>\n";
  return os.str();
}

}  // namespace snug
