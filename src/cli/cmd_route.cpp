// `cake route <contract>... [--json]`: the router's decision table (DESIGN §7): the operator's profile, L0
// feasibility and the L2 prediction per track, the chosen track, the deciding feature and the contenders
// worth measuring too. `cake router fit [--plot FILE] [--leave-one-out] [--json]`: refits the abilities
// from the recorded outcomes (L3), prints them, plots them, and replays the routing leave-one-out.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "contract/contract.h"
#include "core/error.h"
#include "profile/profile.h"
#include "router/gate.h"
#include "router/leave_one_out.h"
#include "router/plot.h"
#include "router/record.h"

namespace cake::cli {

namespace {

nlohmann::json decision_json(const router::Decision& d) {
  nlohmann::json rows = nlohmann::json::array();
  for (const router::TrackRow& r : d.rows) {
    nlohmann::json row{{"track", r.gate.track}, {"feasible", r.gate.feasible}};
    if (r.gate.feasible)
      row.update({{"predicted", r.prediction.score},
                  {"upper", r.prediction.upper},
                  {"observations", r.prediction.observations}});
    else
      row["reason"] = r.gate.reason;
    rows.push_back(std::move(row));
  }
  nlohmann::json j{{"tracks", rows}, {"chosen", d.chosen}};
  if (d.abstained()) {
    j["abstain_reason"] = d.abstain_reason;
  } else {
    j.update({{"runner_up", d.runner_up}, {"deciding", d.deciding}, {"also_measure", d.also_measure}});
  }
  return j;
}

void print_decision(const std::string& name, const profile::Profile& p, const router::Decision& d) {
  std::printf("%s   %s\n", name.c_str(), profile::to_text(p).c_str());
  std::printf("  %-8s %-8s %9s %7s %6s\n", "track", "feasible", "predicted", "upper", "obs");
  for (const router::TrackRow& r : d.rows) {
    if (r.gate.feasible)
      std::printf("  %-8s %-8s %9.1f %7.1f %6d\n", r.gate.track.c_str(), "yes", 100 * r.prediction.score,
                  100 * r.prediction.upper, r.prediction.observations);
    else
      std::printf("  %-8s %-8s  %s\n", r.gate.track.c_str(), "no", r.gate.reason.c_str());
  }
  if (d.abstained()) {
    std::printf("  abstains: no track is feasible\n");
    return;
  }
  std::printf("  chosen: %s (deciding: %s%s%s)\n", d.chosen.c_str(), d.deciding.c_str(),
              d.runner_up.empty() ? "" : ", over ", d.runner_up.c_str());
  if (!d.also_measure.empty()) {
    std::string list;
    for (const std::string& t : d.also_measure) list += (list.empty() ? "" : ", ") + t;
    std::printf("  also measure (bound beats the chosen prediction): %s\n", list.c_str());
  }
}

std::string fmt_score(const std::string& track, double score) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s=%.1f ", track.c_str(), score);
  return buf;
}

}  // namespace

void add_route_command(CLI::App& app) {
  struct Opts {
    std::vector<std::string> files;
    bool json = false;
    double explore = 1.0;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("route", "print the router's decision table for contracts");
  cmd->add_option("contracts", o->files, "contract files (YAML)")->required();
  cmd->add_option("--explore", o->explore, "c in the exploration bound sigma(z + c*sd)")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "print one JSON document on stdout");
  cmd->callback([o] {
    const target::MachineInfo m = target::describe_machine();
    store::Store db = open_store();
    const router::Key key{router::target_key(m)};
    const router::Model model = router::load_model(db, key);
    nlohmann::json doc{
        {"target", key.target}, {"policy", key.policy}, {"operators", nlohmann::json::array()}};
    if (model.tracks.empty() && !o->json)
      std::printf(
          "no abilities recorded for %s/%s: every track predicts the prior (50); "
          "`cake bench --track all` records outcomes\n\n",
          key.target.c_str(), key.policy.c_str());
    int failed = 0;
    for (const std::string& f : o->files) {
      try {
        const CheckedContract c = load_and_check(f);
        const profile::Profile p = profile::profile_of(c);
        const router::Decision d = router::decide(model, p, router::feasibility_gate(c, m), {o->explore});
        nlohmann::json j = decision_json(d);
        j.update({{"file", f}, {"operator", c.contract.name}, {"profile", profile::to_json(p)}});
        doc["operators"].push_back(std::move(j));
        if (!o->json) print_decision(c.contract.name, p, d);
        failed += d.abstained();
      } catch (const Error& e) {
        ++failed;
        doc["operators"].push_back({{"file", f}, {"error", e.what()}});
        std::fprintf(stderr, "%s\n", e.what());
      }
    }
    if (o->json) std::printf("%s\n", doc.dump(2).c_str());
    set_exit_code(failed ? 1 : 0);
  });
}

