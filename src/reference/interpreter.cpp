// The reference interpreter. Each statement's tree is flattened into nodes and evaluated a block
// of "lanes" at a time: the lanes walk the statement's longest domain axis, so the cost of
// walking the tree is paid once per block rather than once per element. Nodes that do not depend
// on the lane variable compute one value and broadcast. All arithmetic is f64; outputs are
// rounded to their dtype once, at the end.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <string>

#include "contract/printer.h"
#include "core/error.h"
#include "reference/reference.h"

namespace cake::reference {
namespace {

using te::Expr;
using te::ExprKind;
using te::Op;
using te::Stmt;

constexpr int kBlock = 256;

struct Buf {
  std::vector<double> data;
  std::vector<int64_t> shape, stride;
  void alloc(std::vector<int64_t> s) {
    shape = std::move(s);
    stride.assign(shape.size(), 1);
    int64_t n = 1;
    for (size_t i = shape.size(); i-- > 0;) {
      stride[i] = n;
      n *= shape[i];
    }
    data.assign(static_cast<size_t>(n), 0.0);
  }
};

struct RVar {
  int slot = -1;
  int lo = -1, hi = -1;  // nodes (bounded) or -1
  int64_t extent = 0;    // inferred extent (when lo < 0)
};

struct Node {
  ExprKind kind = ExprKind::Number;
  Op op = Op::Add;
  te::Fn fn = te::Fn::Where;
  te::ReduceOp red = te::ReduceOp::Sum;
  DType cast_to = DType::f32;
  bool int_typed = false;  // Binary: both operands integer (floor division)
  double num = 0;
  int slot = -1;
  bool lane = false;       // depends on the lane variable
  bool padded = false;
  int pad = -1;            // node of the padding value, -1: zero
  std::vector<int> kids;   // operands / indices / reduction body (kids[0])
  std::vector<RVar> rvars;
  bool lane_bounds = false;  // Reduce: some bound depends on the lane variable
  const Expr* src = nullptr;
};

struct Program {
  std::vector<Node> nodes;
  int root = -1;
  std::vector<int> target_index;  // '+=': nodes of the target indices
};

class Compiler {
 public:
  Compiler(const std::vector<int64_t>& sizes, int lane_slot) : sizes_(sizes), lane_slot_(lane_slot) {}

  int compile(const Expr& e, Program& p) {
    Node n;
    n.kind = e.kind;
    n.src = &e;
    switch (e.kind) {
      case ExprKind::Number: n.num = e.number; break;
      case ExprKind::Size:
        n.kind = ExprKind::Number;
        n.num = static_cast<double>(sizes_[static_cast<size_t>(e.slot)]);
        break;
      case ExprKind::Param: n.slot = e.slot; break;
      case ExprKind::Var:
        n.slot = e.slot;
        n.lane = e.slot == lane_slot_;
        break;
      case ExprKind::Unary: case ExprKind::Binary: case ExprKind::Call: case ExprKind::Cast:
        n.op = e.op;
        n.fn = e.fn;
        n.cast_to = e.cast_to;
        if (e.kind == ExprKind::Binary)
          n.int_typed = e.args[0]->type != te::Type::Float && e.args[1]->type != te::Type::Float;
        for (const auto& a : e.args) n.kids.push_back(compile(*a, p));
        break;
      case ExprKind::Read:
        n.slot = e.slot;
        n.padded = e.padded;
        if (e.pad_value) n.pad = compile(*e.pad_value, p);
        for (const auto& a : e.args) n.kids.push_back(compile(*a, p));
        break;
      case ExprKind::Reduce:
        n.red = e.reduce;
        for (const auto& v : e.rvars) {
          RVar r;
          r.slot = v.slot;
          if (v.lo) {
            r.lo = compile(*v.lo, p);
            r.hi = compile(*v.hi, p);
            if (p.nodes[static_cast<size_t>(r.lo)].lane || p.nodes[static_cast<size_t>(r.hi)].lane) n.lane_bounds = true;
          } else {
            r.extent = eval_size_expr(*v.extent, sizes_);
          }
          n.rvars.push_back(r);
        }
        n.kids.push_back(compile(*e.args[0], p));
        break;
      default: throw Error("reference: unresolved expression " + te::print_expr(e));
    }
    for (int k : n.kids) n.lane |= p.nodes[static_cast<size_t>(k)].lane;
    if (n.pad >= 0) n.lane |= p.nodes[static_cast<size_t>(n.pad)].lane;
    n.lane |= n.lane_bounds;
    p.nodes.push_back(std::move(n));
    return static_cast<int>(p.nodes.size()) - 1;
  }

