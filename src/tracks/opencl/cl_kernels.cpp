// OpenCL C generation for the opencl track: kernel.cl with one kernel per TE statement (SIMT: one
// work-item per output element, or per owned column for '+=' scatters), reductions as loops inside the
// work-item, and an optional work-group variant per reduction statement (one work-group per output
// element, partial results combined by a tree reduction in local memory). One source serves every I/O
// dtype: the host compiles it once per dtype with -DCAKE_IO=<dtype code>.
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>

#include "contract/printer.h"
#include "core/error.h"
#include "tracks/common/host_code.h"
#include "tracks/opencl/opencl_track.h"

namespace cake::tracks::opencl {
namespace {

using te::Expr;
using te::ExprKind;
using te::Op;
using te::Type;

// A generated C value: its code and TE type; `acc` marks floats held in acc_t (else float).
struct Val {
  std::string s;
  Type t = Type::Float;
  bool acc = false;
};

struct Block {
  std::string text;
  int indent = 1;
  void line(const std::string& l) { text += std::string(static_cast<size_t>(indent) * 2, ' ') + l + "\n"; }
};

std::string float_literal(double v) {
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "(-INFINITY)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

// The OpenCL C pointer element type of a tensor's storage (io_t: the operator dtype of the program).
std::string storage_cl(const TensorInfo& t) {
  if (!t.fixed_dtype) return "io_t";
  switch (*t.fixed_dtype) {
    case DType::f32:
      return "float";
    case DType::f16:
      return "half";
    case DType::bf16:
      return "ushort";
    case DType::i32:
      return "int";
    case DType::i64:
      return "long";
    case DType::i8:
      return "char";
    case DType::boolean:
      return "uchar";
  }
  return "float";
}

class Emitter {
 public:
  Emitter(const CheckedContract& c, const Plan& p, const te::Stmt& s, bool wg, int group)
      : c_(c), p_(p), s_(s), wg_(wg), group_(group) {}

  std::string fresh(const char* prefix) { return std::string(prefix) + std::to_string(n_++); }

  static std::string ftype(bool acc) { return acc ? "acc_t" : "float"; }
  static std::string to_f(const Val& v, bool acc) {
    if (v.t == Type::Float && v.acc == acc) return v.s;
    return "((" + ftype(acc) + ")(" + v.s + "))";
  }
  static std::string to_i(const Val& v) {
    if (v.t == Type::Int) return v.s;
    return "((long)(" + v.s + "))";
  }
  static std::string to_b(const Val& v) {
    if (v.t == Type::Bool) return v.s;
    return "((" + v.s + ") != 0)";
  }
  Val as(const Val& v, Type t, bool acc) {
    if (t == Type::Float) return {to_f(v, acc), Type::Float, acc};
    if (t == Type::Int) return {to_i(v), Type::Int};
    return {to_b(v), Type::Bool};
  }

  std::string var(int slot) const { return "v_" + s_.vars[static_cast<size_t>(slot)]; }

  // An integer size expression (sizes, literals, arithmetic) with no block statements.
  std::string size_code(const Expr& e) {
    Block dummy;
    Val v = emit(e, dummy, false);
    if (!dummy.text.empty()) throw Error("opencl: a size expression reads a tensor");
    return to_i(v);
  }

  bool flat_ok = false;  // cake_flat is the row-major offset of the statement's domain point

  // Whether read e is t[v0, v1, ...] over exactly the statement's domain (its offset is cake_flat).
  bool reads_domain(const Expr& e) const {
    if (!flat_ok || e.padded || static_cast<int>(e.args.size()) != s_.n_domain) return false;
    const TensorInfo& t = c_.tensors[static_cast<size_t>(e.slot)];
    for (size_t a = 0; a < e.args.size(); ++a) {
      const Expr& x = *e.args[a];
      if (x.kind != ExprKind::Var || x.slot != static_cast<int>(a)) return false;
      if (te::print_expr(*t.dims[a]) != te::print_expr(*s_.var_extent[a])) return false;
    }
    return true;
  }

  // Offset of a row-major element from per-axis index codes.
  std::string offset(const TensorInfo& t, const std::vector<std::string>& ix) {
    if (ix.empty()) return "0";
    std::string off = ix[0];
    for (size_t a = 1; a < ix.size(); ++a) {
      off.insert(0, "(");
      off += ") * ";
      off += size_code(*t.dims[a]);
      off += " + ";
      off += ix[a];
    }
    return off;
  }

  Val load(int id, const std::string& off) {
    const TensorInfo& t = c_.tensors[static_cast<size_t>(id)];
    const TensorPlan& tp = p_.tensors[static_cast<size_t>(id)];
    if (tp.scratch) {
      std::string code = "w_" + t.name + "[" + off + "]";
      if (tp.scratch_type == "long") return {code, Type::Int};
      return {code, Type::Float, tp.scratch_type == "acc_t"};
    }
    const std::string p = "t_" + t.name;
    if (!t.fixed_dtype) return {"IO_LOAD(" + p + ", " + off + ")", Type::Float};
    switch (*t.fixed_dtype) {
      case DType::f32:
        return {p + "[" + off + "]", Type::Float};
      case DType::f16:
        return {"vload_half(" + off + ", " + p + ")", Type::Float};
      case DType::bf16:
        return {"cake_bf16_load(" + p + "[" + off + "])", Type::Float};
      default:
        return {"((long)" + p + "[" + off + "])", Type::Int};
    }
  }

  Val emit(const Expr& e, Block& b, bool acc) {
    switch (e.kind) {
      case ExprKind::Number:
        if (e.type == Type::Int) {
          char buf[32];
          std::snprintf(buf, sizeof buf, "((long)%lld)", static_cast<long long>(e.number));
          return {buf, Type::Int};
        }
        if (acc) return {"((acc_t)" + float_literal(e.number) + ")", Type::Float, true};
        return {std::isfinite(e.number) ? float_literal(e.number) + "f" : float_literal(e.number),
                Type::Float};
      case ExprKind::Var:
        return {var(e.slot), Type::Int};
      case ExprKind::Size:
        return {"s_" + c_.sizes[static_cast<size_t>(e.slot)].name, Type::Int};
      case ExprKind::Param: {
        Val v{"p_" + c_.contract.params[static_cast<size_t>(e.slot)].name, Type::Float};
        return {to_f(v, acc), Type::Float, acc};
      }
      case ExprKind::Read:
        return read(e, b, acc);
      case ExprKind::Unary: {
        Val a = emit(*e.args[0], b, acc);
        if (e.op == Op::Not) return {"(!" + to_b(a) + ")", Type::Bool};
        Val x = as(a, e.type, acc);
        return {"(-" + x.s + ")", x.t, x.acc};
      }
      case ExprKind::Binary:
        return binary(e, b, acc);
      case ExprKind::Call:
        return call(e, b, acc);
      case ExprKind::Cast:
        return cast(e, b, acc);
      case ExprKind::Reduce:
        return (wg_ && depth_ == 0) ? reduce_wg(e, b) : reduce_serial(e, b);
      default:
        throw Error("opencl: unresolved expression in statement '" + s_.target + "'");
    }
  }

  Val binary(const Expr& e, Block& b, bool acc) {
    Val x = emit(*e.args[0], b, acc);
    Val y = emit(*e.args[1], b, acc);
    const bool floats = e.args[0]->type == Type::Float || e.args[1]->type == Type::Float;
    auto ops = [&](Type t) -> std::pair<std::string, std::string> {
      Val a = as(x, t, acc), c = as(y, t, acc);
      return {a.s, c.s};
    };
    switch (e.op) {
      case Op::Add:
      case Op::Sub:
      case Op::Mul: {
        auto [a, c] = ops(e.type);
        const char* sym = e.op == Op::Add ? " + " : e.op == Op::Sub ? " - " : " * ";
        return {"(" + a + sym + c + ")", e.type, e.type == Type::Float && acc};
      }
      case Op::Div:
      case Op::Mod: {
        if (!floats) {
          auto [a, c] = ops(Type::Int);
          return {std::string(e.op == Op::Div ? "cake_floordiv(" : "cake_floormod(") + a + ", " + c + ")",
                  Type::Int};
        }
        auto [a, c] = ops(Type::Float);
        if (e.op == Op::Div) return {"(" + a + " / " + c + ")", Type::Float, acc};
        return {"fmod(" + a + ", " + c + ")", Type::Float, acc};
      }
      case Op::Lt:
      case Op::Le:
      case Op::Gt:
      case Op::Ge:
      case Op::Eq:
      case Op::Ne: {
        auto [a, c] = ops(floats ? Type::Float : Type::Int);
        std::string sym = std::string(te::op_spelling(e.op));
        return {"(" + a + " " + sym + " " + c + ")", Type::Bool};
      }
      case Op::And:
        return {"(" + to_b(x) + " && " + to_b(y) + ")", Type::Bool};
      case Op::Or:
        return {"(" + to_b(x) + " || " + to_b(y) + ")", Type::Bool};
      default:
        throw Error("opencl: unexpected binary operator");
    }
  }

  Val call(const Expr& e, Block& b, bool acc) {
    using te::Fn;
    std::vector<Val> a;
    for (const auto& x : e.args) a.push_back(emit(*x, b, acc));
    const bool fl = e.type == Type::Float;
    auto f1 = [&](const std::string& fn) { return Val{fn + "(" + to_f(a[0], acc) + ")", Type::Float, acc}; };
    switch (e.fn) {
      case Fn::Where: {
        Val x = as(a[1], e.type, acc), y = as(a[2], e.type, acc);
        return {"(" + to_b(a[0]) + " ? " + x.s + " : " + y.s + ")", e.type, fl && acc};
      }
      case Fn::Min:
      case Fn::Max: {
        const char* fn = e.fn == Fn::Min ? "min" : "max";
        if (fl) {
          return {std::string("cake_f") + fn + "(" + to_f(a[0], acc) + ", " + to_f(a[1], acc) + ")",
                  Type::Float, acc};
        }
        return {std::string(fn) + "(" + to_i(a[0]) + ", " + to_i(a[1]) + ")", Type::Int};
      }
      case Fn::Abs:
        if (fl) return f1("fabs");
        return {"cake_iabs(" + to_i(a[0]) + ")", Type::Int};
      case Fn::Exp:
        return f1("exp");
      case Fn::Log:
        return f1("log");
      case Fn::Sqrt:
        return f1("sqrt");
      case Fn::Rsqrt:
        return f1("rsqrt");
      case Fn::Tanh:
        return f1("tanh");
      case Fn::Erf:
        return f1("cake_erf");
      case Fn::Sigmoid:
        return f1("cake_sigmoid");
      case Fn::Sin:
        return f1("sin");
      case Fn::Cos:
        return f1("cos");
      case Fn::Pow:
        return {"pow(" + to_f(a[0], acc) + ", " + to_f(a[1], acc) + ")", Type::Float, acc};
      case Fn::Floor:
      case Fn::Ceil:
      case Fn::Round:
        if (!fl) return {to_i(a[0]), Type::Int};
        return f1(e.fn == Fn::Floor ? "floor" : e.fn == Fn::Ceil ? "ceil" : "rint");
    }
    throw Error("opencl: unexpected function");
  }

  Val cast(const Expr& e, Block& b, bool acc) {
    Val x = emit(*e.args[0], b, acc);
    const bool from_float = x.t == Type::Float;
    switch (e.cast_to) {
      case DType::f32:
        return {to_f({"(float)" + to_f(x, false), Type::Float}, acc), Type::Float, acc};
      case DType::f16:
        return {to_f({"cake_round_f16(" + to_f(x, false) + ")", Type::Float}, acc), Type::Float, acc};
      case DType::bf16:
        return {to_f({"cake_round_bf16(" + to_f(x, false) + ")", Type::Float}, acc), Type::Float, acc};
      case DType::boolean:
        return {from_float ? "(" + x.s + " != 0)" : to_b(x), Type::Bool};
      case DType::i8:
        return {"((long)convert_char_sat" + std::string(from_float ? "_rtz(" : "(") + x.s + "))", Type::Int};
      case DType::i32:
        return {"((long)convert_int_sat" + std::string(from_float ? "_rtz(" : "(") + x.s + "))", Type::Int};
      case DType::i64:
        if (!from_float) return {to_i(x), Type::Int};
        return {"convert_long_sat_rtz(" + x.s + ")", Type::Int};
    }
    throw Error("opencl: unexpected cast");
  }

  Val read(const Expr& e, Block& b, bool acc) {
    const TensorInfo& t = c_.tensors[static_cast<size_t>(e.slot)];
    if (reads_domain(e)) return load(e.slot, "cake_flat");
    std::vector<std::string> ix;
    std::vector<bool> dd;
    for (const auto& a : e.args) {
      Val v = emit(*a, b, false);
      std::string code = to_i(v);
      const bool data = te::contains(*a, ExprKind::Read);
      const bool simple =
          a->kind == ExprKind::Var || a->kind == ExprKind::Number || a->kind == ExprKind::Size;
      if (!simple || (data && !e.padded)) {
        std::string name = fresh("i");
        std::string decl = data && !e.padded ? "long " : "const long ";
        decl += name;
        decl += " = ";
        decl += code;
        decl += ";";
        b.line(decl);
        code = name;
      }
      ix.push_back(code);
      dd.push_back(data);
    }
    if (!e.padded) {
      for (size_t a = 0; a < ix.size(); ++a) {
        if (dd[a]) {
          const std::string dim = size_code(*t.dims[a]);
          b.line("if (" + ix[a] + " < 0 || " + ix[a] + " >= " + dim + ") { cake_err[0] = 1; " + ix[a] +
                 " = 0; }");
        }
      }
      return load(e.slot, offset(t, ix));
    }
    std::string cond;
    for (size_t a = 0; a < ix.size(); ++a) {
      if (!cond.empty()) cond += " && ";
      cond += ix[a] + " >= 0 && " + ix[a] + " < " + size_code(*t.dims[a]);
    }
    if (cond.empty()) cond = "1";
    Val v = load(e.slot, offset(t, ix));
    const Type rt = t.elem == Type::Float ? Type::Float : Type::Int;
    Val pad = e.pad_value ? emit(*e.pad_value, b, acc) : Val{"0", Type::Int};
    Val vv = as(v, rt, acc), pv = as(pad, rt, acc);
    std::string name = fresh("x");
    b.line("const " + (rt == Type::Float ? ftype(acc) : std::string("long")) + " " + name + " = (" + cond +
           ") ? " + vv.s + " : " + pv.s + ";");
    return {name, rt, rt == Type::Float && acc};
  }

  static std::string identity(te::ReduceOp r, bool floats) {
    switch (r) {
      case te::ReduceOp::Sum:
        return floats ? "(acc_t)0" : "0";
      case te::ReduceOp::Prod:
        return floats ? "(acc_t)1" : "1";
      case te::ReduceOp::Max:
      case te::ReduceOp::ArgMax:
        return floats ? "(acc_t)(-INFINITY)" : "LONG_MIN";
      case te::ReduceOp::Min:
      case te::ReduceOp::ArgMin:
        return floats ? "(acc_t)INFINITY" : "LONG_MAX";
    }
    return "0";
  }

  // The update of accumulator r with value v (both in the accumulator's type).
  static std::string combine(te::ReduceOp r, bool floats, const std::string& acc, const std::string& v) {
    switch (r) {
      case te::ReduceOp::Sum:
        return acc + " += " + v + ";";
      case te::ReduceOp::Prod:
        return acc + " *= " + v + ";";
      case te::ReduceOp::Max:
        return acc + " = " + (floats ? "cake_fmax(" : "max(") + acc + ", " + v + ");";
      case te::ReduceOp::Min:
        return acc + " = " + (floats ? "cake_fmin(" : "min(") + acc + ", " + v + ");";
      default:
        return "";
    }
  }

  bool is_arg(te::ReduceOp r) const { return r == te::ReduceOp::ArgMax || r == te::ReduceOp::ArgMin; }

  // Accumulates the body value into (r, best) for one position `at`.
  void accumulate(const Expr& e, Block& b, const std::string& r, const std::string& best,
                  const std::string& at) {
    const bool floats = e.args[0]->type == Type::Float || is_arg(e.reduce);
    ++depth_;
    Val v = emit(*e.args[0], b, floats);
    --depth_;
    if (is_arg(e.reduce)) {
      std::string x = fresh("y");
      b.line("const acc_t " + x + " = " + to_f(v, true) + ";");
      const char* cmp = e.reduce == te::ReduceOp::ArgMax ? " > " : " < ";
      b.line("if (!isnan(" + best + ") && (isnan(" + x + ") || " + x + cmp + best + ")) { " + best + " = " +
             x + "; " + r + " = " + at + "; }");
    } else {
      b.line(combine(e.reduce, floats, r, floats ? to_f(v, true) : to_i(v)));
    }
  }

  Val reduce_serial(const Expr& e, Block& b) {
    const bool arg = is_arg(e.reduce);
    const bool floats = e.args[0]->type == Type::Float || arg;
    std::string r = fresh("r"), best = arg ? fresh("b") : "", pos;
    if (arg) {
      b.line("acc_t " + best + " = " + identity(e.reduce, true) + ";");
      b.line("long " + r + " = 0;");
    } else {
      b.line(std::string(floats ? "acc_t " : "long ") + r + " = " + identity(e.reduce, floats) + ";");
    }
    const bool multi = e.rvars.size() > 1;
    if (arg && multi) {
      pos = fresh("q");
      b.line("long " + pos + " = 0;");
    }
    const int open = b.indent;
    for (const auto& rv : e.rvars) {
      std::string name = var(rv.slot);
      std::string lo = rv.lo ? to_i(emit(*rv.lo, b, false)) : "0";
      std::string hi = rv.lo ? to_i(emit(*rv.hi, b, false)) : size_code(*rv.extent);
      std::string h = fresh("h");
      std::string bound = "const long ";
      bound += h;
      bound += " = ";
      bound += hi;
      bound += ";";
      b.line(bound);
      std::string head = "for (long ";
      head += name;
      head += " = ";
      head += lo;
      head += "; ";
      head += name;
      head += " < ";
      head += h;
      head += "; ++";
      head += name;
      head += ") {";
      b.line(head);
      ++b.indent;
    }
    accumulate(e, b, r, best, arg ? (multi ? pos : var(e.rvars[0].slot)) : "");
    if (arg && multi) b.line("++" + pos + ";");
    while (b.indent > open) {
      --b.indent;
      b.line("}");
    }
    if (arg) return {r, Type::Int};
    return {r, floats ? Type::Float : Type::Int, floats};
  }

  // One output element per work-group: each work-item reduces a strided share of the flattened range,
  // then a tree reduction in local memory (cake_red / cake_redi) combines the shares.
  Val reduce_wg(const Expr& e, Block& b) {
    const bool arg = is_arg(e.reduce);
    std::string r = fresh("r"), ri = arg ? fresh("ri") : "";
    b.line("acc_t " + r + " = " + identity(e.reduce, true) + ";");
    if (arg) b.line("long " + ri + " = LONG_MAX;");
    std::vector<std::string> lo, ext;
    std::string n = fresh("n");
    std::string count;
    for (const auto& rv : e.rvars) {
      std::string l = rv.lo ? size_code(*rv.lo) : "0";
      std::string x = fresh("e");
      b.line("const long " + x + " = " +
             (rv.lo ? "(" + size_code(*rv.hi) + ") - (" + l + ")" : size_code(*rv.extent)) + ";");
      lo.push_back(l);
      ext.push_back(x);
      count += (count.empty() ? "" : " * ") + x;
    }
    b.line("const long " + n + " = " + count + ";");
    std::string q = fresh("q");
    b.line("for (long " + q + " = cake_lid; " + q + " < " + n + "; " + q + " += " + std::to_string(group_) +
           ") {");
    ++b.indent;
    if (e.rvars.size() == 1) {
      b.line("const long " + var(e.rvars[0].slot) + " = " + lo[0] + " + " + q + ";");
    } else {
      std::string rest = fresh("m");
      b.line("long " + rest + " = " + q + ";");
      for (size_t k = e.rvars.size(); k-- > 0;) {
        if (k == 0) {
          b.line("const long " + var(e.rvars[k].slot) + " = " + lo[k] + " + " + rest + ";");
        } else {
          b.line("const long " + var(e.rvars[k].slot) + " = " + lo[k] + " + " + rest + " % " + ext[k] + ";");
          b.line(rest + " /= " + ext[k] + ";");
        }
      }
    }
    if (arg) {
      // The serial update with r as the best value so far and ri as its position.
      accumulate(e, b, ri, r, e.rvars.size() == 1 ? var(e.rvars[0].slot) : q);
    } else {
      accumulate(e, b, r, "", "");
    }
    --b.indent;
    b.line("}");
    b.line("cake_red[cake_lid] = " + r + ";");
    if (arg) b.line("cake_redi[cake_lid] = " + ri + ";");
    b.line("barrier(CLK_LOCAL_MEM_FENCE);");
    b.line("for (int cake_st = " + std::to_string(group_ / 2) + "; cake_st > 0; cake_st >>= 1) {");
    ++b.indent;
    if (arg) {
      const char* cmp = e.reduce == te::ReduceOp::ArgMax ? " > " : " < ";
      b.line("if (cake_lid < cake_st) {");
      ++b.indent;
      b.line("const acc_t a = cake_red[cake_lid], o = cake_red[cake_lid + cake_st];");
      b.line("const long ia = cake_redi[cake_lid], io = cake_redi[cake_lid + cake_st];");
      b.line(std::string("const int take = isnan(o) ? (!isnan(a) || io < ia) : (!isnan(a) && (o") + cmp +
             "a || (o == a && io < ia)));");
      b.line("if (take) { cake_red[cake_lid] = o; cake_redi[cake_lid] = io; }");
      --b.indent;
      b.line("}");
    } else {
      b.line("if (cake_lid < cake_st) { " +
             combine(e.reduce, true, "cake_red[cake_lid]", "cake_red[cake_lid + cake_st]") + " }");
    }
    b.line("barrier(CLK_LOCAL_MEM_FENCE);");
    --b.indent;
    b.line("}");
    b.line(r + " = cake_red[0];");
    if (arg) b.line(ri + " = cake_redi[0];");
    b.line("barrier(CLK_LOCAL_MEM_FENCE);");
    if (arg) {
      std::string v = fresh("r");
      b.line("const long " + v + " = " + ri + " == LONG_MAX ? 0 : " + ri + ";");
      return {v, Type::Int};
    }
    return {r, Type::Float, true};
  }

  // Statement of the target into its scratch and / or output storage at offset `off`.
  void store(int id, const Val& v, const std::string& off, Block& b) {
    const TensorInfo& t = c_.tensors[static_cast<size_t>(id)];
    const TensorPlan& tp = p_.tensors[static_cast<size_t>(id)];
    if (tp.scratch) {
      std::string code = tp.scratch_type == "long" ? to_i(v) : to_f(v, tp.scratch_type == "acc_t");
      b.line("w_" + t.name + "[" + off + "] = " + code + ";");
    }
    if (t.role == TensorRole::Output && !tp.accumulated) store_output(t, v, off, b);
  }

  void store_output(const TensorInfo& t, const Val& v, const std::string& off, Block& b) {
    const std::string p = "t_" + t.name;
    if (!t.fixed_dtype) {
      b.line("IO_STORE(" + p + ", " + off + ", " + to_f(v, false) + ");");
      return;
    }
    switch (*t.fixed_dtype) {
      case DType::f32:
        b.line(p + "[" + off + "] = " + to_f(v, false) + ";");
        break;
      case DType::f16:
        b.line("vstore_half_rte(" + to_f(v, false) + ", " + off + ", " + p + ");");
        break;
      case DType::bf16:
        b.line(p + "[" + off + "] = cake_bf16_bits(" + to_f(v, false) + ");");
        break;
      case DType::i64:
        b.line(p + "[" + off + "] = " + to_i(v) + ";");
        break;
      case DType::i32:
        b.line(p + "[" + off + "] = (int)" + to_i(v) + ";");
        break;
      case DType::i8:
        b.line(p + "[" + off + "] = (char)" + to_i(v) + ";");
        break;
      case DType::boolean:
        b.line(p + "[" + off + "] = (uchar)(" + to_b(v) + ");");
        break;
    }
  }

  // Declares the domain variables `slots` (in order, last fastest) from the flat index `flat`.
  void decode(const std::vector<int>& slots, const std::string& flat, Block& b) {
    if (slots.empty()) return;
    if (slots.size() == 1) {
      b.line("const long " + var(slots[0]) + " = " + flat + ";");
      return;
    }
    b.line("long cake_rest = " + flat + ";");
    for (size_t k = slots.size(); k-- > 0;) {
      const std::string ext = size_code(*s_.var_extent[static_cast<size_t>(slots[k])]);
      if (k == 0) {
        b.line("const long " + var(slots[k]) + " = cake_rest;");
      } else {
        b.line("const long " + var(slots[k]) + " = cake_rest % " + ext + ";");
        b.line("cake_rest /= " + ext + ";");
      }
    }
  }

  std::string extent_product(const std::vector<int>& slots) {
    std::string p;
    for (int v : slots) {
      p += (p.empty() ? "" : " * ") + std::string("(") + size_code(*s_.var_extent[static_cast<size_t>(v)]) +
           ")";
    }
    return p.empty() ? "1" : p;
  }

 private:
  const CheckedContract& c_;
  const Plan& p_;
  const te::Stmt& s_;
  bool wg_;
  int group_;
  int depth_ = 0;  // reduction nesting while emitting
  int n_ = 0;
};

// Top-level reductions (not inside another reduction) of an expression.
void top_reductions(const Expr& e, std::vector<const Expr*>& out) {
  if (e.kind == ExprKind::Reduce) {
    out.push_back(&e);
    return;
  }
  for (const auto& a : e.args) top_reductions(*a, out);
  if (e.pad_value) top_reductions(*e.pad_value, out);
}

const char* kPrelude = R"CL(#ifndef CAKE_IO
#define CAKE_IO 0 /* operator dtype of this build: 0 f32, 1 f16, 2 bf16 */
#endif
#ifndef CAKE_ACC_F64
#define CAKE_ACC_F64 0 /* 1: reductions accumulate in double (cl_khr_fp64) */
#endif
#if CAKE_ACC_F64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double acc_t;
#else
typedef float acc_t;
#endif

inline float cake_bf16_load(ushort b) { return as_float(((uint)b) << 16); }
inline ushort cake_bf16_bits(float f) {
  uint x = as_uint(f);
  if (isnan(f)) return (ushort)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (ushort)(x >> 16);
}
inline float cake_round_bf16(float f) { return cake_bf16_load(cake_bf16_bits(f)); }
inline float cake_round_f16(float f) { /* nearest binary16 value, ties to even */
  const float a = fabs(f);
  if (isnan(f) || isinf(f)) return f;
  if (a >= 65520.0f) return copysign(INFINITY, f);
  if (a < 6.103515625e-05f) return copysign(rint(a * 16777216.0f) / 16777216.0f, f);
  int e;
  frexp(a, &e);
  const float ulp = ldexp(1.0f, e - 11);
  return copysign(rint(a / ulp) * ulp, f);
}

#if CAKE_IO == 0
typedef float io_t;
#define IO_LOAD(p, i) ((p)[i])
#define IO_STORE(p, i, v) ((p)[i] = (v))
#elif CAKE_IO == 1
typedef half io_t;
#define IO_LOAD(p, i) vload_half((i), (p))
#define IO_STORE(p, i, v) vstore_half_rte((v), (i), (p))
#else
typedef ushort io_t;
#define IO_LOAD(p, i) cake_bf16_load((p)[i])
#define IO_STORE(p, i, v) ((p)[i] = cake_bf16_bits(v))
#endif

/* TE semantics: integer division and modulo floor; max / min propagate NaN. */
inline long cake_floordiv(long a, long b) {
  if (b == 0) return 0;
  long q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
inline long cake_floormod(long a, long b) { return b == 0 ? 0 : a - cake_floordiv(a, b) * b; }
inline long cake_iabs(long a) { return a < 0 ? -a : a; }
inline float __attribute__((overloadable)) cake_fmax(float a, float b) { return (isnan(a) || isnan(b)) ? NAN : fmax(a, b); }
inline float __attribute__((overloadable)) cake_fmin(float a, float b) { return (isnan(a) || isnan(b)) ? NAN : fmin(a, b); }
inline float __attribute__((overloadable)) cake_sigmoid(float x) { return 1.0f / (1.0f + exp(-x)); }
/* erf: PoCL's library erf is slow (about 25 ns a call); this branch-free one vectorizes. |x| < 2.5: the
   Maclaurin series in x^2 (36 terms, Horner in double; coefficients 2/sqrt(pi) (-1)^n / (n! (2n+1)));
   beyond: erf = 1 - erfc, erfc from 16 levels of its continued fraction evaluated as one ratio of
   convergents. Relative error below 1e-9 (series) and 3e-10 (erfc). */
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
inline double cake_erf_f64(double x) {
  const double a = fabs(x);
  const double z = x * x;
  double s = -1.538027363683162e-42;
  s = fma(s, z, 5.5391275344241428e-41);
  s = fma(s, z, -1.9395213725013487e-39);
  s = fma(s, z, 6.5973565455392029e-38);
  s = fma(s, z, -2.17817485947961e-36);
  s = fma(s, z, 6.9737303287929154e-35);
  s = fma(s, z, -2.1630383901171246e-33);
  s = fma(s, z, 6.4929099745445622e-32);
  s = fma(s, z, -1.8841244217042039e-30);
  s = fma(s, z, 5.2791033325108343e-29);
  s = fma(s, z, -1.4263930180784178e-27);
  s = fma(s, z, 3.7115328531632299e-26);
  s = fma(s, z, -9.2867290113190594e-25);
  s = fma(s, z, 2.2308786802746453e-23);
  s = fma(s, z, -5.1362090545858109e-22);
  s = fma(s, z, 1.1312187259246312e-20);
  s = fma(s, z, -2.3784598852774297e-19);
  s = fma(s, z, 4.7633480405150683e-18);
  s = fma(s, z, -9.0639708428086728e-17);
  s = fma(s, z, 1.6342614095367154e-15);
  s = fma(s, z, -2.7835162072109218e-14);
  s = fma(s, z, 4.4632242632864775e-13);
  s = fma(s, z, -6.7113668551641113e-12);
  s = fma(s, z, 9.4227590646504113e-11);
  s = fma(s, z, -1.2290555301717928e-09);
  s = fma(s, z, 1.4807192815879219e-08);
  s = fma(s, z, -1.6365844691234924e-07);
  s = fma(s, z, 1.6462114365889248e-06);
  s = fma(s, z, -1.4925650358406252e-05);
  s = fma(s, z, 0.00012055332981789665);
  s = fma(s, z, -0.00085483270234508533);
  s = fma(s, z, 0.0052239776254421879);
  s = fma(s, z, -0.026866170645131252);
  s = fma(s, z, 0.11283791670955128);
  s = fma(s, z, -0.37612638903183754);
  s = fma(s, z, 1.1283791670955126);
  const double b = fmin(a, 6.0);
  double p0 = 1.0, p1 = b, q0 = 0.0, q1 = 1.0, t;
  t = fma(b, p1, 0.5 * p0); p0 = p1; p1 = t; t = fma(b, q1, 0.5 * q0); q0 = q1; q1 = t;
  t = fma(b, p1, 1.0 * p0); p0 = p1; p1 = t; t = fma(b, q1, 1.0 * q0); q0 = q1; q1 = t;
  t = fma(b, p1, 1.5 * p0); p0 = p1; p1 = t; t = fma(b, q1, 1.5 * q0); q0 = q1; q1 = t;
  t = fma(b, p1, 2.0 * p0); p0 = p1; p1 = t; t = fma(b, q1, 2.0 * q0); q0 = q1; q1 = t;
  t = fma(b, p1, 2.5 * p0); p0 = p1; p1 = t; t = fma(b, q1, 2.5 * q0); q0 = q1; q1 = t;
  t = fma(b, p1, 3.0 * p0); p0 = p1; p1 = t; t = fma(b, q1, 3.0 * q0); q0 = q1; q1 = t;
  t = fma(b, p1, 3.5 * p0); p0 = p1; p1 = t; t = fma(b, q1, 3.5 * q0); q0 = q1; q1 = t;
  t = fma(b, p1, 4.0 * p0); p0 = p1; p1 = t; t = fma(b, q1, 4.0 * q0); q0 = q1; q1 = t;
  t = fma(b, p1, 4.5 * p0); p0 = p1; p1 = t; t = fma(b, q1, 4.5 * q0); q0 = q1; q1 = t;
  t = fma(b, p1, 5.0 * p0); p0 = p1; p1 = t; t = fma(b, q1, 5.0 * q0); q0 = q1; q1 = t;
  t = fma(b, p1, 5.5 * p0); p0 = p1; p1 = t; t = fma(b, q1, 5.5 * q0); q0 = q1; q1 = t;
  t = fma(b, p1, 6.0 * p0); p0 = p1; p1 = t; t = fma(b, q1, 6.0 * q0); q0 = q1; q1 = t;
  t = fma(b, p1, 6.5 * p0); p0 = p1; p1 = t; t = fma(b, q1, 6.5 * q0); q0 = q1; q1 = t;
  t = fma(b, p1, 7.0 * p0); p0 = p1; p1 = t; t = fma(b, q1, 7.0 * q0); q0 = q1; q1 = t;
  t = fma(b, p1, 7.5 * p0); p0 = p1; p1 = t; t = fma(b, q1, 7.5 * q0); q0 = q1; q1 = t;
  t = fma(b, p1, 8.0 * p0); p0 = p1; p1 = t; t = fma(b, q1, 8.0 * q0); q0 = q1; q1 = t;
  const double erfc = exp(-b * b) * q1 / (1.7724538509055160 * p1);
  return a < 2.5 ? s * x : copysign(1.0 - erfc, x);
}
inline float __attribute__((overloadable)) cake_erf(float x) { return (float)cake_erf_f64((double)x); }
#if CAKE_ACC_F64
inline double __attribute__((overloadable)) cake_erf(double x) { return cake_erf_f64(x); }
#endif
#else
#define cake_erf erf
#endif
#if CAKE_ACC_F64
inline double __attribute__((overloadable)) cake_fmax(double a, double b) { return (isnan(a) || isnan(b)) ? NAN : fmax(a, b); }
inline double __attribute__((overloadable)) cake_fmin(double a, double b) { return (isnan(a) || isnan(b)) ? NAN : fmin(a, b); }
inline double __attribute__((overloadable)) cake_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
#endif
)CL";

}  // namespace

Plan plan_kernels(const CheckedContract& c, const Settings& st) {
  Plan p;
  p.tensors.resize(c.tensors.size());
  // Which tensors statements read, and which are accumulated into.
  std::set<int> read;
  for (const auto& s : c.contract.compute) {
    auto scan = [&](const Expr& e) {
      te::any_of(e, [&](const Expr& x) {
        if (x.kind == ExprKind::Read) read.insert(x.slot);
        return false;
      });
    };
    scan(*s.rhs);
    for (const auto& ix : s.index) scan(*ix);
    if (s.accumulate) p.tensors[static_cast<size_t>(s.tensor)].accumulated = true;
  }
  for (size_t id = 0; id < c.tensors.size(); ++id) {
    const TensorInfo& t = c.tensors[id];
    TensorPlan& tp = p.tensors[id];
    if (t.role == TensorRole::Input) continue;
    tp.scratch = t.role == TensorRole::Intermediate || tp.accumulated || read.count(static_cast<int>(id));
    if (tp.accumulated) {
      tp.scratch_type = "acc_t";
    } else {
      tp.scratch_type = t.elem == Type::Float ? (st.all_acc ? "acc_t" : "float") : "long";
    }
  }

  std::string src;
  src += "/* kernel.cl: OpenCL C kernels of operator '" + c.contract.name +
         "', generated by CAKE's opencl track.\n   One kernel per TE statement, enqueued in statement order; "
         "intermediates live in __global scratch (w_*).\n   Build with -DCAKE_IO=<0 f32|1 f16|2 bf16> "
         "-DCAKE_ACC_F64=<0|1>. */\n";
  src += kPrelude;
  src +=
      "\n/* Every kernel takes the same arguments: tensors (t_*), scratch (w_*), the index-error flag, "
      "sizes, params. */\n";
  std::string args;
  auto arg = [&](const std::string& a) { args += (args.empty() ? "    " : ", \\\n    ") + a; };
  for (const auto& t : c.tensors) {
    if (t.role == TensorRole::Intermediate) continue;
    arg(std::string("__global ") + (t.role == TensorRole::Input ? "const " : "") + storage_cl(t) + "* t_" +
        t.name);
  }
  for (size_t id = 0; id < c.tensors.size(); ++id)
    if (p.tensors[id].scratch) arg("__global " + p.tensors[id].scratch_type + "* w_" + c.tensors[id].name);
  arg("__global int* cake_err");
  for (const auto& s : c.sizes) arg("const long s_" + s.name);
  for (const auto& prm : c.contract.params) arg("const float p_" + prm.name);
  src += "#define CAKE_ARGS \\\n" + args + "\n";

  auto attr = [](int wg) {
    return wg > 0 ? "__attribute__((reqd_work_group_size(" + std::to_string(wg) + ", 1, 1))) "
                  : std::string();
  };

  for (int si : c.order) {
    const te::Stmt& s = c.contract.compute[static_cast<size_t>(si)];
    std::vector<int> domain;
    if (s.n_domain > 0) domain.reserve(static_cast<size_t>(s.n_domain));
    for (int v = 0; v < s.n_domain; ++v) domain.push_back(v);
    std::string line = std::to_string(s.pos.line);
    const std::string base = "k" + std::to_string(si) + "_" + s.target;

    if (s.accumulate) {
      // Scatter: work-items own the domain variables that index the target directly, and loop over
      // the rest in domain order: no two work-items touch the same element.
      std::vector<int> owners, serial;
      for (int v : domain) {
        bool own = false;
        for (const auto& ix : s.index) own |= ix->kind == ExprKind::Var && ix->slot == v;
        (own ? owners : serial).push_back(v);
      }
      Emitter em(c, p, s, false, 0);
      Block b;
      b.line("const long cake_total = " + em.extent_product(owners) + ";");
      b.line("const long cake_flat = get_global_id(0);");
      b.line("if (cake_flat >= cake_total) return;");
      em.decode(owners, "cake_flat", b);
      for (int v : serial) {
        b.line("for (long " + em.var(v) + " = 0; " + em.var(v) + " < " +
               em.size_code(*s.var_extent[static_cast<size_t>(v)]) + "; ++" + em.var(v) + ") {");
        ++b.indent;
      }
      Val v = em.emit(*s.rhs, b, true);
      const TensorInfo& t = c.tensors[static_cast<size_t>(s.tensor)];
      std::vector<std::string> ix;
      std::string ok;
      for (size_t a = 0; a < s.index.size(); ++a) {
        std::string code = Emitter::to_i(em.emit(*s.index[a], b, false));
        if (s.index[a]->kind != ExprKind::Var) {
          std::string name = em.fresh("t");
          std::string decl = "const long ";
          decl += name;
          decl += " = ";
          decl += code;
          decl += ";";
          b.line(decl);
          if (!ok.empty()) ok += " && ";
          ok += name;
          ok += " >= 0 && ";
          ok += name;
          ok += " < ";
          ok += em.size_code(*t.dims[a]);
          code = name;
        }
        ix.push_back(code);
      }
      std::string upd = "w_" + t.name + "[" + em.offset(t, ix) + "] += " + Emitter::to_f(v, true) + ";";
      if (ok.empty()) {
        b.line(upd);
      } else {
        std::string guarded = "if (";
        guarded += ok;
        guarded += ") ";
        guarded += upd;
        guarded += " else cake_err[0] = 1;";
        b.line(guarded);
      }
      while (b.indent > 1) {
        --b.indent;
        b.line("}");
      }
      src += "\n/* line " + line + ": " + s.target +
             "[...] += ... (scatter; one work-item per owned target index) */\n";
      src += "__kernel " + attr(st.wg) + "void " + base + "(CAKE_ARGS) {\n" + b.text + "}\n";
      KernelPlan kp;
      kp.kind = KernelPlan::Scatter;
      kp.name = base;
      kp.stmt = si;
      std::string items;
      for (int o : owners) {
        items += (items.empty() ? "" : " * ") + std::string("(") +
                 emit_size_expr(*s.var_extent[static_cast<size_t>(o)]) + ")";
      }
      kp.items = items.empty() ? "1" : items;
      p.kernels.push_back(kp);
      continue;
    }

    std::string items;
    for (int v : domain) {
      items += (items.empty() ? "" : " * ") + std::string("(") +
               emit_size_expr(*s.var_extent[static_cast<size_t>(v)]) + ")";
    }
    if (items.empty()) items = "1";

    {  // one work-item per output element (ipw elements, grid-strided along the last axis)
      Emitter em(c, p, s, false, 0);
      em.flat_ok = true;
      Block b;
      const bool rows = domain.size() >= 2;  // 2-D range: axis 0 the last domain variable, axis 1 the rest
      std::vector<int> rest(domain.begin(), domain.end() - (rows ? 1 : 0));
      const std::string n0 =
          rows ? em.size_code(*s.var_extent[static_cast<size_t>(domain.back())]) : em.extent_product(domain);
      if (rows) {
        b.line("const long cake_row = get_global_id(1);");
        em.decode(rest, "cake_row", b);
      }
      b.line("const long cake_n0 = " + n0 + ";");
      if (st.ipw > 1) {
        b.line("for (long cake_r = 0; cake_r < " + std::to_string(st.ipw) + "; ++cake_r) {");
        ++b.indent;
        b.line("const long cake_i0 = (long)get_global_id(0) + cake_r * (long)get_global_size(0);");
        b.line("if (cake_i0 >= cake_n0) break;");
      } else {
        b.line("const long cake_i0 = get_global_id(0);");
        b.line("if (cake_i0 >= cake_n0) return;");
      }
      if (rows) {
        b.line("const long " + em.var(domain.back()) + " = cake_i0;");
        b.line("const long cake_flat = cake_row * cake_n0 + cake_i0;");
      } else {
        b.line("const long cake_flat = cake_i0;");
        em.decode(domain, "cake_flat", b);
      }
      Val v = em.emit(*s.rhs, b, st.all_acc);
      em.store(s.tensor, v, "cake_flat", b);
      if (st.ipw > 1) {
        --b.indent;
        b.line("}");
      }
      src += "\n/* line " + line + ": " + s.target + " (one work-item per element) */\n";
      src += "__kernel " + attr(st.wg) + "void " + base + "(CAKE_ARGS) {\n" + b.text + "}\n";
      KernelPlan kp;
      kp.kind = KernelPlan::Map;
      kp.name = base;
      kp.stmt = si;
      if (rows) {
        kp.items = "(" + emit_size_expr(*s.var_extent[static_cast<size_t>(domain.back())]) + ")";
        std::string r;
        for (int v2 : rest) {
          r += (r.empty() ? "" : " * ") + std::string("(") +
               emit_size_expr(*s.var_extent[static_cast<size_t>(v2)]) + ")";
        }
        kp.rows = r;
      } else {
        kp.items = items;
      }
      p.kernels.push_back(kp);
    }

    // Work-group variant for reduction statements whose ranges the host can size.
    std::vector<const Expr*> reds;
    top_reductions(*s.rhs, reds);
    bool wg_ok = st.local_reduce != "off" && !reds.empty();
    bool any_arg = false;
    std::string red_len;
    for (const Expr* r : reds) {
      const bool arg = r->reduce == te::ReduceOp::ArgMax || r->reduce == te::ReduceOp::ArgMin;
      any_arg |= arg;
      if (!arg && r->args[0]->type != Type::Float) wg_ok = false;
      std::string len;
      for (const auto& rv : r->rvars) {
        if (rv.lo && (te::contains(*rv.lo, ExprKind::Var) || te::contains(*rv.hi, ExprKind::Var) ||
                      te::contains(*rv.lo, ExprKind::Read) || te::contains(*rv.hi, ExprKind::Read)))
          wg_ok = false;
        if (!wg_ok) break;
        std::string e = rv.lo ? "((" + emit_size_expr(*rv.hi) + ") - (" + emit_size_expr(*rv.lo) + "))"
                              : "(" + emit_size_expr(*rv.extent) + ")";
        len += (len.empty() ? "" : " * ") + e;
      }
      if (!wg_ok) break;
      if (red_len.empty()) {
        red_len = len;
      } else {
        red_len.insert(0, "std::max<int64_t>(");
        red_len += ", ";
        red_len += len;
        red_len += ")";
      }
    }
    if (wg_ok) {
      const int g = st.reduce_wg;
      Emitter em(c, p, s, true, g);
      em.flat_ok = true;
      Block b;
      b.line("__local acc_t cake_red[" + std::to_string(g) + "];");
      if (any_arg) b.line("__local long cake_redi[" + std::to_string(g) + "];");
      b.line("const long cake_flat = get_group_id(0);");
      b.line("const int cake_lid = get_local_id(0);");
      em.decode(domain, "cake_flat", b);
      Val v = em.emit(*s.rhs, b, st.all_acc);
      b.line("if (cake_lid == 0) {");
      ++b.indent;
      em.store(s.tensor, v, "cake_flat", b);
      --b.indent;
      b.line("}");
      src += "\n/* line " + line + ": " + s.target +
             " (one work-group per element, tree reduction in local memory) */\n";
      src += "__kernel " + attr(g) + "void " + base + "_wg(CAKE_ARGS) {\n" + b.text + "}\n";
      KernelPlan kp;
      kp.kind = KernelPlan::MapWg;
      kp.name = base + "_wg";
      kp.stmt = si;
      kp.items = items;
      kp.red_len = red_len;
      kp.group = g;
      p.kernels.push_back(kp);
    }
  }

  // Accumulated outputs: convert the accumulator to the output's dtype once every statement has run.
  for (size_t id = 0; id < c.tensors.size(); ++id) {
    const TensorInfo& t = c.tensors[id];
    if (t.role != TensorRole::Output || !p.tensors[id].accumulated) continue;
    te::Stmt dummy;
    Emitter em(c, p, dummy, false, 0);
    Block b;
    std::string n, host_n;
    for (const auto& d : t.dims) {
      n += (n.empty() ? "" : " * ") + std::string("(") + em.size_code(*d) + ")";
      host_n += (host_n.empty() ? "" : " * ") + std::string("(") + emit_size_expr(*d) + ")";
    }
    if (n.empty()) n = host_n = "1";
    b.line("const long cake_flat = get_global_id(0);");
    b.line("if (cake_flat >= " + n + ") return;");
    em.store_output(t, Val{"w_" + t.name + "[cake_flat]", Type::Float, true}, "cake_flat", b);
    src += "\n/* " + t.name + ": accumulator to output dtype */\n";
    src += "__kernel void store_" + t.name + "(CAKE_ARGS) {\n" + b.text + "}\n";
    KernelPlan kp;
    kp.kind = KernelPlan::Store;
    kp.name = "store_" + t.name;
    kp.tensor = static_cast<int>(id);
    kp.items = host_n;
    p.kernels.push_back(kp);
  }
  p.source = src;
  return p;
}

}  // namespace cake::tracks::opencl