void add_router_command(CLI::App& app) {
  struct Opts {
    std::string plot;
    bool json = false, loo = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* router_cmd = app.add_subcommand("router", "the router's abilities");
  router_cmd->require_subcommand(1);
  CLI::App* cmd = router_cmd->add_subcommand("fit", "refit the abilities from the recorded outcomes");
  cmd->add_option("--plot", o->plot, "write the abilities per feature and track as SVG");
  cmd->add_flag("--leave-one-out", o->loo,
                "replay the routing of each operator with abilities fitted without it");
  cmd->add_flag("--json", o->json, "print one JSON document on stdout");
  cmd->callback([o] {
    const target::MachineInfo m = target::describe_machine();
    store::Store db = open_store();
    const router::Key key{router::target_key(m)};
    const std::vector<router::Outcome> data = router::load_outcomes(db, key);
    if (data.empty()) {
      std::fprintf(stderr,
                   "cake router fit: no outcomes recorded for %s/%s; `cake bench --track all` records them\n",
                   key.target.c_str(), key.policy.c_str());
      return set_exit_code(1);
    }
    const router::Model model = router::fit(data);
    router::save_model(db, key, model);
    nlohmann::json doc{{"target", key.target}, {"policy", key.policy}, {"outcomes", data.size()}};
    for (const auto& [t, a] : model.tracks) doc["abilities"][t] = router::ability_to_json(a);
    if (!o->json) {
      std::printf("abilities for %s/%s from %zu outcomes\n%-8s %4s %6s", key.target.c_str(),
                  key.policy.c_str(), data.size(), "track", "obs", "a");
      for (int k = 0; k < profile::kNumFeatures; ++k)
        std::printf(" %6.6s", std::string(profile::feature_name(k)).c_str());
      std::printf(" %6s\n", "b");
      for (const auto& [t, a] : model.tracks) {
        std::printf("%-8s %4d", t.c_str(), a.observations);
        for (double w : a.w) std::printf(" %6.2f", w);
        std::printf("\n");
      }
    }
    if (!o->plot.empty()) {
      std::ofstream(o->plot) << router::abilities_svg(model);
      if (!o->json) std::printf("plot: %s\n", o->plot.c_str());
    }
    if (o->loo) {
      const router::LeaveOneOut r = router::leave_one_out(data);
      nlohmann::json rows = nlohmann::json::array();
      if (!o->json)
        std::printf("\nleave-one-out routing\n%-18s %-8s %-8s %7s %7s %7s  measured\n", "operator", "chosen",
                    "best", "chosen", "best", "regret");
      for (const router::LeaveOneOutRow& row : r.rows) {
        rows.push_back({{"operator", row.op},
                        {"measured", row.measured},
                        {"predicted", row.predicted},
                        {"chosen", row.chosen},
                        {"best", row.best},
                        {"fixed", row.fixed},
                        {"regret", row.regret()}});
        if (o->json) continue;
        std::string measured;
        for (const auto& [t, s] : row.measured) measured += fmt_score(t, s);
        std::printf("%-18s %-8s %-8s %7.1f %7.1f %7.1f  %s\n", row.op.c_str(), row.chosen.c_str(),
                    row.best.c_str(), row.measured.at(row.chosen), row.measured.at(row.best), row.regret(),
                    measured.c_str());
      }
      doc["leave_one_out"] = {{"rows", rows},
                              {"mean_regret", r.mean_regret},
                              {"mean_fixed_regret", r.mean_fixed_regret},
                              {"best_chosen", r.best_chosen}};
      if (!o->json)
        std::printf("mean regret %.2f points (fixed best-mean track: %.2f); best track chosen on %d of %zu\n",
                    r.mean_regret, r.mean_fixed_regret, r.best_chosen, r.rows.size());
    }
    if (o->json) std::printf("%s\n", doc.dump(2).c_str());
  });
}

}  // namespace cake::cli
