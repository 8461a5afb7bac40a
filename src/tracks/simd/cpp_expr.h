// TE expressions → C++ expressions for the simd track. Reductions, index computations and bounds
// checks become statements hoisted into a `pre` block placed just before the expression's use; the
// expression itself is returned as text. The caller decides how each tensor is accessed.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "contract/contract.h"

namespace cake::tracks::simd {

// Whether e's value is always an f32 value, whatever type the kernel holds it in: a float input (every
// float dtype fits in f32), a literal f32 represents, a cast to a float dtype, a selection among such
// values (negation, min, max, abs, floor, ceil, round, where, a max / min reduction), or a tensor written
// once by such an expression. (Sums, products and quotients held in the compute type are not.)
bool f32_exact(const CheckedContract& c, const te::Expr& e);
// Whether e is one +, -, * or / of two f32_exact values: rounded to f32, it gives the same bits computed
// in f32, since f64's 53 bits are at least 2 * 24 + 2 (rounding the exact result to f64 first never
// changes its f32 rounding).
bool single_f32_op(const CheckedContract& c, const te::Expr& e);

struct ExprOptions {
  std::string real = "float";     // the type of Float-typed expressions
  std::string acc = "float";      // the type of sum / prod accumulators
  bool vector_reductions = true;  // innermost sum/max/min/prod loops in vector lanes (lane_reduction)
  // > 0: every short_reducible reduction is emitted as this many terms in straight-line code, for a row
  // loop vectorized across rows (the caller has checked that each such extent lies in [1, short_rows] and
  // declared short_row_constants for it).
  int short_rows = 0;
};

// Whether e calls a transcendental function (exp, log, tanh, erf, sigmoid, sin, cos, pow): tens of vector
// operations each, where the rest of the arithmetic is one.
bool transcendental_call(const te::Expr& e);

// Whether reduction e has the straight-line form of ExprOptions::short_rows: one variable over a size
// symbol (no bounds), a sum, max, min, argmax or argmin, of a body with no reduction or padded read.
bool short_reducible(const te::Expr& e);
// The loop-invariant constants of that form for reductions over size symbol `size` (its C name), up to n
// terms: term k reads index k, or the row's last index past its end (sr<k>_`size`), and a sum adds it under
// the mask sm<k>_`size` (all ones within the row, 0 past it).
std::string short_row_constants(const std::string& size, int n, const std::string& indent);

class CppExprEmitter {
 public:
  // access(tensor id, index expressions, stored) → an expression reading that element (the indices are in
  // range): as a compute-type value, or with `stored` as it is held (its storage type, for a copy of bits).
  using Access = std::function<std::string(int tensor, const std::vector<std::string>& index, bool stored)>;

  CppExprEmitter(const CheckedContract& c, const te::Stmt& s, ExprOptions o, Access access)
      : c_(c), s_(s), o_(std::move(o)), access_(std::move(access)) {}

  // Emits e; statements it needs first are appended to pre (each line prefixed with indent).
  std::string emit(const te::Expr& e, std::string& pre, const std::string& indent);
  // Emits a read as the element is stored (no conversion to the compute type), for a statement that copies
  // it: its bits move. A padded read only where assume_in_range has proven it in range.
  std::string emit_stored(const te::Expr& read, std::string& pre, const std::string& indent);
  // Loop-invariant reads and calls: a read or a function call outside any reduction that does not use
  // variable slot `slot` is emitted once into *hoist (placed before the loop over that variable) instead of
  // into pre. (GCC does not vectorize a loop that re-reads a scalar its stores might alias, nor hoist an
  // inlined function.)
  void hoist_invariant_of(int slot, std::string* hoist, std::string indent) {
    hoist_slot_ = slot;
    hoist_ = hoist;
    hoist_indent_ = std::move(indent);
  }
  // Emits `text` in place of the sub-expression e (the contraction skeleton's accumulated sum).
  void substitute(const te::Expr* e, std::string text) { subst_.emplace_back(e, std::move(text)); }
  // Padded reads take every index that uses variable slot `slot` as in range (no bounds test, no clamp):
  // for the interior of a stencil row, where the caller has proven it.
  void assume_in_range_along(int slot) { in_range_slot_ = slot; }
  // Padded read `read` takes every index as in range: the caller has tested all of them (an implicit
  // GEMM's window, per run of columns, its row in range and its columns in the interior).
  void assume_in_range(const te::Expr* read) { all_in_ = read; }
  // Padded reads whose range along variable `slot` is known over the loop being emitted: in (true: their
  // indices that use slot need no test) or out (false: the read is its pad value). For a loop split into
  // regions where each read is wholly in or out of range.
  void known_range_along(int slot, std::map<const te::Expr*, bool> in) {
    region_slot_ = slot;
    region_in_ = std::move(in);
  }
  // The C++ type of an expression of this TE type.
  std::string type_of(te::Type t) const;

 private:
  std::string fresh(const char* stem) { return stem + std::to_string(counter_++); }
  std::string read(const te::Expr& e, std::string& pre, const std::string& indent);
  std::string reduce(const te::Expr& e, std::string& pre, const std::string& indent);
  std::string arg_reduce(const te::Expr& e, std::string& pre, const std::string& indent);
  std::string lane_reduction(const te::Expr& e, const std::string& r, const std::string& acc, bool ints,
                             const te::Expr& body, const std::string& identity, const std::string& indent);
  // A reduction variable's [lo, hi) as C expressions (any statements they need go to pre).
  std::pair<std::string, std::string> bounds(const te::ReduceVar& rv, std::string& pre,
                                             const std::string& indent);
  std::string call(const te::Expr& e, std::string& pre, const std::string& indent);
  std::string call_text(const te::Expr& e, std::string& pre, const std::string& indent);
  bool hoistable(const te::Expr& e) const;
  std::string cast(const te::Expr& e, std::string& pre, const std::string& indent);

  const CheckedContract& c_;
  const te::Stmt& s_;
  ExprOptions o_;
  Access access_;
  int counter_ = 0;
  std::vector<std::pair<const te::Expr*, std::string>> subst_;
  int depth_ = 0;                     // reductions entered
  const te::Expr* stored_ = nullptr;  // the read emit_stored asked for
  int hoist_slot_ = -1;
  int in_range_slot_ = -1;
  const te::Expr* all_in_ = nullptr;
  int region_slot_ = -1;
  std::map<const te::Expr*, bool> region_in_;
  std::string* hoist_ = nullptr;
  std::string hoist_indent_;
};

}  // namespace cake::tracks::simd
