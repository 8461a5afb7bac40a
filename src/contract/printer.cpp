// Canonical printing of TE trees (minimal parentheses, exact numbers) and of contracts.
#include "contract/printer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace cake::te {
namespace {

int prec(const Expr& e) {
  if (e.kind == ExprKind::Binary) {
    switch (e.op) {
      case Op::Or:
        return 1;
      case Op::And:
        return 2;
      case Op::Eq:
      case Op::Ne:
        return 3;
      case Op::Lt:
      case Op::Le:
      case Op::Gt:
      case Op::Ge:
        return 4;
      case Op::Add:
      case Op::Sub:
        return 5;
      default:
        return 6;
    }
  }
  if (e.kind == ExprKind::Unary) return 7;
  if (e.kind == ExprKind::Number && (e.number < 0 || std::signbit(e.number))) return 7;  // prints as -x
  return 8;
}

std::string number(const Expr& e) {
  double v = e.number;
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[40];
  if (e.int_literal) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.17g", v);
  // Shortest form that reads back exactly.
  for (int p = 1; p <= 17; ++p) {
    char t[40];
    std::snprintf(t, sizeof t, "%.*g", p, v);
    if (std::strtod(t, nullptr) == v) {
      std::snprintf(buf, sizeof buf, "%s", t);
      break;
    }
  }
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

void print(const Expr& e, std::ostringstream& o);

void print_child(const Expr& c, int min_prec, std::ostringstream& o) {
  if (prec(c) < min_prec) {
    o << '(';
    print(c, o);
    o << ')';
  } else {
    print(c, o);
  }
}

void print_list(const std::vector<ExprPtr>& xs, std::ostringstream& o) {
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i) o << ", ";
    print(*xs[i], o);
  }
}

void print(const Expr& e, std::ostringstream& o) {
  switch (e.kind) {
    case ExprKind::Number:
      o << number(e);
      return;
    case ExprKind::Name:
    case ExprKind::Var:
    case ExprKind::Size:
    case ExprKind::Param:
      o << e.name;
      return;
    case ExprKind::Read:
      o << e.name;
      if (e.padded) {
        o << '?';
        if (e.pad_value) {
          o << '(';
          print(*e.pad_value, o);
          o << ')';
        }
      }
      o << '[';
      print_list(e.args, o);
      o << ']';
      return;
    case ExprKind::Unary:
      o << op_spelling(e.op);
      print_child(*e.args[0], 7, o);
      return;
    case ExprKind::Binary: {
      int p = prec(e);
      print_child(*e.args[0], p, o);
      o << ' ' << op_spelling(e.op) << ' ';
      print_child(*e.args[1], p + 1, o);
      return;
    }
    case ExprKind::Call:
      o << fn_name(e.fn) << '(';
      print_list(e.args, o);
      o << ')';
      return;
    case ExprKind::Cast:
      o << "cast<" << dtype_name(e.cast_to) << ">(";
      print(*e.args[0], o);
      o << ')';
      return;
    case ExprKind::Reduce:
      o << reduce_name(e.reduce) << '(';
      for (size_t i = 0; i < e.rvars.size(); ++i) {
        const ReduceVar& v = e.rvars[i];
        if (i) o << ", ";
        o << v.name;
        if (v.lo) {
          o << " in ";
          print(*v.lo, o);
          o << "..";
          print(*v.hi, o);
        }
      }
      o << ": ";
      print(*e.args[0], o);
      o << ')';
      return;
  }
}

}  // namespace

std::string print_expr(const Expr& e) {
  std::ostringstream o;
  print(e, o);
  return o.str();
}

std::string print_stmt(const Stmt& s) {
  std::ostringstream o;
  o << s.target;
  if (!s.index.empty()) {
    o << '[';
    print_list(s.index, o);
    o << ']';
  }
  o << (s.accumulate ? " += " : " = ");
  print(*s.rhs, o);
  return o.str();
}

std::string print_program(const std::vector<Stmt>& prog) {
  std::string r;
  for (const auto& s : prog) r += print_stmt(s) + "\n";
  return r;
}

}  // namespace cake::te

