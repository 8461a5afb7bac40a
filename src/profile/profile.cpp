// Feature extraction from the checked TE. Each feature is decided by a structural fact that a
// reader can verify in the contract; `why` records it.
#include "profile/profile.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace cake::profile {
namespace {

using te::Expr;
using te::ExprKind;
using te::Stmt;

void walk(const Expr& e, const std::function<void(const Expr&)>& f) {
  f(e);
  for (const auto& a : e.args) walk(*a, f);
  if (e.pad_value) walk(*e.pad_value, f);
}

std::set<int> vars_of(const Expr& e) {
  std::set<int> s;
  walk(e, [&](const Expr& x) {
    if (x.kind == ExprKind::Var) s.insert(x.slot);
  });
  return s;
}

// An index that combines two or more variables (h*S + r): a window.
bool windowed_index(const Expr& ix) {
  return !te::contains(ix, ExprKind::Read) && vars_of(ix).size() >= 2;
}

// All reads under e (excluding those inside index expressions).
void value_reads(const Expr& e, std::vector<const Expr*>& out) {
  if (e.kind == ExprKind::Read) {
    out.push_back(&e);
    return;
  }
  for (const auto& a : e.args) value_reads(*a, out);
}

struct Facts {
  int stages = 0;
  int max_depth = 0;     // loop-nest depth (domain + reduction variables)
  bool window = false;   // some read index combines variables
  bool gather = false;   // data-dependent read
  bool scatter = false;  // data-dependent write (+= with a read in the index)
  bool broadcast_or_perm = false;
  bool triangular = false;  // a reduction range depends on an outer variable
  int reductions = 0;       // reduction nodes
  bool multi_axis_reduction = false;
  int contractions = 0;  // sum over a product of two distinct tensors' reads, each with a private variable
  bool chained_contraction = false;
  bool windowed_contraction = false;
  int phases = 1;  // passes: reduction stages that must complete before the last one, + 1
  bool reduction_feeds_later = false;
  bool reuse = false;       // some read ignores a variable of its context
  bool int_values = false;  // integer data beyond indices (quantized)
};

bool is_contraction(const Expr& red, std::vector<const Expr*>* reads_out) {
  if (red.kind != ExprKind::Reduce || red.reduce != te::ReduceOp::Sum) return false;
  std::vector<const Expr*> reads;
  value_reads(*red.args[0], reads);
  std::set<int> rv;
  for (const auto& v : red.rvars) rv.insert(v.slot);
  for (size_t i = 0; i < reads.size(); ++i)
    for (size_t j = i + 1; j < reads.size(); ++j) {
      if (reads[i]->slot == reads[j]->slot) continue;
      std::set<int> a = vars_of(*reads[i]), b = vars_of(*reads[j]);
      bool shared_red = false, a_own = false, b_own = false;
      for (int v : a) {
        if (b.count(v) && rv.count(v)) shared_red = true;
        if (!b.count(v) && !rv.count(v)) a_own = true;
      }
      for (int v : b)
        if (!a.count(v) && !rv.count(v)) b_own = true;
      if (shared_red && (a_own || b_own)) {
        if (reads_out) *reads_out = {reads[i], reads[j]};
        return true;
      }
    }
  return false;
}

Facts gather_facts(const CheckedContract& cc) {
  const Contract& c = cc.contract;
  Facts f;
  f.stages = static_cast<int>(c.compute.size());
  std::map<int, int> red_depth;         // tensor -> reduction stages on the longest chain producing it
  std::map<int, bool> is_contract_out;  // tensor produced by a contraction
  for (int j : cc.order) {
    const Stmt& s = c.compute[static_cast<size_t>(j)];
    f.max_depth = std::max(f.max_depth, static_cast<int>(s.vars.size()));
    if (s.accumulate)
      for (const auto& ix : s.index)
        if (te::contains(*ix, ExprKind::Read)) f.scatter = true;
    bool stmt_reduces = false, stmt_contracts = false, reads_contracted = false;
    int in_depth = 0;
    std::function<void(const Expr&, const std::set<int>&)> visit = [&](const Expr& e,
                                                                       const std::set<int>& ctx) {
      std::set<int> inner = ctx;
      if (e.kind == ExprKind::Reduce) {
        ++f.reductions;
        stmt_reduces = true;
        if (e.rvars.size() > 1) f.multi_axis_reduction = true;
        for (const auto& v : e.rvars) {
          inner.insert(v.slot);
          if (v.lo && (!vars_of(*v.lo).empty() || !vars_of(*v.hi).empty())) f.triangular = true;
        }
        std::vector<const Expr*> pair;
        if (is_contraction(e, &pair)) {
          ++f.contractions;
          stmt_contracts = true;
          for (const Expr* r : pair) {
            if (is_contract_out[r->slot]) f.chained_contraction = true;
            for (const auto& ix : r->args)
              if (windowed_index(*ix)) f.windowed_contraction = true;
          }
        }
      }
      if (e.kind == ExprKind::Read) {
        std::set<int> used;
        bool plain_in_order = true;
        int last = -1;
        for (const auto& ix : e.args) {
          if (te::contains(*ix, ExprKind::Read)) f.gather = true;
          if (windowed_index(*ix)) f.window = true;
          for (int v : vars_of(*ix)) used.insert(v);
          if (ix->kind != ExprKind::Var || ix->slot <= last) plain_in_order = false;
          if (ix->kind == ExprKind::Var) last = ix->slot;
        }
        if (!plain_in_order || used.size() != inner.size()) f.broadcast_or_perm = true;
        for (int v : inner)
          if (!used.count(v)) f.reuse = true;
        if (is_contract_out[e.slot]) reads_contracted = true;
        int d = red_depth.count(e.slot) ? red_depth[e.slot] : 0;
        if (d > 0) f.reduction_feeds_later = true;
        in_depth = std::max(in_depth, d);
        const TensorInfo& t = cc.tensors[static_cast<size_t>(e.slot)];
        if (!t.index_only && t.fixed_dtype && !is_float(*t.fixed_dtype) && *t.fixed_dtype != DType::boolean &&
            *t.fixed_dtype != DType::i64 && *t.fixed_dtype != DType::i32)
          f.int_values = true;
        for (const auto& ix : e.args) visit(*ix, inner);
        return;
      }
      if (e.kind == ExprKind::Cast && !is_float(e.cast_to) && e.cast_to != DType::boolean)
        f.int_values = true;
      for (const auto& a : e.args) visit(*a, inner);
    };
    std::set<int> domain;
    for (int v = 0; v < s.n_domain; ++v) domain.insert(v);
    visit(*s.rhs, domain);
    for (const auto& ix : s.index) visit(*ix, domain);
    f.phases = std::max(f.phases, in_depth + 1);
    // Only plain reductions make passes: a contraction's epilogue fuses into it.
    red_depth[s.tensor] = std::max(red_depth[s.tensor], in_depth + (stmt_reduces && !stmt_contracts ? 1 : 0));
    // Anything computed from a contraction's result counts as contraction-derived.
    if (stmt_contracts || reads_contracted) is_contract_out[s.tensor] = true;
  }
  return f;
}

int bucket_stages(int n) {
  return n <= 1 ? 0 : n <= 3 ? 1 : n <= 6 ? 2 : 3;
}

}  // namespace

