// Rendering of the package report: markdown tables of the run's figures and hand-written SVG plots
// (log-log roofline with the machine's roofs, evolution curve). Tolerant of missing and mistyped fields.
#include "deliver/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <vector>

namespace cake::deliver {

namespace {

using nlohmann::json;

std::optional<double> num(const json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  const double v = it->get<double>();
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<double> positive(const json& j, const char* key) {
  const auto v = num(j, key);
  if (v && *v > 0) return v;
  return std::nullopt;
}

// A field as text: strings as they are, other values as compact JSON, "" when missing.
std::string text(const json& j, const char* key) {
  if (!j.is_object()) return "";
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  return it->dump();
}

const json& member(const json& j, const char* key) {
  static const json null;
  if (!j.is_object()) return null;
  const auto it = j.find(key);
  return it == j.end() ? null : *it;
}

std::string cell(std::string s) {  // a markdown table cell
  std::string r;
  for (char ch : s) {
    if (ch == '|')
      r += "\\|";
    else if (ch == '\n' || ch == '\r')
      r += ' ';
    else
      r += ch;
  }
  if (r.size() > 240) r = r.substr(0, 237) + "...";
  return r;
}

std::string value_cell(const json& v) {
  if (v.is_string()) return cell(v.get<std::string>());
  if (v.is_number_float()) return fmt::format("{:.4g}", v.get<double>());
  return "`" + cell(v.dump()) + "`";
}

std::string xml(std::string_view s) {
  std::string r;
  for (char ch : s) {
    switch (ch) {
      case '&':
        r += "&amp;";
        break;
      case '<':
        r += "&lt;";
        break;
      case '>':
        r += "&gt;";
        break;
      case '"':
        r += "&quot;";
        break;
      default:
        r += (static_cast<unsigned char>(ch) < 0x20) ? ' ' : ch;
    }
  }
  return r;
}

std::string seconds(std::optional<double> s) {
  if (!s) return "";
  const double v = *s;
  if (v < 1e-6) return fmt::format("{:.3g} ns", v * 1e9);
  if (v < 1e-3) return fmt::format("{:.3g} µs", v * 1e6);
  if (v < 1) return fmt::format("{:.3g} ms", v * 1e3);
  return fmt::format("{:.3g} s", v);
}

std::string g3(std::optional<double> v) {
  return v ? fmt::format("{:.3g}", *v) : "";
}

std::string e2(std::optional<double> v) {
  return v ? fmt::format("{:.2e}", *v) : "";
}

double geomean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += std::log(x);
  return std::exp(s / static_cast<double>(v.size()));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// ---- SVG plumbing ----

struct Frame {
  double W = 760, H = 500, L = 86, R = 730, T = 56, B = 430;
};

std::string tick_label(int decade) {
  if (decade >= -3 && decade <= 5) return fmt::format("{}", std::pow(10.0, decade));
  return fmt::format("1e{}", decade);
}

// Decades [lo, hi] (powers of ten) covering values in [a, b].
std::pair<int, int> decades(double a, double b) {
  int lo = static_cast<int>(std::floor(std::log10(a)));
  int hi = static_cast<int>(std::ceil(std::log10(b)));
  if (hi <= lo) hi = lo + 1;
  return {lo, hi};
}

struct LogAxis {
  int lo, hi;
  double p0, p1;  // pixel positions of 10^lo and 10^hi
  double at(double v) const { return p0 + (std::log10(v) - lo) / static_cast<double>(hi - lo) * (p1 - p0); }
};

std::string svg_open(const Frame& f, std::string_view title) {
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"28\" font-size=\"16\" text-anchor=\"middle\">{3}</text>\n"
      "<defs><clipPath id=\"plot\"><rect x=\"{4}\" y=\"{5}\" width=\"{6}\" "
      "height=\"{7}\"/></clipPath></defs>\n",
      f.W, f.H, f.W / 2, xml(title), f.L, f.T, f.R - f.L, f.B - f.T);
  return s;
}

std::string log_grid_x(const Frame& f, const LogAxis& x) {
  std::string s;
  const int step = std::max(1, (x.hi - x.lo) / 10);
  for (int d = x.lo; d <= x.hi; d += step) {
    const double px = x.at(std::pow(10.0, d));
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/>\n", px, f.T,
                     f.B);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", px, f.B + 18,
                     tick_label(d));
  }
  return s;
}

