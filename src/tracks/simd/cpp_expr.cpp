// TE → C++ expression emission for the simd track (see cpp_expr.h).
#include "tracks/simd/cpp_expr.h"

#include <fmt/format.h>

#include <cmath>

#include "contract/printer.h"
#include "core/error.h"
#include "tracks/common/host_code.h"

namespace cake::tracks::simd {

using te::Expr;
using te::ExprKind;
using te::Fn;
using te::Op;
using te::ReduceOp;
using te::Type;

std::string CppExprEmitter::type_of(Type t) const {
  switch (t) {
    case Type::Int:
      return "int64_t";
    case Type::Bool:
      return "bool";
    case Type::Float:
      return o_.real;
  }
  return o_.real;
}

std::string CppExprEmitter::emit(const Expr& e, std::string& pre, const std::string& ind) {
  for (const auto& [x, text] : subst_)
    if (x == &e) return text;
  switch (e.kind) {
    case ExprKind::Number:
      if (std::isinf(e.number)) return fmt::format("(({})({}INFINITY))", o_.real, e.number < 0 ? "-" : "");
      if (e.type == Type::Int) return fmt::format("INT64_C({})", static_cast<int64_t>(e.number));
      return fmt::format("(({}){:.17g})", o_.real, e.number);
    case ExprKind::Var:
      return var_id(s_.vars.at(static_cast<size_t>(e.slot)));
    case ExprKind::Size:
      return size_id(e.name);
    case ExprKind::Param:
      return fmt::format("(({}){})", o_.real, param_id(e.name));
    case ExprKind::Read:
      return read(e, pre, ind);
    case ExprKind::Unary: {
      const std::string a = emit(*e.args[0], pre, ind);
      return e.op == Op::Neg ? "(-" + a + ")" : "(!" + a + ")";
    }
    case ExprKind::Binary: {
      // 1 + erf(z) is computed as erfc(-z): no cancellation where erf(z) is close to -1 (gelu's tail).
      if (e.op == Op::Add && e.type == Type::Float) {
        for (int side = 0; side < 2; ++side) {
          const Expr& one = *e.args[static_cast<size_t>(side)];
          const Expr& other = *e.args[static_cast<size_t>(1 - side)];
          if (one.kind == ExprKind::Number && one.number == 1.0 && other.kind == ExprKind::Call &&
              other.fn == Fn::Erf)
            return fmt::format("cake_erf1p(({})({}))", o_.real, emit(*other.args[0], pre, ind));
        }
      }
      const std::string a = emit(*e.args[0], pre, ind), b = emit(*e.args[1], pre, ind);
      const bool ints = e.args[0]->type != Type::Float && e.args[1]->type != Type::Float;
      switch (e.op) {
        case Op::Add:
          return "(" + a + " + " + b + ")";
        case Op::Sub:
          return "(" + a + " - " + b + ")";
        case Op::Mul:
          return "(" + a + " * " + b + ")";
        case Op::Div:
          if (ints) return "cake_floordiv(" + a + ", " + b + ")";
          return fmt::format("(({}){} / ({}){})", o_.real, a, o_.real, b);
        case Op::Mod:
          if (ints) return "cake_floormod(" + a + ", " + b + ")";
          return fmt::format("std::fmod(({}){}, ({}){})", o_.real, a, o_.real, b);
        case Op::Lt:
          return "(" + a + " < " + b + ")";
        case Op::Le:
          return "(" + a + " <= " + b + ")";
        case Op::Gt:
          return "(" + a + " > " + b + ")";
        case Op::Ge:
          return "(" + a + " >= " + b + ")";
        case Op::Eq:
          return "(" + a + " == " + b + ")";
        case Op::Ne:
          return "(" + a + " != " + b + ")";
        case Op::And:
          return "(" + a + " && " + b + ")";
        case Op::Or:
          return "(" + a + " || " + b + ")";
        default:
          break;
      }
      break;
    }
    case ExprKind::Call:
      return call(e, pre, ind);
    case ExprKind::Cast:
      return cast(e, pre, ind);
    case ExprKind::Reduce:
      return reduce(e, pre, ind);
    default:
      break;
  }
  throw Error(fmt::format("simd: cannot lower '{}' at {}:{}", te::print_expr(e), e.pos.line, e.pos.col));
}

bool CppExprEmitter::hoistable(const Expr& e) const {
  return hoist_ && depth_ == 0 && !te::any_of(e, [&](const Expr& x) {
           return (x.kind == ExprKind::Var && x.slot == hoist_slot_) || x.kind == ExprKind::Reduce;
         });
}

std::string CppExprEmitter::read(const Expr& e, std::string& pre_in, const std::string& ind_in) {
  const TensorInfo& t = c_.tensors.at(static_cast<size_t>(e.slot));
  if (const auto region = region_in_.find(&e); e.padded && region != region_in_.end() && !region->second) {
    const std::string pad =
        e.pad_value ? emit(*e.pad_value, pre_in, ind_in) : "0";  // out of range throughout
    return fmt::format("(({}){})", type_of(e.type), pad);
  }
  const bool hoist = hoistable(e);
  std::string& pre = hoist ? *hoist_ : pre_in;
  const std::string& ind = hoist ? hoist_indent_ : ind_in;
  std::vector<std::string> idx;
  std::vector<bool> trusted;  // padded reads: indices the caller proved in range
  std::string inside;         // padded reads: the in-bounds condition
  const std::string id = fresh("i");
  for (size_t k = 0; k < e.args.size(); ++k) {
    const Expr& ix = *e.args[k];
    const std::string dim = emit_size_expr(*t.dims[k]);
    const auto uses = [&](int slot) {
      return slot >= 0 &&
             te::any_of(ix, [&](const Expr& x) { return x.kind == ExprKind::Var && x.slot == slot; });
    };
    const auto region = region_in_.find(&e);
    // A variable whose extent is this axis's extent is in range.
    const bool spans = ix.kind == ExprKind::Var && static_cast<size_t>(ix.slot) < s_.var_extent.size() &&
                       s_.var_extent[static_cast<size_t>(ix.slot)] &&
                       emit_size_expr(*s_.var_extent[static_cast<size_t>(ix.slot)]) == dim;
    const bool in_range = spans || uses(in_range_slot_) || &e == all_in_ ||
                          (region != region_in_.end() && region->second && uses(region_slot_));
    trusted.push_back(in_range);
    if (ix.kind == ExprKind::Var && (!e.padded || in_range)) {  // a plain variable: proven in range
      idx.push_back(emit(ix, pre, ind));
      continue;
    }
    const std::string name = fmt::format("{}_{}", id, k);
    // A data-dependent index that does not vary in the hoisted loop (index_select's ids[k] in the loop over
    // d) is read and checked once before it: the check's branch inside kept GCC from vectorizing the f16
    // copy (8.6 -> 1.7 ms at D=512, K=8192).
    const bool checked = te::contains(ix, ExprKind::Read);
    const bool before = !e.padded && checked && !hoist && hoistable(ix);
    std::string& ipre = before ? *hoist_ : pre;
    const std::string& iind = before ? hoist_indent_ : ind;
    const std::string value = emit(ix, ipre, iind);
    ipre += fmt::format("{}int64_t {} = {};\n", iind, name, value);
    if (e.padded && !in_range) {
      inside += fmt::format("{}((uint64_t){} < (uint64_t){})", inside.empty() ? "" : " && ", name, dim);
    } else if (checked) {  // data-dependent: checked here, reported through err
      ipre += fmt::format(
          "{}if ((uint64_t){} >= (uint64_t){}) {{ cake_set_error(&err, CAKE_ERR_INDEX); {} = 0; }}\n", iind,
          name, dim, name);
    }
    idx.push_back(name);
  }
  const bool stored = &e == stored_;
  std::string value;
  if (!e.padded || (stored && inside.empty())) {  // (emit_stored: a padded read proven in range)
    value = access_(e.slot, idx, stored);
  } else {
    const std::string ok = id + "_in";
    pre += fmt::format("{}const bool {} = {};\n", ind, ok, inside.empty() ? "true" : inside);
    for (size_t k = 0; k < idx.size(); ++k)  // never address outside the tensor
      if (!trusted[k]) idx[k] = fmt::format("({} ? {} : 0)", ok, idx[k]);
    const std::string pad = e.pad_value ? emit(*e.pad_value, pre, ind) : "0";
    value = fmt::format("({} ? ({}){} : ({}){})", ok, type_of(e.type), access_(e.slot, idx, false),
                        type_of(e.type), pad);
  }
  if (!hoist) return value;
  std::string h = fresh("h");
  pre += fmt::format("{}const {} {} = {};\n", ind, stored ? "auto" : type_of(e.type), h, value);
  return h;
}

std::string CppExprEmitter::emit_stored(const Expr& e, std::string& pre, const std::string& ind) {
  if (e.kind != ExprKind::Read || (e.padded && all_in_ != &e))
    throw Error("simd: emit_stored takes a read that needs no bounds test, not '" + te::print_expr(e) + "'");
  stored_ = &e;
  std::string value = read(e, pre, ind);
  stored_ = nullptr;
  return value;
}

namespace {
bool literal(const Expr& e) {
  return e.kind == ExprKind::Number && !std::isnan(e.number);
}
}  // namespace

// A call whose arguments do not vary in the hoisted loop (log_softmax's log(s[n]) in the loop over d) is
// computed once before it: GCC hoists a libm call it knows is pure, not an inlined one like cake_log.
std::string CppExprEmitter::call(const Expr& e, std::string& pre, const std::string& ind) {
  if (!hoistable(e)) return call_text(e, pre, ind);
  const std::string value = call_text(e, *hoist_, hoist_indent_);
  std::string h = fresh("h");
  *hoist_ += fmt::format("{}const {} {} = {};\n", hoist_indent_, type_of(e.type), h, value);
  return h;
}

std::string CppExprEmitter::call_text(const Expr& e, std::string& pre, const std::string& ind) {
  std::vector<std::string> a;
  for (const te::ExprPtr& x : e.args) a.push_back(emit(*x, pre, ind));
  const bool f = e.type == Type::Float;
  const std::string R = o_.real;
  auto real = [&](size_t i) {
    return e.args[i]->type == Type::Float ? a[i] : fmt::format("(({}){})", R, a[i]);
  };
  switch (e.fn) {
    case Fn::Where:
      return fmt::format("({} ? ({}){} : ({}){})", a[0], type_of(e.type), a[1], type_of(e.type), a[2]);
    case Fn::Min:
    case Fn::Max: {
      const char* fn = e.fn == Fn::Min ? "min" : "max";
      if (!f) return fmt::format("std::{}<int64_t>({}, {})", fn, a[0], a[1]);
      const bool lit0 = literal(*e.args[0]), lit1 = literal(*e.args[1]);
      if (lit0 != lit1)  // a clamp's bound: one comparison, not a NaN test of both operands
        return fmt::format("cake_f{}_lit<{}>({}, {})", fn, lit0, real(0), real(1));
      return fmt::format("cake_f{}({}, {})", fn, real(0), real(1));
    }
    case Fn::Abs:
      return f ? fmt::format("std::fabs({})", a[0]) : fmt::format("std::llabs({})", a[0]);
    case Fn::Exp:
      return fmt::format("cake_exp({})", real(0));
    case Fn::Log:
      return fmt::format("cake_log({})", real(0));
    case Fn::Sqrt:
      return fmt::format("std::sqrt({})", real(0));
    case Fn::Rsqrt:
      return fmt::format("(({})1 / std::sqrt({}))", R, real(0));
    case Fn::Tanh:
      return fmt::format("std::tanh({})", real(0));
    case Fn::Erf:
      return fmt::format("cake_erf({})", real(0));
    case Fn::Sigmoid:
      return fmt::format("cake_sigmoid({})", real(0));
    case Fn::Sin:
      return fmt::format("std::sin({})", real(0));
    case Fn::Cos:
      return fmt::format("std::cos({})", real(0));
    case Fn::Pow:
      return fmt::format("std::pow({}, {})", real(0), real(1));
    case Fn::Floor:
      return fmt::format("std::floor({})", real(0));
    case Fn::Ceil:
      return fmt::format("std::ceil({})", real(0));
    case Fn::Round:
      return fmt::format("std::nearbyint({})", real(0));  // half to even (default rounding mode)
  }
  throw Error("simd: unknown function");
}

namespace {
bool f32_exact_at(const CheckedContract& c, const Expr& e, int depth) {
  if (e.kind == ExprKind::Number)  // an integer literal too: it converts to the float it equals
    return std::isnan(e.number) || static_cast<double>(static_cast<float>(e.number)) == e.number;
  if (e.type != Type::Float || depth > 16) return false;
  auto exact = [&](const Expr& x) { return f32_exact_at(c, x, depth + 1); };
  switch (e.kind) {
    case ExprKind::Cast:
      return e.cast_to == DType::f32 || e.cast_to == DType::bf16 || e.cast_to == DType::f16;
    case ExprKind::Unary:
      return e.op == Op::Neg && exact(*e.args[0]);
    case ExprKind::Call:
      switch (e.fn) {
        case Fn::Where:
          return exact(*e.args[1]) && exact(*e.args[2]);
        case Fn::Min:
        case Fn::Max:
          return exact(*e.args[0]) && exact(*e.args[1]);
        case Fn::Abs:
        case Fn::Floor:
        case Fn::Ceil:
        case Fn::Round:  // an integer of an f32 value's magnitude is an f32 value
          return exact(*e.args[0]);
        default:
          return false;
      }
    case ExprKind::Reduce:
      return (e.reduce == ReduceOp::Max || e.reduce == ReduceOp::Min) && exact(*e.args[0]);
    case ExprKind::Read: {
      if (e.padded && e.pad_value) return false;
      const TensorInfo& t = c.tensors.at(static_cast<size_t>(e.slot));
      if (t.role == TensorRole::Input) return !t.fixed_dtype || is_float(*t.fixed_dtype);
      int writes = 0;
      bool held = false;
      for (const te::Stmt& s : c.contract.compute) {
        if (s.tensor != e.slot) continue;
        ++writes;
        held = !s.accumulate && exact(*s.rhs);
      }
      return writes == 1 && held;
    }
    default:
      return false;
  }
}
}  // namespace

bool f32_exact(const CheckedContract& c, const Expr& e) {
  return f32_exact_at(c, e, 0);
}

bool single_f32_op(const CheckedContract& c, const Expr& e) {
  return e.kind == ExprKind::Binary && e.type == Type::Float &&
         (e.op == Op::Add || e.op == Op::Sub || e.op == Op::Mul || e.op == Op::Div) &&
         f32_exact(c, *e.args[0]) && f32_exact(c, *e.args[1]);
}

std::string CppExprEmitter::cast(const Expr& e, std::string& pre, const std::string& ind) {
  // One operation of two f32 values rounded to f32 is the same computed in f32 (single_f32_op): an f64
  // kernel then divides in f32 lanes, twice as many per instruction, and f32 division is the faster.
  const Expr& x = *e.args[0];
  if (e.cast_to == DType::f32 && o_.real != "float" && single_f32_op(c_, x)) {
    const std::string l = emit(*x.args[0], pre, ind), r = emit(*x.args[1], pre, ind);
    return fmt::format("(({})((float)({}) {} (float)({})))", o_.real, l, op_spelling(x.op), r);
  }
  std::string a = emit(x, pre, ind);
  switch (e.cast_to) {
    case DType::f32:
      return fmt::format("(({})(float)({}))", o_.real, a);
    case DType::bf16:
      return fmt::format("(({})cake_bf16_to_f32(cake_f32_to_bf16((float)({}))))", o_.real, a);
    case DType::f16:
      return fmt::format("(({})cake_f16_to_f32(cake_f32_to_f16((float)({}))))", o_.real, a);
    case DType::i8:
      return fmt::format("((int64_t)cake_i8({}))", a);
    case DType::i32:
      return fmt::format("((int64_t)cake_to_i32((double)({})))", a);
    case DType::i64:
      return fmt::format("cake_to_i64((double)({}))", a);
    case DType::boolean:
      return fmt::format("(({}) != 0)", a);
  }
  return a;
}

std::pair<std::string, std::string> CppExprEmitter::bounds(const te::ReduceVar& rv, std::string& pre,
                                                           const std::string& ind) {
  if (!rv.lo) return {"0", emit_size_expr(*rv.extent)};
  std::string lo = emit(*rv.lo, pre, ind);  // bounds depend only on outer variables
  return {lo, emit(*rv.hi, pre, ind)};
}

namespace {
constexpr int kShortReduction = 16;  // reductions over fewer elements than this are not vectorized
}  // namespace

bool transcendental_call(const Expr& e) {
  if (e.kind != ExprKind::Call) return false;
  switch (e.fn) {
    case te::Fn::Exp:
    case te::Fn::Log:
    case te::Fn::Tanh:
    case te::Fn::Erf:
    case te::Fn::Sigmoid:
    case te::Fn::Sin:
    case te::Fn::Cos:
    case te::Fn::Pow:
      return true;
    default:
      return false;
  }
}

bool short_reducible(const Expr& e) {
  if (e.kind != ExprKind::Reduce || e.rvars.size() != 1 || e.rvars[0].lo || !e.rvars[0].extent ||
      e.rvars[0].extent->kind != ExprKind::Size || e.reduce == ReduceOp::Prod)
    return false;
  return !te::contains(*e.args[0], ExprKind::Reduce) &&
         !te::any_of(*e.args[0], [](const Expr& x) { return x.kind == ExprKind::Read && x.padded; });
}

std::string short_row_constants(const std::string& size, int n, const std::string& ind) {
  std::string out;
  for (int k = 0; k < n; ++k) {
    out += fmt::format(
        "{0}const int64_t sr{2}_{1} = {2} < {1} ? {2} : {1} - 1; const uint64_t sm{2}_{1} = {2} < {1} ? "
        "~UINT64_C(0) : 0;\n",
        ind, size, k);
  }
  return out;
}

// A reduction as a loop over its variables, or (`straight`, ExprOptions::short_rows) as o_.short_rows
// terms in straight-line code, each in a block binding the variable to its index constant
// (short_row_constants): no loop of its own, so the row loop around it vectorizes across rows (argmax f16
// D=13 N=8192: a plain loop per row was 48 ns a row). Past the row's end a term reads the row's last
// element again: a sum masks it to +0 (cake_keep); max, min, argmax and argmin need no mask, since a repeat
// of the last element never wins (a strict comparison, and a NaN already taken stays). Sums add in index
// order, as the loop does, and give the same bits.
std::string CppExprEmitter::reduce(const Expr& e, std::string& pre, const std::string& ind) {
  const bool straight = o_.short_rows > 0 && short_reducible(e);
  std::string r = fresh("r");
  const bool arg = e.reduce == ReduceOp::ArgMax || e.reduce == ReduceOp::ArgMin;
  const bool ints = e.args[0]->type != Type::Float && !arg;
  // max / min select one of their terms, exact in any type: they run in the compute type (an f64
  // accumulator would only convert every f32 term and halve the vector width).
  const bool select = arg || e.reduce == ReduceOp::Max || e.reduce == ReduceOp::Min;
  const std::string acc = ints ? "int64_t" : select ? o_.real : o_.acc;
  const Expr& body = *e.args[0];
  const bool single = e.rvars.size() == 1;
  // Vectorizable when the loop is innermost and its body is a plain expression.
  const bool plain = !straight && o_.vector_reductions && single && !te::contains(body, ExprKind::Reduce) &&
                     !te::any_of(body, [](const Expr& x) { return x.kind == ExprKind::Read && x.padded; });
  if (plain && arg && e.args[0]->type == Type::Float) return arg_reduce(e, pre, ind);
  const bool vec = plain && (e.reduce == ReduceOp::Sum || e.reduce == ReduceOp::Max ||
                             e.reduce == ReduceOp::Min || e.reduce == ReduceOp::Prod);
  const char* id = "0";
  switch (e.reduce) {
    case ReduceOp::Sum:
      id = "0";
      break;
    case ReduceOp::Prod:
      id = "1";
      break;
    case ReduceOp::Max:
    case ReduceOp::ArgMax:
      id = ints ? "INT64_MIN" : "-INFINITY";
      break;
    case ReduceOp::Min:
    case ReduceOp::ArgMin:
      id = ints ? "INT64_MAX" : "INFINITY";
      break;
  }
  if (arg) {
    pre += fmt::format("{}{} {}_best = {}; int64_t {} = 0, {}_pos = 0;\n", ind, acc, r, id, r, r);
  } else {
    pre += fmt::format("{}{} {} = {};\n", ind, acc, r, id);
    if (!ints && (e.reduce == ReduceOp::Max || e.reduce == ReduceOp::Min))
      pre += fmt::format("{}int {}_nan = 0;\n", ind, r);
  }
  // The step adding term b (emitted at indent `inner`) into the accumulator; `mask`: a sum's term under it.
  const auto step_of = [&](const std::string& b, const std::string& inner, const std::string& mask) {
    switch (e.reduce) {
      case ReduceOp::Sum:
        if (!mask.empty()) return fmt::format("{}{} += cake_keep(({})({}), {});\n", inner, r, acc, b, mask);
        return fmt::format("{}{} += {};\n", inner, r, b);
      case ReduceOp::Prod:
        return fmt::format("{}{} *= {};\n", inner, r, b);
      case ReduceOp::Max:
      case ReduceOp::Min: {
        const char* cmp = e.reduce == ReduceOp::Max ? ">" : "<";
        if (ints) {
          return fmt::format("{}{{ const int64_t x = {}; {} = x {} {} ? x : {}; }}\n", inner, b, r, cmp, r,
                             r);
        }
        return fmt::format("{}{{ const {} x = {}; {}_nan |= (x != x); {} = x {} {} ? x : {}; }}\n", inner,
                           acc, b, r, r, cmp, r, r);
      }
      case ReduceOp::ArgMax:
      case ReduceOp::ArgMin:
        break;
    }
    const char* cmp = e.reduce == ReduceOp::ArgMax ? ">" : "<";
    // The first maximum wins; the first NaN wins over everything after it. Selects, not a branch: the copy
    // for rows of one vectorizes across rows only without control flow (there GCC folds it to a memset).
    const std::string at = single ? var_id(s_.vars.at(static_cast<size_t>(e.rvars[0].slot))) : r + "_pos";
    std::string step = fmt::format(
        "{}{{ const {} x = {}; const bool {}_take = {}_best == {}_best && (x != x || x {} {}_best); "
        "{}_best = {}_take ? x : {}_best; {} = {}_take ? {} : {}; }}\n",
        inner, o_.real, b, r, r, r, cmp, r, r, r, r, r, r, at, r);
    if (!single) step += fmt::format("{}++{}_pos;\n", inner, r);
    return step;
  };
  std::string loop, short_if;
  if (straight) {
    const std::string v = var_id(s_.vars.at(static_cast<size_t>(e.rvars[0].slot)));
    const std::string size = emit_size_expr(*e.rvars[0].extent), in = ind + "  ";
    for (int k = 0; k < o_.short_rows; ++k) {
      std::string body_pre;
      ++depth_;
      const std::string b = emit(body, body_pre, in);
      --depth_;
      loop += fmt::format("{}{{\n{}const int64_t {} = sr{}_{};\n{}{}{}}}\n", ind, in, v, k, size, body_pre,
                          step_of(b, in, fmt::format("sm{}_{}", k, size)), ind);
    }
  } else {
    std::string open, close, inner = ind;
    for (const te::ReduceVar& rv : e.rvars) {
      const std::string v = var_id(s_.vars.at(static_cast<size_t>(rv.slot)));
      const auto [lo, hi] = bounds(rv, pre, ind);
      if (vec) short_if = fmt::format("({}) - ({}) < {}", hi, lo, kShortReduction);
      open += fmt::format("{}for (int64_t {} = {}; {} < {}; ++{}) {{\n", inner, v, lo, v, hi, v);
      close.insert(0, inner + "}\n");
      inner += "  ";
    }
    std::string body_pre;
    ++depth_;
    const std::string b = emit(body, body_pre, inner);
    --depth_;
    loop = open + body_pre + step_of(b, inner, "") + close;
  }
  if (vec) {
    // A vectorized reduction pays a combine of its lanes per row: a short one runs as a plain loop instead.
    pre += fmt::format("{}if ({}) {{\n{}{}}} else {{\n{}{}}}\n", ind, short_if, loop, ind,
                       lane_reduction(e, r, acc, ints, body, id, ind + "  "), ind);
  } else {
    pre += loop;
  }
  if (!arg && !ints && (e.reduce == ReduceOp::Max || e.reduce == ReduceOp::Min))
    pre += fmt::format("{}if ({}_nan) {} = NAN;\n", ind, r, r);
  if (arg) return r;
  return ints ? r : fmt::format("(({}){})", o_.real, r);
}

// A sum / product / max / min over one innermost variable in vector registers (GCC vector extensions of 64
// bytes, L lanes). Each block of terms is computed by an `omp simd` loop into a small buffer, read back
// (a block of one vector in 32-byte halves, cake_lanes::load_halves, so that the load takes its data from the
// stores GCC made, whatever their width) and combined into accumulators: blocks of 4L into four independent
// chains, then blocks of L, then the last L terms as one block overlapping what was taken, the terms already
// taken replaced by the identity (contiguous loads, no gather, no scalar tail: a row here has at least
// kShortReduction ≥ L terms); then the accumulators and their lanes combine pairwise (cake_lanes in
// cake_math.h). GCC's own `omp simd reduction` spills its lanes and combines them one by one in lane order, a
// dependent chain of L scalar operations per row that costs more than a row of a hundred terms. Sums and
// products round in this blocked order (closer to exact than the sequential sum); max / min select and are
// exact, a NaN term tracked in a mask vector.
std::string CppExprEmitter::lane_reduction(const Expr& e, const std::string& r, const std::string& acc,
                                           bool ints, const Expr& body, const std::string& id,
                                           const std::string& ind) {
  const te::ReduceVar& rv = e.rvars[0];
  const std::string v = var_id(s_.vars.at(static_cast<size_t>(rv.slot)));
  const int L = acc == "float" ? 16 : 8;  // double and int64_t: 8
  static_assert(kShortReduction >= 16, "the overlapping last block needs a row of at least L terms");
  std::string out;
  const auto [lo, hi] = bounds(rv, out, ind);
  const bool nan = !ints && (e.reduce == ReduceOp::Max || e.reduce == ReduceOp::Min);
  const auto op = [&](const std::string& a, const std::string& b) {
    switch (e.reduce) {
      case ReduceOp::Sum:
        return fmt::format("{} + {}", a, b);
      case ReduceOp::Prod:
        return fmt::format("{} * {}", a, b);
      case ReduceOp::Max:
        return fmt::format("{} > {} ? {} : {}", b, a, b, a);
      default:
        return fmt::format("{} < {} ? {} : {}", b, a, b, a);
    }
  };
  const char* across = e.reduce == ReduceOp::Sum    ? "sum"
                       : e.reduce == ReduceOp::Prod ? "prod"
                       : e.reduce == ReduceOp::Max  ? "max"
                                                    : "min";
  const std::string V = r + "_V", a0 = r + "_a0", a1 = r + "_a1", a2 = r + "_a2", a3 = r + "_a3",
                    nm = r + "_nm", t = r + "_t", k = r + "_k", b0 = r + "_b", last = r + "_e";
  out += fmt::format("{}typedef {} {} __attribute__((vector_size(64)));\n", ind, acc, V);
  out += fmt::format("{}{} {} = {} + {}{{}}, {} = {}, {} = {}, {} = {};\n", ind, V, a0, id, V, a1, a0, a2, a0,
                     a3, a0);
  if (nan) out += fmt::format("{}decltype({} != {}) {}{{}};\n", ind, a0, a0, nm);
  out += fmt::format("{}const int64_t {} = {};\n{}int64_t {} = {};\n", ind, last, hi, ind, b0, lo);
  // The n·L terms from `start` into the buffer t (`masked`: the identity for terms before b0), then into
  // the accumulators.
  const auto block = [&](int n, const std::string& start, bool masked, const std::vector<std::string>& into,
                         const std::string& in) {
    std::string text = fmt::format("{}alignas(64) {} {}[{}];\n", in, acc, t, n * L);
    text += fmt::format("{}#pragma omp simd\n{}for (int {} = 0; {} < {}; ++{}) {{\n", in, in, k, k, n * L, k);
    const std::string in2 = in + "  ";
    text += fmt::format("{}const int64_t {} = {} + {};\n", in2, v, start, k);
    std::string body_pre;
    ++depth_;
    const std::string x = emit(body, body_pre, in2);
    --depth_;
    text += body_pre;
    // The masked block's terms are computed for every lane, then selected: each index of the block lies in
    // the row and was taken by an earlier block, so the reads stay in bounds. A select around the body
    // made GCC mask its loads, and masked loads of bf16 / f16 elements left the loop scalar (log_softmax
    // bf16 D=127 N=4096 562 -> 430 µs).
    text += masked ? fmt::format("{}const {} {}_x = ({}){};\n{}{}[{}] = {} >= {} ? {}_x : {};\n", in2, acc, r,
                                 acc, x, in2, t, k, v, b0, r, id)
                   : fmt::format("{}{}[{}] = {};\n", in2, t, k, x);
    text += in + "}\n";
    for (size_t i = 0; i < into.size(); ++i) {
      // A block of one vector is read back in halves (cake_lanes::load_halves); GCC stores the blocks of
      // four whole, and halves there only add loads (rms_norm in cache, D = 2048: 1.2x slower).
      const std::string at = fmt::format("{} + {}", t, static_cast<int>(i) * L);
      const std::string term = n == 1 ? fmt::format("cake_lanes::load_halves<{}>({})", V, at)
                                      : fmt::format("*(const {}*)({})", V, at);
      text += fmt::format("{}{} = {};\n", in, into[i], op(into[i], term));
      if (nan) text += fmt::format("{}{} |= {} != {};\n", in, nm, term, term);
    }
    return text;
  };
  out += fmt::format("{}for (; {} + {} <= {}; {} += {}) {{\n", ind, b0, 4 * L, last, b0, 4 * L);
  out += block(4, b0, false, {a0, a1, a2, a3}, ind + "  ") + ind + "}\n";
  out += fmt::format("{}for (; {} + {} <= {}; {} += {}) {{\n", ind, b0, L, last, b0, L);
  out += block(1, b0, false, {a0}, ind + "  ") + ind + "}\n";
  out += fmt::format("{}if ({} < {}) {{\n", ind, b0, last);
  out += block(1, fmt::format("({} - {})", last, L), true, {a1}, ind + "  ") + ind + "}\n";
  out += fmt::format("{}{} = cake_lanes::{}({});\n", ind, r, across,
                     op("(" + op(a0, a1) + ")", "(" + op(a2, a3) + ")"));
  if (nan) out += fmt::format("{}{}_nan = cake_lanes::any({});\n", ind, r, nm);
  return out;
}

// argmax / argmin over one variable in two vectorized passes: the extreme value (and whether a NaN occurs),
// then the first position holding it (or the first NaN), searched in blocks of 64 with a vector test per
// block (3-4x faster than a blocked search of 256, or one loop taking the smallest matching position). A loop
// that carries both the value and its position does not vectorize; rows under 16 elements still take that
// single plain pass, cheaper than two.
std::string CppExprEmitter::arg_reduce(const Expr& e, std::string& pre, const std::string& ind) {
  std::string r = fresh("r");
  const bool is_max = e.reduce == ReduceOp::ArgMax;
  const char* cmp = is_max ? ">" : "<";
  const te::ReduceVar& rv = e.rvars[0];
  const std::string v = var_id(s_.vars.at(static_cast<size_t>(rv.slot)));
  const auto [lo, hi] = bounds(rv, pre, ind);
  const std::string R = o_.real, in = ind + "  ", in2 = in + "  ";
  // The body (with the statements it needs) as one block at indent `at`, its value bound to x.
  const auto body_at = [&](const std::string& at) {
    std::string body_pre;
    ++depth_;
    const std::string b = emit(*e.args[0], body_pre, at + "  ");
    --depth_;
    return std::pair{body_pre, fmt::format("const {} x = {};", R, b)};
  };
  pre += fmt::format("{}{} {}_best = {}; int64_t {} = {}; int {}_nan = 0;\n", ind, R, r,
                     is_max ? "-INFINITY" : "INFINITY", r, lo, r);
  pre += fmt::format("{}if (({}) - ({}) < {}) {{\n", ind, hi, lo, kShortReduction);
  {  // one plain pass: the first extreme wins, the first NaN wins over everything after it
    const auto [bp, bx] = body_at(in);
    pre += fmt::format(
        "{}for (int64_t {} = {}; {} < {}; ++{}) {{\n{}{}  {} if ({}_best == {}_best && (x != x || x {} "
        "{}_best)) {{ {}_best = x; {} = {}; }}\n{}}}\n",
        in, v, lo, v, hi, v, bp, in, bx, r, r, cmp, r, r, r, v, in);
  }
  pre += ind + "} else {\n";
  {  // pass 1: the extreme value, exact in any type
    const auto [bp, bx] = body_at(in);
    pre += fmt::format("{}#pragma omp simd reduction({}:{}_best) reduction(|:{}_nan)\n", in,
                       is_max ? "max" : "min", r, r);
    pre += fmt::format(
        "{}for (int64_t {} = {}; {} < {}; ++{}) {{\n{}{}  {} {}_nan |= (x != x); {}_best = x {} "
        "{}_best ? x : {}_best;\n{}}}\n",
        in, v, lo, v, hi, v, bp, in, bx, r, r, cmp, r, r, in);
  }
  {  // pass 2: its first position
    const std::string hit = fmt::format("({}_nan ? (x != x) : (x == {}_best))", r, r);
    pre += fmt::format("{}for (int64_t {}_b = {}, {}_found = 0; {}_b < {} && !{}_found; {}_b += 64) {{\n", in,
                       r, lo, r, r, hi, r, r);
    pre += fmt::format("{}const int64_t {}_e = std::min<int64_t>({}_b + 64, {});\n{}int {}_hit = 0;\n", in2,
                       r, r, hi, in2, r);
    // the NaN test is chosen outside the vector loops: a select inside one costs it 3x
    const std::string tests[2] = {"(x != x)", fmt::format("(x == {}_best)", r)};
    for (int k = 0; k < 2; ++k) {
      const std::string& t = tests[k];
      const auto [bp, bx] = body_at(in2 + "  ");
      pre += k == 0 ? fmt::format("{}if ({}_nan) {{\n", in2, r) : in2 + "} else {\n";
      pre += fmt::format("{}  #pragma omp simd reduction(|:{}_hit)\n", in2, r);
      pre +=
          fmt::format("{}  for (int64_t {} = {}_b; {} < {}_e; ++{}) {{\n{}{}    {} {}_hit |= {};\n{}  }}\n",
                      in2, v, r, v, r, v, bp, in2, bx, r, t, in2);
    }
    pre += in2 + "}\n";
    const auto [bp2, bx2] = body_at(in2);
    pre += fmt::format(
        "{}if ({}_hit)\n{}  for (int64_t {} = {}_b; {} < {}_e; ++{}) {{\n{}{}    {} if ({}) {{ {} = "
        "{}; {}_found = 1; break; }}\n{}  }}\n",
        in2, r, in2, v, r, v, r, v, bp2, in2, bx2, hit, r, v, r, in2);
    pre += in + "}\n";
  }
  pre += ind + "}\n";
  return r;
}

}  // namespace cake::tracks::simd
