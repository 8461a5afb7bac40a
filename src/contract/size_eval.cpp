// Integer evaluation of size expressions (floor division), size environments per case, and
// tensor shapes; the contract's lookups (dtypes, tensors, size slots).
#include <algorithm>
#include <cmath>

#include "contract/contract.h"
#include "core/error.h"

namespace cake {

namespace {
int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
}  // namespace

int64_t eval_size_expr(const te::Expr& e, const std::vector<int64_t>& sizes) {
  using te::ExprKind;
  using te::Op;
  switch (e.kind) {
    case ExprKind::Number: return static_cast<int64_t>(e.number);
    case ExprKind::Size:
      if (e.slot < 0 || e.slot >= static_cast<int>(sizes.size())) throw Error("size '" + e.name + "' is unresolved");
      return sizes[static_cast<size_t>(e.slot)];
    case ExprKind::Unary: {
      int64_t a = eval_size_expr(*e.args[0], sizes);
      return e.op == Op::Neg ? -a : (a == 0);
    }
    case ExprKind::Binary: {
      int64_t a = eval_size_expr(*e.args[0], sizes);
      if (e.op == Op::And && !a) return 0;
      if (e.op == Op::Or && a) return 1;
      int64_t b = eval_size_expr(*e.args[1], sizes);
      switch (e.op) {
        case Op::Add: return a + b;
        case Op::Sub: return a - b;
        case Op::Mul: return a * b;
        case Op::Div:
          if (b == 0) throw Error("division by zero in size expression");
          return floordiv(a, b);
        case Op::Mod:
          if (b == 0) throw Error("division by zero in size expression");
          return a - floordiv(a, b) * b;
        case Op::Lt: return a < b;
        case Op::Le: return a <= b;
        case Op::Gt: return a > b;
        case Op::Ge: return a >= b;
        case Op::Eq: return a == b;
        case Op::Ne: return a != b;
        case Op::And: case Op::Or: return b != 0;
        default: break;
      }
      break;
    }
    case ExprKind::Call: {
      int64_t a = eval_size_expr(*e.args[0], sizes);
      int64_t b = eval_size_expr(*e.args[1], sizes);
      if (e.fn == te::Fn::Min) return std::min(a, b);
      if (e.fn == te::Fn::Max) return std::max(a, b);
      break;
    }
    default: break;
  }
  throw Error("not a size expression");
}

std::vector<int64_t> evaluate_sizes(const CheckedContract& c, const std::map<std::string, int64_t>& free) {
  std::vector<int64_t> v(c.sizes.size(), 0);
  for (size_t i = 0; i < c.sizes.size(); ++i) {
    const SizeInfo& s = c.sizes[i];
    if (s.free) {
      auto it = free.find(s.name);
      if (it == free.end()) throw Error("no value for size symbol '" + s.name + "'");
      v[i] = it->second;
    } else {
      v[i] = eval_size_expr(*s.expr, v);
    }
  }
  return v;
}

std::vector<int64_t> tensor_shape(const CheckedContract& c, int tensor, const std::vector<int64_t>& sizes) {
  std::vector<int64_t> s;
  for (const auto& d : c.tensors[static_cast<size_t>(tensor)].dims) s.push_back(eval_size_expr(*d, sizes));
  return s;
}

bool Contract::has_dtype(DType d) const { return std::find(dtypes.begin(), dtypes.end(), d) != dtypes.end(); }

const TensorInfo* CheckedContract::find_tensor(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

int CheckedContract::size_slot(const std::string& name) const {
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i].name == name) return static_cast<int>(i);
  return -1;
}

std::vector<int> CheckedContract::input_ids() const {
  std::vector<int> r;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].role == TensorRole::Input) r.push_back(static_cast<int>(i));
  return r;
}

std::vector<int> CheckedContract::output_ids() const {
  std::vector<int> r;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].role == TensorRole::Output) r.push_back(static_cast<int>(i));
  return r;
}

}  // namespace cake
