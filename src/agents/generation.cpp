// The generation controller (generation.h): route, lower, build, judge, repair, time, choose.
#include "agents/generation.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "profile/profile.h"
#include "router/gate.h"
#include "router/record.h"
#include "skills/skill.h"

namespace cake::agents {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The tracks to try, in order, each with why: the router's choice, its contenders, then the other
// feasible tracks by predicted score.
std::vector<std::pair<std::string, std::string>> track_order(const json& routing,
                                                             const GenerationOptions& o) {
  if (!o.track.empty()) return {{o.track, "--track"}};
  std::vector<std::pair<std::string, std::string>> order;
  std::set<std::string> seen;
  const auto add = [&](const std::string& t, const std::string& why) {
    if (!t.empty() && seen.insert(t).second) order.emplace_back(t, why);
  };
  add(routing["chosen"], "router's choice (deciding: " + routing.value("deciding", "") + ")");
  for (const json& t : routing.value("also_measure", json::array()))
    add(t, "router's contender (its upper bound beats the choice)");
  std::vector<std::pair<double, std::string>> rest;
  for (const json& r : routing["tracks"]) {
    if (r["feasible"].get<bool>())
      rest.emplace_back(-r.value("predicted", 0.0), r["track"].get<std::string>());
  }
  std::sort(rest.begin(), rest.end());
  for (const auto& [p, t] : rest) add(t, fmt::format("fallback (predicted {:.1f})", -p));
  return order;
}

std::string first_failure(const json& eval) {
  for (const json& k : eval["cases"]) {
    if (k["verdict"] != "pass") {
      return fmt::format("{} {} {}: {}", k["id"].get<std::string>(), k["dtype"].get<std::string>(),
                         k["verdict"].get<std::string>(), k["detail"].get<std::string>());
    }
  }
  return "";
}

}  // namespace