std::string_view feature_name(int f) {
  static constexpr std::string_view names[kNumFeatures] = {
      "contraction",  "reduction",     "tiling",           "fusion",
      "dtype_spread", "data_movement", "scheduling_depth", "blocking"};
  return f >= 0 && f < kNumFeatures ? names[f] : "?";
}

Profile profile_of(const CheckedContract& cc) {
  const Contract& c = cc.contract;
  Facts f = gather_facts(cc);
  Profile p;
  auto set = [&](Feature k, int v, std::string why) {
    p.x[k] = std::clamp(v, 0, 3);
    p.why[k] = std::move(why);
  };

  if (f.chained_contraction)
    set(Contraction, 3, "a contraction consumes another contraction's result");
  else if (f.contractions > 0 && !f.windowed_contraction)
    set(Contraction, 2, "sum over a product of two tensors");
  else if (f.contractions > 0 || (f.window && f.reductions > 0))
    set(Contraction, 1, "windowed contraction");
  else
    set(Contraction, 0, "no contraction");

  int plain_reductions = f.reductions - f.contractions;
  if (plain_reductions <= 0 && f.contractions == 0)
    set(Reduction, 0, "no reduction");
  else if (f.reduction_feeds_later)
    set(Reduction, 3, "a reduction's result feeds a later stage");
  else if (f.reductions > 1 || f.multi_axis_reduction || f.triangular)
    set(Reduction, 2, f.triangular ? "segmented (triangular) reduction" : "several reductions");
  else
    set(Reduction, 1, "one reduction over one axis");

  int depth = f.max_depth;
  int t = depth <= 1 ? 0 : depth == 2 ? 1 : depth == 3 ? 2 : 3;
  std::string why = std::to_string(depth) + "-deep loop nest";
  if (f.window && t < 2) {
    t = 2;
    why += ", windowed";
  }
  if ((f.gather || f.scatter || f.triangular) && t < 3 && depth >= 3) {
    t = 3;
    why += ", irregular extents";
  }
  set(Tiling, t, why);

  set(Fusion, bucket_stages(f.stages), std::to_string(f.stages) + " stage" + (f.stages == 1 ? "" : "s"));

  bool mixed = false;
  for (const auto& ti : cc.tensors)
    if (ti.role != TensorRole::Intermediate && !ti.index_only && ti.fixed_dtype) mixed = true;
  if (f.int_values)
    set(DTypeSpread, 3, "integer / quantized values");
  else if (mixed || c.dtypes.size() >= 3)
    set(DTypeSpread, 2, mixed ? "fixed-dtype tensor beside the I/O dtype" : "three I/O dtypes");
  else if (c.dtypes.size() == 2)
    set(DTypeSpread, 1, "two I/O dtypes");
  else
    set(DTypeSpread, 0, "one I/O dtype");

  if (f.scatter)
    set(DataMovement, 3, "data-dependent scatter");
  else if (f.gather)
    set(DataMovement, 2, "data-dependent gather");
  else if (f.broadcast_or_perm || f.window)
    set(DataMovement, 1, "strided, broadcast or transposed reads");
  else
    set(DataMovement, 0, "contiguous");

  if (f.triangular || f.scatter || f.chained_contraction)
    set(SchedulingDepth, 3,
        f.triangular ? "prefix dependency across the axis"
        : f.scatter  ? "scattered writes across blocks"
                     : "chained contraction phases");
  else if (f.phases >= 4)
    set(SchedulingDepth, 3, std::to_string(f.phases) + " dependent phases");
  else if (f.phases == 3)
    set(SchedulingDepth, 2, "3 dependent phases");
  else if (f.phases == 2)
    set(SchedulingDepth, 1, "2 passes");
  else
    set(SchedulingDepth, 0, "one pass");

  if (f.chained_contraction || f.windowed_contraction)
    set(Blocking, 3,
        f.chained_contraction ? "reuse across chained contractions" : "window and channel reuse");
  else if (f.contractions > 0)
    set(Blocking, 2, "2-D operand reuse");
  else if (f.reuse)
    set(Blocking, 1, "row reuse");
  else
    set(Blocking, 0, "streaming");

  p.difficulty_derived = !(c.level >= 1 && c.level <= 4);
  p.difficulty = p.difficulty_derived ? derived_difficulty(p.x) : c.level;
  return p;
}

