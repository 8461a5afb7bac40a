// Parent selection for Evolution mode (parents.h): fitness, tiers, the tier sampler, track champions and
// failed moves over a run's variants.
#include "evolve/parents.h"

#include <algorithm>
#include <map>

#include "tracks/regimes/regimes.h"

namespace cake::evolve {

bool is_composite(const std::string& track) {
  return track == tracks::kRegimesTrack;
}

bool fitter(const Variant& a, const Variant& b) {
  if (a.efficiency != b.efficiency) return a.efficiency > b.efficiency;
  return a.total_s < b.total_s;
}

const Variant* best_of(const std::vector<Variant>& all, int up_to_round) {
  const Variant* best = nullptr;
  for (const Variant& v : all)
    if (v.round <= up_to_round && v.correct() && (!best || fitter(v, *best))) best = &v;
  return best;
}

// Failed variants are not parents: a child of a failing kernel mostly fails too, and its failure bans its
// move for the rest of the run (linear_bias_gelu lost `bf16_dot=true` so, tried on an `acc=f32` parent that
// failed the gate).
Tiers tier(const std::vector<Variant>& all) {
  std::vector<const Variant*> ok;
  Tiers t;
  for (const Variant& v : all) {
    if (v.correct()) {
      ok.push_back(&v);
    } else if (v.status == "failed") {
      t.failed.push_back(&v);
    }
  }
  std::sort(ok.begin(), ok.end(), [](const Variant* a, const Variant* b) { return fitter(*a, *b); });
  const size_t third = (ok.size() + 2) / 3;
  for (size_t i = 0; i < ok.size(); ++i)
    (i < third ? t.good : i < 2 * third ? t.medium : t.poor).push_back(ok[i]);
  return t;
}

const Variant* sample_parent(const Tiers& t, std::mt19937_64& rng) {
  const double u = std::uniform_real_distribution<double>(0, 1)(rng);
  const std::vector<const Variant*>* order[3] = {&t.good, &t.medium, &t.poor};
  const int first = u < 0.6 ? 0 : u < 0.9 ? 1 : 2;
  for (int k = 0; k < 3; ++k) {
    const auto& tier = *order[(first + k) % 3];
    if (!tier.empty()) return tier[std::uniform_int_distribution<size_t>(0, tier.size() - 1)(rng)];
  }
  return nullptr;
}

// The tiers alone fill with the fittest lineage's children and can leave a close second track unexplored
// (rms_norm: 36 variants in 12 rounds, none a child of the simd seed, whose f32 move was the better kernel).
// A far second gets no turns: linear_bias_gelu gave two of five rounds' first parents to opencl at
// efficiency 0.008 against simd's 0.171; such a track is still a parent when the tiers draw it.
std::vector<const Variant*> track_champions(const std::vector<Variant>& singles, double min_share) {
  std::map<std::string, const Variant*> best;
  for (const Variant& v : singles) {
    if (!v.correct()) continue;
    const Variant*& b = best[v.track];
    if (!b || fitter(v, *b)) b = &v;
  }
  std::vector<const Variant*> out;
  out.reserve(best.size());
  for (const auto& [track, v] : best) out.push_back(v);
  std::sort(out.begin(), out.end(), [](const Variant* a, const Variant* b) { return fitter(*a, *b); });
  if (!out.empty()) {
    const double bar = min_share * out.front()->efficiency;
    out.erase(std::remove_if(out.begin(), out.end(), [&](const Variant* v) { return v->efficiency < bar; }),
              out.end());
  }
  return out;
}

// A move that broke a kernel once (a type the precision gate rejects, a build that does not compile) is not
// proposed again on another parent. Strategies read "<signature> -> <class>: <move>".
std::set<std::string> failed_moves(const std::vector<Variant>& all) {
  std::set<std::string> out;
  for (const Variant& v : all) {
    const size_t at = v.strategy.find(": ");
    if (v.status == "failed" && !is_composite(v.track) && at != std::string::npos)
      out.insert(v.track + "|" + v.strategy.substr(at + 2));
  }
  return out;
}

}  // namespace cake::evolve