GenerationResult generate(skills::Session& s, const std::string& file, const GenerationOptions& o) {
  const auto t0 = Clock::now();
  GenerationResult r;
  const auto log = [&](const std::string& line) {
    if (o.log) o.log(line);
  };
  if (!s.run) {
    try {
      s.begin_run("generate", s.contract(file));
    } catch (const Error& e) {  // a contract that does not load: nothing to generate
      r.why_none = e.what();
      r.seconds = since(t0);
      return r;
    }
  }
  r.description = skills::call(s, "describe", {{"contract", file}});
  if (!r.description["ok"].get<bool>()) {
    r.why_none = r.description["error"];
    r.seconds = since(t0);
    return r;
  }
  r.operator_name = r.description["operator"];
  const json& routing = r.description["routing"];
  const auto order = track_order(routing, o);
  if (order.empty()) r.why_none = "no track is feasible: " + routing.value("abstain_reason", "");

  struct Correct {
    std::string track;
    json knobs;
    int64_t candidate;
  };
  std::vector<Correct> correct;
  std::vector<std::string> reasons;
  int attempts = 0;
  for (size_t ti = 0; ti < order.size() && attempts < o.max_attempts; ++ti) {
    const auto& [track, track_why] = order[ti];
    // Once a kernel is correct, only the router's contenders are still worth judging.
    if (!correct.empty() && !(o.explore && track_why.rfind("router's contender", 0) == 0)) break;
    json knobs = ti == 0 ? o.start_knobs : json::object();
    std::string why = track_why;
    json tried = json::array();
    std::optional<int64_t> parent;
    while (attempts < o.max_attempts) {
      ++attempts;
      const auto ta = Clock::now();
      Attempt a{track, knobs, 0, why, "", 0};
      json lower_in{{"contract", file}, {"track", track}, {"knobs", knobs}};
      if (parent) lower_in["parent"] = *parent;
      const json low = skills::call(s, "lower", lower_in);
      if (!low["ok"].get<bool>()) {
        a.outcome = "invalid: " + low["error"].get<std::string>();
        a.seconds = since(ta);
        log(fmt::format("{} attempt {}: {} — {}", r.operator_name, attempts, track, a.outcome));
        r.attempts.push_back(a);
        reasons.push_back(track + ": " + a.outcome);
        break;
      }
      a.candidate = low["candidate"];
      a.knobs = low["knobs"];
      tried.push_back(a.knobs);
      parent = a.candidate;
      json debug_in{{"contract", file}, {"track", track}, {"knobs", a.knobs}, {"tried", tried}};
      if (low["build"]["status"] != "ok") {
        a.outcome = "build-failed: " + low["build"].value("failure", "");
        debug_in["build"] = low["build"];
      } else {
        const json ev =
            skills::call(s, "evaluate", {{"contract", file}, {"candidate", a.candidate}, {"timing", false}});
        if (ev["ok"].get<bool>() && ev["passed"] == ev["total"]) {
          a.outcome = "correct";
        } else if (!ev["ok"].get<bool>()) {
          a.outcome = "evaluate failed: " + ev["error"].get<std::string>();
        } else {
          a.outcome =
              fmt::format("{} of {} cases fail (first: {})", ev["total"].get<int>() - ev["passed"].get<int>(),
                          ev["total"].get<int>(), first_failure(ev));
          debug_in["evaluation"] = ev;
        }
      }
      a.seconds = since(ta);
      log(fmt::format("{} attempt {}: {} {} — {} ({:.1f} s)", r.operator_name, attempts, track,
                      why.substr(0, why.find(" (")), a.outcome, a.seconds));
      r.attempts.push_back(a);
      if (a.outcome == "correct") {
        if (r.seconds_to_first_correct < 0) r.seconds_to_first_correct = since(t0);
        correct.push_back({track, a.knobs, a.candidate});
        break;
      }
      reasons.push_back(track + ": " + a.outcome);
      const json dbg = skills::call(s, "debug", debug_in);
      if (!dbg["ok"].get<bool>() || dbg["repairs"].empty()) {
        if (dbg["ok"].get<bool>()) log(fmt::format("{}: no repair left on {}", r.operator_name, track));
        break;
      }
      knobs = dbg["repairs"][0]["knobs"];
      why = "repair of " + dbg["diagnosis"]["class"].get<std::string>() + ": " +
            dbg["repairs"][0]["why"].get<std::string>();
    }
  }

  // Time every correct kernel against the baseline; the best score is the result.
  const router::Key key{router::target_key(s.machine)};
  bool recorded = false;
  for (const Correct& k : correct) {
    const json ev =
        skills::call(s, "evaluate", {{"contract", file}, {"candidate", k.candidate}, {"timing", true}});
    if (!ev["ok"].get<bool>() || ev["passed"] != ev["total"]) {
      reasons.push_back(k.track + ": failed when timed: " +
                        (ev["ok"].get<bool>() ? first_failure(ev) : ev["error"].get<std::string>()));
      continue;
    }
    log(fmt::format("{}: {} scores {:.1f} ({:.2f}x the baseline)", r.operator_name, k.track,
                    ev["score"].get<double>(), ev["speedup_over_baseline"].get<double>()));
    if (o.record && s.baseline) {
      const CheckedContract& c = s.contract(file);
      router::record_outcome(s.db, key,
                             router::outcome_of(profile::profile_of(c), c.contract.name, c.hash, k.track,
                                                ev["score"].get<double>()),
                             s.run);
      recorded = true;
    }
    if (!r.ok || ev["score"].get<double>() > r.best["score"].get<double>()) {
      r.ok = true;
      r.best = ev;
      r.best_track = k.track;
      r.best_knobs = k.knobs;
      r.library = s.built(k.candidate)->build.library.string();
    }
  }
  if (recorded) router::refit(s.db, key);
  if (!r.ok && r.why_none.empty()) {
    r.why_none = fmt::format("no correct kernel in {} attempts", attempts);
    for (const std::string& why : reasons) r.why_none += "; " + why;
  }
  r.seconds = since(t0);
  return r;
}

json to_json(const GenerationResult& r) {
  json attempts = json::array();
  for (const Attempt& a : r.attempts) {
    attempts.push_back({{"track", a.track},
                        {"knobs", a.knobs},
                        {"candidate", a.candidate},
                        {"why", a.why},
                        {"outcome", a.outcome},
                        {"seconds", a.seconds}});
  }
  json j{{"ok", r.ok},
         {"operator", r.operator_name},
         {"description", r.description},
         {"attempts", attempts},
         {"seconds", r.seconds},
         {"seconds_to_first_correct", r.seconds_to_first_correct}};
  if (r.ok) {
    j["track"] = r.best_track;
    j["knobs"] = r.best_knobs;
    j["library"] = r.library;
    j["best"] = r.best;
  } else {
    j["why_none"] = r.why_none;
  }
  return j;
}

}  // namespace cake::agents