int derived_difficulty(const std::array<int, kNumFeatures>& x) {
  if (x[Contraction] == 3 || x[Fusion] == 3 || (x[Reduction] == 3 && x[DataMovement] >= 2)) return 4;
  if (x[Contraction] >= 1 || x[DataMovement] == 3 || x[DTypeSpread] == 3 ||
      (x[Tiling] == 3 && x[Blocking] >= 1 && x[Reduction] == 0 && x[DataMovement] <= 1))
    return 3;
  if (x[Reduction] >= 1 || x[DataMovement] >= 2 || x[Tiling] == 3 || x[SchedulingDepth] >= 1) return 2;
  return 1;
}

int difficulty_of(const CheckedContract& c) {
  return c.contract.level ? c.contract.level : profile_of(c).difficulty;
}

nlohmann::json to_json(const Profile& p) {
  nlohmann::json j;
  j["version"] = p.version;
  j["difficulty"] = p.difficulty;
  j["difficulty_derived"] = p.difficulty_derived;
  nlohmann::json feats = nlohmann::json::object();
  nlohmann::json why = nlohmann::json::object();
  for (int k = 0; k < kNumFeatures; ++k) {
    feats[std::string(feature_name(k))] = p.x[static_cast<size_t>(k)];
    why[std::string(feature_name(k))] = p.why[static_cast<size_t>(k)];
  }
  j["features"] = feats;
  j["why"] = why;
  j["vector"] = p.x;
  return j;
}

std::string to_text(const Profile& p) {
  std::string s;
  for (int k = 0; k < kNumFeatures; ++k)
    s += std::string(feature_name(k)) + "=" + std::to_string(p.x[static_cast<size_t>(k)]) + " ";
  return s + "difficulty=" + std::to_string(p.difficulty) + (p.difficulty_derived ? " (derived)" : "");
}

}  // namespace cake::profile
