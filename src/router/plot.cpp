// SVG bar chart of the abilities per parameter and track.
#include "router/plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace cake::router {

namespace {

std::string param_label(int i) {
  if (i == 0) return "level a";
  if (i == kNumParams - 1) return "difficulty b";
  return std::string(profile::feature_name(i - 1));
}

constexpr const char* kColors[] = {"#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860"};

}  // namespace

std::string abilities_svg(const Model& m) {
  const double width = 960, height = 420, left = 60, right = 20, top = 40, bottom = 90;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  double extent = 0.5;
  for (const auto& [t, a] : m.tracks)
    for (int i = 0; i < kNumParams; ++i)
      extent = std::max(extent, std::abs(a.w[i]) + std::sqrt(std::max(0.0, a.cov[i][i])));
  extent = std::ceil(extent * 2) / 2;
  const auto y_of = [&](double v) { return top + plot_h / 2 - v / extent * (plot_h / 2); };
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" font-size=\"15\">Router abilities per feature and track (Eq. 3; bars ±1 "
      "sd)</text>\n",
      width, height, left);
  for (double v : {-extent, -extent / 2, 0.0, extent / 2, extent}) {
    s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\"/>\n", left,
                     left + plot_w, y_of(v), y_of(v), v == 0 ? "#000" : "#ddd");
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.2g}</text>\n", left - 6, y_of(v) + 4,
                     v);
  }
  const double group = plot_w / kNumParams;
  const double n = std::max<double>(1, static_cast<double>(m.tracks.size()));
  const double bar = group * 0.8 / n;
  for (int i = 0; i < kNumParams; ++i) {
    const double gx = left + i * group;
    s += fmt::format(
        "<text transform=\"translate({:.1f},{:.1f}) rotate(-35)\" text-anchor=\"end\">{}</text>\n",
        gx + group / 2, top + plot_h + 14, param_label(i));
    int j = 0;
    for (const auto& [t, a] : m.tracks) {
      const double x = gx + group * 0.1 + j * bar, v = a.w[i], sd = std::sqrt(std::max(0.0, a.cov[i][i]));
      const char* color = kColors[j % std::size(kColors)];
      s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"/>\n",
                       x, std::min(y_of(v), y_of(0)), bar * 0.9, std::abs(y_of(v) - y_of(0)), color);
      s +=
          fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" stroke=\"#333\"/>\n",
                      x + bar * 0.45, y_of(v - sd), y_of(v + sd));
      ++j;
    }
  }
  int j = 0;
  for (const auto& [t, a] : m.tracks) {
    const double x = left + j * 150;
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>", x, height - 22,
                     kColors[j % std::size(kColors)]);
    s += fmt::format("<text x=\"{}\" y=\"{}\">{} ({} outcomes)</text>\n", x + 16, height - 12, t,
                     a.observations);
    ++j;
  }
  return s + "</svg>\n";
}

}  // namespace cake::router
