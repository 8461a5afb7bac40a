// Case cost from the TE, the roofline floor, HAP, the operator score and the per-level summary.
#include "eval/score.h"

#include <algorithm>
#include <map>

namespace cake::eval {

using te::Expr;
using te::ExprKind;
using te::Type;

namespace {

// Values of the statement's variables for bound evaluation: each at the middle of its extent.
struct Midpoints {
  const std::vector<int64_t>& sizes;
  std::vector<double> vars;
};

double eval_int(const Expr& e, const Midpoints& m) {
  switch (e.kind) {
    case ExprKind::Number:
      return e.number;
    case ExprKind::Size:
      return static_cast<double>(m.sizes[static_cast<size_t>(e.slot)]);
    case ExprKind::Var:
      return m.vars[static_cast<size_t>(e.slot)];
    case ExprKind::Unary:
      return -eval_int(*e.args[0], m);
    case ExprKind::Binary: {
      const double a = eval_int(*e.args[0], m), b = eval_int(*e.args[1], m);
      switch (e.op) {
        case te::Op::Add:
          return a + b;
        case te::Op::Sub:
          return a - b;
        case te::Op::Mul:
          return a * b;
        case te::Op::Div:
          return b != 0 ? a / b : 0;
        default:
          return 0;
      }
    }
    case ExprKind::Call:
      if (e.fn == te::Fn::Min) return std::min(eval_int(*e.args[0], m), eval_int(*e.args[1], m));
      if (e.fn == te::Fn::Max) return std::max(eval_int(*e.args[0], m), eval_int(*e.args[1], m));
      return 0;
    default:
      return 0;
  }
}

// Flops of e evaluated once; reduction `carried` (a prefix sum, carried along its axis by a running
// accumulator) adds one term per evaluation.
double flops_of(const Expr& e, Midpoints& m, const Expr* carried) {
  double f = 0;
  for (const te::ExprPtr& a : e.args)
    if (a && e.kind != ExprKind::Reduce && e.kind != ExprKind::Read) f += flops_of(*a, m, carried);
  const bool float_operands =
      e.type == Type::Float || std::any_of(e.args.begin(), e.args.end(),
                                           [](const te::ExprPtr& a) { return a && a->type == Type::Float; });
  switch (e.kind) {
    case ExprKind::Unary:
    case ExprKind::Binary:
    case ExprKind::Call:
      return f + (float_operands ? 1 : 0);
    case ExprKind::Read:
      return e.pad_value ? flops_of(*e.pad_value, m, carried) : 0;
    case ExprKind::Reduce: {
      double n = 1;
      for (const te::ReduceVar& r : e.rvars) {
        const double ext = r.lo ? eval_int(*r.hi, m) - eval_int(*r.lo, m) : eval_int(*r.extent, m);
        if (&e != carried) n *= std::max(0.0, ext);
        m.vars[static_cast<size_t>(r.slot)] =
            (r.lo ? eval_int(*r.lo, m) : 0) + (ext - 1) / 2;  // nested bounds: the middle
      }
      return n * (flops_of(*e.args[0], m, carried) + (e.args[0]->type == Type::Float ? 1 : 0));
    }
    default:
      return f;
  }
}

// A sum of products of two bf16 tensors in case k: the work a bf16 dot-product instruction does.
bool bf16_dot(const CheckedContract& c, const cases::Case& k, const Expr& e) {
  if (e.kind != ExprKind::Reduce || e.reduce != te::ReduceOp::Sum) return false;
  const Expr& body = *e.args[0];
  if (body.kind != ExprKind::Binary || body.op != te::Op::Mul) return false;
  return std::all_of(body.args.begin(), body.args.end(), [&](const te::ExprPtr& a) {
    return a->kind == ExprKind::Read && !a->padded &&
           c.tensors[static_cast<size_t>(a->slot)].dtype_for(k.dtype) == DType::bf16;
  });
}

}  // namespace

CaseCost case_cost(const CheckedContract& c, const cases::Case& k) {
  CaseCost cost;
  // Inputs read only through data-dependent indices (an embedding table) are compulsory only where they
  // are read: at most one element per point of the statements that gather from them.
  std::vector<double> gathered(c.tensors.size(), 0);
  std::vector<bool> plain(c.tensors.size(), false);
  for (const te::Stmt& s : c.contract.compute) {
    Midpoints m{k.sizes, std::vector<double>(s.vars.size(), 0)};
    double points = 1;
    for (int v = 0; v < s.n_domain; ++v) {
      const int64_t ext = eval_size_expr(*s.var_extent[static_cast<size_t>(v)], k.sizes);
      points *= static_cast<double>(ext);
      m.vars[static_cast<size_t>(v)] = static_cast<double>(ext - 1) / 2;  // the mean of 0..ext-1
    }
    // The least work: a prefix sum counts one term per output, not its whole prefix.
    cost.flops += points * (flops_of(*s.rhs, m, te::prefix_sum(s)) + (s.accumulate ? 1 : 0));
    te::any_of(*s.rhs, [&](const Expr& e) {
      if (bf16_dot(c, k, e)) cost.dot_flops += points * flops_of(e, m, nullptr);
      return false;
    });
    te::any_of(*s.rhs, [&](const Expr& e) {
      if (e.kind != ExprKind::Read) return false;
      const bool dependent = std::any_of(e.args.begin(), e.args.end(), [](const te::ExprPtr& ix) {
        return te::contains(*ix, ExprKind::Read);
      });
      if (dependent)
        gathered[static_cast<size_t>(e.slot)] += points;
      else
        plain[static_cast<size_t>(e.slot)] = true;
      return false;
    });
  }
  for (size_t id = 0; id < c.tensors.size(); ++id) {
    const TensorInfo& t = c.tensors[id];
    if (t.role == TensorRole::Intermediate) continue;
    double n = static_cast<double>(shape_numel(tensor_shape(c, static_cast<int>(id), k.sizes)));
    if (t.role == TensorRole::Input && !plain[id] && gathered[id] > 0) n = std::min(n, gathered[id]);
    const double bytes = n * static_cast<double>(dtype_size(t.dtype_for(k.dtype)));
    (t.role == TensorRole::Input ? cost.bytes_read : cost.bytes_written) += bytes;
  }
  return cost;
}

double floor_seconds(const CaseCost& cost, const MachinePeaks& p, bool inputs_rotated) {
  double t = p.call_s;
  if (p.flops_per_s > 0) {
    const double dot = p.dot_flops_per_s > 0 ? cost.dot_flops : 0;
    t = std::max(t, (cost.flops - dot) / p.flops_per_s + (dot > 0 ? dot / p.dot_flops_per_s : 0));
  }
  // The bandwidth of the smallest level a footprint of `bytes` stays in.
  const auto bandwidth = [&p](double bytes) {
    if (p.cache_bytes_per_s > 0 && bytes <= p.cache_bytes) return p.cache_bytes_per_s;
    if (p.llc_bytes_per_s > 0 && bytes <= p.llc_bytes) return p.llc_bytes_per_s;
    return p.bytes_per_s;
  };
  const double q = cost.bytes_read + cost.bytes_written;
  const double bw_read = inputs_rotated ? p.bytes_per_s : bandwidth(q);
  const double bw_write = inputs_rotated ? bandwidth(cost.bytes_written) : bandwidth(q);
  if (bw_read > 0 && bw_write > 0) t = std::max(t, cost.bytes_read / bw_read + cost.bytes_written / bw_write);
  return t;
}

double hap(double t_cand, double t_base, double t_hw) {
  t_hw = std::min({t_hw, t_cand, t_base});
  const double num = t_base - t_hw, den = (t_cand - t_hw) + (t_base - t_hw);
  if (den <= 0) return 0.5;  // both at the floor
  return std::clamp(num / den, 0.0, 1.0);
}

double efficiency(double t_hw, double t_cand) {
  return t_cand > 0 ? std::min(1.0, t_hw / t_cand) : 0;
}

double operator_score(bool builds_and_runs, const std::vector<CaseResult>& cases) {
  double s = builds_and_runs ? 0.2 : 0.0;
  if (!cases.empty()) {
    double acc = 0;
    for (const CaseResult& r : cases)
      if (r.passed) acc += 0.3 + 0.5 * hap(r.t_cand, r.t_base, r.t_hw);
    s += acc / static_cast<double>(cases.size());
  }
  return 100.0 * s;
}

std::vector<LevelSummary> summarize_levels(const std::vector<OperatorResult>& ops) {
  std::map<int, LevelSummary> by;
  auto add = [](LevelSummary& l, const OperatorResult& o) {
    ++l.operators;
    l.mean_score += o.score;
    l.cases += o.cases;
    l.passed += o.passed;
  };
  LevelSummary all;
  for (const OperatorResult& o : ops) {
    LevelSummary& l = by[o.level];
    l.level = o.level;
    add(l, o);
    add(all, o);
  }
  std::vector<LevelSummary> out;
  for (auto& [lv, l] : by) out.push_back(l);
  out.push_back(all);
  for (LevelSummary& l : out) {
    if (l.operators) l.mean_score /= l.operators;
    l.pass_rate = l.cases ? static_cast<double>(l.passed) / l.cases : 0;
  }
  return out;
}

}  // namespace cake::eval