namespace cake {
namespace {

std::string dims(const TensorDecl& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.dims.size(); ++i) s += (i ? ", " : "") + te::print_expr(*t.dims[i]);
  s += "]";
  if (t.fixed_dtype) return "\"" + std::string(dtype_name(*t.fixed_dtype)) + s + "\"";
  return s;
}

std::string num(double v) {
  te::Expr e;
  e.number = v;
  e.int_literal = std::floor(v) == v && std::fabs(v) < 9e15;
  return te::print_expr(e);
}

std::string rules(const CaseSetRule& r, const char* set) {
  std::string s = std::string("  ") + set + ": { count: " + std::to_string(r.count) +
                  ", seed: " + std::to_string(r.seed) + ", shapes: {";
  for (size_t i = 0; i < r.shapes.size(); ++i) {
    const ShapeRule& sr = r.shapes[i];
    s += (i ? ", " : " ") + sr.symbol + ": ";
    if (sr.is_range) {
      s += "\"" + std::to_string(sr.lo) + ".." + std::to_string(sr.hi) + "\"";
    } else {
      s += "[";
      for (size_t j = 0; j < sr.values.size(); ++j) s += (j ? ", " : "") + std::to_string(sr.values[j]);
      s += "]";
    }
  }
  return s + " } }\n";
}

const char* dist_name(Distribution d) {
  switch (d) {
    case Distribution::Normal:
      return "normal";
    case Distribution::Uniform:
      return "uniform";
    case Distribution::RandInt:
      return "randint";
    case Distribution::Bernoulli:
      return "bernoulli";
    case Distribution::Constant:
      return "constant";
  }
  return "?";
}

}  // namespace

std::string print_contract(const Contract& c) {
  std::ostringstream o;
  o << "name: " << c.name << "\n";
  if (c.level) o << "level: " << c.level << "\n";
  if (!c.summary.empty()) {
    std::string q;
    for (char ch : c.summary) q += (ch == '"' || ch == '\\') ? std::string("\\") + ch : std::string(1, ch);
    o << "summary: \"" << q << "\"\n";
  }
  o << "dtypes: [";
  for (size_t i = 0; i < c.dtypes.size(); ++i) o << (i ? ", " : "") << dtype_name(c.dtypes[i]);
  o << "]\n";
  auto tensors = [&](const char* key, const std::vector<TensorDecl>& ts) {
    o << key << ": {";
    for (size_t i = 0; i < ts.size(); ++i) o << (i ? ", " : " ") << ts[i].name << ": " << dims(ts[i]);
    o << " }\n";
  };
  tensors("inputs", c.inputs);
  tensors("outputs", c.outputs);
  if (!c.params.empty()) {
    o << "params: {";
    for (size_t i = 0; i < c.params.size(); ++i)
      o << (i ? ", " : " ") << c.params[i].name << ": " << num(c.params[i].value);
    o << " }\n";
  }
  if (!c.sizes.empty()) {
    o << "sizes: {";
    for (size_t i = 0; i < c.sizes.size(); ++i)
      o << (i ? ", " : " ") << c.sizes[i].name << ": \"" << te::print_expr(*c.sizes[i].expr) << "\"";
    o << " }\n";
  }
  if (!c.constraints.empty()) {
    o << "constraints:\n";
    for (const auto& e : c.constraints) o << "  - \"" << te::print_expr(*e) << "\"\n";
  }
  o << "compute: |\n";
  for (const auto& s : c.compute) o << "  " << te::print_stmt(s) << "\n";
  o << "cases:\n" << rules(c.standard, "standard") << rules(c.hidden, "hidden");
  if (!c.values.empty()) {
    o << "  values: {";
    for (size_t i = 0; i < c.values.size(); ++i) {
      const ValueRule& v = c.values[i];
      o << (i ? ", " : " ") << v.tensor << ": \"" << dist_name(v.dist) << "(";
      for (size_t j = 0; j < v.args.size(); ++j) o << (j ? ", " : "") << te::print_expr(*v.args[j]);
      o << ")\"";
    }
    o << " }\n";
  }
  o << "limits: { max_bytes: " << num(c.limits.max_bytes) << ", max_flops: " << num(c.limits.max_flops)
    << " }\n";
  o << "baseline: " << c.baseline << "\n";
  return o.str();
}

}  // namespace cake