 private:
  const std::vector<int64_t>& sizes_;
  int lane_slot_;
};

struct Ctx {
  const std::vector<Buf>* tensors = nullptr;
  const std::vector<double>* params = nullptr;
  const std::vector<TensorInfo>* info = nullptr;
  const std::string* file = nullptr;
  std::vector<int64_t> vals;  // current value of every non-lane variable slot
  int lane_slot = -1;
  int64_t lane_base = 0;
  std::vector<std::vector<double>> buf;   // per node, kBlock values
  std::vector<std::vector<double>> aux;   // per node: argmax best values
};

[[noreturn]] void index_error(const Ctx& cx, const Node& n, int axis, int64_t v, int64_t ext) {
  const Expr& e = *n.src;
  throw Error(*cx.file + ":" + std::to_string(e.pos.line) + ":" + std::to_string(e.pos.col) +
              ": reference: index " + std::to_string(v) + " of '" + (*cx.info)[static_cast<size_t>(n.slot)].name +
              "' axis " + std::to_string(axis) + " is outside 0.." + std::to_string(ext - 1) + " (in " +
              te::print_expr(e) + ")");
}

inline double fn1(te::Fn f, double x) {
  switch (f) {
    case te::Fn::Abs: return std::fabs(x);
    case te::Fn::Exp: return std::exp(x);
    case te::Fn::Log: return std::log(x);
    case te::Fn::Sqrt: return std::sqrt(x);
    case te::Fn::Rsqrt: return 1.0 / std::sqrt(x);
    case te::Fn::Tanh: return std::tanh(x);
    case te::Fn::Erf: return std::erf(x);
    case te::Fn::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case te::Fn::Sin: return std::sin(x);
    case te::Fn::Cos: return std::cos(x);
    case te::Fn::Floor: return std::floor(x);
    case te::Fn::Ceil: return std::ceil(x);
    case te::Fn::Round: return std::nearbyint(x);  // default rounding mode: half to even
    default: return x;
  }
}

inline double nan_max(double a, double b) { return (std::isnan(a) || std::isnan(b)) ? NAN : std::max(a, b); }
inline double nan_min(double a, double b) { return (std::isnan(a) || std::isnan(b)) ? NAN : std::min(a, b); }

inline double binop(Op op, bool ints, double a, double b) {
  switch (op) {
    case Op::Add: return a + b;
    case Op::Sub: return a - b;
    case Op::Mul: return a * b;
    case Op::Div:
      if (ints) return b == 0 ? NAN : std::floor(a / b);
      return a / b;
    case Op::Mod:
      if (ints) return b == 0 ? NAN : a - std::floor(a / b) * b;
      return std::fmod(a, b);
    case Op::Lt: return a < b;
    case Op::Le: return a <= b;
    case Op::Gt: return a > b;
    case Op::Ge: return a >= b;
    case Op::Eq: return a == b;
    case Op::Ne: return a != b;
    case Op::And: return (a != 0) && (b != 0);
    case Op::Or: return (a != 0) || (b != 0);
    default: return 0;
  }
}

class Evaluator {
 public:
  Evaluator(const Program& p, Ctx& cx) : p_(p), cx_(cx) {}

