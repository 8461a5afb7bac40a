// Evolution mode (loop.h): planning rounds from the tiers, measuring variants durably, stopping, resuming.
#include "evolve/loop.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <random>
#include <set>

#include "build/build_service.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "eval/sandbox.h"
#include "evolve/parents.h"
#include "evolve/signature.h"
#include "evolve/strategies.h"
#include "profile/profile.h"
#include "skills/skill.h"
#include "tracks/regimes/regimes.h"

namespace cake::evolve {

namespace {

using nlohmann::json;

std::vector<Variant> load(store::Store& db, int64_t run) {
  std::vector<Variant> out;
  auto q = db.prepare(
      "SELECT id, round, track, knobs_json, source_hash, COALESCE(parent_id, 0), strategy, status, "
      "COALESCE(total_s, 0), "
      "COALESCE(efficiency, 0), COALESCE(result_json, 'null') FROM evolution_variants WHERE run_id = ? ORDER "
      "BY id");
  q.bind(1, run);
  while (q.step()) {
    out.push_back({q.column_int64(0), int(q.column_int64(1)), q.column_text(2), q.column_text(3),
                   q.column_text(4), q.column_int64(5), q.column_text(6), q.column_text(7),
                   q.column_double(8), q.column_double(9), json::parse(q.column_text(10))});
  }
  return out;
}

// The resolved knobs (as stored) and the hash of the source they lower to.
std::pair<std::string, std::string> identity(skills::Session& s, const CheckedContract& c,
                                             const std::string& track, const json& knobs) {
  const tracks::Artifact a = variant_artifact(s, c, track, knobs);
  return {a.knobs.to_json().dump(), build::artifact_hash(a)};
}

// Lowers and builds a variant as a recorded candidate: through the lower skill (traced) for a track's
// variant, directly for a composite (no skill lowers those). The lower skill's output shape either way.
json lower_variant(skills::Session& s, const std::string& file, const std::string& track, const json& knobs) {
  if (!is_composite(track))
    return skills::call(s, "lower", {{"contract", file}, {"track", track}, {"knobs", knobs}});
  const CheckedContract& c = s.contract(file);
  const skills::Built& b = s.remember(skills::build_candidate(s, c, variant_artifact(s, c, track, knobs)));
  return {{"ok", true},
          {"candidate", b.candidate},
          {"library", b.build.ok() ? b.build.library.string() : ""},
          {"build", {{"status", build::status_name(b.build.status)}, {"failure", b.build.failure}}}};
}

void plan(store::Store& db, int64_t run, int round, const std::string& track,
          const std::pair<std::string, std::string>& id, int64_t parent, const std::string& strategy) {
  auto ins = db.prepare(
      "INSERT INTO evolution_variants(run_id, round, track, knobs_json, source_hash, parent_id, strategy, "
      "status) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, 'planned')");
  ins.bind(1, run).bind(2, int64_t{round}).bind(3, track).bind(4, id.first).bind(5, id.second);
  if (parent) ins.bind(6, parent);
  ins.bind(7, strategy).step();
}

// Validation cases: drawn by the hidden set's rules but from another seed (never the hidden cases), at most
// this many. A variant that passes the standard cases must pass these too, untimed, before it counts as
// correct, so a move that trades precision (class A) cannot fit the twenty standard cases alone.
constexpr int kValidationCases = 12;

std::vector<cases::Case> validation_cases(const std::string& file) {
  CheckedContract v = load_and_check(file);
  v.contract.hidden.seed = v.contract.hidden.seed * 1000003u + 0x5eed;
  v.contract.hidden.count = std::min(v.contract.hidden.count, kValidationCases);
  return cases::make_cases(v, cases::Set::Hidden);
}

// "" when the library passes every validation case, else the first failure.
std::string validate(skills::Session& s, const std::string& file, const std::vector<cases::Case>& validation,
                     const std::string& library) {
  eval::SandboxOptions so;
  so.threads = s.threads;
  so.wall_seconds = s.case_seconds;
  for (const cases::Case& k : validation) {
    s.status(fmt::format("{}: validation case {}", s.contract(file).contract.name, k.describe()));
    const eval::CaseRun run = eval::run_sandboxed(library, file, k, so);
    if (run.verdict != eval::Verdict::Pass) {
      return fmt::format("validation case {}: {}{}", k.describe(), eval::verdict_name(run.verdict),
                         run.detail.empty() ? "" : " (" + run.detail + ")");
    }
  }
  s.status("");
  return "";
}

// Lowers and judges one planned variant; its measurements and its result commit together, so a kill
// leaves it planned and unmeasured.
void measure(skills::Session& s, const std::string& file, const std::vector<cases::Case>& validation,
             Variant& v) {
  s.db.exec("BEGIN IMMEDIATE");
  try {
    const json low = lower_variant(s, file, v.track, json::parse(v.knobs_key));
    int64_t candidate = 0;
    int passed = 0, total = 0;
    if (!low["ok"].get<bool>() || low["build"]["status"] != "ok") {
      v.status = "failed";
      v.result = {{"error", low["ok"].get<bool>() ? "build: " + low["build"].value("failure", "")
                                                  : low["error"].get<std::string>()}};
    } else {
      candidate = low["candidate"];
      v.result =
          skills::call(s, "evaluate", {{"contract", file}, {"candidate", candidate}, {"timing", true}});
      passed = v.result.value("passed", 0);
      total = v.result.value("total", 0);
      v.status = v.result["ok"].get<bool>() && total > 0 && passed == total ? "measured" : "failed";
      if (v.status == "measured") {
        if (const std::string why = validate(s, file, validation, low["library"]); !why.empty()) {
          v.status = "failed";
          v.result["error"] = why;
        }
      }
      v.total_s = v.result.value("total_s", 0.0);
      v.efficiency = v.result.value("mean_efficiency", 0.0);
    }
    auto up = s.db.prepare(
        "UPDATE evolution_variants SET status = ?, candidate_id = ?, total_s = ?, efficiency = ?, passed = "
        "?, total = ?, "
        "result_json = ?, measured_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?");
    up.bind(1, v.status);
    if (candidate) up.bind(2, candidate);
    up.bind(3, v.total_s)
        .bind(4, v.efficiency)
        .bind(5, int64_t{passed})
        .bind(6, int64_t{total})
        .bind(7, v.result.dump());
    up.bind(8, v.id).step();
    s.db.exec("COMMIT");
  } catch (...) {
    s.db.exec("ROLLBACK");
    throw;
  }
}

// Classes H and D across variants: the fittest single-track variant split with the correct variant that best
// complements it, by case size or one of the `sizes` (tracks::best_split) or by dtype
// (tracks::best_dtype_split) over their measured cases, when the split predicts a mean efficiency at least
// min_gain above the fittest variant's. Returns the composite's knobs and strategy.
std::optional<std::pair<json, std::string>> plan_composite(const std::vector<Variant>& all, double min_gain,
                                                           const std::vector<std::string>& sizes) {
  const Variant* base = nullptr;
  for (const Variant& v : all)
    if (v.correct() && !is_composite(v.track) && (!base || fitter(v, *base))) base = &v;
  if (!base) return std::nullopt;
  struct Plan {
    double efficiency = 0;
    json knobs;
    std::string what;
  };
  std::optional<Plan> best;
  const auto part = [](const Variant& v) {
    return json{{"track", v.track}, {"knobs", json::parse(v.knobs_key)}}.dump();
  };
  const auto consider = [&](const Variant& small, const Variant& large, double e, json route,
                            std::string what) {
    if (best && e <= best->efficiency) return;
    route["small"] = part(small);
    route["large"] = part(large);
    best = Plan{e, std::move(route), std::move(what)};
  };
  for (const Variant& v : all) {
    if (&v == base || !v.correct() || is_composite(v.track)) continue;
    const json a = v.result.value("cases", json::array()), b = base->result.value("cases", json::array());
    if (const auto sp = tracks::best_split(a, b, sizes)) {
      const Variant& small = sp->a_small ? v : *base;
      const Variant& large = sp->a_small ? *base : v;
      const std::string below = std::to_string(sp->below);
      json route = sp->size.empty()
                       ? json{{"below_io_bytes", below}}
                       : json{{"below_io_bytes", "0"}, {"size", sp->size}, {"below_size", below}};
      consider(small, large, sp->efficiency, std::move(route),
               fmt::format("H: regimes: variant {} below {} ({} cases), variant {} above", small.id,
                           sp->size.empty() ? below + " I/O bytes" : sp->size + " = " + below,
                           sp->small_cases, large.id));
    }
    if (const auto sp = tracks::best_dtype_split(a, b)) {
      std::string names;
      for (DType d : sp->a_dtypes) names += (names.empty() ? "" : ",") + std::string(dtype_name(d));
      consider(v, *base, sp->efficiency, {{"below_io_bytes", "0"}, {"dtypes", names}},
               fmt::format("D: dtypes: variant {} for {} ({} cases), variant {} for the rest", v.id, names,
                           sp->a_cases, base->id));
    }
  }
  if (!best || best->efficiency <= base->efficiency * (1 + min_gain)) return std::nullopt;
  return std::pair{best->knobs, fmt::format("{}; predicted efficiency {:.3f}", best->what, best->efficiency)};
}

// Evolution asks class A for speed: a move to a wider type ("f64", or f64_elementwise "true") only costs
// time, and precision repairs are the debug skill's job, so only moves away from those are kept.
bool faster(const json& parent, const json& moved) {
  for (const auto& [name, value] : moved.items()) {
    if (parent.contains(name) && parent[name] == value) continue;
    if (value == "f64" || (name == "f64_elementwise" && value == "true")) return false;
  }
  return true;
}

// A kernel may not take more threads than the run was given (--threads): a `threads` knob above it would
// buy its speed with cores the floor, the baseline and the user do not have.
bool within_threads(const json& knobs, int threads) {
  const auto it = knobs.find("threads");
  if (it == knobs.end() || !it->is_string()) return true;
  const std::string& v = it->get_ref<const std::string&>();
  return v == "0" || std::atoll(v.c_str()) <= threads;  // 0: as many as the run has
}

// Plans round r's variants; returns how many were planned.
int plan_round(skills::Session& s, const std::string& file, int64_t run, int r,
               const std::vector<Variant>& all, const EvolveOptions& o) {
  const CheckedContract& c = s.contract(file);
  const profile::Profile prof = profile::profile_of(c);
  std::set<std::string> seen;  // track|knobs and source hashes already in the run
  for (const Variant& v : all) seen.insert(v.track + "|" + v.knobs_key), seen.insert(v.source_hash);
  const std::set<std::string> failed = failed_moves(all);
  // Parents are tiered among the single-track variants: a composite's moves are new splits of its parts,
  // planned by plan_composite.
  std::vector<Variant> singles;
  std::copy_if(all.begin(), all.end(), std::back_inserter(singles),
               [](const Variant& v) { return !is_composite(v.track); });
  const Tiers t = tier(singles);
  // The round's first parent is a track's champion, the tracks within champion_share of the leader's
  // efficiency (half by default) taking turns by round (track_champions says why).
  const std::vector<const Variant*> champions = track_champions(singles, o.champion_share);
  std::mt19937_64 rng(o.seed * 1000003u + uint64_t(run) * 1009u + uint64_t(r));
  int planned = 0;
  s.db.exec("BEGIN IMMEDIATE");
  try {
    if (const auto comp = plan_composite(all, o.composite_gain, tracks::routable_sizes(c))) {
      const auto id = identity(s, c, tracks::kRegimesTrack, comp->first);
      if (!seen.count(std::string(tracks::kRegimesTrack) + "|" + id.first) && !seen.count(id.second)) {
        seen.insert(id.second);
        const bool by_dtype = comp->first.contains("dtypes");
        plan(s.db, run, r, tracks::kRegimesTrack, id, 0,
             (by_dtype ? "diverging-dtypes -> " : "diverging-shape-regimes -> ") + comp->second);
        ++planned;
      }
    }
    for (int i = 0, tries = 0; planned < o.variants && tries < 4 * o.variants; ++tries) {
      const Variant* parent = tries == 0 && champions.size() > 1
                                  ? champions[static_cast<size_t>(r) % champions.size()]
                                  : sample_parent(t, rng);
      if (!parent) break;
      const Signature sig = signature_of(parent->result.value("cases", json::array()), prof, s.peaks);
      const std::vector<char> classes = classes_for(sig.bottleneck);
      bool placed = false;
      for (size_t k = 0; k < classes.size() && !placed; ++k) {
        // The round rotates the first class too, so every class of the signature gets its turn even when
        // a round has fewer variants than the signature has classes; round 1 starts at the most promising.
        const char cls = classes[(size_t(i) + size_t(r - 1) + k) % classes.size()];
        const json opt = skills::call(s, "optimize",
                                      {{"contract", file},
                                       {"track", parent->track},
                                       {"knobs", json::parse(parent->knobs_key)},
                                       {"knobs_only", class_knobs(cls)}});
        if (!opt["ok"].get<bool>()) continue;
        std::vector<const json*> fresh;
        const json parent_knobs = json::parse(parent->knobs_key);
        for (const json& v : opt["variants"]) {
          if (!seen.count(parent->track + "|" + v["knobs"].dump()) && within_threads(v["knobs"], s.threads) &&
              !failed.count(parent->track + "|" + v["move"].get<std::string>()) &&
              (cls != 'A' || faster(parent_knobs, v["knobs"])))
            fresh.push_back(&v);
        }
        std::shuffle(fresh.begin(), fresh.end(), rng);
        for (const json* pick : fresh) {
          const auto id = identity(s, c, parent->track, (*pick)["knobs"]);
          const std::string key = parent->track + "|" + id.first;
          const bool known = seen.count(key) || seen.count(id.second);
          seen.insert(parent->track + "|" + (*pick)["knobs"].dump());
          seen.insert(key);
          if (known)
            continue;  // the same source as a variant already in the run: the knob has no effect here
          seen.insert(id.second);
          plan(s.db, run, r, parent->track, id, parent->id,
               fmt::format("{} -> {}: {}", bottleneck_name(sig.bottleneck), cls,
                           (*pick)["move"].get<std::string>()));
          placed = true;
          break;
        }
      }
      if (placed) ++planned, ++i;
    }
    s.db.exec("COMMIT");
  } catch (...) {
    s.db.exec("ROLLBACK");
    throw;
  }
  return planned;
}

RoundSummary summarize(const std::vector<Variant>& all, int r) {
  RoundSummary sum;
  sum.round = r;
  std::vector<Variant> upto;
  std::map<std::string, int> sigs;
  for (const Variant& v : all) {
    if (v.round > r) continue;
    upto.push_back(v);
    if (v.round == r && v.round > 0) {
      sum.strategies.push_back(v.strategy);
      ++sigs[v.strategy.substr(0, v.strategy.find(" -> "))];
    }
  }
  const Tiers t = tier(upto);
  sum.good = int(t.good.size()), sum.medium = int(t.medium.size());
  sum.poor = int(t.poor.size() + t.failed.size());
  if (const Variant* b = best_of(upto, r)) sum.best_s = b->total_s, sum.efficiency = b->efficiency;
  int most = 0;
  for (const auto& [name, n] : sigs)
    if (n > most) most = n, sum.signature = name;
  return sum;
}

void write_round(store::Store& db, int64_t run, const RoundSummary& sum, const Variant* best,
                 const std::string& stop) {
  std::string strategies;
  for (const std::string& x : sum.strategies) strategies += (strategies.empty() ? "" : "; ") + x;
  auto q = db.prepare(
      "INSERT OR REPLACE INTO evolution_rounds(run_id, round, best_id, best_s, efficiency, good, medium, "
      "poor, signature, "
      "strategies, stop_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  q.bind(1, run).bind(2, int64_t{sum.round});
  if (best) q.bind(3, best->id);
  q.bind(4, sum.best_s).bind(5, sum.efficiency).bind(6, int64_t{sum.good}).bind(7, int64_t{sum.medium});
  q.bind(8, int64_t{sum.poor}).bind(9, sum.signature).bind(10, strategies);
  if (!stop.empty()) q.bind(11, stop);
  q.step();
}

// The run's first seed: the starting kernel (round 0's first variant).
const Variant* first_seed(const std::vector<Variant>& all) {
  const auto it = std::min_element(all.begin(), all.end(), [](const Variant& a, const Variant& b) {
    return std::pair(a.round, a.id) < std::pair(b.round, b.id);
  });
  return it != all.end() && it->round == 0 ? &*it : nullptr;
}

// NOLINTNEXTLINE(bugprone-exception-escape): the implicit moves of nlohmann::json members
struct Confirmed {
  int64_t delivered = 0;  // variant id
  json seed, best;        // each's median evaluation (null: a repeat failed)
  json record;            // EvolveResult::confirmation
};

// The winner's curse (loop.h): the best-so-far and the first seed, each lowered again as a candidate (a
// build-cache hit), are timed `repeats` times, alternately, so both see the same machine; the best is
// delivered only if its median mean efficiency beats the seed's. Recorded in evolution_confirmations.
// Nothing when there is nothing to compare.
std::optional<Confirmed> confirm(skills::Session& s, const std::string& file, int64_t run,
                                 const std::vector<Variant>& all, const Variant& best, int repeats) {
  const Variant* seed = first_seed(all);
  if (repeats <= 0 || !seed || !seed->correct() || seed->id == best.id) return std::nullopt;
  const Variant* side[2] = {seed, &best};
  int64_t candidate[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    const json low = lower_variant(s, file, side[k]->track, json::parse(side[k]->knobs_key));
    if (low["ok"].get<bool>() && low["build"]["status"] == "ok") candidate[k] = low["candidate"];
  }
  std::vector<json> timed[2];
  json efficiencies[2] = {json::array(), json::array()};
  for (int i = 0; i < repeats; ++i) {
    for (int k = 0; k < 2; ++k) {
      s.status(fmt::format("{}: confirming the {} ({}/{})", s.contract(file).contract.name,
                           k ? "best" : "seed", i + 1, repeats));
      timed[k].push_back(
          candidate[k] ? skills::call(s, "evaluate",
                                      {{"contract", file}, {"candidate", candidate[k]}, {"timing", true}})
                       : json{{"ok", false}});
      const json& e = timed[k].back();
      efficiencies[k].push_back(e.value("ok", false) && e.value("passed", 0) == e.value("total", -1)
                                    ? json(e.value("mean_efficiency", 0.0))
                                    : json(nullptr));
    }
  }
  s.status("");
  Confirmed c;
  c.seed = median_evaluation(timed[0]);
  c.best = median_evaluation(timed[1]);
  const bool best_wins = delivers_best(c.seed, c.best);
  c.delivered = best_wins ? best.id : seed->id;
  const auto efficiency = [](const json& median) {
    return median.is_null() ? json(nullptr) : json(median.value("mean_efficiency", 0.0));
  };
  c.record = {{"repeats", repeats},
              {"seed", efficiencies[0]},
              {"best", efficiencies[1]},
              {"seed_median", efficiency(c.seed)},
              {"best_median", efficiency(c.best)},
              {"delivered", best_wins ? "best" : "seed"}};
  const json& won = best_wins ? c.best : c.seed;
  auto q = s.db.prepare(
      "INSERT OR REPLACE INTO evolution_confirmations(run_id, seed_id, best_id, winner_id, repeats, "
      "efficiency, seed_json, best_json, efficiencies_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
  q.bind(1, run).bind(2, seed->id).bind(3, best.id).bind(4, c.delivered).bind(5, int64_t{repeats});
  if (!won.is_null()) q.bind(6, won.value("mean_efficiency", 0.0));
  q.bind(7, c.seed.dump()).bind(8, c.best.dump()).bind(9, c.record.dump()).step();
  return c;
}

EvolveResult run_rounds(skills::Session& s, const std::string& file, int64_t run, const EvolveOptions& o) {
  EvolveResult res;
  res.run = run;
  const auto log = [&](const std::string& line) {
    if (o.log) o.log(line);
  };
  const std::string op = s.contract(file).contract.name;
  const std::vector<cases::Case> validation = validation_cases(file);  // the same cases for every variant
  int no_gain = 0;
  double prev_best = 0;
  // The stop: the confirmation (when there is a best to confirm) and the round that closes the run commit
  // together, so a run killed while confirming resumes into the same stop and confirms again.
  std::optional<Confirmed> confirmed;
  const auto stop_run = [&](const RoundSummary& sum, const std::vector<Variant>& all, const Variant* best,
                            const std::string& stop) {
    s.db.exec("BEGIN IMMEDIATE");
    try {
      if (best) confirmed = confirm(s, file, run, all, *best, o.confirm);
      write_round(s.db, run, sum, best, stop);
      s.db.exec("COMMIT");
    } catch (...) {
      s.db.exec("ROLLBACK");
      throw;
    }
    res.stop_reason = stop;
    if (!confirmed) return;
    const auto median = [](const json& e) {
      return e.is_null() ? std::string("failed")
                         : fmt::format("efficiency {:.3f} ({:.4g} s)", e["mean_efficiency"].get<double>(),
                                       e.value("total_s", 0.0));
    };
    log(fmt::format("{}: timed again {} times each, alternately: seed {}, best {}; delivering the {}", op,
                    o.confirm, median(confirmed->seed), median(confirmed->best),
                    confirmed->record["delivered"].get<std::string>()));
  };
  for (int r = 0;; ++r) {
    std::vector<Variant> all = load(s.db, run);
    const bool has_round =
        std::any_of(all.begin(), all.end(), [&](const Variant& v) { return v.round == r; });
    if (!has_round) {
      if (r == 0) throw Error("evolve: run " + std::to_string(run) + " has no seed variant");
      if (plan_round(s, file, run, r, all, o) == 0) {
        stop_run(res.rounds.back(), all, best_of(all, r - 1), "no move left in the knob space");
        break;
      }
      all = load(s.db, run);
    }
    for (Variant& v : all) {
      if (v.round != r || v.status != "planned") continue;
      measure(s, file, validation, v);
      ++res.measured_now;
      log(fmt::format("{} round {}: {} — {}", op, r, v.round ? v.strategy : "seed",
                      v.correct()
                          ? fmt::format("{:.4g} s over the cases, efficiency {:.3f}", v.total_s, v.efficiency)
                          : "failed: " + (v.result.contains("error") ? v.result["error"].get<std::string>()
                                                                     : std::string("a case did not pass"))));
    }
    const RoundSummary sum = summarize(all, r);
    res.rounds.push_back(sum);
    const Variant* best = best_of(all, r);
    if (!best) {
      stop_run(sum, all, nullptr, "the seed kernel failed");
      break;
    }
    if (r > 0) no_gain = sum.efficiency - prev_best > o.min_gain * prev_best ? 0 : no_gain + 1;
    prev_best = sum.efficiency;
    log(fmt::format("{} round {}: best {:.4g} s, efficiency {:.3f}, tiers {}/{}/{}{}", op, r, sum.best_s,
                    sum.efficiency, sum.good, sum.medium, sum.poor,
                    sum.signature.empty() ? "" : ", signature " + sum.signature));
    std::string stop;
    if (sum.efficiency >= o.stop_efficiency) {
      stop = fmt::format("efficiency {:.3f} reached {:.2f}", sum.efficiency, o.stop_efficiency);
    } else if (no_gain >= o.patience) {
      stop = fmt::format("no gain above {:.1f}% in {} rounds", 100 * o.min_gain, o.patience);
    } else if (r >= o.rounds) {
      stop = fmt::format("round budget ({})", o.rounds);
    }
    if (!stop.empty()) {
      stop_run(sum, all, best, stop);
      break;
    }
    write_round(s.db, run, sum, best, stop);
  }
  const std::vector<Variant> all = load(s.db, run);
  if (const Variant* seed = first_seed(all); seed && seed->correct()) res.seed_evaluation = seed->result;
  const Variant* best = best_of(all, 1 << 30);
  if (!best) {
    res.why = res.stop_reason;
    return res;
  }
  json evaluation = best->result;
  if (confirmed) {
    best = &*std::find_if(all.begin(), all.end(),
                          [&](const Variant& v) { return v.id == confirmed->delivered; });
    const json& delivered = confirmed->record["delivered"] == "best" ? confirmed->best : confirmed->seed;
    if (!delivered.is_null()) evaluation = delivered;
    if (!confirmed->seed.is_null()) res.seed_evaluation = confirmed->seed;
    res.confirmation = confirmed->record;
  }
  const json low = lower_variant(s, file, best->track, json::parse(best->knobs_key));
  if (!low["ok"].get<bool>() || low["library"].get<std::string>().empty()) {
    res.why = "the best variant no longer builds";
    return res;
  }
  res.ok = true;
  res.track = best->track;
  res.knobs = json::parse(best->knobs_key);
  res.evaluation = evaluation;
  res.library = low["library"];
  return res;
}

}  // namespace

// The repeat of median mean efficiency (the lower middle of an even count); null when a repeat did not
// pass every case.
json median_evaluation(const std::vector<json>& repeats) {
  std::vector<const json*> order;
  for (const json& e : repeats) {
    const int total = e.value("total", 0);
    if (!e.value("ok", false) || total == 0 || e.value("passed", 0) != total) return nullptr;
    order.push_back(&e);
  }
  if (order.empty()) return nullptr;
  std::sort(order.begin(), order.end(), [](const json* a, const json* b) {
    return a->value("mean_efficiency", 0.0) < b->value("mean_efficiency", 0.0);
  });
  return *order[(order.size() - 1) / 2];
}

bool delivers_best(const json& seed_median, const json& best_median) {
  if (best_median.is_null()) return false;
  return seed_median.is_null() ||
         best_median["mean_efficiency"].get<double>() > seed_median["mean_efficiency"].get<double>();
}

tracks::Artifact variant_artifact(skills::Session& s, const CheckedContract& c, const std::string& track,
                                  const json& knobs) {
  const auto lower = [&](const std::string& name, const json& k) {
    const tracks::Track* t = tracks::find_track(name);
    if (!t) throw Error("evolve: unknown track '" + name + "'");
    return t->lower(c, s.machine, tracks::Knobs::from_json(k));
  };
  if (!is_composite(track)) return lower(track, knobs);
  const tracks::RegimesParts p = tracks::regimes_parts(tracks::Knobs::from_json(knobs));
  return tracks::compose_regimes(c, lower(p.small_track, p.small_knobs), lower(p.large_track, p.large_knobs),
                                 p.route);
}

EvolveResult evolve(skills::Session& s, const std::string& file, const std::string& track, const json& knobs,
                    const EvolveOptions& o) {
  const CheckedContract& c = s.contract(file);
  const int64_t run = s.begin_run("evolve", c);
  std::set<std::string> planned;
  const auto seed = [&](const std::string& t, const json& k) {
    const auto id = identity(s, c, t, k);
    if (planned.insert(t + "|" + id.first).second && planned.insert(id.second).second)
      plan(s.db, run, 0, t, id, 0, "seed");
  };
  seed(track, knobs);
  for (const auto& [t, k] : o.more_seeds) {
    const tracks::Track* tr = tracks::find_track(t);
    if (tr && tr->feasible(c, s.machine).ok) seed(t, k);
  }
  return run_rounds(s, file, run, o);
}

std::optional<int64_t> unfinished_run(store::Store& db, const std::string& contract_hash) {
  auto q = db.prepare(
      "SELECT r.id FROM runs r WHERE r.command = 'evolve' AND r.contract_hash = ? AND NOT EXISTS (SELECT 1 "
      "FROM "
      "evolution_rounds e WHERE e.run_id = r.id AND e.stop_reason IS NOT NULL) ORDER BY r.id DESC LIMIT 1");
  q.bind(1, contract_hash);
  if (!q.step()) return std::nullopt;
  return q.column_int64(0);
}

std::optional<Evolved> latest_evolved(store::Store& db, const std::string& contract_hash) {
  auto q = db.prepare(
      "SELECT e.run_id, v.track, v.knobs_json, COALESCE(c.efficiency, v.efficiency, 0) "
      "FROM evolution_rounds e LEFT JOIN evolution_confirmations c ON c.run_id = e.run_id "
      "JOIN evolution_variants v ON v.id = COALESCE(c.winner_id, e.best_id) JOIN runs r ON r.id = e.run_id "
      "WHERE r.command = 'evolve' AND r.contract_hash = ? AND e.stop_reason IS NOT NULL "
      "ORDER BY e.run_id DESC, e.round DESC LIMIT 1");
  q.bind(1, contract_hash);
  if (!q.step()) return std::nullopt;
  return Evolved{q.column_int64(0), q.column_text(1), json::parse(q.column_text(2)), q.column_double(3)};
}

EvolveResult resume(skills::Session& s, const std::string& file, int64_t run, const EvolveOptions& o) {
  s.run = run;
  return run_rounds(s, file, run, o);
}

json curve(const EvolveResult& r) {
  json out = json::array();
  for (const RoundSummary& x : r.rounds) {
    out.push_back({{"round", x.round},
                   {"best_s", x.best_s},
                   {"efficiency", x.efficiency},
                   {"good", x.good},
                   {"medium", x.medium},
                   {"poor", x.poor},
                   {"signature", x.signature},
                   {"strategies", x.strategies}});
  }
  return out;
}

}  // namespace cake::evolve
