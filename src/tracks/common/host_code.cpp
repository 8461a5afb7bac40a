// The ABI prologue, size expressions, identifiers and support headers shared by the CPU-hosted tracks.
#include "tracks/common/host_code.h"

#include <fmt/format.h>

#include "core/error.h"

namespace cake::embedded {
extern const char* const kernel_abi_h;
extern const char* const cake_prelude_h;
}  // namespace cake::embedded

namespace cake::tracks {

std::string size_id(const std::string& name) {
  return "s_" + name;
}
std::string tensor_id(const std::string& name) {
  return "t_" + name;
}
std::string var_id(const std::string& name) {
  return "v_" + name;
}
std::string param_id(const std::string& name) {
  return "p_" + name;
}

std::string storage_type(DType t) {
  switch (t) {
    case DType::f32:
      return "float";
    case DType::f16:
    case DType::bf16:
      return "uint16_t";
    case DType::i32:
      return "int32_t";
    case DType::i64:
      return "int64_t";
    case DType::i8:
      return "int8_t";
    case DType::boolean:
      return "bool";
  }
  return "float";
}

std::string emit_size_expr(const te::Expr& e) {
  static const SizeSpelling c{[](int64_t v) { return fmt::format("INT64_C({})", v); },
                              [](const std::string& n) { return size_id(n); }};
  return emit_size_expr(e, c);
}

std::string emit_size_expr(const te::Expr& e, const SizeSpelling& sp) {
  using te::ExprKind;
  using te::Op;
  auto sub = [&](size_t i) { return emit_size_expr(*e.args[i], sp); };
  switch (e.kind) {
    case ExprKind::Number:
      return sp.number(static_cast<int64_t>(e.number));
    case ExprKind::Size:
      return sp.size(e.name);
    case ExprKind::Unary:
      if (e.op == Op::Neg) return "(-" + sub(0) + ")";
      break;
    case ExprKind::Binary:
      switch (e.op) {
        case Op::Add:
          return fmt::format("({} + {})", sub(0), sub(1));
        case Op::Sub:
          return fmt::format("({} - {})", sub(0), sub(1));
        case Op::Mul:
          return fmt::format("({} * {})", sub(0), sub(1));
        case Op::Div:
          return fmt::format("cake_floordiv({}, {})", sub(0), sub(1));
        case Op::Mod:
          return fmt::format("cake_floormod({}, {})", sub(0), sub(1));
        default:
          break;
      }
      break;
    case ExprKind::Call:
      if (e.fn == te::Fn::Min) return fmt::format("{}({}, {})", sp.min, sub(0), sub(1));
      if (e.fn == te::Fn::Max) return fmt::format("{}({}, {})", sp.max, sub(0), sub(1));
      break;
    default:
      break;
  }
  throw Error(
      fmt::format("line {}:{}: this size expression cannot be lowered (only + - * / % min max over sizes)",
                  e.pos.line, e.pos.col));
}

std::string op_dtype_expr(const CheckedContract& c) {
  for (const TensorInfo& t : c.tensors) {
    if (t.role == TensorRole::Intermediate || t.fixed_dtype) continue;
    return fmt::format("{}[{}].dtype", t.role == TensorRole::Input ? "in" : "out", t.index);
  }
  return fmt::format("{}", static_cast<int>(c.contract.dtypes.front()));
}

std::string emit_abi_prologue(const CheckedContract& c) {
  const Contract& k = c.contract;
  std::string s;
  int n_free = 0;
  for (const SizeInfo& z : c.sizes) n_free += z.free ? 1 : 0;
  const size_t n_params = k.params.size();
  s += fmt::format(
      "  if (n_in != {} || n_out != {} || n_params < {} || !in || !out || (n_params > 0 && !params))\n"
      "    return CAKE_ERR_ARGS;\n",
      k.inputs.size(), k.outputs.size(), n_params + static_cast<size_t>(n_free));
  for (size_t i = 0; i < n_params; ++i)
    s += fmt::format("  const double {} = params[{}];\n", param_id(k.params[i].name), i);
  size_t slot = n_params;
  for (const SizeInfo& z : c.sizes) {
    if (z.free) {
      s += fmt::format("  const int64_t {} = (int64_t)params[{}];\n", size_id(z.name), slot++);
    } else {
      s += fmt::format("  const int64_t {} = {};\n", size_id(z.name), emit_size_expr(*z.expr));
    }
  }
  s += fmt::format("  const int32_t op_dtype = {};\n", op_dtype_expr(c));
  std::string allowed;
  for (DType d : k.dtypes)
    allowed += fmt::format("{}op_dtype != {}", allowed.empty() ? "" : " && ", static_cast<int>(d));
  s += fmt::format("  if ({}) return CAKE_ERR_DTYPE;\n", allowed);
  for (const TensorInfo& t : c.tensors) {
    if (t.role == TensorRole::Intermediate) continue;
    std::string dims;
    for (const te::ExprPtr& d : t.dims) dims += emit_size_expr(*d) + ", ";
    const std::string dtype =
        t.fixed_dtype ? fmt::format("{}", static_cast<int>(*t.fixed_dtype)) : "op_dtype";
    s += fmt::format(
        "  {{ /* {} */\n    const int64_t shape[] = {{{}0}};\n"
        "    const int e = cake_check_tensor(&{}[{}], {}, {}, shape);\n    if (e) return e;\n  }}\n",
        t.name, dims, t.role == TensorRole::Input ? "in" : "out", t.index, dtype, t.dims.size());
  }
  return s;
}

std::vector<SourceFile> prelude_files() {
  return {{"cake_kernel_abi.h", embedded::kernel_abi_h}, {"cake_prelude.h", embedded::cake_prelude_h}};
}

SourceFile exports_map() {
  return {"exports.map", "{\n  global: cake_run;\n  local: *;\n};\n"};
}

}  // namespace cake::tracks