std::string log_grid_y(const Frame& f, const LogAxis& y) {
  std::string s;
  const int step = std::max(1, (y.hi - y.lo) / 10);
  for (int d = y.lo; d <= y.hi; d += step) {
    const double py = y.at(std::pow(10.0, d));
    s += fmt::format("<line x1=\"{1}\" y1=\"{0:.1f}\" x2=\"{2}\" y2=\"{0:.1f}\" stroke=\"#ddd\"/>\n", py, f.L,
                     f.R);
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", f.L - 6, py + 4,
                     tick_label(d));
  }
  return s;
}

std::string axes(const Frame& f, std::string_view xlabel, std::string_view ylabel) {
  return fmt::format(
      "<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{3}\" fill=\"none\" stroke=\"#333\"/>\n"
      "<text x=\"{4}\" y=\"{5}\" text-anchor=\"middle\">{6}</text>\n"
      "<text x=\"20\" y=\"{7}\" text-anchor=\"middle\" transform=\"rotate(-90 20 {7})\">{8}</text>\n",
      f.L, f.T, f.R - f.L, f.B - f.T, (f.L + f.R) / 2, f.B + 42, xml(xlabel), (f.T + f.B) / 2, xml(ylabel));
}

struct RoofPoint {
  double ai, gflops;
  std::string verdict, label;
};

std::vector<RoofPoint> roof_points(const json& report) {
  std::vector<RoofPoint> v;
  const json& cs = member(report, "cases");
  if (!cs.is_array()) return v;
  for (const json& k : cs) {
    const auto f = positive(k, "flops"), b = positive(k, "bytes"), t = positive(k, "t_cand_s");
    if (!f || !b || !t) continue;
    RoofPoint p{*f / *b, *f / *t / 1e9, text(k, "verdict"), ""};
    const std::string d = text(k, "describe");
    p.label =
        fmt::format("{}{}: AI {:.3g} flop/B, {:.3g} GFLOP/s, {}", text(k, "id"), d.empty() ? "" : " " + d,
                    p.ai, p.gflops, p.verdict.empty() ? "no verdict" : p.verdict);
    v.push_back(std::move(p));
  }
  return v;
}

}  // namespace

int roofline_point_count(const json& report) {
  return static_cast<int>(roof_points(report).size());
}

