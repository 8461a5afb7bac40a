// TE -> Halide lowering (halide_lower.h). Every TE tensor becomes a Func in f32 (integer tensors in i32,
// `+=` targets in the accumulator type); every reduction a Func with an RDom (lane-split into a vector of
// partial results when it runs along a contiguous axis); outputs are Funcs that convert to the storage
// dtype once. Halide dimension 0 is the innermost, i.e. the TE's last axis, so every argument list is
// written reversed. The manual schedule places each stage relative to the output that consumes it
// (inline, at the output's row loop, at its register tile, or at root) and vectorizes / parallelizes.
#include "tracks/halide/halide_lower.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "core/error.h"
#include "tracks/common/host_code.h"
#include "tracks/halide/halide_math.h"

namespace cake::tracks::halide {
namespace {

using te::Expr;
using te::ExprKind;
using te::Fn;
using te::Op;
using te::ReduceOp;
using te::Stmt;

enum class HT { I32, Bool, F32, F64 };

bool is_float(HT t) {
  return t == HT::F32 || t == HT::F64;
}

struct HE {
  std::string s;
  HT t = HT::F32;
  bool is_num = false;  // a literal: converted exactly to whatever type it meets
  double num = 0;
};

std::string ctype(HT t) {
  switch (t) {
    case HT::I32:
      return "int32_t";
    case HT::Bool:
      return "bool";
    case HT::F32:
      return "float";
    case HT::F64:
      return "double";
  }
  return "float";
}

std::string float_lit(double v, HT t) {
  if (std::isinf(v)) {
    std::string inf =
        t == HT::F64 ? "std::numeric_limits<double>::infinity()" : "std::numeric_limits<float>::infinity()";
    return v < 0 ? "Expr(-" + inf + ")" : "Expr(" + inf + ")";
  }
  if (t == HT::F64) return fmt::format("Expr({:.17e})", v);
  return fmt::format("Expr({:.9e}f)", v);
}

HE conv(const HE& e, HT to) {
  if (e.t == to && !e.is_num) return e;
  if (e.is_num) {
    if (to == HT::I32) return {fmt::format("Expr({})", static_cast<int64_t>(e.num)), to};
    if (to == HT::Bool) return {e.num != 0 ? "(Expr(1) == 1)" : "(Expr(1) == 0)", to};
    return {float_lit(e.num, to), to};
  }
  if (e.t == to) return e;
  if (to == HT::Bool) return {"(" + e.s + " != " + conv(HE{"", HT::I32, true, 0}, e.t).s + ")", to};
  if (e.t == HT::Bool) {
    return {
        fmt::format("select({}, {}, {})", e.s, conv({"", to, true, 1}, to).s, conv({"", to, true, 0}, to).s),
        to};
  }
  return {"cast<" + ctype(to) + ">(" + e.s + ")", to};
}

bool transcendental(Fn f) {
  switch (f) {
    case Fn::Exp:
    case Fn::Log:
    case Fn::Tanh:
    case Fn::Erf:
    case Fn::Sigmoid:
    case Fn::Sin:
    case Fn::Cos:
    case Fn::Pow:
      return true;
    default:
      return false;
  }
}

bool has_transcendental(const Expr& e) {
  return te::any_of(e, [](const Expr& x) { return x.kind == ExprKind::Call && transcendental(x.fn); });
}

void collect_vars(const Expr& e, std::set<int>& out) {
  te::any_of(e, [&](const Expr& x) {
    if (x.kind == ExprKind::Var) out.insert(x.slot);
    return false;
  });
}

// Reads in e, not descending into nested reductions.
void collect_reads(const Expr& e, std::vector<const Expr*>& out) {
  if (e.kind == ExprKind::Reduce) return;
  if (e.kind == ExprKind::Read) out.push_back(&e);
  for (const auto& a : e.args)
    if (a) collect_reads(*a, out);
  if (e.pad_value) collect_reads(*e.pad_value, out);
}

// The class of a reduction: how its Func is vectorized.
enum class RClass {
  Vec,     // vectorize the Func's innermost pure variable (contractions: matmul, conv, pooling)
  Lane,    // split the innermost reduction variable into vector lanes (row reductions)
  Pred,    // bounds depend on pure variables (triangular): RDom::where, vectorize the innermost pure var
  Serial,  // none of the above
};

struct FuncRec {
  std::string name;
  enum Kind { Stmt, Reduce, Part, Output, Transposed } kind = Stmt;
  std::vector<std::string> vars;  // pure arguments, Halide order (innermost first)
  std::set<std::string> producers;
  int tensor = -1;
  bool expensive = false;  // Stmt: contains a transcendental call
  bool scatter = false;    // Stmt: has `+=` updates
  int n_updates = 0;
  // Reduce
  RClass rclass = RClass::Serial;
  std::string xvar, yvar;  // Vec: vectorized and reuse pure variables
  std::string part;        // Lane: the partial-result Func
  std::string rdom;        // the main RDom
  int n_rvars = 0;
  bool tile_candidate = false;  // a Vec reduction of an output's own statement along its last variable
  std::string tile_output;      // ... and that output
  std::string work;             // Halide text: elements of work per row (task sizing)
  // Scatter: RVar expression that may be vectorized (appears bare as the target's last index)
  std::string scatter_vec_rvar;
  std::vector<std::string> scatter_rvars;  // all RDom components, innermost first
  // Transposed views
  std::string storage_inner;  // Var stored innermost
  // Placement (manual schedule)
  enum Place { Inline, AtRow, AtTile, Root } place = Inline;
  std::string anchor;  // the root Func whose loops it is computed in
};

struct Env {
  std::map<int, std::string> var;                            // slot -> Halide expression of the variable
  std::map<int, std::pair<std::string, std::string>> range;  // slot -> inclusive [lo, hi] as Halide text
  HT ft = HT::F32;
  bool safe = false;         // read inputs through boundary-safe views
  std::set<int> transposed;  // input tensor ids read through transposed views
};

class Lowerer {
 public:
  Lowerer(const CheckedContract& c, const Options& o, DType dt, const std::vector<int64_t>& est)
      : c_(c), o_(o), dt_(dt), est_(est) {
    manual_ = o.schedule == "manual";
    vw_ = std::max(1, o.vector_width);
    accum64_ = dt == DType::f32 ? o.accum_f64_f32io : o.accum_f64_lowp;
    stmt_ft_ = dt == DType::f32 && o.f64_elementwise ? HT::F64 : HT::F32;
  }

  std::string run();

 private:
  const CheckedContract& c_;
  const Options& o_;
  DType dt_;
  const std::vector<int64_t>& est_;
  bool manual_ = true;
  int vw_ = 16;
  bool accum64_ = true;
  HT stmt_ft_ = HT::F32;       // float type of statement arithmetic
  std::map<int, HT> stmt_ht_;  // non-input tensor -> type of its Func

  std::string decl_;   // Func / Var / RDom declarations
  std::string algo_;   // definitions
  std::string sched_;  // schedule
  std::vector<FuncRec> funcs_;
  std::map<std::string, size_t> func_index_;
  std::set<std::string> var_names_;
  std::set<std::string> views_;  // view Funcs defined so far
  int n_red_ = 0;
  const Stmt* stmt_ = nullptr;
  std::string cur_;                                      // the Func being defined (for producer edges)
  std::map<int, std::string> tensor_func_;               // non-input tensor -> its Func
  std::map<int, std::vector<std::string>> tensor_vars_;  // output tensor -> vars of its Func
  std::map<int, bool> defined_;
  std::map<std::string, std::pair<int, std::string>> pad_of_;  // px views: (tensor, pad value)
  std::map<int, HT> scatter_type_;
  std::map<int, std::string> transpose_inner_;  // transposed input -> the dim stored innermost // `+=`
                                                // targets: accumulator type
  std::set<std::string> svars_, srvars_;        // Vars / RVars the schedule introduces
  std::string sv(const std::string& n) {
    svars_.insert(n);
    return n;
  }
  std::string srv(const std::string& n) {
    srvars_.insert(n);
    return n;
  }

  FuncRec& rec(const std::string& name) { return funcs_[func_index_.at(name)]; }
  FuncRec& add_func(const std::string& name, FuncRec::Kind k, bool declare = true) {
    FuncRec r;
    r.name = name;
    r.kind = k;
    func_index_[name] = funcs_.size();
    funcs_.push_back(r);
    if (declare) decl_ += fmt::format("  Func {}(\"{}\");\n", name, name);
    return funcs_.back();
  }
  void depends(const std::string& producer) {
    if (!cur_.empty() && func_index_.count(producer)) rec(cur_).producers.insert(producer);
  }
  std::string var(const std::string& te_name) {
    var_names_.insert(te_name);
    return "v_" + te_name;
  }

  // ---- types and storage
  DType tensor_dtype(int id) const { return c_.tensors[static_cast<size_t>(id)].dtype_for(dt_); }
  std::string halide_type(DType t) const {
    switch (t) {
      case DType::f32:
        return "Float(32)";
      case DType::f16:
        return "Float(16)";
      case DType::bf16:
        return "UInt(16)";  // converted with cake_bf16_to_f32 / cake_f32_to_bf16
      case DType::i32:
        return "Int(32)";
      case DType::i64:
        return "Int(64)";
      case DType::i8:
        return "Int(8)";
      case DType::boolean:
        return "UInt(8)";
    }
    return "Float(32)";
  }
  HT tensor_ht(int id) const {
    const TensorInfo& ti = c_.tensors[static_cast<size_t>(id)];
    if (ti.role != TensorRole::Input && stmt_ht_.count(id)) return stmt_ht_.at(id);
    if (ti.role == TensorRole::Intermediate) {
      return ti.elem == te::Type::Int ? HT::I32 : ti.elem == te::Type::Bool ? HT::Bool : HT::F32;
    }
    DType d = ti.dtype_for(dt_);
    if (is_float(d)) return HT::F32;
    return d == DType::boolean ? HT::Bool : HT::I32;
  }
  std::string from_storage(const std::string& v, DType t) const {
    switch (t) {
      case DType::f32:
        return v;
      case DType::f16:
        return "cake_f16_to_f32(" + v + ")";
      case DType::bf16:
        return "cake_bf16_to_f32(" + v + ")";
      case DType::boolean:
        return "(" + v + " != 0)";
      default:
        return "cast<int32_t>(" + v + ")";
    }
  }
  std::string to_storage(const HE& v, DType t) const {
    switch (t) {
      case DType::f32:
        return conv(v, HT::F32).s;
      case DType::f16:
        return "cake_f32_to_f16(" + conv(v, HT::F32).s + ")";
      case DType::bf16:
        return "cake_f32_to_bf16(" + conv(v, HT::F32).s + ")";
      case DType::i32:
      case DType::i64:
      case DType::i8: {
        std::string ty = t == DType::i32 ? "Int(32)" : t == DType::i64 ? "Int(64)" : "Int(8)";
        if (is_float(v.t)) return "cake_to_int(" + v.s + ", " + ty + ")";
        return "saturating_cast(" + ty + ", " + conv(v, HT::I32).s + ")";
      }
      case DType::boolean:
        return "cast<uint8_t>(" + conv(v, HT::Bool).s + ")";
    }
    return v.s;
  }

