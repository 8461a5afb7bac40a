// Case-set generation: standard sets cover every listed size value plus the extremes, hidden sets
// draw from ranges with awkward values mixed in; all shrink to the contract's limits and satisfy
// its constraints. Input values come from a counter-based generator, so every case is the same on
// every machine and independent of how many other cases were made.
#include "cases/cases.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "core/error.h"
#include "core/hash.h"

namespace cake::cases {
namespace {

// splitmix64: a tiny, well-mixed generator whose whole state is one counter.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  int64_t below(int64_t n) { return n <= 0 ? 0 : static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
};

bool is_prime(int64_t n) {
  if (n < 2) return false;
  for (int64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

double eval_arg(const te::Expr& e, const std::vector<int64_t>& sizes, const std::vector<double>& params) {
  using te::ExprKind;
  using te::Op;
  switch (e.kind) {
    case ExprKind::Number:
      return e.number;
    case ExprKind::Size:
      return static_cast<double>(sizes[static_cast<size_t>(e.slot)]);
    case ExprKind::Param:
      return params[static_cast<size_t>(e.slot)];
    case ExprKind::Unary:
      return -eval_arg(*e.args[0], sizes, params);
    case ExprKind::Binary: {
      double a = eval_arg(*e.args[0], sizes, params), b = eval_arg(*e.args[1], sizes, params);
      bool ints = e.type == te::Type::Int;
      switch (e.op) {
        case Op::Add:
          return a + b;
        case Op::Sub:
          return a - b;
        case Op::Mul:
          return a * b;
        case Op::Div:
          return ints ? std::floor(a / b) : a / b;
        case Op::Mod:
          return a - std::floor(a / b) * b;
        default:
          return 0;
      }
    }
    case ExprKind::Call: {
      double a = eval_arg(*e.args[0], sizes, params), b = eval_arg(*e.args[1], sizes, params);
      return e.fn == te::Fn::Min ? std::min(a, b) : std::max(a, b);
    }
    default:
      return 0;
  }
}

using Assignment = std::vector<int64_t>;  // free symbols, in slot order

constexpr int64_t kValueChunk = 1 << 16;  // elements per random stream

class Generator {
 public:
  Generator(const CheckedContract& c, Set set) : c_(c), set_(set) {
    const CaseSetRule& own = set == Set::Standard ? c.contract.standard : c.contract.hidden;
    rule_set_ = &own;
    for (size_t i = 0; i < c.sizes.size(); ++i) {
      if (!c.sizes[i].free) continue;
      free_.push_back(static_cast<int>(i));
      const ShapeRule* r = find(own, c.sizes[i].name);
      if (!r) r = find(c.contract.standard, c.sizes[i].name);
      rules_.push_back(r);
    }
    for (const auto& p : c.contract.params) params_.push_back(p.value);
  }

  std::vector<Case> make() {
    const int count = rule_set_->count;
    Rng rng(Hasher().add(c_.hash).add(set_name(set_)).add_u64(rule_set_->seed).digest());
    std::vector<Assignment> picks;
    std::set<Assignment> seen;
    auto offer = [&](Assignment a) {
      if (static_cast<int>(picks.size()) >= count) return;
      if (!fit(a)) return;
      if (seen.insert(a).second) picks.push_back(std::move(a));
    };
    if (set_ == Set::Standard) {
      offer(extreme(false));
      offer(extreme(true));
      for (size_t s = 0; s < free_.size(); ++s) {
        const auto vals = values_of(s);
        for (size_t v = 0; v < vals.size(); ++v) {
          Assignment a(free_.size());
          for (size_t o = 0; o < free_.size(); ++o) {
            const auto ov = values_of(o);
            a[o] = o == s ? vals[v] : ov[(v + o) % ov.size()];
          }
          offer(std::move(a));
        }
      }
      for (int tries = 0; tries < 4000 && static_cast<int>(picks.size()) < count; ++tries) {
        Assignment a(free_.size());
        for (size_t o = 0; o < free_.size(); ++o) {
          const auto ov = values_of(o);
          a[o] = ov[static_cast<size_t>(rng.below(static_cast<int64_t>(ov.size())))];
        }
        offer(std::move(a));
      }
    } else {
      offer(extreme(true));  // the largest sizes allowed (shrunk to the limits)
      offer(extreme(false));
      for (int tries = 0; tries < 20000 && static_cast<int>(picks.size()) < count; ++tries) {
        Assignment a(free_.size());
        for (size_t o = 0; o < free_.size(); ++o) a[o] = draw(o, rng);
        offer(std::move(a));
      }
    }
    if (picks.empty())
      throw Error(std::string(c_.contract.file) + ": no " + std::string(set_name(set_)) +
                  " case satisfies the constraints and limits; widen the shapes or raise limits");
    // Fewer distinct shapes than cases: repeat shapes (they get other dtypes and values).
    for (size_t i = 0; static_cast<int>(picks.size()) < count; ++i) picks.push_back(picks[i]);

    std::vector<Case> out;
    const auto& dts = c_.contract.dtypes;
    for (int i = 0; i < count; ++i) {
      Case k;
      k.set = set_;
      k.index = i;
      k.dtype = dts[static_cast<size_t>(i) % dts.size()];
      for (size_t o = 0; o < free_.size(); ++o)
        k.free[c_.sizes[static_cast<size_t>(free_[o])].name] = picks[static_cast<size_t>(i)][o];
      k.sizes = evaluate_sizes(c_, k.free);
      k.params = params_;
      k.seed = Hasher()
                   .add(c_.hash)
                   .add(set_name(set_))
                   .add_u64(rule_set_->seed)
                   .add_u64(static_cast<uint64_t>(i))
                   .digest();
      out.push_back(std::move(k));
    }
    return out;
  }

 private:
  const CheckedContract& c_;
  Set set_;
  const CaseSetRule* rule_set_ = nullptr;
  std::vector<int> free_;
  std::vector<const ShapeRule*> rules_;
  std::vector<double> params_;

  static const ShapeRule* find(const CaseSetRule& r, const std::string& sym) {
    for (const auto& s : r.shapes)
      if (s.symbol == sym) return &s;
    return nullptr;
  }

  // The values a standard set enumerates for free symbol o (ranges: ends, 1, a prime, an odd middle).
  std::vector<int64_t> values_of(size_t o) const {
    const ShapeRule& r = *rules_[o];
    if (!r.is_range) {
      std::vector<int64_t> v = r.values;
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
      return v;
    }
    std::set<int64_t> v = {r.lo, r.hi};
    int64_t mid = r.lo + (r.hi - r.lo) / 2;
    while (mid > r.lo && !is_prime(mid)) --mid;
    v.insert(mid);
    if (r.lo <= 1 && r.hi >= 1) v.insert(1);
    return {v.begin(), v.end()};
  }

  Assignment extreme(bool hi) const {
    Assignment a(free_.size());
    for (size_t o = 0; o < free_.size(); ++o) {
      auto v = values_of(o);
      a[o] = hi ? v.back() : v.front();
    }
    return a;
  }

  int64_t draw(size_t o, Rng& rng) const {
    const ShapeRule& r = *rules_[o];
    if (!r.is_range) return r.values[static_cast<size_t>(rng.below(static_cast<int64_t>(r.values.size())))];
    double u = rng.uniform01();
    int64_t lo = r.lo, hi = r.hi;
    if (u < 0.08) return std::max<int64_t>(lo, std::min<int64_t>(1, hi));
    if (u < 0.14) return hi;
    double l0 = std::log(static_cast<double>(std::max<int64_t>(lo, 1))),
           l1 = std::log(static_cast<double>(std::max<int64_t>(hi, 1)));
    int64_t v = static_cast<int64_t>(std::llround(std::exp(l0 + (l1 - l0) * rng.uniform01())));
    v = std::clamp(v, lo, hi);
    if (u < 0.30) {  // a prime at or below v
      int64_t p = v;
      while (p > lo && !is_prime(p)) --p;
      if (is_prime(p)) return p;
    } else if (u < 0.45) {  // one off a multiple of 16
      int64_t m = (v / 16) * 16 + (rng.below(2) ? 1 : -1);
      if (m >= lo && m <= hi) return m;
    }
    return v;
  }

  bool valid(const Assignment& a, std::vector<int64_t>& sizes) const {
    std::map<std::string, int64_t> f;
    for (size_t o = 0; o < free_.size(); ++o) f[c_.sizes[static_cast<size_t>(free_[o])].name] = a[o];
    try {
      sizes = evaluate_sizes(c_, f);
      for (int64_t v : sizes)
        if (v < 0) return false;
      for (const auto& k : c_.contract.constraints)
        if (eval_size_expr(*k, sizes) == 0) return false;
    } catch (const Error&) {
      return false;
    }
    return true;
  }

  bool within_limits(const std::vector<int64_t>& sizes) const {
    Case k;
    k.sizes = sizes;
    k.params = params_;
    return case_bytes(c_, k) <= c_.contract.limits.max_bytes &&
           case_flops(c_, k) <= c_.contract.limits.max_flops;
  }

  // Shrinks a over-limit assignment, largest symbol first, to the next smaller allowed value.
  bool fit(Assignment& a) const {
    std::vector<int64_t> sizes;
    for (int step = 0; step < 200; ++step) {
      if (!valid(a, sizes)) return false;
      if (within_limits(sizes)) return true;
      size_t big = 0;
      for (size_t o = 1; o < a.size(); ++o)
        if (a[o] > a[big]) big = o;
      if (a.empty()) return false;
      const ShapeRule& r = *rules_[big];
      int64_t next = -1;
      if (r.is_range) {
        next = std::max(r.lo, a[big] * 3 / 4);
        if (next == a[big]) next = -1;
      } else {
        for (int64_t v : r.values)
          if (v < a[big] && v > next) next = v;
      }
      if (next < 0) {
        // The largest cannot shrink: try any other symbol that can.
        bool moved = false;
        for (size_t o = 0; o < a.size() && !moved; ++o) {
          const ShapeRule& ro = *rules_[o];
          int64_t n2 = -1;
          if (ro.is_range)
            n2 = a[o] * 3 / 4 >= ro.lo && a[o] * 3 / 4 < a[o] ? a[o] * 3 / 4 : -1;
          else
            for (int64_t v : ro.values)
              if (v < a[o] && v > n2) n2 = v;
          if (n2 >= 0) {
            a[o] = n2;
            moved = true;
          }
        }
        if (!moved) return false;
      } else {
        a[big] = next;
      }
    }
    return false;
  }
};

// Flops of an expression evaluated once, counting reduction bodies per iteration.
double expr_cost(const te::Expr& e, const std::vector<int64_t>& sizes, const std::vector<double>& dom_ext) {
  double c = 0;
  switch (e.kind) {
    case te::ExprKind::Binary:
    case te::ExprKind::Unary:
    case te::ExprKind::Call:
      c = 1;
      break;
    default:
      break;
  }
  if (e.kind == te::ExprKind::Reduce) {
    double iters = 1;
    for (const auto& v : e.rvars) {
      if (v.extent) {
        iters *= static_cast<double>(eval_size_expr(*v.extent, sizes));
      } else {
        // Bounded by outer variables (triangular): about half the first outer variable's extent.
        double guess = 1;
        bool has_var = false;
        std::function<void(const te::Expr&)> look = [&](const te::Expr& x) {
          if (x.kind == te::ExprKind::Var && x.slot < static_cast<int>(dom_ext.size()) && !has_var) {
            has_var = true;
            guess = std::max(1.0, dom_ext[static_cast<size_t>(x.slot)] / 2);
          }
          for (const auto& a : x.args) look(*a);
        };
        look(*v.hi);
        if (!has_var) {
          try {
            guess = static_cast<double>(eval_size_expr(*v.hi, sizes) - eval_size_expr(*v.lo, sizes));
          } catch (const Error&) {
            guess = 1;
          }
        }
        iters *= std::max(1.0, guess);
      }
    }
    return iters * (expr_cost(*e.args[0], sizes, dom_ext) + 1);
  }
  for (const auto& a : e.args) c += expr_cost(*a, sizes, dom_ext);
  return c;
}

}  // namespace

std::string_view set_name(Set s) {
  return s == Set::Standard ? "standard" : "hidden";
}

std::string Case::id() const {
  return std::string(set_name(set)) + "/" + std::to_string(index);
}

std::string Case::describe() const {
  std::string s(dtype_name(dtype));
  for (const auto& [k, v] : free) s += " " + k + "=" + std::to_string(v);
  return s;
}

std::vector<Case> make_cases(const CheckedContract& c, Set set) {
  return Generator(c, set).make();
}

double case_bytes(const CheckedContract& c, const Case& k) {
  double b = 0;
  for (size_t t = 0; t < c.tensors.size(); ++t) {
    const TensorInfo& ti = c.tensors[t];
    if (ti.role == TensorRole::Intermediate) continue;
    double n = 1;
    for (int64_t d : tensor_shape(c, static_cast<int>(t), k.sizes)) n *= static_cast<double>(d);
    b += n * static_cast<double>(dtype_size(ti.dtype_for(k.dtype)));
  }
  return b;
}

double case_flops(const CheckedContract& c, const Case& k) {
  double f = 0;
  for (const auto& s : c.contract.compute) {
    std::vector<double> dom;
    double points = 1;
    for (int v = 0; v < s.n_domain; ++v) {
      double e = static_cast<double>(eval_size_expr(*s.var_extent[static_cast<size_t>(v)], k.sizes));
      dom.push_back(e);
      points *= e;
    }
    f += points * std::max(1.0, expr_cost(*s.rhs, k.sizes, dom));
  }
  return f;
}

std::vector<Tensor> make_inputs(const CheckedContract& c, const Case& k) {
  std::vector<Tensor> out;
  for (int id : c.input_ids()) {
    const TensorInfo& ti = c.tensors[static_cast<size_t>(id)];
    DType dt = ti.dtype_for(k.dtype);
    Tensor t(dt, tensor_shape(c, id, k.sizes));
    const ValueRule* rule = nullptr;
    for (const auto& v : c.contract.values)
      if (v.tensor == ti.name) rule = &v;
    std::vector<double> args;
    Distribution dist = is_float(dt)           ? Distribution::Normal
                        : dt == DType::boolean ? Distribution::Bernoulli
                                               : Distribution::RandInt;
    if (rule) {
      dist = rule->dist;
      for (const auto& a : rule->args) args.push_back(eval_arg(*a, k.sizes, k.params));
    } else if (dist == Distribution::Normal) {
      args = {0.0, 1.0};
    } else if (dist == Distribution::Bernoulli) {
      args = {0.5};
    } else {
      args = {-8.0, 8.0};
    }
    if (dist == Distribution::RandInt && std::ceil(args[1]) <= std::ceil(args[0]))
      throw Error(c.contract.file + ": randint range for '" + ti.name + "' is empty in case " + k.id() +
                  " (" + k.describe() + ")");
    // Values come in chunks, each from its own counter-based stream: deterministic and parallel.
    const uint64_t stream = Hasher().add_u64(k.seed).add(ti.name).digest();
    const int64_t n = t.numel();
    std::vector<double> vals(static_cast<size_t>(n));
    const int64_t nchunks = (n + kValueChunk - 1) / kValueChunk;
#pragma omp parallel for schedule(static)
    for (int64_t ch = 0; ch < nchunks; ++ch) {
      Rng rng(stream ^ (static_cast<uint64_t>(ch) * 0xd1b54a32d192ed03ull));
      const int64_t lo = ch * kValueChunk, hi = std::min(n, lo + kValueChunk);
      for (int64_t i = lo; i < hi; ++i) {
        double v = 0;
        switch (dist) {
          case Distribution::Normal: {
            // Box-Muller, both outputs used: elements come in pairs from one draw.
            double u1 = 1.0 - rng.uniform01(), u2 = rng.uniform01();
            double r = args[1] * std::sqrt(-2.0 * std::log(u1)), a = 6.283185307179586 * u2;
            vals[static_cast<size_t>(i)] = args[0] + r * std::cos(a);
            if (i + 1 < hi) vals[static_cast<size_t>(++i)] = args[0] + r * std::sin(a);
            continue;
          }
          case Distribution::Uniform:
            v = args[0] + (args[1] - args[0]) * rng.uniform01();
            break;
          case Distribution::RandInt: {
            int64_t a = static_cast<int64_t>(std::ceil(args[0])),
                    b = static_cast<int64_t>(std::ceil(args[1]));
            v = static_cast<double>(a + rng.below(b - a));
            break;
          }
          case Distribution::Bernoulli:
            v = rng.uniform01() < args[0] ? 1.0 : 0.0;
            break;
          case Distribution::Constant:
            v = args[0];
            break;
        }
        vals[static_cast<size_t>(i)] = v;
      }
    }
    store_f64(vals.data(), dt, t.data(), n);
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<Tensor> make_outputs(const CheckedContract& c, const Case& k) {
  std::vector<Tensor> out;
  for (int id : c.output_ids())
    out.emplace_back(c.tensors[static_cast<size_t>(id)].dtype_for(k.dtype), tensor_shape(c, id, k.sizes));
  return out;
}

}  // namespace cake::cases

namespace cake::cases {

std::vector<double> kernel_params(const CheckedContract& c, const Case& k) {
  std::vector<double> p = k.params;
  for (size_t s = 0; s < c.sizes.size(); ++s)
    if (c.sizes[s].free) p.push_back(static_cast<double>(k.sizes[s]));
  return p;
}

}  // namespace cake::cases

namespace cake::cases {

Case make_case(const CheckedContract& c, const std::map<std::string, int64_t>& free, DType dtype,
               uint64_t seed) {
  Case k;
  k.set = Set::Standard;
  k.index = -1;
  k.dtype = dtype;
  k.free = free;
  for (const SizeInfo& z : c.sizes)
    if (z.free && !free.count(z.name))
      throw Error("make_case: no value for size '" + z.name + "' of " + c.contract.name);
  k.sizes = evaluate_sizes(c, k.free);
  for (const ParamDecl& p : c.contract.params) k.params.push_back(p.value);
  k.seed = seed;
  return k;
}

}  // namespace cake::cases