  // Values of node i for lanes [lane_base, lane_base + n): n values if the node depends on the
  // lane variable, else one.
  const double* eval(int i, int n) {
    const Node& nd = p_.nodes[static_cast<size_t>(i)];
    double* out = cx_.buf[static_cast<size_t>(i)].data();
    const int m = nd.lane ? n : 1;
    switch (nd.kind) {
      case ExprKind::Number: out[0] = nd.num; return out;
      case ExprKind::Param: out[0] = (*cx_.params)[static_cast<size_t>(nd.slot)]; return out;
      case ExprKind::Var:
        if (nd.lane)
          for (int l = 0; l < m; ++l) out[l] = static_cast<double>(cx_.lane_base + l);
        else
          out[0] = static_cast<double>(cx_.vals[static_cast<size_t>(nd.slot)]);
        return out;
      case ExprKind::Unary: {
        const Node& a = p_.nodes[static_cast<size_t>(nd.kids[0])];
        const double* x = eval(nd.kids[0], n);
        const int sa = a.lane ? 1 : 0;
        if (nd.op == Op::Neg)
          for (int l = 0; l < m; ++l) out[l] = -x[l * sa];
        else
          for (int l = 0; l < m; ++l) out[l] = x[l * sa] == 0 ? 1.0 : 0.0;
        return out;
      }
      case ExprKind::Binary: {
        const int sa = p_.nodes[static_cast<size_t>(nd.kids[0])].lane ? 1 : 0;
        const int sb = p_.nodes[static_cast<size_t>(nd.kids[1])].lane ? 1 : 0;
        const double* x = eval(nd.kids[0], n);
        const double* y = eval(nd.kids[1], n);
        switch (nd.op) {  // the hot operators get their own loops
          case Op::Add: for (int l = 0; l < m; ++l) out[l] = x[l * sa] + y[l * sb]; break;
          case Op::Sub: for (int l = 0; l < m; ++l) out[l] = x[l * sa] - y[l * sb]; break;
          case Op::Mul: for (int l = 0; l < m; ++l) out[l] = x[l * sa] * y[l * sb]; break;
          default:
            for (int l = 0; l < m; ++l) out[l] = binop(nd.op, nd.int_typed, x[l * sa], y[l * sb]);
        }
        return out;
      }
      case ExprKind::Call: {
        if (nd.fn == te::Fn::Where) {
          const double* c = eval(nd.kids[0], n);
          const double* x = eval(nd.kids[1], n);
          const double* y = eval(nd.kids[2], n);
          const int sc = stride(nd.kids[0]), sa = stride(nd.kids[1]), sb = stride(nd.kids[2]);
          for (int l = 0; l < m; ++l) out[l] = c[l * sc] != 0 ? x[l * sa] : y[l * sb];
          return out;
        }
        if (te::fn_arity(nd.fn) == 2) {
          const double* x = eval(nd.kids[0], n);
          const double* y = eval(nd.kids[1], n);
          const int sa = stride(nd.kids[0]), sb = stride(nd.kids[1]);
          for (int l = 0; l < m; ++l) {
            double a = x[l * sa], b = y[l * sb];
            out[l] = nd.fn == te::Fn::Min ? nan_min(a, b) : nd.fn == te::Fn::Max ? nan_max(a, b) : std::pow(a, b);
          }
          return out;
        }
        const double* x = eval(nd.kids[0], n);
        const int sa = stride(nd.kids[0]);
        for (int l = 0; l < m; ++l) out[l] = fn1(nd.fn, x[l * sa]);
        return out;
      }
      case ExprKind::Cast: {
        const double* x = eval(nd.kids[0], n);
        const int sa = stride(nd.kids[0]);
        for (int l = 0; l < m; ++l) out[l] = round_to_dtype(x[l * sa], nd.cast_to);
        return out;
      }
      case ExprKind::Read: return read(nd, i, n, out, m);
      case ExprKind::Reduce: return reduce(nd, i, n, out, m);
      default: return out;
    }
  }