  std::string hsize(const Expr& e) const;
  std::string dim_extent(int tensor, size_t axis) const {
    return hsize(*c_.tensors[static_cast<size_t>(tensor)].dims[axis]);
  }
  static std::string dims_list(size_t rank) {
    std::string s;
    for (size_t i = 0; i < rank; ++i) s += (i ? ", " : "") + fmt::format("d{}", i);
    return s;
  }

  std::string view(int id, const std::string& kind, const std::string& pad = "",
                   const std::string& storage_inner = "");
  HE emit(const Expr& e, Env& env);
  HE emit_read(const Expr& e, Env& env);
  HE emit_reduce(const Expr& e, Env& env);
  HE emit_call(const Expr& e, Env& env);
  HE emit_binary(const Expr& e, Env& env);
  std::optional<std::pair<std::string, std::string>> interval(const Expr& e, const Env& env);
  RClass classify(const Expr& red, const std::vector<int>& free_slots, const std::vector<std::string>& pure,
                  FuncRec& r, std::set<int>& transposed);
  void emit_statement(const Stmt& s);
  void place();
  void schedule();
  void schedule_root(FuncRec& f);
  void schedule_at(FuncRec& f, const std::string& anchor, const std::string& level);
  std::string rows_split(const std::string& stage, const std::vector<std::string>& rows,
                         const std::string& base, const std::string& work, std::string& row_level);
  std::string estimates();

