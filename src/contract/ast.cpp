// Spellings, builtin tables and deep copies of TE trees.
#include "contract/ast.h"

#include <array>
#include <utility>

namespace cake::te {
namespace {

struct FnEntry {
  Fn fn;
  std::string_view name;
  int arity;
};
constexpr std::array<FnEntry, 17> kFns = {{
    {Fn::Where, "where", 3},
    {Fn::Min, "min", 2},
    {Fn::Max, "max", 2},
    {Fn::Abs, "abs", 1},
    {Fn::Exp, "exp", 1},
    {Fn::Log, "log", 1},
    {Fn::Sqrt, "sqrt", 1},
    {Fn::Rsqrt, "rsqrt", 1},
    {Fn::Tanh, "tanh", 1},
    {Fn::Erf, "erf", 1},
    {Fn::Sigmoid, "sigmoid", 1},
    {Fn::Sin, "sin", 1},
    {Fn::Cos, "cos", 1},
    {Fn::Pow, "pow", 2},
    {Fn::Floor, "floor", 1},
    {Fn::Ceil, "ceil", 1},
    {Fn::Round, "round", 1},
}};

constexpr std::array<std::pair<ReduceOp, std::string_view>, 6> kReduces = {{
    {ReduceOp::Sum, "sum"},
    {ReduceOp::Max, "max"},
    {ReduceOp::Min, "min"},
    {ReduceOp::Prod, "prod"},
    {ReduceOp::ArgMax, "argmax"},
    {ReduceOp::ArgMin, "argmin"},
}};

}  // namespace

std::string_view op_spelling(Op op) {
  switch (op) {
    case Op::Neg:
      return "-";
    case Op::Not:
      return "!";
    case Op::Add:
      return "+";
    case Op::Sub:
      return "-";
    case Op::Mul:
      return "*";
    case Op::Div:
      return "/";
    case Op::Mod:
      return "%";
    case Op::Lt:
      return "<";
    case Op::Le:
      return "<=";
    case Op::Gt:
      return ">";
    case Op::Ge:
      return ">=";
    case Op::Eq:
      return "==";
    case Op::Ne:
      return "!=";
    case Op::And:
      return "&&";
    case Op::Or:
      return "||";
  }
  return "?";
}

std::string_view fn_name(Fn fn) {
  for (const auto& e : kFns)
    if (e.fn == fn) return e.name;
  return "?";
}

int fn_arity(Fn fn) {
  for (const auto& e : kFns)
    if (e.fn == fn) return e.arity;
  return 0;
}

std::optional<Fn> parse_fn(std::string_view name) {
  for (const auto& e : kFns)
    if (e.name == name) return e.fn;
  return std::nullopt;
}

std::string_view reduce_name(ReduceOp r) {
  for (const auto& [op, name] : kReduces)
    if (op == r) return name;
  return "?";
}

std::optional<ReduceOp> parse_reduce(std::string_view name) {
  for (const auto& [op, n] : kReduces)
    if (n == name) return op;
  return std::nullopt;
}

ExprPtr Expr::clone() const {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->pos = pos;
  e->number = number;
  e->int_literal = int_literal;
  e->name = name;
  e->op = op;
  e->fn = fn;
  e->reduce = reduce;
  e->cast_to = cast_to;
  e->padded = padded;
  if (pad_value) e->pad_value = pad_value->clone();
  for (const auto& a : args) e->args.push_back(a->clone());
  for (const auto& v : rvars) {
    ReduceVar c;
    c.name = v.name;
    c.pos = v.pos;
    c.slot = v.slot;
    if (v.lo) c.lo = v.lo->clone();
    if (v.hi) c.hi = v.hi->clone();
    if (v.extent) c.extent = v.extent->clone();
    e->rvars.push_back(std::move(c));
  }
  e->slot = slot;
  e->type = type;
  return e;
}

Stmt Stmt::clone() const {
  Stmt s;
  s.target = target;
  s.pos = pos;
  for (const auto& i : index) s.index.push_back(i->clone());
  s.accumulate = accumulate;
  if (rhs) s.rhs = rhs->clone();
  s.tensor = tensor;
  s.vars = vars;
  for (const auto& v : var_extent) s.var_extent.push_back(v ? v->clone() : nullptr);
  s.n_domain = n_domain;
  return s;
}

ExprPtr make_number(double v, bool is_int, Pos pos) {
  auto e = std::make_unique<Expr>();
  e->kind = ExprKind::Number;
  e->number = v;
  e->int_literal = is_int;
  e->type = is_int ? Type::Int : Type::Float;
  e->pos = pos;
  return e;
}

ExprPtr make_size(const std::string& name, int slot, Pos pos) {
  auto e = std::make_unique<Expr>();
  e->kind = ExprKind::Size;
  e->name = name;
  e->slot = slot;
  e->type = Type::Int;
  e->pos = pos;
  return e;
}

ExprPtr make_binary(Op op, ExprPtr a, ExprPtr b, Pos pos) {
  auto e = std::make_unique<Expr>();
  e->kind = ExprKind::Binary;
  e->op = op;
  e->pos = pos;
  e->args.push_back(std::move(a));
  e->args.push_back(std::move(b));
  return e;
}

bool any_of(const Expr& e, const std::function<bool(const Expr&)>& pred) {
  if (pred(e)) return true;
  for (const ExprPtr& a : e.args)
    if (a && any_of(*a, pred)) return true;
  if (e.pad_value && any_of(*e.pad_value, pred)) return true;
  for (const ReduceVar& r : e.rvars)
    if ((r.lo && any_of(*r.lo, pred)) || (r.hi && any_of(*r.hi, pred))) return true;
  return false;
}

bool contains(const Expr& e, ExprKind kind) {
  return any_of(e, [kind](const Expr& x) { return x.kind == kind; });
}

bool uses_var(const Expr& e, int slot) {
  return any_of(e, [slot](const Expr& x) { return x.kind == ExprKind::Var && x.slot == slot; });
}

const Expr* only_reduction(const Expr& e) {
  const Expr* red = nullptr;
  int reductions = 0;
  any_of(e, [&](const Expr& x) {
    if (x.kind == ExprKind::Reduce) red = &x, ++reductions;
    return false;
  });
  return reductions == 1 ? red : nullptr;
}

namespace {
// Whether e rises by exactly one with variable slot j: j, j ± o or o + j with o free of j.
bool steps_with(const Expr& e, int j) {
  if (e.kind == ExprKind::Var) return e.slot == j;
  if (e.kind != ExprKind::Binary || (e.op != Op::Add && e.op != Op::Sub)) return false;
  const Expr &a = *e.args[0], &b = *e.args[1];
  return (steps_with(a, j) && !uses_var(b, j)) || (e.op == Op::Add && steps_with(b, j) && !uses_var(a, j));
}
}  // namespace

const Expr* prefix_sum(const Stmt& s) {
  if (s.accumulate || s.n_domain < 1 || !s.rhs) return nullptr;
  const int j = s.n_domain - 1;
  const Expr* red = only_reduction(*s.rhs);
  if (!red || red->reduce != ReduceOp::Sum || red->rvars.size() != 1) return nullptr;
  const ReduceVar& rv = red->rvars[0];
  if (!rv.lo || uses_var(*rv.lo, j) || !steps_with(*rv.hi, j) || uses_var(*red->args[0], j)) return nullptr;
  return red;
}

}  // namespace cake::te