std::string render_roofline_svg(const json& report) {
  const Frame f;
  const std::vector<RoofPoint> pts = roof_points(report);
  const json& m = member(report, "machine");
  const auto bw = positive(m, "bandwidth_gbs"), peak = positive(m, "fma_gflops");
  double xa = 1e300, xb = 0, ya = 1e300, yb = 0;
  for (const RoofPoint& p : pts) {
    xa = std::min(xa, p.ai);
    xb = std::max(xb, p.ai);
    ya = std::min(ya, p.gflops);
    yb = std::max(yb, p.gflops);
  }
  if (bw && peak) {
    const double ridge = *peak / *bw;
    xa = std::min(xa, ridge / 10);
    xb = std::max(xb, ridge * 10);
  }
  if (peak) {
    ya = std::min(ya, *peak / 1000);
    yb = std::max(yb, *peak * 1.2);
  }
  if (xb <= 0) xa = 0.01, xb = 100;
  if (yb <= 0) ya = 0.1, yb = 1000;
  const auto [xlo, xhi] = decades(xa, xb);
  const auto [ylo, yhi] = decades(ya, yb);
  const LogAxis x{xlo, xhi, f.L, f.R}, y{ylo, yhi, f.B, f.T};
  std::string op = text(report, "operator");
  std::string s = svg_open(f, "Roofline" + (op.empty() ? std::string() : ": " + op));
  s += log_grid_x(f, x) + log_grid_y(f, y);
  s += axes(f, "arithmetic intensity (flop / byte)", "achieved GFLOP/s");
  const double x0 = std::pow(10.0, xlo), x1 = std::pow(10.0, xhi);
  std::vector<std::pair<double, double>> roof;
  if (bw && peak) {
    const double ridge = *peak / *bw;
    roof = {{x0, *bw * x0}, {ridge, *peak}, {x1, *peak}};
  } else if (bw) {
    roof = {{x0, *bw * x0}, {x1, *bw * x1}};
  } else if (peak) {
    roof = {{x0, *peak}, {x1, *peak}};
  }
  if (!roof.empty()) {
    std::string pl;
    for (const auto& [a, b] : roof) pl += fmt::format("{:.1f},{:.1f} ", x.at(a), y.at(b));
    s += fmt::format(
        "<polyline clip-path=\"url(#plot)\" points=\"{}\" fill=\"none\" stroke=\"#1d3557\" "
        "stroke-width=\"2\"/>\n",
        pl);
  }
  for (const RoofPoint& p : pts) {
    const char* fill = p.verdict == "pass" ? "#2a9d8f" : p.verdict.empty() ? "#888888" : "#e63946";
    s += fmt::format(
        "<circle class=\"case\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" fill=\"{}\" fill-opacity=\"0.8\" "
        "stroke=\"#222\" "
        "clip-path=\"url(#plot)\"><title>{}</title></circle>\n",
        x.at(p.ai), y.at(p.gflops), fill, xml(p.label));
  }
  // Legend.
  double ly = f.T + 16;
  auto legend = [&](const std::string& swatch, const std::string& label) {
    s += swatch + fmt::format("<text x=\"{}\" y=\"{:.1f}\">{}</text>\n", f.L + 34, ly + 4, xml(label));
    ly += 18;
  };
  if (bw)
    legend(fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#1d3557\" "
                       "stroke-width=\"2\"/>",
                       f.L + 10, ly, f.L + 28, ly),
           fmt::format("bandwidth roof {:.3g} GB/s", *bw));
  if (peak)
    legend(fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#1d3557\" "
                       "stroke-width=\"2\"/>",
                       f.L + 10, ly, f.L + 28, ly),
           fmt::format("compute roof {:.3g} GFLOP/s", *peak));
  legend(fmt::format("<circle cx=\"{}\" cy=\"{:.1f}\" r=\"4\" fill=\"#2a9d8f\"/>", f.L + 19, ly),
         "case, passed");
  legend(fmt::format("<circle cx=\"{}\" cy=\"{:.1f}\" r=\"4\" fill=\"#e63946\"/>", f.L + 19, ly),
         "case, failed");
  if (pts.empty())
    s += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#666\">no timed cases with flops and "
        "bytes</text>\n",
        (f.L + f.R) / 2, (f.T + f.B) / 2);
  s += "</svg>\n";
  return s;
}

std::string render_evolution_svg(const json& report) {
  const json& ev = member(report, "evolution");
  if (!ev.is_array() || ev.empty()) return "";
  std::vector<std::pair<double, double>> times, effs;
  double i = 0;
  for (const json& r : ev) {
    const double round = num(r, "round").value_or(i);
    if (const auto t = positive(r, "best_s")) times.emplace_back(round, *t);
    if (const auto e = num(r, "efficiency")) effs.emplace_back(round, *e);
    i += 1;
  }
  // Efficiency is Evolution's fitness (it never falls from round to round); time only when it is missing.
  const bool use_time = effs.empty();
  const auto& pts = use_time ? times : effs;
  if (pts.empty()) return "";
  const Frame f;
  double r0 = pts.front().first, r1 = r0;
  for (const auto& p : pts) r0 = std::min(r0, p.first), r1 = std::max(r1, p.first);
  if (r1 <= r0) r1 = r0 + 1;
  auto px = [&](double r) { return f.L + (r - r0) / (r1 - r0) * (f.R - f.L); };
  std::string op = text(report, "operator");
  std::string s = svg_open(f, "Evolution" + (op.empty() ? std::string() : ": " + op));
  std::function<double(double)> py;
  LogAxis y{0, 1, f.B, f.T};
  if (use_time) {
    double a = 1e300, b = 0;
    for (const auto& p : pts) a = std::min(a, p.second), b = std::max(b, p.second);
    const auto [lo, hi] = decades(a, b);
    y = {lo, hi, f.B, f.T};
    py = [y](double v) { return y.at(v); };
    s += log_grid_y(f, y);
  } else {
    double hi = 1;
    for (const auto& p : pts) hi = std::max(hi, p.second);
    py = [&f, hi](double v) { return f.B - std::clamp(v, 0.0, hi) / hi * (f.B - f.T); };
    for (int k = 0; k <= 4; ++k) {
      const double v = hi * k / 4, yy = py(v);
      s += fmt::format("<line x1=\"{1}\" y1=\"{0:.1f}\" x2=\"{2}\" y2=\"{0:.1f}\" stroke=\"#ddd\"/>\n", yy,
                       f.L, f.R);
      s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.2g}</text>\n", f.L - 6, yy + 4, v);
    }
  }
  const int nt = static_cast<int>(std::min(10.0, r1 - r0));
  for (int k = 0; k <= nt; ++k) {
    const double r = r0 + (r1 - r0) * k / std::max(1, nt);
    s +=
        fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:.3g}</text>\n", px(r), f.B + 18, r);
  }
  s += axes(f, "round", use_time ? "best time (s)" : "efficiency (T_HW / T_cand)");
  std::string pl;
  for (const auto& p : pts) pl += fmt::format("{:.1f},{:.1f} ", px(p.first), py(p.second));
  s += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#1d3557\" stroke-width=\"2\"/>\n", pl);
  for (const auto& p : pts)
    s += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"#1d3557\"><title>round {:.3g}: {:.3g}"
        "</title></circle>\n",
        px(p.first), py(p.second), p.first, p.second);
  s += "</svg>\n";
  return s;
}