 private:
  const Program& p_;
  Ctx& cx_;

  int stride(int k) const { return p_.nodes[static_cast<size_t>(k)].lane ? 1 : 0; }

  const double* read(const Node& nd, int self, int n, double* out, int m) {
    const Buf& t = (*cx_.tensors)[static_cast<size_t>(nd.slot)];
    const size_t rank = nd.kids.size();
    // Fast path: every index is lane-independent or the bare lane variable.
    int lane_axis = -1;
    bool simple = true;
    int64_t base = 0;
    bool out_of_range = false;
    for (size_t a = 0; a < rank && simple; ++a) {
      const Node& ix = p_.nodes[static_cast<size_t>(nd.kids[a])];
      if (ix.lane) {
        if (ix.kind == ExprKind::Var && lane_axis < 0) lane_axis = static_cast<int>(a);
        else simple = false;
      }
    }
    if (simple) {
      for (size_t a = 0; a < rank; ++a) {
        if (static_cast<int>(a) == lane_axis) continue;
        int64_t v = static_cast<int64_t>(eval(nd.kids[a], n)[0]);
        if (v < 0 || v >= t.shape[a]) {
          if (!nd.padded) index_error(cx_, nd, static_cast<int>(a), v, t.shape[a]);
          out_of_range = true;
        }
        base += v * t.stride[a];
      }
      if (lane_axis < 0) {
        out[0] = out_of_range ? pad_value(nd, n) : t.data[static_cast<size_t>(base)];
        return out;
      }
      const int64_t lo = cx_.lane_base, hi = cx_.lane_base + m - 1, ext = t.shape[static_cast<size_t>(lane_axis)];
      const int64_t st = t.stride[static_cast<size_t>(lane_axis)];
      if (!out_of_range && lo >= 0 && hi < ext) {
        const double* src = t.data.data() + base + lo * st;
        if (st == 1) std::copy(src, src + m, out);
        else
          for (int l = 0; l < m; ++l) out[l] = src[l * st];
        return out;
      }
      if (!nd.padded) index_error(cx_, nd, lane_axis, lo < 0 ? lo : hi, ext);
      double pv = pad_value(nd, n);
      for (int l = 0; l < m; ++l) {
        int64_t v = lo + l;
        out[l] = (out_of_range || v < 0 || v >= ext) ? pv : t.data[static_cast<size_t>(base + v * st)];
      }
      return out;
    }
    // General path: per-lane offsets from arbitrary index expressions (affine, data-dependent).
    std::vector<const double*> ix(rank);
    std::vector<int> sx(rank);
    for (size_t a = 0; a < rank; ++a) {
      ix[a] = eval(nd.kids[a], n);
      sx[a] = stride(nd.kids[a]);
    }
    double pv = nd.padded ? pad_value(nd, n) : 0.0;
    const double* pvs = nd.pad >= 0 ? cx_.buf[static_cast<size_t>(nd.pad)].data() : nullptr;
    const int spv = nd.pad >= 0 ? stride(nd.pad) : 0;
    (void)self;
    for (int l = 0; l < m; ++l) {
      int64_t off = 0;
      bool oob = false;
      for (size_t a = 0; a < rank; ++a) {
        int64_t v = static_cast<int64_t>(ix[a][l * sx[a]]);
        if (v < 0 || v >= t.shape[a]) {
          if (!nd.padded) index_error(cx_, nd, static_cast<int>(a), v, t.shape[a]);
          oob = true;
        }
        off += v * t.stride[a];
      }
      out[l] = oob ? (pvs ? pvs[l * spv] : pv) : t.data[static_cast<size_t>(off)];
    }
    return out;
  }

  double pad_value(const Node& nd, int n) {
    if (nd.pad < 0) return 0.0;
    return eval(nd.pad, n)[0];
  }

