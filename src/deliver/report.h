// The package's report (DESIGN §9): report.md and its plots (roofline.svg, evolution.svg) rendered from the
// report JSON (operator, contract hash, track, knobs, routing, machine, set, score, pass rate, cases,
// evolution). Every field may be missing or of an unexpected type: what is there is rendered, the rest is
// left out, nothing throws.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace cake::deliver {

// report.md. `plots`: which plot files sit beside it (linked when set); `usage`: a markdown section
// appended at the end (how to call the package).
struct ReportPlots {
  bool roofline = false;
  bool evolution = false;
};
std::string render_report_md(const nlohmann::json& report, const ReportPlots& plots = {},
                             std::string_view usage = {});

// Log-log roofline: x = arithmetic intensity (flops / bytes), y = achieved GFLOP/s per case
// (flops / t_cand_s / 1e9), with the bandwidth roof (machine.bandwidth_gbs · x) and the compute roof
// (machine.fma_gflops). One <circle> per plottable case (flops, bytes and t_cand_s all positive).
std::string render_roofline_svg(const nlohmann::json& report);
int roofline_point_count(const nlohmann::json& report);

// Best time per evolution round (log y), or efficiency per round when no times are given. Empty string
// when the report has no evolution rounds.
std::string render_evolution_svg(const nlohmann::json& report);

}  // namespace cake::deliver