std::string render_report_md(const json& report, const ReportPlots& plots, std::string_view usage) {
  const std::string op = text(report, "operator");
  std::string s =
      fmt::format("# Operator package report: {}\n\n", op.empty() ? "(unnamed operator)" : cell(op));

  // Summary.
  std::vector<std::pair<std::string, std::string>> rows;
  auto row = [&](const char* label, const std::string& v) {
    if (!v.empty()) rows.emplace_back(label, v);
  };
  row("contract hash",
      text(report, "contract_hash").empty() ? "" : "`" + cell(text(report, "contract_hash")) + "`");
  row("track", cell(text(report, "track")));
  const json& knobs = member(report, "knobs");
  if (knobs.is_object() && !knobs.empty()) {
    std::string k;
    for (auto it = knobs.begin(); it != knobs.end(); ++it)
      k += (k.empty() ? "" : ", ") + it.key() + "=" + (it->is_string() ? it->get<std::string>() : it->dump());
    row("knobs", "`" + cell(k) + "`");
  } else if (!knobs.is_null()) {
    row("knobs", value_cell(knobs));
  }
  row("case set", cell(text(report, "set")));
  if (const auto v = num(report, "score")) row("score", fmt::format("{:.1f} / 100", *v));
  if (const auto v = num(report, "pass_rate")) row("pass rate", fmt::format("{:.1f} %", *v * 100));
  const json& cs = member(report, "cases");
  if (cs.is_array() && !cs.empty()) {
    int pass = 0;
    std::vector<double> speed, eff;
    for (const json& k : cs) {
      pass += text(k, "verdict") == "pass" ? 1 : 0;
      const auto tc = positive(k, "t_cand_s"), tb = positive(k, "t_base_s"), tf = positive(k, "t_floor_s");
      if (tc && tb) speed.push_back(*tb / *tc);
      if (tc && tf) eff.push_back(*tf / *tc);
    }
    row("cases passed", fmt::format("{} of {}", pass, cs.size()));
    if (!speed.empty())
      row("speed-up over the baseline", fmt::format("{:.3g}× (geometric mean)", geomean(speed)));
    if (!eff.empty())
      row("roofline efficiency", fmt::format("{:.3g} (median of T_HW / T_cand)", median(eff)));
  }
  if (!rows.empty()) {
    s += "| | |\n|---|---|\n";
    for (const auto& [k, v] : rows) s += fmt::format("| {} | {} |\n", k, v);
    s += "\n";
  }

  // Machine.
  const json& m = member(report, "machine");
  if (m.is_object() && !m.empty()) {
    s += "## Machine\n\n| | |\n|---|---|\n";
    if (const auto v = num(m, "bandwidth_gbs")) s += fmt::format("| memory bandwidth | {:.3g} GB/s |\n", *v);
    if (const auto v = num(m, "fma_gflops")) s += fmt::format("| FP32 FMA peak | {:.3g} GFLOP/s |\n", *v);
    if (const auto v = num(m, "threads")) s += fmt::format("| threads | {:.0f} |\n", *v);
    if (m.contains("bandwidth_gbs") && m.contains("fma_gflops")) {
      const auto bw = positive(m, "bandwidth_gbs"), pk = positive(m, "fma_gflops");
      if (bw && pk) s += fmt::format("| ridge point | {:.3g} flop/byte |\n", *pk / *bw);
    }
    for (auto it = m.begin(); it != m.end(); ++it) {
      if (it.key() == "bandwidth_gbs" || it.key() == "fma_gflops" || it.key() == "threads") continue;
      s += fmt::format("| {} | {} |\n", cell(it.key()), value_cell(*it));
    }
    s += "\n";
  }

  // Routing.
  const json& routing = member(report, "routing");
  if (routing.is_object() && !routing.empty()) {
    s += "## Routing decision\n\n| | |\n|---|---|\n";
    for (auto it = routing.begin(); it != routing.end(); ++it)
      s += fmt::format("| {} | {} |\n", cell(it.key()), value_cell(*it));
    s += "\n";
  } else if (!routing.is_null()) {
    s += "## Routing decision\n\n" + value_cell(routing) + "\n\n";
  }

  // Generation: the controller's attempts (track, why, outcome, time).
  const json& gen = member(report, "generation");
  if (gen.is_object()) {
    s += "## Generation\n\n";
    if (const auto t = num(gen, "seconds_to_first_correct"))
      s += fmt::format("First correct kernel after {:.1f} s", *t);
    if (const auto t = num(gen, "seconds")) s += fmt::format("; {:.1f} s in all, timing included", *t);
    s += ".\n\n";
    const json& attempts = member(gen, "attempts");
    if (attempts.is_array() && !attempts.empty()) {
      s += "| # | track | why | outcome | seconds |\n|---|---|---|---|---|\n";
      int i = 0;
      for (const json& a : attempts)
        s += fmt::format("| {} | {} | {} | {} | {} |\n", ++i, cell(text(a, "track")), cell(text(a, "why")),
                         cell(text(a, "outcome")), g3(num(a, "seconds")));
      s += "\n";
    }
  }

  // Cases.
  if (cs.is_array() && !cs.empty()) {
    s += "## Cases\n\n";
    s += "Precision: MERE / MARE are the mean / max relative error against the f64 reference. Times: T_cand "
         "the "
         "kernel, T_base the baseline, T_HW the roofline floor; efficiency = T_HW / T_cand.\n\n";
    s += "| case | shape | dtype | verdict | MERE | MARE | T_cand | T_base | T_HW | vs base | efficiency | "
         "GFLOP/s | "
         "GB/s |\n";
    s += "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const json& k : cs) {
      const auto tc = positive(k, "t_cand_s"), tb = positive(k, "t_base_s"), tf = positive(k, "t_floor_s");
      const auto fl = num(k, "flops"), by = num(k, "bytes");
      std::optional<double> speed, eff, gf, gb;
      if (tc && tb) speed = *tb / *tc;
      if (tc && tf) eff = *tf / *tc;
      if (tc && fl) gf = *fl / *tc / 1e9;
      if (tc && by) gb = *by / *tc / 1e9;
      s += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                       cell(text(k, "id")), cell(text(k, "describe")), cell(text(k, "dtype")),
                       cell(text(k, "verdict")), e2(num(k, "mere")), e2(num(k, "mare")), seconds(tc),
                       seconds(tb), seconds(tf), speed ? g3(speed) + "×" : "", g3(eff), g3(gf), g3(gb));
    }
    s += "\n";
  }
  if (plots.roofline) s += "## Roofline\n\n![roofline](roofline.svg)\n\n";

  // Evolution.
  const json& ev = member(report, "evolution");
  if (ev.is_array() && !ev.empty()) {
    s += "## Evolution\n\n| round | best time | efficiency |\n|---|---|---|\n";
    for (const json& r : ev)
      s += fmt::format("| {} | {} | {} |\n", cell(text(r, "round")), seconds(positive(r, "best_s")),
                       g3(num(r, "efficiency")));
    s += "\n";
    const json& c = member(report, "evolution_confirmation");
    if (c.is_object()) {
      // The medians as the stop computed them (evolve::median_evaluation); null: a repeat failed a case.
      const auto median = [&](const char* side) {
        const auto it = c.find(side);
        return it != c.end() && it->is_null() ? std::string("failed") : g3(num(c, side));
      };
      s += fmt::format(
          "At the stop the best and the seed were timed again {} times each, alternately: median efficiency "
          "{} (best) against {} (seed); delivered: the {}.\n\n",
          cell(text(c, "repeats")), median("best_median"), median("seed_median"), cell(text(c, "delivered")));
    }
    if (plots.evolution) s += "![evolution](evolution.svg)\n\n";
  }
  if (!usage.empty()) s += std::string(usage) + "\n";
  return s;
}

}  // namespace cake::deliver
