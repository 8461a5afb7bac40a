// The tensor-expression (TE) language's syntax tree (DESIGN §3). The parser builds it with names
// unresolved; the checker resolves every name in place (index variable, size symbol, param,
// tensor) and annotates scalar types, so the reference interpreter and the tracks walk one tree.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace cake::te {

// A position in the contract file (1-based; 0 = unknown).
struct Pos {
  int line = 0;
  int col = 0;
};

enum class ExprKind {
  Number,  // literal (also inf / -inf)
  Name,    // unresolved identifier (parser output only)
  Var,     // index variable (slot in its statement)
  Size,    // size symbol (slot in CheckedContract::sizes)
  Param,   // scalar parameter (slot in Contract::params)
  Read,    // tensor read  t[i, j], t?[...], t?(v)[...]; args = indices
  Unary,   // - !
  Binary,  // + - * / % < <= > >= == != && ||
  Call,    // builtin function; args = arguments
  Cast,    // cast<T>(e); args = {e}
  Reduce,  // sum|max|min|prod|argmax|argmin(vars: body); args = {body}
};

enum class Op { Neg, Not, Add, Sub, Mul, Div, Mod, Lt, Le, Gt, Ge, Eq, Ne, And, Or };

enum class Fn {
  Where,
  Min,
  Max,
  Abs,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Tanh,
  Erf,
  Sigmoid,
  Sin,
  Cos,
  Pow,
  Floor,
  Ceil,
  Round
};

enum class ReduceOp { Sum, Max, Min, Prod, ArgMax, ArgMin };

// Scalar type of an expression: sizes, index variables, integer tensors and literals without a
// fraction are Int; comparisons and logic are Bool; everything else is Float.
enum class Type { Int, Bool, Float };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// One variable of a reduction: `k` (range inferred from how k indexes tensors), or `k in lo..hi`.
struct ReduceVar {
  std::string name;
  ExprPtr lo, hi;  // both null when inferred
  Pos pos;
  int slot = -1;   // checker: variable slot in the statement
  ExprPtr extent;  // checker: inferred extent (a size expression) when lo/hi are null
};

struct Expr {
  ExprKind kind = ExprKind::Number;
  Pos pos;
  double number = 0;         // Number
  bool int_literal = false;  // Number written without fraction/exponent
  std::string name;          // Name/Var/Size/Param/Read(tensor)/Call(function)
  Op op = Op::Add;           // Unary / Binary
  Fn fn = Fn::Where;         // Call
  ReduceOp reduce = ReduceOp::Sum;
  DType cast_to = DType::f32;  // Cast
  bool padded = false;         // Read: t?[...]
  ExprPtr pad_value;           // Read: t?(v)[...] (null: zero)
  std::vector<ExprPtr> args;
  std::vector<ReduceVar> rvars;  // Reduce

  // Filled by the checker.
  int slot = -1;  // Var: variable slot; Size: size slot; Param: param slot; Read: tensor id
  Type type = Type::Float;

  ExprPtr clone() const;
};

// name[idx...] = rhs   or   name[idx...] += rhs
struct Stmt {
  std::string target;
  Pos pos;                     // of the target name
  std::vector<ExprPtr> index;  // plain variables for '=', any integer expressions for '+='
  bool accumulate = false;
  ExprPtr rhs;

  // Filled by the checker.
  int tensor = -1;                  // target tensor id
  std::vector<std::string> vars;    // variable names by slot
  std::vector<ExprPtr> var_extent;  // extent (size expression) per slot; null for bounded rvars
  int n_domain = 0;                 // slots [0, n_domain) are the statement's iteration domain

  Stmt clone() const;
};

std::string_view op_spelling(Op op);
std::string_view fn_name(Fn fn);
std::string_view reduce_name(ReduceOp r);
std::optional<Fn> parse_fn(std::string_view name);
std::optional<ReduceOp> parse_reduce(std::string_view name);
int fn_arity(Fn fn);

// True when pred holds for e or any sub-expression (arguments, pad values, reduction bounds).
bool any_of(const Expr& e, const std::function<bool(const Expr&)>& pred);
// True when e or any sub-expression is of this kind (a Read: data-dependent; a Reduce; a Var).
bool contains(const Expr& e, ExprKind kind);
// True when e uses the variable in slot `slot`.
bool uses_var(const Expr& e, int slot);
// The one reduction in e (nested ones counted too); null when e has none or more than one.
const Expr* only_reduction(const Expr& e);
// The one sum of checked statement s's right-hand side when it is a prefix sum along s's innermost domain
// axis j: sum(k in lo..hi: body) with lo and body free of j and hi rising by one with j (cumsum's
// sum(k in 0..j + 1: x[n, k])); null otherwise. Each output then needs only the terms past its
// predecessor's: one running accumulator along j, O(extent of j) terms instead of O(extent²).
const Expr* prefix_sum(const Stmt& s);

// Helpers to build trees (used by the checker, tests and tracks).
ExprPtr make_number(double v, bool is_int, Pos pos = {});
ExprPtr make_size(const std::string& name, int slot, Pos pos = {});
ExprPtr make_binary(Op op, ExprPtr a, ExprPtr b, Pos pos = {});

}  // namespace cake::te