  static double identity(te::ReduceOp r) {
    switch (r) {
      case te::ReduceOp::Sum: return 0.0;
      case te::ReduceOp::Prod: return 1.0;
      case te::ReduceOp::Max: case te::ReduceOp::ArgMax: return -std::numeric_limits<double>::infinity();
      case te::ReduceOp::Min: case te::ReduceOp::ArgMin: return std::numeric_limits<double>::infinity();
    }
    return 0.0;
  }

  const double* reduce(const Node& nd, int self, int n, double* out, int m) {
    if (nd.lane_bounds) {
      // Per-lane ranges (triangular): evaluate the whole reduction one lane at a time.
      const int64_t base = cx_.lane_base;
      std::vector<double> res(static_cast<size_t>(m));
      for (int l = 0; l < m; ++l) {
        cx_.lane_base = base + l;
        res[static_cast<size_t>(l)] = reduce_lanes(nd, self, 1)[0];
      }
      cx_.lane_base = base;
      std::copy(res.begin(), res.end(), out);
      return out;
    }
    return reduce_lanes(nd, self, nd.lane ? n : 1);
  }

  // Reduces with bounds uniform over the lanes; m lanes of output.
  const double* reduce_lanes(const Node& nd, int self, int m) {
    double* acc = cx_.buf[static_cast<size_t>(self)].data();
    double* best = cx_.aux[static_cast<size_t>(self)].data();
    const bool arg = nd.red == te::ReduceOp::ArgMax || nd.red == te::ReduceOp::ArgMin;
    const double id = identity(nd.red);
    for (int l = 0; l < m; ++l) {
      acc[l] = arg ? 0.0 : id;
      best[l] = id;
    }
    const int body = nd.kids[0];
    const int sb = stride(body);
    int64_t position = 0;
    const bool single = nd.rvars.size() == 1;
    // Iterate the reduction variables as nested loops (first variable outermost).
    std::vector<int64_t> lo(nd.rvars.size()), hi(nd.rvars.size());
    size_t depth = 0;
    auto bounds = [&](size_t d) {
      const RVar& r = nd.rvars[d];
      if (r.lo >= 0) {
        lo[d] = static_cast<int64_t>(eval(r.lo, 1)[0]);
        hi[d] = static_cast<int64_t>(eval(r.hi, 1)[0]);
      } else {
        lo[d] = 0;
        hi[d] = r.extent;
      }
      cx_.vals[static_cast<size_t>(r.slot)] = lo[d];
    };
    bounds(0);
    for (;;) {
      const RVar& r = nd.rvars[depth];
      int64_t& k = cx_.vals[static_cast<size_t>(r.slot)];
      if (k >= hi[depth]) {
        if (depth == 0) break;
        --depth;
        ++cx_.vals[static_cast<size_t>(nd.rvars[depth].slot)];
        continue;
      }
      if (depth + 1 < nd.rvars.size()) {
        ++depth;
        bounds(depth);
        continue;
      }
      const double* v = eval(body, m);
      switch (nd.red) {
        case te::ReduceOp::Sum: for (int l = 0; l < m; ++l) acc[l] += v[l * sb]; break;
        case te::ReduceOp::Prod: for (int l = 0; l < m; ++l) acc[l] *= v[l * sb]; break;
        case te::ReduceOp::Max: for (int l = 0; l < m; ++l) acc[l] = nan_max(acc[l], v[l * sb]); break;
        case te::ReduceOp::Min: for (int l = 0; l < m; ++l) acc[l] = nan_min(acc[l], v[l * sb]); break;
        case te::ReduceOp::ArgMax: case te::ReduceOp::ArgMin: {
          const bool mx = nd.red == te::ReduceOp::ArgMax;
          const double at = single ? static_cast<double>(k) : static_cast<double>(position);
          for (int l = 0; l < m; ++l) {
            double x = v[l * sb];
            if (std::isnan(best[l])) continue;  // the first NaN wins, as in torch
            if (std::isnan(x) || (mx ? x > best[l] : x < best[l])) {
              best[l] = x;
              acc[l] = at;
            }
          }
          break;
        }
      }
      ++position;
      ++k;
    }
    return acc;
  }
};

void run_statement(const CheckedContract& c, const Stmt& s, const std::vector<int64_t>& sizes,
                   const std::vector<double>& params, std::vector<Buf>& tensors) {
  // Domain extents and the lane variable: the longest domain axis (the last on ties).
  std::vector<int64_t> ext(static_cast<size_t>(s.n_domain));
  int lane = -1;
  for (int v = 0; v < s.n_domain; ++v) {
    ext[static_cast<size_t>(v)] = eval_size_expr(*s.var_extent[static_cast<size_t>(v)], sizes);
    if (lane < 0 || ext[static_cast<size_t>(v)] >= ext[static_cast<size_t>(lane)]) lane = v;
  }
  for (int64_t e : ext)
    if (e <= 0) return;  // empty domain
  Buf& target = tensors[static_cast<size_t>(s.tensor)];
  if (!s.accumulate) target.alloc(tensor_shape(c, s.tensor, sizes));
  else if (target.data.empty() && target.shape.empty()) target.alloc(tensor_shape(c, s.tensor, sizes));

  Program prog;
  Compiler comp(sizes, lane);
  prog.root = comp.compile(*s.rhs, prog);
  if (s.accumulate)
    for (const auto& ix : s.index) prog.target_index.push_back(comp.compile(*ix, prog));

  const int64_t lane_ext = lane >= 0 ? ext[static_cast<size_t>(lane)] : 1;
  const int block = static_cast<int>(std::min<int64_t>(kBlock, lane_ext));
  const int64_t nblocks = (lane_ext + block - 1) / block;
  int64_t outer = 1;
  for (int v = 0; v < s.n_domain; ++v)
    if (v != lane) outer *= ext[static_cast<size_t>(v)];
  const int64_t total = outer * nblocks;

  auto make_ctx = [&](Ctx& cx) {
    cx.tensors = &tensors;
    cx.params = &params;
    cx.info = &c.tensors;
    cx.file = &c.contract.file;
    cx.vals.assign(s.vars.size(), 0);
    cx.lane_slot = lane;
    cx.buf.assign(prog.nodes.size(), std::vector<double>(static_cast<size_t>(block)));
    cx.aux.resize(prog.nodes.size());
    for (size_t i = 0; i < prog.nodes.size(); ++i)
      if (prog.nodes[i].kind == ExprKind::Reduce) cx.aux[i].assign(static_cast<size_t>(block), 0.0);
  };
  // Sets the non-lane domain variables from a flat block number; returns the lane block start.
  auto position = [&](Ctx& cx, int64_t flat) {
    int64_t b = flat % nblocks;
    int64_t rest = flat / nblocks;
    for (int v = s.n_domain - 1; v >= 0; --v) {
      if (v == lane) continue;
      cx.vals[static_cast<size_t>(v)] = rest % ext[static_cast<size_t>(v)];
      rest /= ext[static_cast<size_t>(v)];
    }
    cx.lane_base = b * block;
    return static_cast<int>(std::min<int64_t>(block, lane_ext - b * block));
  };

  if (s.accumulate) {  // scatter: serial, in domain order, so the sum order is fixed
    Ctx cx;
    make_ctx(cx);
    Evaluator ev(prog, cx);
    const TensorInfo& ti = c.tensors[static_cast<size_t>(s.tensor)];
    for (int64_t f = 0; f < total; ++f) {
      int n = position(cx, f);
      const double* val = ev.eval(prog.root, n);
      const int sv = prog.nodes[static_cast<size_t>(prog.root)].lane ? 1 : 0;
      std::vector<const double*> ix;
      std::vector<int> sx;
      for (int k : prog.target_index) {
        ix.push_back(ev.eval(k, n));
        sx.push_back(prog.nodes[static_cast<size_t>(k)].lane ? 1 : 0);
      }
      for (int l = 0; l < n; ++l) {
        int64_t off = 0;
        for (size_t a = 0; a < ix.size(); ++a) {
          int64_t v = static_cast<int64_t>(ix[a][l * sx[a]]);
          if (v < 0 || v >= target.shape[a]) {
            const Expr& e = *s.index[a];
            throw Error(c.contract.file + ":" + std::to_string(e.pos.line) + ":" + std::to_string(e.pos.col) +
                        ": reference: scatter index " + std::to_string(v) + " of '" + ti.name + "' axis " +
                        std::to_string(a) + " is outside 0.." + std::to_string(target.shape[a] - 1));
          }
          off += v * target.stride[a];
        }
        target.data[static_cast<size_t>(off)] += val[l * sv];
      }
    }
    return;
  }

  std::string error;
  std::atomic<bool> failed{false};
#pragma omp parallel
  {
    Ctx cx;
    make_ctx(cx);
    Evaluator ev(prog, cx);
    const int sv = prog.nodes[static_cast<size_t>(prog.root)].lane ? 1 : 0;
#pragma omp for schedule(dynamic, 4)
    for (int64_t f = 0; f < total; ++f) {
      if (failed.load(std::memory_order_relaxed)) continue;
      try {
        int n = position(cx, f);
        const double* val = ev.eval(prog.root, n);
        int64_t off = 0;
        for (int v = 0; v < s.n_domain; ++v)
          if (v != lane) off += cx.vals[static_cast<size_t>(v)] * target.stride[static_cast<size_t>(v)];
        if (lane >= 0) {
          const int64_t st = target.stride[static_cast<size_t>(lane)];
          double* dst = target.data.data() + off + cx.lane_base * st;
          for (int l = 0; l < n; ++l) dst[l * st] = val[l * sv];
        } else {
          target.data[static_cast<size_t>(off)] = val[0];
        }
      } catch (const std::exception& e) {
#pragma omp critical
        {
          if (!failed) error = e.what();
          failed = true;
        }
      }
    }
  }
  if (failed) throw Error(error);
}

}  // namespace

std::vector<Tensor> run(const CheckedContract& c, const cases::Case& k, const std::vector<Tensor>& inputs) {
  std::vector<Buf> tensors(c.tensors.size());
  const std::vector<int> in_ids = c.input_ids();
  if (inputs.size() != in_ids.size())
    throw Error("reference: expected " + std::to_string(in_ids.size()) + " inputs, given " + std::to_string(inputs.size()));
  for (size_t i = 0; i < in_ids.size(); ++i) {
    Buf& b = tensors[static_cast<size_t>(in_ids[i])];
    const Tensor& t = inputs[i];
    if (t.shape() != tensor_shape(c, in_ids[i], k.sizes))
      throw Error("reference: input '" + c.tensors[static_cast<size_t>(in_ids[i])].name + "' has shape " +
                  shape_str(t.shape()) + ", the case needs " + shape_str(tensor_shape(c, in_ids[i], k.sizes)));
    b.alloc(t.shape());
    load_f64(t.data(), t.dtype(), b.data.data(), t.numel());
  }
  // Outputs defined only by '+=' start at zero.
  for (int id : c.output_ids()) tensors[static_cast<size_t>(id)].alloc(tensor_shape(c, id, k.sizes));
  for (int j : c.order) run_statement(c, c.contract.compute[static_cast<size_t>(j)], k.sizes, k.params, tensors);

  std::vector<Tensor> out;
  for (int id : c.output_ids()) {
    const TensorInfo& ti = c.tensors[static_cast<size_t>(id)];
    const Buf& b = tensors[static_cast<size_t>(id)];
    Tensor t(ti.dtype_for(k.dtype), tensor_shape(c, id, k.sizes));
    store_f64(b.data.data(), t.dtype(), t.data(), t.numel());
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace cake::reference