  std::map<std::string, std::string> row_level_;   // root Func -> its row loop variable
  std::map<std::string, std::string> tile_level_;  // root Func -> its register-tile loop variable
};

std::string Lowerer::hsize(const Expr& e) const {
  static const SizeSpelling halide{[](int64_t v) { return fmt::format("Expr({})", v); },
                                   [](const std::string& n) { return "Expr(s_" + n + ")"; }, "min", "max"};
  return emit_size_expr(e, halide);
}

// Input views: in_x (f32 / i32 values), se_x (reads clamped to the edge, for over-computing register tiles),
// px<k>_x (padded with a constant), tr_x (transposed copy, boundary-safe).
std::string Lowerer::view(int id, const std::string& kind, const std::string& pad,
                          const std::string& storage_inner) {
  const TensorInfo& ti = c_.tensors[static_cast<size_t>(id)];
  const size_t rank = ti.dims.size();
  const DType d = tensor_dtype(id);
  std::string name;
  if (kind == "in") {
    name = "in_" + ti.name;
  } else if (kind == "se") {
    name = "se_" + ti.name;
  } else if (kind == "tr") {
    name = "tr_" + ti.name;
  } else {
    name = fmt::format("px{}_{}", views_.size(), ti.name);
  }
  if (kind == "px") {
    for (const auto& v : views_)
      if (v.rfind("px", 0) == 0 && pad_of_.count(v) && pad_of_[v] == std::make_pair(id, pad)) return v;
  } else if (views_.count(name)) {
    return name;
  }
  views_.insert(name);
  const std::string dl = dims_list(rank);
  std::string bounds;
  for (size_t a = 0; a < rank; ++a)
    bounds += (a ? ", " : "") + std::string("{0, ") + dim_extent(id, rank - 1 - a) + "}";
  if (kind == "in") {
    decl_ += fmt::format("  Func {}(\"{}\");\n", name, name);
    algo_ += fmt::format("  {}({}) = {};\n", name, dl, from_storage("t_" + ti.name + "(" + dl + ")", d));
  } else if (kind == "se" || kind == "tr") {
    decl_ += fmt::format("  Func {}(\"{}\");\n", name, name);
    algo_ += fmt::format(
        "  {}({}) = {};\n", name, dl,
        from_storage(fmt::format("BoundaryConditions::repeat_edge(t_{}, {{{}}})({})", ti.name, bounds, dl),
                     d));
    if (kind == "tr") {
      FuncRec& r = add_func(name, FuncRec::Transposed, false);
      r.tensor = id;
      r.storage_inner = storage_inner;
      for (size_t a = 0; a < rank; ++a) r.vars.push_back(fmt::format("d{}", a));
    }
  } else {
    pad_of_[name] = {id, pad};
    const std::string in = view(id, "in");
    decl_ += fmt::format("  Func {};\n", name);
    algo_ +=
        fmt::format("  {} = BoundaryConditions::constant_exterior({}, {}, {{{}}});\n", name, in, pad, bounds);
  }
  return name;
}

std::optional<std::pair<std::string, std::string>> Lowerer::interval(const Expr& e, const Env& env) {
  using P = std::pair<std::string, std::string>;
  switch (e.kind) {
    case ExprKind::Number: {
      std::string v = fmt::format("Expr({})", static_cast<int64_t>(e.number));
      return P{v, v};
    }
    case ExprKind::Size: {
      std::string v = "Expr(s_" + e.name + ")";
      return P{v, v};
    }
    case ExprKind::Var: {
      auto it = env.range.find(e.slot);
      if (it == env.range.end()) return std::nullopt;
      return it->second;
    }
    case ExprKind::Unary: {
      if (e.op != Op::Neg) return std::nullopt;
      auto a = interval(*e.args[0], env);
      if (!a) return std::nullopt;
      return P{"(-" + a->second + ")", "(-" + a->first + ")"};
    }
    case ExprKind::Binary: {
      auto a = interval(*e.args[0], env), b = interval(*e.args[1], env);
      if (!a || !b) return std::nullopt;
      if (e.op == Op::Add)
        return P{"(" + a->first + " + " + b->first + ")", "(" + a->second + " + " + b->second + ")"};
      if (e.op == Op::Sub)
        return P{"(" + a->first + " - " + b->second + ")", "(" + a->second + " - " + b->first + ")"};
      if (e.op == Op::Mul) {
        // products: all four corners
        std::string c[4] = {a->first + " * " + b->first, a->first + " * " + b->second,
                            a->second + " * " + b->first, a->second + " * " + b->second};
        return P{fmt::format("min(min({}, {}), min({}, {}))", c[0], c[1], c[2], c[3]),
                 fmt::format("max(max({}, {}), max({}, {}))", c[0], c[1], c[2], c[3])};
      }
      return std::nullopt;
    }
    case ExprKind::Call:
      if (e.fn == Fn::Min || e.fn == Fn::Max) {
        auto a = interval(*e.args[0], env), b = interval(*e.args[1], env);
        if (!a || !b) return std::nullopt;
        std::string f = e.fn == Fn::Min ? "min" : "max";
        return P{f + "(" + a->first + ", " + b->first + ")", f + "(" + a->second + ", " + b->second + ")"};
      }
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

HE Lowerer::emit_binary(const Expr& e, Env& env) {
  const Expr& x = *e.args[0];
  const Expr& y = *e.args[1];
  // 1 + erf(z) = erfc(-z) and 1 - erf(z) = erfc(z): accurate where erf(z) is close to -1 / +1 (gelu tails).
  auto is_one = [](const Expr& q) { return q.kind == ExprKind::Number && q.number == 1.0; };
  auto is_erf = [](const Expr& q) { return q.kind == ExprKind::Call && q.fn == Fn::Erf; };
  if (e.op == Op::Add && ((is_one(x) && is_erf(y)) || (is_erf(x) && is_one(y)))) {
    const Expr& z = *(is_erf(x) ? x : y).args[0];
    HE a = conv(emit(z, env), HT::F32);
    return {"cake_erfc(-" + a.s + ")", HT::F32};
  }
  if (e.op == Op::Sub && is_one(x) && is_erf(y)) {
    HE a = conv(emit(*y.args[0], env), HT::F32);
    return {"cake_erfc(" + a.s + ")", HT::F32};
  }
  HE a = emit(x, env), b = emit(y, env);
  auto unify = [&](HE& p, HE& q) {
    HT t;
    if (is_float(p.t) || is_float(q.t) || (p.is_num && !std::isfinite(p.num))) {
      t = env.ft;
      if ((p.t == HT::F64 && !p.is_num) || (q.t == HT::F64 && !q.is_num)) t = HT::F64;
    } else {
      t = HT::I32;
    }
    // numbers typed Float by the checker stay float
    if (t == HT::I32 && ((p.is_num && p.t != HT::I32) || (q.is_num && q.t != HT::I32))) t = env.ft;
    p = conv(p, t);
    q = conv(q, t);
    return t;
  };
  switch (e.op) {
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div:
    case Op::Mod: {
      HT t = unify(a, b);
      static const char* sym[] = {"", "", " + ", " - ", " * ", " / ", " % "};
      if (e.op == Op::Mod) {
        if (is_float(t)) return {"cake_fmod(" + a.s + ", " + b.s + ")", t};
        return {"cake_floormod(" + a.s + ", " + b.s + ")", t};
      }
      if (e.op == Op::Div && !is_float(t)) {
        bool positive = (y.kind == ExprKind::Number && y.number > 0) || y.kind == ExprKind::Size;
        if (!positive) return {"cake_floordiv(" + a.s + ", " + b.s + ")", t};
      }
      // Float division stays an IEEE division (Halide otherwise may multiply by a reciprocal).
      if (e.op == Op::Div && is_float(t)) return {"strict_float(" + a.s + " / " + b.s + ")", t};
      return {"(" + a.s + sym[static_cast<int>(e.op)] + b.s + ")", t};
    }
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
    case Op::Eq:
    case Op::Ne: {
      unify(a, b);
      static const std::map<Op, const char*> sym = {{Op::Lt, " < "},  {Op::Le, " <= "}, {Op::Gt, " > "},
                                                    {Op::Ge, " >= "}, {Op::Eq, " == "}, {Op::Ne, " != "}};
      return {"(" + a.s + sym.at(e.op) + b.s + ")", HT::Bool};
    }
    case Op::And:
      return {"(" + conv(a, HT::Bool).s + " && " + conv(b, HT::Bool).s + ")", HT::Bool};
    case Op::Or:
      return {"(" + conv(a, HT::Bool).s + " || " + conv(b, HT::Bool).s + ")", HT::Bool};
    default:
      break;
  }
  throw Error("halide: unexpected binary operator");
}

HE Lowerer::emit_call(const Expr& e, Env& env) {
  auto fl = [&](const HE& v) {  // argument as a float of its own precision
    if (is_float(v.t) && !v.is_num) return v;
    return conv(v, env.ft);
  };
  switch (e.fn) {
    case Fn::Where: {
      HE cnd = conv(emit(*e.args[0], env), HT::Bool);
      HE a = emit(*e.args[1], env), b = emit(*e.args[2], env);
      HT t;
      if (e.type == te::Type::Float || is_float(a.t) || is_float(b.t)) {
        t = env.ft;
        if ((a.t == HT::F64 && !a.is_num) || (b.t == HT::F64 && !b.is_num)) t = HT::F64;
      } else {
        t = e.type == te::Type::Bool ? HT::Bool : HT::I32;
      }
      return {"select(" + cnd.s + ", " + conv(a, t).s + ", " + conv(b, t).s + ")", t};
    }
    case Fn::Min:
    case Fn::Max: {
      HE a = emit(*e.args[0], env), b = emit(*e.args[1], env);
      HT t = HT::I32;
      if (is_float(a.t) || is_float(b.t) || e.type == te::Type::Float) {
        t = env.ft;
        if ((a.t == HT::F64 && !a.is_num) || (b.t == HT::F64 && !b.is_num)) t = HT::F64;
      }
      std::string f = e.fn == Fn::Min ? "cake_min" : "cake_max";
      return {f + "(" + conv(a, t).s + ", " + conv(b, t).s + ")", t};
    }
    case Fn::Pow: {
      HE a = fl(emit(*e.args[0], env)), b = fl(emit(*e.args[1], env));
      HT t = (a.t == HT::F64 || b.t == HT::F64) ? HT::F64 : HT::F32;
      return {"pow(" + conv(a, t).s + ", " + conv(b, t).s + ")", t};
    }
    default:
      break;
  }
  HE a = emit(*e.args[0], env);
  if (e.fn == Fn::Abs) {
    if (is_float(a.t) || e.type == te::Type::Float) {
      HE f = fl(a);
      return {"abs(" + f.s + ")", f.t};
    }
    return {"cast<int32_t>(abs(" + conv(a, HT::I32).s + "))", HT::I32};
  }
  if ((e.fn == Fn::Floor || e.fn == Fn::Ceil || e.fn == Fn::Round) && !is_float(a.t) && !a.is_num)
    return conv(a, HT::I32);
  HE f = fl(a);
  const std::string f32 = conv(f, HT::F32).s;  // exp / tanh / sigmoid / erf run in f32 (vectorized)
  switch (e.fn) {
    case Fn::Exp:
      return {"cake_exp(" + f32 + ")", HT::F32};
    case Fn::Log:
      return {"log(" + f.s + ")", f.t};
    case Fn::Sqrt:
      return {"sqrt(" + f.s + ")", f.t};
    case Fn::Rsqrt:
      return {"(" + conv({"", f.t, true, 1}, f.t).s + " / sqrt(" + f.s + "))", f.t};
    case Fn::Tanh:
      return {"cake_tanh(" + f32 + ")", HT::F32};
    case Fn::Erf:
      return {"cake_erf(" + conv(f, HT::F32).s + ")", HT::F32};
    case Fn::Sigmoid:
      return {"cake_sigmoid(" + f32 + ")", HT::F32};
    case Fn::Sin:
      return {"sin(" + f.s + ")", f.t};
    case Fn::Cos:
      return {"cos(" + f.s + ")", f.t};
    case Fn::Floor:
      return {"floor(" + f.s + ")", f.t};
    case Fn::Ceil:
      return {"ceil(" + f.s + ")", f.t};
    case Fn::Round:
      return {"round(" + f.s + ")", f.t};  // Halide rounds half to even
    default:
      break;
  }
  throw Error("halide: unexpected function " + std::string(te::fn_name(e.fn)));
}

HE Lowerer::emit_read(const Expr& e, Env& env) {
  const int id = e.slot;
  const TensorInfo& ti = c_.tensors[static_cast<size_t>(id)];
  const size_t rank = e.args.size();
  std::vector<std::string> idx(rank);
  for (size_t a = 0; a < rank; ++a) {
    idx[a] = conv(emit(*e.args[a], env), HT::I32).s;
    // data-dependent: clamp (the wrapper range-checks plain index tensors)
    if (te::contains(*e.args[a], ExprKind::Read))
      idx[a] = fmt::format("clamp({}, 0, {} - 1)", idx[a], dim_extent(id, a));
  }
  const HT t = tensor_ht(id);
  auto call = [&](const std::string& f, const std::vector<std::string>& ix) {
    std::string s = f + "(";
    for (size_t a = rank; a-- > 0;) s += ix[a] + (a ? ", " : "");
    return s + ")";
  };
  std::string f;
  const bool input = ti.role == TensorRole::Input;
  if (input) {
    if (env.transposed.count(id)) {
      f = view(id, "tr", "", transpose_inner_.at(id));
    } else if (env.safe && !e.padded) {
      f = view(id, "se");
    } else {
      f = view(id, "in");
    }
  } else {
    f = tensor_func_.at(id);
    depends(f);
  }
  if (e.padded) {
    HE pad = e.pad_value ? emit(*e.pad_value, env) : HE{"", t, true, 0};
    pad = conv(pad, t);
    if (input && !(e.pad_value && te::contains(*e.pad_value, ExprKind::Var))) {
      std::string pf = view(id, "px", pad.s);
      return {call(pf, idx), t};
    }
    std::string cond;
    std::vector<std::string> cl(rank);
    for (size_t a = 0; a < rank; ++a) {
      std::string ext = dim_extent(id, a);
      cond += fmt::format("{}{} >= 0 && {} < {}", a ? " && " : "", idx[a], idx[a], ext);
      cl[a] = fmt::format("clamp({}, 0, {} - 1)", idx[a], ext);
    }
    if (rank == 0) return {call(f, cl), t};
    return {fmt::format("select(likely({}), {}, {})", cond, call(f, cl), pad.s), t};
  }
  return {call(f, idx), t};
}

RClass Lowerer::classify(const Expr& red, const std::vector<int>& free_slots,
                         const std::vector<std::string>& pure, FuncRec& r, std::set<int>& transposed) {
  std::vector<const Expr*> reads;
  collect_reads(*red.args[0], reads);
  bool bounds_dep = false;
  for (const auto& rv : red.rvars)
    if (rv.lo && (te::contains(*rv.lo, ExprKind::Var) || te::contains(*rv.hi, ExprKind::Var)))
      bounds_dep = true;
  std::set<int> own;
  for (const auto& rv : red.rvars) own.insert(rv.slot);
  auto slots = [](const Expr& x) {
    std::set<int> s;
    collect_vars(x, s);
    return s;
  };
  if (!free_slots.empty()) {
    const int xs = free_slots.front();  // innermost pure variable
    bool in_last = false;
    for (const Expr* rd : reads)
      if (!rd->args.empty() && slots(*rd->args.back()).count(xs)) in_last = true;
    // A read that does not depend on the variable y, while one that depends on x exists: reuse across y.
    auto reuse_var = [&](int xslot) -> std::string {
      for (size_t i = 1; i < free_slots.size(); ++i) {
        const int ys = free_slots[i];
        bool indep_x_dep = false;
        for (const Expr* rd : reads) {
          std::set<int> s = slots(*rd);
          if (s.count(xslot) && !s.count(ys)) indep_x_dep = true;
        }
        if (indep_x_dep) return pure[i];
      }
      return "";
    };
    if (in_last) {
      r.xvar = pure.front();
      r.yvar = reuse_var(xs);
      return bounds_dep ? RClass::Pred : RClass::Vec;
    }
    if (manual_ && o_.transpose_inputs && free_slots.size() >= 2 && !bounds_dep) {
      // x indexes a non-last axis of an input whose last index is a reduction variable: store it transposed
      for (const Expr* rd : reads) {
        const TensorInfo& ti = c_.tensors[static_cast<size_t>(rd->slot)];
        if (ti.role != TensorRole::Input || rd->padded || rd->args.size() < 2) continue;
        const Expr& last = *rd->args.back();
        if (!(last.kind == ExprKind::Var && own.count(last.slot))) continue;
        for (size_t a = 0; a + 1 < rd->args.size(); ++a) {
          const Expr& ix = *rd->args[a];
          if (ix.kind == ExprKind::Var && ix.slot == xs) {
            std::string y = reuse_var(xs);
            if (y.empty()) continue;
            transposed.insert(rd->slot);
            transpose_inner_[rd->slot] = fmt::format("d{}", rd->args.size() - 1 - a);
            r.xvar = pure.front();
            r.yvar = y;
            r.storage_inner = fmt::format("d{}", rd->args.size() - 1 - a);
            return RClass::Vec;
          }
        }
      }
    }
    if (bounds_dep) {
      r.xvar = pure.front();
      return RClass::Pred;
    }
  } else if (bounds_dep) {
    return RClass::Serial;
  }
  if (bounds_dep) return RClass::Serial;
  const int ks = red.rvars.back().slot;
  for (const Expr* rd : reads)
    if (!rd->args.empty() && slots(*rd->args.back()).count(ks)) return RClass::Lane;
  return RClass::Serial;
}

HE Lowerer::emit_reduce(const Expr& e, Env& env) {
  const int id = n_red_++;
  const Stmt& s = *stmt_;
  const std::string tname = c_.tensors[static_cast<size_t>(s.tensor)].name;
  const std::string R = fmt::format("red{}_{}", id, tname);
  // Free variables: the enclosing statement's variables the body or bounds use (domain slots innermost first,
  // then enclosing reduction variables).
  std::set<int> own, used;
  for (const auto& rv : e.rvars) own.insert(rv.slot);
  collect_vars(e, used);
  std::vector<int> free_slots;
  for (int sl : used)
    if (!own.count(sl)) free_slots.push_back(sl);
  std::sort(free_slots.begin(), free_slots.end(), [&](int a, int b) {
    bool da = a < s.n_domain, db = b < s.n_domain;
    if (da != db) return da;
    return a > b;
  });
  std::vector<std::string> pure, call;
  for (int sl : free_slots) {
    pure.push_back(var(s.vars[static_cast<size_t>(sl)]));
    call.push_back(env.var.at(sl));
  }
  const std::string parent = cur_;
  FuncRec& r0 = add_func(R, FuncRec::Reduce);
  r0.vars = pure;
  r0.n_rvars = static_cast<int>(e.rvars.size());
  std::set<int> transposed;
  FuncRec tmp;
  RClass cls = classify(e, free_slots, pure, tmp, transposed);
  const bool arg = e.reduce == ReduceOp::ArgMax || e.reduce == ReduceOp::ArgMin;
  if (!manual_) {
    cls = RClass::Serial;
    transposed.clear();
  }
  if (cls == RClass::Lane && (!o_.vectorize_reductions || vw_ < 2 || (arg && e.rvars.size() > 1)))
    cls = RClass::Serial;
  {
    FuncRec& r = rec(R);
    r.rclass = cls;
    r.xvar = tmp.xvar;
    r.yvar = tmp.yvar;
    // register-tile candidate: a contraction directly in an output's statement, along its last variable
    const TensorInfo& ti = c_.tensors[static_cast<size_t>(s.tensor)];
    if (cls == RClass::Vec && ti.role == TensorRole::Output && !s.accumulate &&
        parent == tensor_func_.at(s.tensor) && !free_slots.empty() && free_slots.front() == s.n_domain - 1 &&
        s.rhs.get() != nullptr) {
      r.tile_candidate = true;
      r.tile_output = "out_" + ti.name;
    }
  }
  // Body environment.
  Env inner;
  inner.transposed = transposed;
  for (size_t i = 0; i < free_slots.size(); ++i) {
    inner.var[free_slots[i]] = pure[i];
    if (env.range.count(free_slots[i])) inner.range[free_slots[i]] = env.range.at(free_slots[i]);
  }
  inner.safe = manual_ && rec(R).tile_candidate;
  if (inner.safe) {
    // Register tiles compute whole tiles at the edges: every input read must be boundary-safe.
  }
  // Accumulator and body types.
  HT acc;
  const Expr& body = *e.args[0];
  const bool int_body = body.type != te::Type::Float;
  if (arg || e.reduce == ReduceOp::Max || e.reduce == ReduceOp::Min) {
    acc = int_body ? HT::I32 : HT::F32;
    inner.ft = HT::F32;
  } else {
    acc = int_body ? HT::I32 : (accum64_ ? HT::F64 : HT::F32);
    inner.ft = (acc == HT::F64 && !has_transcendental(body)) ? HT::F64 : HT::F32;
  }
  auto identity = [&](HT t) -> std::string {
    switch (e.reduce) {
      case ReduceOp::Sum:
        return conv({"", t, true, 0}, t).s;
      case ReduceOp::Prod:
        return conv({"", t, true, 1}, t).s;
      case ReduceOp::Max:
        return t == HT::I32 ? "Int(32).min()" : conv({"", t, true, -INFINITY}, t).s;
      case ReduceOp::Min:
        return t == HT::I32 ? "Int(32).max()" : conv({"", t, true, INFINITY}, t).s;
      case ReduceOp::ArgMax:
        return "Tuple(Expr(0), " +
               (t == HT::I32 ? std::string("Int(32).min()") : conv({"", t, true, -INFINITY}, t).s) + ")";
      case ReduceOp::ArgMin:
        return "Tuple(Expr(0), " +
               (t == HT::I32 ? std::string("Int(32).max()") : conv({"", t, true, INFINITY}, t).s) + ")";
    }
    return "0";
  };
  const std::string is_max = e.reduce == ReduceOp::ArgMax ? "true" : "false";
  // update text: target(args) <- combine(target(args), value [, index])
  auto update = [&](const std::string& target, const std::string& value, const std::string& index) {
    switch (e.reduce) {
      case ReduceOp::Sum:
        return fmt::format("  {0} = {0} + {1};\n", target, value);
      case ReduceOp::Prod:
        return fmt::format("  {0} = {0} * {1};\n", target, value);
      case ReduceOp::Max:
        return fmt::format("  {0} = cake_max({0}, {1});\n", target, value);
      case ReduceOp::Min:
        return fmt::format("  {0} = cake_min({0}, {1});\n", target, value);
      default:
        return fmt::format(
            "  {{\n    Expr v = {1}, i = {2};\n    Expr take = cake_arg_better(v, i, {0}[1], {0}[0], {3});\n"
            "    {0} = Tuple(select(take, i, {0}[0]), select(take, v, {0}[1]));\n  }}\n",
            target, value, index, is_max);
    }
  };
  auto args_text = [](const std::vector<std::string>& a) {
    std::string t;
    for (size_t i = 0; i < a.size(); ++i) t += (i ? ", " : "") + a[i];
    return t;
  };
  const std::string target = R + "(" + args_text(pure) + ")";
  const size_t nr = e.rvars.size();
  // RDom bounds per reduction variable (TE order).
  std::vector<std::pair<std::string, std::string>> box(nr);  // min, extent
  std::vector<std::string> preds;
  std::string work = "Expr(1)";
  for (size_t i = 0; i < nr; ++i) {
    const auto& rv = e.rvars[i];
    if (!rv.lo) {
      box[i] = {"Expr(0)", hsize(*rv.extent)};
    } else if (!te::contains(*rv.lo, ExprKind::Var) && !te::contains(*rv.hi, ExprKind::Var)) {
      std::string lo = conv(emit(*rv.lo, inner), HT::I32).s, hi = conv(emit(*rv.hi, inner), HT::I32).s;
      box[i] = {lo, fmt::format("max({} - {}, 0)", hi, lo)};
    } else {
      auto lo = interval(*rv.lo, inner), hi = interval(*rv.hi, inner);
      if (!lo || !hi) throw Error("halide: reduction bounds not affine in the index variables");
      box[i] = {lo->first, fmt::format("max({} - {}, 0)", hi->second, lo->first)};
    }
    work = fmt::format("({} * {})", work, box[i].second);
  }
  rec(R).work = work;
  const std::string rd = fmt::format("r{}", id);
  rec(R).rdom = rd;
  std::string def;
  def += fmt::format("  // {} = {}(...) of statement '{}'\n", R, te::reduce_name(e.reduce), tname);
  const std::string acc_t = ctype(acc);
  (void)acc_t;
  if (cls == RClass::Lane) {
    // Lane split: part(u, ...) over chunks of `vw` consecutive values of the innermost reduction variable,
    // a tail, then the lanes combined.
    const std::string P = fmt::format("part{}_{}", id, tname);
    FuncRec& pr = add_func(P, FuncRec::Part);
    std::vector<std::string> ppure = pure;
    ppure.insert(ppure.begin(), "u_lane");
    pr.vars = ppure;
    rec(R).part = P;
    const std::string L = std::to_string(vw_);
    const std::string kmin = box[nr - 1].first, kext = box[nr - 1].second;
    std::string chunk = "{{0, " + kext + " / " + L + "}";
    std::string tail = "{{" + kmin + " + " + kext + " / " + L + " * " + L + ", " + kext + " - " + kext +
                       " / " + L + " * " + L + "}";
    for (size_t i = nr - 1; i-- > 0;) {
      chunk += ", {" + box[i].first + ", " + box[i].second + "}";
      tail += ", {" + box[i].first + ", " + box[i].second + "}";
    }
    decl_ += fmt::format("  RDom {0}c({{{1}}}, \"{0}c\"), {0}t({{{2}}}, \"{0}t\"), {0}l(0, {3}, \"{0}l\");\n",
                         rd, chunk.substr(1), tail.substr(1), L);
    const std::string ptarget = P + "(" + args_text(ppure) + ")";
    // partials
    Env pe = inner;
    pe.var[e.rvars[nr - 1].slot] = fmt::format("({} + {}c[0] * {} + u_lane)", kmin, rd, L);
    for (size_t i = 0; i + 1 < nr; ++i) pe.var[e.rvars[i].slot] = fmt::format("{}c[{}]", rd, nr - 1 - i);
    cur_ = P;
    HE pv = emit(body, pe);
    Env te_ = inner;
    te_.var[e.rvars[nr - 1].slot] = rd + "t[0]";
    for (size_t i = 0; i + 1 < nr; ++i) te_.var[e.rvars[i].slot] = fmt::format("{}t[{}]", rd, nr - 1 - i);
    cur_ = R;
    HE tv = emit(body, te_);
    depends(P);
    def += fmt::format("  {} = {};\n", ptarget, identity(acc));
    def +=
        update(ptarget, conv(pv, arg ? (int_body ? HT::I32 : HT::F32) : acc).s, pe.var[e.rvars[nr - 1].slot]);
    def += fmt::format("  {} = {};\n", target, identity(acc));
    def +=
        update(target, conv(tv, arg ? (int_body ? HT::I32 : HT::F32) : acc).s, te_.var[e.rvars[nr - 1].slot]);
    std::vector<std::string> lane_args = pure;
    lane_args.insert(lane_args.begin(), rd + "l");
    const std::string pl = P + "(" + args_text(lane_args) + ")";
    if (arg) {
      def += update(target, pl + "[1]", pl + "[0]");
    } else {
      def += update(target, pl, "");
    }
    rec(R).n_updates = 2;
    rec(P).n_updates = 1;
  } else {
    std::string dom;
    for (size_t i = nr; i-- > 0;)
      dom += (i + 1 < nr ? ", {" : "{") + box[i].first + ", " + box[i].second + "}";
    decl_ += fmt::format("  RDom {0}({{{1}}}, \"{0}\");\n", rd, dom);
    Env be = inner;
    for (size_t i = 0; i < nr; ++i) {
      be.var[e.rvars[i].slot] = fmt::format("{}[{}]", rd, nr - 1 - i);
      be.range[e.rvars[i].slot] = {box[i].first, "(" + box[i].first + " + " + box[i].second + " - 1)"};
    }
    for (size_t i = 0; i < nr; ++i) {
      const auto& rv = e.rvars[i];
      if (rv.lo && (te::contains(*rv.lo, ExprKind::Var) || te::contains(*rv.hi, ExprKind::Var))) {
        std::string k = be.var[rv.slot];
        preds.push_back(fmt::format("{} >= {} && {} < {}", k, conv(emit(*rv.lo, be), HT::I32).s, k,
                                    conv(emit(*rv.hi, be), HT::I32).s));
      }
    }
    for (const auto& p : preds) def += fmt::format("  {}.where({});\n", rd, p);
    cur_ = R;
    HE bv = emit(body, be);
    std::string index;
    if (arg) {
      if (nr == 1) {
        index = be.var[e.rvars[0].slot];
      } else {  // flattened position, first variable outermost
        index = "Expr(0)";
        for (size_t i = 0; i < nr; ++i) {
          index = fmt::format("({} * {} + ({} - {}))", index, box[i].second, be.var[e.rvars[i].slot],
                              box[i].first);
        }
      }
    }
    def += fmt::format("  {} = {};\n", target, identity(acc));
    def += update(target, conv(bv, arg ? (int_body ? HT::I32 : HT::F32) : acc).s, index);
    rec(R).n_updates = 1;
  }
  algo_ += def;
  cur_ = parent;
  depends(R);
  std::string callt = R + "(" + args_text(call) + ")";
  if (arg) return {callt + "[0]", HT::I32};
  return {callt, acc};
}

HE Lowerer::emit(const Expr& e, Env& env) {
  switch (e.kind) {
    case ExprKind::Number: {
      HT t = e.type == te::Type::Int ? HT::I32 : env.ft;
      return {"", t, true, e.number};
    }
    case ExprKind::Size:
      return {"Expr(s_" + e.name + ")", HT::I32};
    case ExprKind::Param:
      return {"Expr(p_" + e.name + ")", HT::F32};
    case ExprKind::Var:
      return {env.var.at(e.slot), HT::I32};
    case ExprKind::Read:
      return emit_read(e, env);
    case ExprKind::Unary: {
      HE a = emit(*e.args[0], env);
      if (e.op == Op::Not) return {"!" + conv(a, HT::Bool).s, HT::Bool};
      if (a.is_num) return {"", a.t, true, -a.num};
      if (a.t == HT::Bool) a = conv(a, HT::I32);
      return {"(-" + a.s + ")", a.t};
    }
    case ExprKind::Binary:
      return emit_binary(e, env);
    case ExprKind::Call:
      return emit_call(e, env);
    case ExprKind::Cast: {
      HE a = emit(*e.args[0], env);
      switch (e.cast_to) {
        case DType::f32:
          return conv(a, HT::F32);
        case DType::f16:
          return {"cake_round_f16(" + conv(a, HT::F32).s + ")", HT::F32};
        case DType::bf16:
          return {"cake_round_bf16(" + conv(a, HT::F32).s + ")", HT::F32};
        case DType::boolean:
          return conv(a, HT::Bool);
        case DType::i8:
        case DType::i32:
        case DType::i64: {
          std::string ty = e.cast_to == DType::i8 ? "Int(8)" : "Int(32)";
          if (is_float(a.t) || (a.is_num && a.t != HT::I32)) {
            HE f = conv(a, is_float(a.t) ? a.t : HT::F32);
            return {"cast<int32_t>(cake_to_int(" + f.s + ", " + ty + "))", HT::I32};
          }
          if (e.cast_to == DType::i8)
            return {"cast<int32_t>(saturating_cast(Int(8), " + conv(a, HT::I32).s + "))", HT::I32};
          return conv(a, HT::I32);
        }
      }
      return a;
    }
    case ExprKind::Reduce:
      return emit_reduce(e, env);
    default:
      break;
  }
  throw Error("halide: unresolved expression");
}

void Lowerer::emit_statement(const Stmt& s) {
  stmt_ = &s;
  const TensorInfo& ti = c_.tensors[static_cast<size_t>(s.tensor)];
  const std::string F = "f_" + ti.name;
  const size_t rank = ti.dims.size();
  if (!tensor_func_.count(s.tensor)) {
    FuncRec& r = add_func(F, FuncRec::Stmt);
    r.tensor = s.tensor;
    tensor_func_[s.tensor] = F;
  }
  cur_ = F;
  Env env;
  env.ft = stmt_ft_;
  HT t = tensor_ht(s.tensor);
  if (!s.accumulate) {
    std::vector<std::string> vars;
    for (int v = s.n_domain; v-- > 0;) {
      vars.push_back(var(s.vars[static_cast<size_t>(v)]));
      env.var[v] = vars.back();
      env.range[v] = {"Expr(0)", "(" + hsize(*s.var_extent[static_cast<size_t>(v)]) + " - 1)"};
    }
    rec(F).vars = vars;
    rec(F).expensive = has_transcendental(*s.rhs);
    tensor_vars_[s.tensor] = vars;
    HE v = emit(*s.rhs, env);
    if (t == HT::F32 && is_float(v.t) && !v.is_num) t = v.t;  // keep f64 values unrounded
    if (!stmt_ht_.count(s.tensor)) stmt_ht_[s.tensor] = t;
    t = stmt_ht_[s.tensor];
    std::string args;
    for (size_t i = 0; i < vars.size(); ++i) args += (i ? ", " : "") + vars[i];
    algo_ += fmt::format("  {}({}) = {};\n", F, args, conv(v, t).s);
    defined_[s.tensor] = true;
    return;
  }
  // out[idx...] += e : an update over an RDom spanning the statement's domain.
  const HT acc = t == HT::F32 ? (accum64_ ? HT::F64 : HT::F32) : t;
  FuncRec& r = rec(F);
  if (!defined_[s.tensor]) {
    std::string dl = dims_list(rank);
    for (size_t a = 0; a < rank; ++a) r.vars.push_back(fmt::format("d{}", a));
    tensor_vars_[s.tensor] = r.vars;
    algo_ += fmt::format("  {}({}) = {};\n", F, dl, conv({"", acc, true, 0}, acc).s);
    defined_[s.tensor] = true;
    scatter_type_[s.tensor] = acc;
  }
  r.scatter = true;
  const std::string rd = fmt::format("rs{}", r.n_updates);
  std::string dom;
  for (int v = s.n_domain; v-- > 0;)
    dom += (v + 1 < s.n_domain ? ", {0, " : "{0, ") + hsize(*s.var_extent[static_cast<size_t>(v)]) + "}";
  decl_ += fmt::format("  RDom {}_{}({{{}}}, \"{}_{}\");\n", rd, ti.name, dom, rd, ti.name);
  std::vector<std::string> comps;
  for (int v = 0; v < s.n_domain; ++v) {
    env.var[v] = fmt::format("{}_{}[{}]", rd, ti.name, s.n_domain - 1 - v);
    env.range[v] = {"Expr(0)", "(" + hsize(*s.var_extent[static_cast<size_t>(v)]) + " - 1)"};
  }
  for (int v = s.n_domain; v-- > 0;) comps.push_back(env.var[v]);
  HE v = emit(*s.rhs, env);
  std::vector<std::string> idx(rank);
  for (size_t a = 0; a < rank; ++a) {
    idx[a] = conv(emit(*s.index[a], env), HT::I32).s;
    if (te::contains(*s.index[a], ExprKind::Read))
      idx[a] = fmt::format("clamp({}, 0, {} - 1)", idx[a], dim_extent(s.tensor, a));
  }
  std::string args;
  for (size_t a = rank; a-- > 0;) args += idx[a] + (a ? ", " : "");
  HT at = scatter_type_.count(s.tensor) ? scatter_type_[s.tensor] : acc;
  algo_ += fmt::format("  {0}({1}) = {0}({1}) + {2};\n", F, args, conv(v, at).s);
  // A domain variable that is the target's whole last index, and appears in no other target index, makes the
  // update race-free along it: vectorizable.
  FuncRec& rr = rec(F);
  rr.scatter_rvars = comps;
  if (rank > 0) {
    const Expr& last = *s.index[rank - 1];
    if (last.kind == ExprKind::Var && last.slot < s.n_domain) {
      bool alone = true;
      for (size_t a = 0; a + 1 < rank; ++a) {
        std::set<int> sl;
        collect_vars(*s.index[a], sl);
        if (sl.count(last.slot)) alone = false;
      }
      if (alone) rr.scatter_vec_rvar = env.var[last.slot];
    }
  }
  rr.n_updates += 1;
}

// ---- placement ----------------------------------------------------------------------------------

void Lowerer::place() {
  std::map<std::string, std::set<std::string>> consumers;
  for (const FuncRec& f : funcs_)
    for (const std::string& p : f.producers) consumers[p].insert(f.name);
  std::map<std::string, std::set<std::string>> anchors;  // for inline Funcs: the anchors they pass through
  auto anchorset = [&](const std::string& cons) -> std::set<std::string> {
    const FuncRec& c = rec(cons);
    if (c.place == FuncRec::Root) return {c.name};
    if (c.place == FuncRec::Inline) return anchors[cons];
    return {c.anchor};
  };
  auto has_row = [&](const std::string& a) { return !rec(a).vars.empty(); };
  // Consumers before producers: reverse of a post-order walk over the producer edges.
  std::vector<size_t> post;
  std::set<std::string> seen;
  std::function<void(const std::string&)> visit = [&](const std::string& n) {
    if (!seen.insert(n).second) return;
    for (const std::string& p : rec(n).producers) visit(p);
    post.push_back(func_index_.at(n));
  };
  for (const FuncRec& f : funcs_)
    if (f.kind == FuncRec::Output) visit(f.name);
  for (const FuncRec& f : funcs_) visit(f.name);
  for (size_t oi = post.size(); oi-- > 0;) {
    FuncRec& f = funcs_[post[oi]];
    if (f.kind == FuncRec::Output) {
      f.place = FuncRec::Root;
      f.anchor = f.name;
      continue;
    }
    if (f.kind == FuncRec::Transposed) {
      f.place = FuncRec::Root;
      f.anchor = f.name;
      continue;
    }
    if (f.kind == FuncRec::Part) continue;  // placed with its reduction
    std::set<std::string> S;
    for (const std::string& cn : consumers[f.name]) {
      if (rec(cn).kind == FuncRec::Part) {
        // a part is computed where its reduction is
        for (const FuncRec& g : funcs_) {
          if (g.part == cn) {
            auto a = anchorset(g.name);
            S.insert(a.begin(), a.end());
          }
        }
        continue;
      }
      auto a = anchorset(cn);
      S.insert(a.begin(), a.end());
    }
    bool materialize = f.kind == FuncRec::Reduce || f.scatter;
    if (f.kind == FuncRec::Stmt && !f.scatter) {
      if (o_.stages == "inline") {
        materialize = false;
      } else if (o_.stages == "at_row" || o_.stages == "root") {
        materialize = true;
      } else {
        materialize = consumers[f.name].size() >= 2 && f.expensive;
      }
    }
    if (!materialize) {
      f.place = FuncRec::Inline;
      anchors[f.name] = S;
      continue;
    }
    if (f.scatter || o_.stages == "root" || S.size() != 1 || !has_row(*S.begin())) {
      f.place = FuncRec::Root;
      f.anchor = f.name;
      continue;
    }
    f.anchor = *S.begin();
    f.place = (f.kind == FuncRec::Reduce && f.tile_candidate && f.tile_output == f.anchor) ? FuncRec::AtTile
                                                                                           : FuncRec::AtRow;
  }
  for (FuncRec& f : funcs_) {
    if (f.kind == FuncRec::Reduce && !f.part.empty()) {
      rec(f.part).place = f.place == FuncRec::Root ? FuncRec::AtRow : f.place;
      rec(f.part).anchor = f.place == FuncRec::Root ? f.name : f.anchor;
    }
  }
}

// ---- schedule -----------------------------------------------------------------------------------

// Fuses `rows` (innermost first) of a stage into one loop and splits it into parallel tasks.
std::string Lowerer::rows_split(const std::string& stage, const std::vector<std::string>& rows,
                                const std::string& base, const std::string& work, std::string& row_level) {
  std::string s;
  std::string fused = rows.front();
  for (size_t i = 1; i < rows.size(); ++i) {
    std::string nf = sv(fmt::format("{}_f{}", base, i));
    s += fmt::format("  {}.fuse({}, {}, {});\n", stage, fused, rows[i], nf);
    fused = nf;
  }
  if (!o_.parallel) {
    row_level = fused;
    return s;
  }
  std::string factor = o_.task_rows > 0 ? fmt::format("Expr({})", o_.task_rows)
                                        : fmt::format("max(1, 32768 / max(1, {}))", work);
  s +=
      fmt::format("  {0}.split({1}, {2}_task, {2}_row, {3}, TailStrategy::GuardWithIf).parallel({2}_task);\n",
                  stage, fused, base, factor);
  sv(base + "_task");
  row_level = sv(base + "_row");
  return s;
}

void Lowerer::schedule_at(FuncRec& f, const std::string& anchor, const std::string& level) {
  const std::string VW = std::to_string(vw_);
  std::string& s = sched_;
  if (f.kind == FuncRec::Part) {
    s += fmt::format("  {}.compute_at({}, {}).vectorize(u_lane);\n", f.name, anchor, level);
    s += fmt::format("  {}.update(0).vectorize(u_lane);\n", f.name);
    return;
  }
  s += fmt::format("  {}.compute_at({}, {});\n", f.name, anchor, level);
  if (f.kind == FuncRec::Stmt) {
    if (!f.vars.empty() && vw_ > 1)
      s += fmt::format("  {}.vectorize({}, {}, TailStrategy::GuardWithIf);\n", f.name, f.vars.front(), VW);
    return;
  }
  if (f.kind != FuncRec::Reduce) return;
  if ((f.rclass == RClass::Vec || f.rclass == RClass::Pred) && vw_ > 1) {
    s += fmt::format("  {}.vectorize({}, {}, TailStrategy::GuardWithIf);\n", f.name, f.xvar, VW);
    std::string order = f.xvar;
    for (int i = 0; i < f.n_rvars; ++i) order += fmt::format(", {}[{}]", f.rdom, i);
    for (const auto& v : f.vars)
      if (v != f.xvar) order += ", " + v;
    s += fmt::format("  {}.update(0).reorder({}).vectorize({}, {}, TailStrategy::GuardWithIf);\n", f.name,
                     order, f.xvar, VW);
  }
}

void Lowerer::schedule_root(FuncRec& f) {
  const std::string VW = std::to_string(vw_);
  std::string& s = sched_;
  const std::string base = f.name;
  if (f.kind != FuncRec::Output) s += fmt::format("  {}.compute_root();\n", f.name);
  if (f.vars.empty()) {
    row_level_[f.name] = "";
    return;
  }
  if (f.kind == FuncRec::Transposed) {
    std::string order = f.storage_inner;
    for (const auto& v : f.vars)
      if (v != f.storage_inner) order += ", " + v;
    s += fmt::format("  {}.reorder_storage({}).reorder({});\n", f.name, order, order);
    if (vw_ > 1)
      s += fmt::format("  {}.vectorize({}, {}, TailStrategy::GuardWithIf);\n", f.name, f.storage_inner, VW);
    if (o_.parallel && f.vars.size() >= 2) s += fmt::format("  {}.parallel({});\n", f.name, f.vars.back());
    return;
  }
  // The register-tiled contraction computed inside this Func, if any.
  const FuncRec* tile = nullptr;
  for (const FuncRec& g : funcs_)
    if (g.kind == FuncRec::Reduce && g.place == FuncRec::AtTile && g.anchor == f.name) tile = &g;
  const std::string x = f.vars.front();
  if (tile) {
    const std::string y = tile->yvar;
    const int tn = std::max(1, o_.tile_n), tm = y.empty() ? 1 : std::max(1, o_.tile_m);
    const std::string xo = sv(base + "_xo"), xi = sv(base + "_xi"), yo = sv(base + "_yo"),
                      yi = sv(base + "_yi");
    s += fmt::format("  {}.split({}, {}, {}, {}, TailStrategy::GuardWithIf)", f.name, x, xo, xi, vw_ * tn);
    std::vector<std::string> order = {xi};
    if (!y.empty()) {
      s += fmt::format(".split({}, {}, {}, {}, TailStrategy::GuardWithIf)", y, yo, yi, tm);
      order.push_back(yi);
    }
    order.push_back(xo);
    std::vector<std::string> outer;
    for (size_t i = 1; i < f.vars.size(); ++i) outer.push_back(f.vars[i] == y ? yo : f.vars[i]);
    std::string ord;
    for (const auto& v : order) ord += (ord.empty() ? "" : ", ") + v;
    for (const auto& v : outer) ord += ", " + v;
    s += fmt::format(".reorder({})", ord);
    if (vw_ > 1) s += fmt::format(".vectorize({}, {})", xi, VW);
    if (tn > 1) s += fmt::format(".unroll({})", xi);
    if (!y.empty() && tm > 1) s += fmt::format(".unroll({})", yi);
    s += ";\n";
    std::string level = xo;
    if (!outer.empty()) {
      std::string fused = outer.front();
      for (size_t i = 1; i < outer.size(); ++i) {
        std::string nf = sv(fmt::format("{}_f{}", base, i));
        s += fmt::format("  {}.fuse({}, {}, {});\n", f.name, fused, outer[i], nf);
        fused = nf;
      }
      if (o_.parallel) s += fmt::format("  {}.parallel({});\n", f.name, fused);
      level = fused;
    } else if (o_.parallel) {
      s += fmt::format("  {}.parallel({});\n", f.name, xo);
    }
    row_level_[f.name] = level;
    tile_level_[f.name] = xo;
    // the tile reduction itself
    const FuncRec& r = *tile;
    s += fmt::format("  {}.compute_at({}, {}).bound_extent({}, {})", r.name, f.name, xo, r.xvar, vw_ * tn);
    if (!r.yvar.empty()) s += fmt::format(".bound_extent({}, {})", r.yvar, tm);
    if (vw_ > 1) s += fmt::format(".vectorize({}, {})", r.xvar, VW);
    if (tn > 1) s += fmt::format(".unroll({})", r.xvar);
    if (!r.yvar.empty() && tm > 1) s += fmt::format(".unroll({})", r.yvar);
    s += ";\n";
    std::string uord = r.xvar + (r.yvar.empty() ? "" : ", " + r.yvar);
    for (const auto& v : r.vars)
      if (v != r.xvar && v != r.yvar) uord += ", " + v;
    for (int i = 0; i < r.n_rvars; ++i) uord += fmt::format(", {}[{}]", r.rdom, i);
    s += fmt::format("  {}.update(0).reorder({})", r.name, uord);
    if (vw_ > 1) s += fmt::format(".vectorize({}, {})", r.xvar, VW);
    if (tn > 1) s += fmt::format(".unroll({})", r.xvar);
    if (!r.yvar.empty() && tm > 1) s += fmt::format(".unroll({})", r.yvar);
    if (o_.unroll_k > 1) {
      srv(r.name + "_ko");
      srv(r.name + "_ki");
    }
    if (o_.unroll_k > 1) {
      s += fmt::format(".split({0}[0], {1}_ko, {1}_ki, {2}, TailStrategy::GuardWithIf).unroll({1}_ki)",
                       r.rdom, r.name, o_.unroll_k);
    }
    s += ";\n";
    return;
  }
  // Row schedules. Does a reduction keyed by x feed this Func directly? Then each x is a row (no vector).
  bool rows_all = false;
  if (f.kind == FuncRec::Reduce && (f.rclass == RClass::Lane || f.rclass == RClass::Serial)) rows_all = true;
  if (f.kind == FuncRec::Output || f.kind == FuncRec::Stmt) {
    for (const FuncRec& g : funcs_) {
      if (g.kind == FuncRec::Reduce && g.anchor == f.name && g.place == FuncRec::AtRow && !g.vars.empty() &&
          g.vars.front() == x && (g.rclass == RClass::Lane || g.rclass == RClass::Serial) &&
          f.vars.size() == 1)
        rows_all = true;
    }
  }
  std::string work = "Expr(1)";
  if (f.kind == FuncRec::Reduce) {
    work = f.work;
  } else if (f.kind == FuncRec::Output) {
    work = f.name + ".output_buffer().dim(0).extent()";
    if (rows_all) {
      for (const FuncRec& g : funcs_) {
        if (g.kind == FuncRec::Reduce && g.anchor == f.name && !g.vars.empty() && g.vars.front() == x)
          work = g.work;
      }
    }
  } else if (f.tensor >= 0) {
    const TensorInfo& ti = c_.tensors[static_cast<size_t>(f.tensor)];
    work = ti.dims.empty() ? "Expr(1)" : hsize(*ti.dims.back());
  }
  const int n_stages = 1 + f.n_updates;
  std::string level;
  for (int st = 0; st < n_stages; ++st) {
    const std::string stage = st == 0 ? f.name : fmt::format("{}.update({})", f.name, st - 1);
    std::string sb = st == 0 ? base : fmt::format("{}_u{}", base, st - 1);
    if (f.scatter && st > 0) {
      // scatter update: vectorize (and parallelize) along the race-free variable, serial otherwise
      if (!f.scatter_vec_rvar.empty() && f.scatter_rvars.size() >= 1 &&
          f.scatter_rvars.front() == f.scatter_vec_rvar && vw_ > 1) {
        std::string rest;
        for (size_t i = 1; i < f.scatter_rvars.size(); ++i) rest += ", " + f.scatter_rvars[i];
        srv(sb + "_o");
        srv(sb + "_i");
        s += fmt::format(
            "  {0}.allow_race_conditions().split({1}, {2}_o, {2}_i, {3}, TailStrategy::GuardWithIf)"
            ".reorder({2}_i{4}, {2}_o).vectorize({2}_i, {5}, TailStrategy::GuardWithIf)",
            stage, f.scatter_vec_rvar, sb, vw_ * 4, rest, VW);
        if (o_.parallel) s += fmt::format(".parallel({}_o)", sb);
        s += ";\n";
      }
      continue;
    }
    std::vector<std::string> rows;
    const bool vec = !rows_all && vw_ > 1;
    std::string xo = x;
    if (vec) {
      xo = sv(sb + "_xo");
      sv(sb + "_xi");
      s += fmt::format("  {}.split({}, {}, {}_xi, {}, TailStrategy::GuardWithIf).vectorize({}_xi);\n", stage,
                       x, xo, sb, VW, sb);
    }
    if (rows_all) {
      rows = f.vars;
    } else if (f.vars.size() > 1) {
      rows.assign(f.vars.begin() + 1, f.vars.end());
    } else {
      rows = {xo};
      if (f.kind == FuncRec::Output && vec) work = "Expr(" + VW + ")";
    }
    if (f.kind == FuncRec::Reduce && st > 0 && (f.rclass == RClass::Vec || f.rclass == RClass::Pred)) {
      // put the reduction loops inside the pure ones but outside the vector
      std::string ord = vec ? sb + "_xi" : x;
      for (int i = 0; i < f.n_rvars; ++i) ord += fmt::format(", {}[{}]", f.rdom, i);
      if (vec) ord += ", " + xo;
      for (const auto& r : rows)
        if (r != xo) ord += ", " + r;
      s += fmt::format("  {}.reorder({});\n", stage, ord);
    }
    std::string lvl;
    s += rows_split(stage, rows, sb, work, lvl);
    if (st == n_stages - 1) level = lvl;
  }
  row_level_[f.name] = level;
}

void Lowerer::schedule() {
  sched_ += "  // ---- schedule (manual)\n";
  // Root Funcs first (outputs included): their loop structure defines the levels others attach to.
  for (FuncRec& f : funcs_)
    if (f.place == FuncRec::Root) schedule_root(f);
  for (FuncRec& f : funcs_) {
    if (f.place != FuncRec::AtRow) continue;
    const std::string& lvl = row_level_[f.anchor];
    if (lvl.empty()) {
      sched_ += fmt::format("  {}.compute_root();\n", f.name);
      continue;
    }
    schedule_at(f, f.anchor, lvl);
  }
}

std::string Lowerer::estimates() {
  std::string s;
  for (size_t i = 0; i < c_.sizes.size() && i < est_.size(); ++i)
    s += fmt::format("  s_{}.set_estimate({});\n", c_.sizes[i].name, std::max<int64_t>(1, est_[i]));
  for (const ParamDecl& p : c_.contract.params)
    s += fmt::format("  p_{}.set_estimate({:.9g}f);\n", p.name, p.value);
  auto ext = [&](const te::Expr& d) { return std::max<int64_t>(1, eval_size_expr(d, est_)); };
  for (int id : c_.input_ids()) {
    const TensorInfo& ti = c_.tensors[static_cast<size_t>(id)];
    const size_t r = ti.dims.size();
    for (size_t a = 0; a < r; ++a)
      s += fmt::format("  t_{}.dim({}).set_estimate(0, {});\n", ti.name, a, ext(*ti.dims[r - 1 - a]));
  }
  for (int id : c_.output_ids()) {
    const TensorInfo& ti = c_.tensors[static_cast<size_t>(id)];
    const size_t r = ti.dims.size();
    std::string b;
    for (size_t a = 0; a < r; ++a) b += fmt::format("{}{{0, {}}}", a ? ", " : "", ext(*ti.dims[r - 1 - a]));
    s += fmt::format("  out_{}.set_estimates({{{}}});\n", ti.name, b);
  }
  return s;
}

std::string Lowerer::run() {
  const Contract& k = c_.contract;
  std::string head;
  const std::string fn = pipeline_function(dt_);
  head += fmt::format("// Pipeline for operator dtype {}.\nstatic void build_{}(const Target& target) {{\n",
                      dtype_name(dt_), dtype_name(dt_));
  for (int id : c_.input_ids()) {
    const TensorInfo& ti = c_.tensors[static_cast<size_t>(id)];
    head += fmt::format("  ImageParam t_{}({}, {}, \"{}\");\n", ti.name, halide_type(tensor_dtype(id)),
                        ti.dims.size(), ti.name);
  }
  for (const ParamDecl& p : k.params) head += fmt::format("  Param<float> p_{}(\"p_{}\");\n", p.name, p.name);
  for (const SizeInfo& z : c_.sizes)
    head += fmt::format("  Param<int32_t> s_{}(\"s_{}\");\n", z.name, z.name);
  for (int j : c_.order) emit_statement(k.compute[static_cast<size_t>(j)]);
  // outputs
  cur_.clear();
  for (int id : c_.output_ids()) {
    const TensorInfo& ti = c_.tensors[static_cast<size_t>(id)];
    const std::string O = "out_" + ti.name;
    FuncRec& r = add_func(O, FuncRec::Output);
    r.tensor = id;
    std::vector<std::string> vars = tensor_vars_.count(id) ? tensor_vars_[id] : std::vector<std::string>{};
    if (vars.empty())
      for (size_t a = 0; a < ti.dims.size(); ++a) vars.push_back(fmt::format("d{}", a));
    rec(O).vars = vars;
    std::string args;
    for (size_t i = 0; i < vars.size(); ++i) args += (i ? ", " : "") + vars[i];
    const std::string F = tensor_func_.at(id);
    rec(O).producers.insert(F);
    HT ft = scatter_type_.count(id) ? scatter_type_[id] : tensor_ht(id);
    algo_ += fmt::format("  {}({}) = {};\n", O, args,
                         to_storage({fmt::format("{}({})", F, args), ft}, tensor_dtype(id)));
  }
  if (manual_) {
    place();
    schedule();
  }
  std::string vars = "  Var u_lane(\"u_lane\")";
  for (int i = 0; i < 8; ++i) vars += fmt::format(", d{0}(\"d{0}\")", i);
  for (const auto& n : var_names_) vars += fmt::format(", v_{0}(\"{0}\")", n);
  vars += ";\n";
  std::string vars_decl;
  for (const auto& v : svars_) vars_decl += fmt::format("  Var {0}(\"{0}\");\n", v);
  for (const auto& v : srvars_) vars_decl += fmt::format("  RVar {0}(\"{0}\");\n", v);
  std::string out = head + vars + vars_decl + decl_ + "\n  // ---- algorithm\n" + algo_ + "\n";
  if (manual_) out += sched_;
  // arguments and compilation
  std::string args = "  std::vector<Argument> args = {";
  bool first = true;
  for (int id : c_.input_ids()) {
    args += (first ? "" : ", ") + std::string("t_") + c_.tensors[static_cast<size_t>(id)].name;
    first = false;
  }
  for (const ParamDecl& p : k.params) {
    args += (first ? "" : ", ") + std::string("p_") + p.name;
    first = false;
  }
  for (const SizeInfo& z : c_.sizes) {
    args += (first ? "" : ", ") + std::string("s_") + z.name;
    first = false;
  }
  args += "};\n";
  std::string outs = "  Pipeline p({";
  first = true;
  for (int id : c_.output_ids()) {
    outs += (first ? "" : ", ") + std::string("out_") + c_.tensors[static_cast<size_t>(id)].name;
    first = false;
  }
  outs += "});\n";
  out += "\n" + args + outs;
  if (!manual_) {
    std::string plugin = o_.schedule == "adams2019" ? "Adams2019"
                         : o_.schedule == "li2018"  ? "Li2018"
                                                    : "Mullapudi2016";
    out += estimates();
    out += fmt::format("  p.auto_schedule(\"{}\", target, MachineParams(2, 32ull << 20, 40));\n", plugin);
  }
  out += fmt::format(
      "  p.compile_to_object(\"{}.o\", args, \"{}\", target.with_feature(Target::NoRuntime));\n", fn, fn);
  out += "}\n\n";
  return out;
}

}  // namespace

std::string pipeline_function(DType op_dtype) {
  return "cake_halide_" + std::string(dtype_name(op_dtype));
}

std::optional<std::string> unsupported(const CheckedContract& c) {
  const Contract& k = c.contract;
  for (DType d : k.dtypes)
    if (!is_float(d)) return "operator dtype " + std::string(dtype_name(d)) + " is not a float dtype";
  for (const TensorInfo& t : c.tensors)
    if (t.dims.size() > 8) return "tensor '" + t.name + "' has rank > 8";
  for (const Stmt& s : k.compute) {
    bool bad = false;
    std::string why;
    te::any_of(*s.rhs, [&](const Expr& e) {
      if (e.kind == ExprKind::Reduce) {
        bool dep = false;
        for (const auto& rv : e.rvars)
          if (rv.lo && (te::contains(*rv.lo, ExprKind::Var) || te::contains(*rv.hi, ExprKind::Var)))
            dep = true;
        if (dep && e.rvars.size() > 1 && (e.reduce == ReduceOp::ArgMax || e.reduce == ReduceOp::ArgMin)) {
          bad = true;
          why = "argmax/argmin over several variables with index-dependent bounds";
        }
      }
      if (e.kind == ExprKind::Cast && e.cast_to == DType::i64) {
        bad = true;
        why = "cast<i64> inside a computation (the track computes integers in i32)";
      }
      return false;
    });
    if (s.accumulate) {
      bool self =
          te::any_of(*s.rhs, [&](const Expr& e) { return e.kind == ExprKind::Read && e.slot == s.tensor; });
      if (self) {
        bad = true;
        why = "a '+=' statement that reads its own target";
      }
    }
    if (bad) return "statement '" + s.target + "' at line " + std::to_string(s.pos.line) + ": " + why;
  }
  // Everything else must lower: try it.
  try {
    Options o;
    std::vector<int64_t> est(c.sizes.size(), 1);
    (void)pipeline_source(c, o, est);
    (void)wrapper_source(c);
  } catch (const std::exception& e) {
    return e.what();
  }
  return std::nullopt;
}

std::string pipeline_source(const CheckedContract& c, const Options& o, const std::vector<int64_t>& est) {
  const Contract& k = c.contract;
  std::string s;
  s += "// Halide generator for CAKE operator '" + k.name + "' (written by CAKE's halide track).\n";
  s += "// Defines one pipeline per I/O dtype (compute in f32, load/store in the I/O dtype), applies the "
       "schedule\n";
  s += "// (" + o.schedule +
       "), and AOT-compiles each to a position-independent object; the Halide runtime goes\n";
  s += "// into halide_runtime.o once. Halide dimension 0 is the TE's last axis: argument lists are "
       "reversed.\n";
  s += "// Host target of this build: " + o.machine + " (the objects are compiled for it).\n";
  s += "//\n// TE:\n";
  {
    std::string src;
    for (const Stmt& st : k.compute) (void)st;
    // the compute block as written in the contract
    size_t pos = k.source.find("compute:");
    if (pos != std::string::npos) {
      size_t end = k.source.find("\ncases:", pos);
      src = k.source.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    }
    size_t i = 0;
    while (i < src.size()) {
      size_t j = src.find('\n', i);
      if (j == std::string::npos) j = src.size();
      s += "//   " + src.substr(i, j - i) + "\n";
      i = j + 1;
    }
  }
  s += "#include <cstdio>\n#include <limits>\n#include <vector>\n\n#include \"Halide.h\"\n\nusing namespace "
       "Halide;\n\n";
  s += halide_math_source();
  s += R"(
// argmax / argmin: does (v, i) beat the best so far (bv, bi)? The first index wins ties; the first NaN wins.
static Expr cake_arg_better(Expr v, Expr i, Expr bv, Expr bi, bool is_max) {
  Expr gt = is_max ? v > bv : v < bv;
  Expr win = gt || (v == bv && i < bi);
  if (!v.type().is_float()) return win;
  return (is_nan(v) && !(is_nan(bv) && bi <= i)) || (!is_nan(v) && !is_nan(bv) && win);
}

)";
  for (DType d : k.dtypes) {
    Lowerer l(c, o, d, est);
    s += l.run();
  }
  s += "int main() {\n";
  s += "  Target target = get_host_target();\n";
  if (!o.cpu_has_avx512fp16) {
    s += "  // Halide 14's sapphirerapids feature implies AVX512-FP16 (vmovw ...), which this CPU lacks.\n"
         "  target = target.without_feature(Target::AVX512_SapphireRapids);\n";
  }
  if (o.strict_float) {
    s += "  // Every float operation as IEEE defines it: no fast-math assumptions (no NaN, no infinity).\n"
         "  target = target.with_feature(Target::StrictFloat);\n";
  }
  if (o.schedule != "manual")
    s += "  load_plugin(\"/usr/lib/x86_64-linux-gnu/halide14/libautoschedule_" + o.schedule + ".so\");\n";
  for (DType d : k.dtypes) s += "  build_" + std::string(dtype_name(d)) + "(target);\n";
  s += "  compile_standalone_runtime(\"halide_runtime.o\", target);\n";
  s += "  return 0;\n}\n";
  return s;
}

std::string wrapper_source(const CheckedContract& c) {
  const Contract& k = c.contract;
  std::string s;
  s += "// C ABI wrapper for CAKE operator '" + k.name + "' (halide track): checks the call, converts each\n";
  s += "// cake_tensor to a halide_buffer_t (Halide dim 0 = our last axis) and runs the pipeline of the "
       "call's dtype.\n";
  s += "#include <stdint.h>\n#include <string.h>\n\n#include \"HalideRuntime.h\"\n#include "
       "\"cake_kernel_abi.h\"\n"
       "#include \"cake_prelude.h\"\n\n";
  // declarations
  for (DType d : k.dtypes) {
    std::string a;
    for (size_t i = 0; i < k.inputs.size(); ++i) a += "halide_buffer_t*, ";
    for (size_t i = 0; i < k.params.size(); ++i) a += "float, ";
    for (size_t i = 0; i < c.sizes.size(); ++i) a += "int32_t, ";
    for (size_t i = 0; i < k.outputs.size(); ++i) a += std::string(i ? ", " : "") + "halide_buffer_t*";
    s += "extern \"C\" int " + pipeline_function(d) + "(" + a + ");\n";
  }
  s += R"(
namespace {

// Halide buffer over a dense row-major cake_tensor (checked by the prologue): dimensions reversed.
int to_buffer(const cake_tensor* t, uint8_t code, uint8_t bits, halide_dimension_t* dims, halide_buffer_t* b) {
  memset(b, 0, sizeof *b);
  const int r = t->rank;
  for (int i = 0; i < r; ++i) {
    const int64_t e = t->shape[r - 1 - i], st = t->stride[r - 1 - i];
    if (e > INT32_MAX || st > INT32_MAX) return CAKE_ERR_SHAPE;
    dims[i].min = 0;
    dims[i].extent = (int32_t)e;
    dims[i].stride = (int32_t)st;
    dims[i].flags = 0;
  }
  b->host = (uint8_t*)t->data;
  b->type.code = (halide_type_code_t)code;
  b->type.bits = bits;
  b->type.lanes = 1;
  b->dimensions = r;
  b->dim = r ? dims : NULL;
  return CAKE_OK;
}

// Halide's default handler prints and aborts the process; a kernel must return an error code instead.
void quiet_error(void* user_context, const char* msg) {
  (void)user_context;
  (void)msg;
}

int status(int rc) {
  if (rc == 0) return CAKE_OK;
  if (rc == halide_error_code_out_of_memory || rc == halide_error_code_buffer_allocation_too_large) return CAKE_ERR_NOMEM;
  if (rc == halide_error_code_bad_type) return CAKE_ERR_DTYPE;
  return CAKE_ERR_SHAPE;
}

}  // namespace

extern "C" int cake_run(const cake_tensor* in, int n_in, cake_tensor* out, int n_out, const double* params,
                        int n_params) {
  halide_set_error_handler(quiet_error);
)";
  s += emit_abi_prologue(c);
  // index range checks: a plain index tensor read as a whole index
  std::set<std::string> checks;
  auto check = [&](const Expr& ix, int tensor, size_t axis) {
    if (ix.kind != ExprKind::Read) return;
    const TensorInfo& it = c.tensors[static_cast<size_t>(ix.slot)];
    if (it.role != TensorRole::Input || is_float(it.dtype_for(DType::f32))) return;
    for (const auto& a : ix.args)
      if (a->kind != ExprKind::Var) return;
    const std::string ext = emit_size_expr(*c.tensors[static_cast<size_t>(tensor)].dims[axis]);
    const std::string key = it.name + "|" + ext;
    if (checks.count(key)) return;
    checks.insert(key);
    const std::string ty = storage_type(*it.fixed_dtype);
    s += fmt::format(
        "  {{  // {0} indexes axis {1} of {2}\n    const {3}* ix = (const {3}*)in[{4}].data;\n    int64_t n "
        "= 1;\n"
        "    for (int a = 0; a < in[{4}].rank; ++a) n *= in[{4}].shape[a];\n"
        "    for (int64_t i = 0; i < n; ++i)\n      if (ix[i] < 0 || (int64_t)ix[i] >= {5}) return "
        "CAKE_ERR_INDEX;\n  }}\n",
        it.name, axis, c.tensors[static_cast<size_t>(tensor)].name, ty, it.index, ext);
  };
  std::function<void(const Expr&)> walk = [&](const Expr& e) {
    if (e.kind == ExprKind::Read)
      for (size_t a = 0; a < e.args.size(); ++a) check(*e.args[a], e.slot, a);
    for (const auto& a : e.args)
      if (a) walk(*a);
    if (e.pad_value) walk(*e.pad_value);
  };
  for (const Stmt& st : k.compute) {
    walk(*st.rhs);
    if (st.accumulate) {
      for (size_t a = 0; a < st.index.size(); ++a) {
        check(*st.index[a], st.tensor, a);
        walk(*st.index[a]);
      }
    }
  }
  for (const SizeInfo& z : c.sizes)
    s += fmt::format("  if ({0} < INT32_MIN || {0} > INT32_MAX) return CAKE_ERR_SHAPE;\n", size_id(z.name));
  s += "  halide_dimension_t dims[" +
       std::to_string(std::max<size_t>(1, k.inputs.size() + k.outputs.size())) + "][CAKE_MAX_RANK];\n";
  s += "  halide_buffer_t bufs[" + std::to_string(std::max<size_t>(1, k.inputs.size() + k.outputs.size())) +
       "];\n";
  s += "  int rc;\n  switch (op_dtype) {\n";
  auto code = [](DType t) -> std::pair<int, int> {
    switch (t) {
      case DType::f32:
        return {2, 32};
      case DType::f16:
        return {2, 16};
      case DType::bf16:
        return {1, 16};  // uint16 storage in the pipeline
      case DType::i32:
        return {0, 32};
      case DType::i64:
        return {0, 64};
      case DType::i8:
        return {0, 8};
      case DType::boolean:
        return {1, 8};
    }
    return {2, 32};
  };
  for (DType d : k.dtypes) {
    s += fmt::format("    case {}: {{  // {}\n", static_cast<int>(d), dtype_name(d));
    std::string call = pipeline_function(d) + "(";
    size_t b = 0;
    const auto ins = c.input_ids(), outs = c.output_ids();
    for (size_t i = 0; i < ins.size(); ++i, ++b) {
      auto [cd, bits] = code(c.tensors[static_cast<size_t>(ins[i])].dtype_for(d));
      s += fmt::format("      if ((rc = to_buffer(&in[{}], {}, {}, dims[{}], &bufs[{}])) != 0) return rc;\n",
                       i, cd, bits, b, b);
      call += fmt::format("&bufs[{}], ", b);
    }
    for (const ParamDecl& p : k.params) call += "(float)" + param_id(p.name) + ", ";
    for (const SizeInfo& z : c.sizes) call += "(int32_t)" + size_id(z.name) + ", ";
    for (size_t i = 0; i < outs.size(); ++i, ++b) {
      auto [cd, bits] = code(c.tensors[static_cast<size_t>(outs[i])].dtype_for(d));
      s += fmt::format("      if ((rc = to_buffer(&out[{}], {}, {}, dims[{}], &bufs[{}])) != 0) return rc;\n",
                       i, cd, bits, b, b);
      call += fmt::format("{}&bufs[{}]", i ? ", " : "", b);
    }
    call += ")";
    s += "      rc = " + call + ";\n      break;\n    }\n";
  }
  s += "    default: return CAKE_ERR_DTYPE;\n  }\n  return status(rc);\n}\n";
  return s;
}

}  // namespace cake::tracks::halide
