// Text generation for the operator package: C header, C wrapper library, CMake package files and the
// PyTorch custom op, all derived from the checked contract (tensors, dtypes, params, sizes, constraints).
#include "deliver/codegen.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <set>

#include "contract/printer.h"
#include "core/error.h"
#include "core/kernel_abi.h"
#include "deliver/package.h"

namespace cake::deliver {

namespace {

// ---- what the generated code needs to know about the contract ----

struct Model {
  std::string op;
  std::vector<const TensorInfo*> ins, outs;  // ABI order
  std::vector<const TensorInfo*> all;        // ins then outs
  std::vector<int> free;                     // free size slots, in CheckedContract::sizes order (the ABI's)
  std::vector<int> typed_free;               // the same, in the typed entry points' order
  std::vector<int> derived;                  // derived size slots, in evaluation order
  size_t n_params = 0;
  size_t n_scalars = 0;  // params + free sizes
};

Model model(const CheckedContract& c) {
  if (!is_c_identifier(c.contract.name))
    throw Error("operator name '" + c.contract.name + "' is not a C identifier; a package needs one");
  if (c.contract.dtypes.empty()) throw Error("contract " + c.contract.name + " lists no dtypes");
  Model m;
  m.op = c.contract.name;
  for (int id : c.input_ids()) m.ins.push_back(&c.tensors[static_cast<size_t>(id)]);
  for (int id : c.output_ids()) m.outs.push_back(&c.tensors[static_cast<size_t>(id)]);
  m.all = m.ins;
  m.all.insert(m.all.end(), m.outs.begin(), m.outs.end());
  for (const TensorInfo* t : m.all)
    if (t->dims.size() > CAKE_MAX_RANK)
      throw Error(fmt::format("tensor {} has rank {}; the C ABI allows at most {}", t->name, t->dims.size(),
                              CAKE_MAX_RANK));
  for (size_t s = 0; s < c.sizes.size(); ++s)
    (c.sizes[s].free ? m.free : m.derived).push_back(static_cast<int>(s));
  // Typed order: as the symbols first appear in the input shapes (left to right), then the other free
  // sizes in the order the contract's standard case rule lists them, then any left in the ABI's order.
  std::vector<bool> seen(c.sizes.size(), false);
  std::function<void(const te::Expr&)> visit = [&](const te::Expr& e) {
    if (e.kind == te::ExprKind::Size || e.kind == te::ExprKind::Name) {
      const int slot = c.size_slot(e.name);
      if (slot >= 0 && c.sizes[static_cast<size_t>(slot)].free && !seen[static_cast<size_t>(slot)]) {
        seen[static_cast<size_t>(slot)] = true;
        m.typed_free.push_back(slot);
      }
    }
    for (const te::ExprPtr& a : e.args) visit(*a);
  };
  for (const TensorInfo* t : m.ins)
    for (const te::ExprPtr& d : t->dims) visit(*d);
  for (const ShapeRule& r : c.contract.standard.shapes) {
    const int slot = c.size_slot(r.symbol);
    if (slot >= 0 && c.sizes[static_cast<size_t>(slot)].free && !seen[static_cast<size_t>(slot)]) {
      seen[static_cast<size_t>(slot)] = true;
      m.typed_free.push_back(slot);
    }
  }
  for (int z : m.free)
    if (!seen[static_cast<size_t>(z)]) m.typed_free.push_back(z);
  m.n_params = c.contract.params.size();
  m.n_scalars = m.n_params + m.free.size();
  return m;
}

// Names of C/C++ and torch-schema words an argument must not be spelled as.
bool reserved_word(const std::string& s) {
  static const std::set<std::string> words{
      "auto",     "break",      "case",      "char",     "const",    "continue",  "default",    "do",
      "double",   "else",       "enum",      "extern",   "float",    "for",       "goto",       "if",
      "inline",   "int",        "long",      "register", "restrict", "return",    "short",      "signed",
      "sizeof",   "static",     "struct",    "switch",   "typedef",  "union",     "unsigned",   "void",
      "volatile", "while",      "bool",      "true",     "false",    "class",     "delete",     "new",
      "template", "this",       "throw",     "try",      "catch",    "namespace", "operator",   "private",
      "public",   "protected",  "virtual",   "using",    "typename", "explicit",  "friend",     "mutable",
      "and",      "or",         "not",       "xor",      "Tensor",   "Scalar",    "ScalarType", "None",
      "True",     "False",      "str",       "out",      "self",     "dtype",     "layout",     "device",
      "Device",   "Layout",     "Generator", "SymInt",   "NULL",     "nullptr",   "errno",      "assert",
      "int8_t",   "int16_t",    "int32_t",   "int64_t",  "uint8_t",  "uint16_t",  "uint32_t",   "uint64_t",
      "size_t",   "cake_tensor"};
  return words.count(s) > 0 || s.rfind("cake_", 0) == 0 || s.rfind("s_", 0) == 0 || s.rfind("a_", 0) == 0;
}

// An argument name in generated C / schema text (the TE name, suffixed when it is a reserved word).
std::string arg_name(const std::string& te_name) {
  return reserved_word(te_name) ? te_name + "_" : te_name;
}

std::string tensor_local(const std::string& te_name) {  // the torch impl's contiguous copy of a tensor
  return "t_" + te_name;
}

std::string c_string(std::string_view s) {  // a C string literal
  std::string r = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      r += '\\';
      r += ch;
    } else if (ch == '\n') {
      r += "\\n";
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      r += ' ';
    } else {
      r += ch;
    }
  }
  return r + "\"";
}

// Text inside a /* */ comment.
std::string comment_safe(std::string s) {
  for (size_t p; (p = s.find("*/")) != std::string::npos;) s.replace(p, 2, "* /");
  for (size_t p; (p = s.find("/*")) != std::string::npos;) s.replace(p, 2, "/ *");
  return s;
}

std::string shape_text(const TensorInfo& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.dims.size(); ++i) s += (i ? ", " : "") + te::print_expr(*t.dims[i]);
  return s + "]";
}

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? std::string(sep) : "") + v[i];
  return s;
}

std::string dtype_list(const CheckedContract& c) {
  std::vector<std::string> v;
  for (DType d : c.contract.dtypes) v.emplace_back(dtype_name(d));
  return join(v, ", ");
}

std::string scalar_list(const CheckedContract& c, const Model& m) {
  std::vector<std::string> v;
  for (const ParamDecl& p : c.contract.params) v.push_back(p.name);
  for (int s : m.free) v.push_back(c.sizes[static_cast<size_t>(s)].name);
  return v.empty() ? "none" : join(v, ", ");
}

// ---- size expressions in C / C++ over s_<name> locals ----

struct Spelling {
  const char* div;
  const char* mod;
  const char* min;
  const char* max;
};
constexpr Spelling kSpell{"cake_w_floordiv", "cake_w_floormod", "cake_w_min", "cake_w_max"};

std::string size_expr(const te::Expr& e) {
  using te::ExprKind;
  using te::Op;
  auto sub = [&](size_t i) { return size_expr(*e.args.at(i)); };
  switch (e.kind) {
    case ExprKind::Number:
      if (e.number != std::floor(e.number) || std::fabs(e.number) > 9.0e15) break;
      return fmt::format("((int64_t){})", static_cast<long long>(e.number));
    case ExprKind::Size:
    case ExprKind::Name:
      return "s_" + e.name;
    case ExprKind::Unary:
      return fmt::format("({}{})", e.op == Op::Neg ? "-" : "!", sub(0));
    case ExprKind::Binary:
      if (e.op == Op::Div) return fmt::format("{}({}, {})", kSpell.div, sub(0), sub(1));
      if (e.op == Op::Mod) return fmt::format("{}({}, {})", kSpell.mod, sub(0), sub(1));
      return fmt::format("({} {} {})", sub(0), te::op_spelling(e.op), sub(1));
    case ExprKind::Call:
      if (e.fn == te::Fn::Min) return fmt::format("{}({}, {})", kSpell.min, sub(0), sub(1));
      if (e.fn == te::Fn::Max) return fmt::format("{}({}, {})", kSpell.max, sub(0), sub(1));
      break;
    default:
      break;
  }
  throw Error(
      fmt::format("line {}:{}: size expression '{}' cannot be written in C (only integers, sizes, "
                  "+ - * / % min max and comparisons)",
                  e.pos.line, e.pos.col, te::print_expr(e)));
}

// Constraints that can be spelled (others are left to the kernel and documented as unchecked).
std::vector<std::pair<std::string, std::string>> constraints(const CheckedContract& c) {
  std::vector<std::pair<std::string, std::string>> v;  // {C expression, TE text}
  for (const te::ExprPtr& e : c.contract.constraints) {
    try {
      v.emplace_back(size_expr(*e), te::print_expr(*e));
    } catch (const Error&) {
    }
  }
  return v;
}

std::string unpack_sizes(const CheckedContract& c, const char* array) {  // const int64_t s_N = sz[0]; ...
  std::string s;
  for (size_t i = 0; i < c.sizes.size(); ++i)
    s += fmt::format("  const int64_t s_{} = {}[{}];\n  (void)s_{};\n", c.sizes[i].name, array, i,
                     c.sizes[i].name);
  return s;
}

// The C helpers both the wrapper and the torch source use for size arithmetic. `on_zero` is the statement
// run when a divisor is zero (it must not return normally from a throwing variant, or record the fault).
std::string size_helpers(const std::string& on_zero, const char* storage) {
  return fmt::format(
      "{0}int64_t cake_w_floordiv(int64_t a, int64_t b) {{\n"
      "  if (b == 0) {{\n    {1}\n    return 0;\n  }}\n"
      "  int64_t q = a / b;\n  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;\n  return q;\n}}\n"
      "{0}int64_t cake_w_floormod(int64_t a, int64_t b) {{\n"
      "  if (b == 0) {{\n    {1}\n    return 0;\n  }}\n"
      "  int64_t r = a % b;\n  if (r != 0 && ((r < 0) != (b < 0))) r += b;\n  return r;\n}}\n"
      "{0}int64_t cake_w_min(int64_t a, int64_t b) {{ return a < b ? a : b; }}\n"
      "{0}int64_t cake_w_max(int64_t a, int64_t b) {{ return a > b ? a : b; }}\n",
      storage, on_zero);
}

std::string c_storage(DType t) {
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

bool uses_bool(const CheckedContract& c, const Model& m) {
  for (const TensorInfo* t : m.all)
    for (DType d : c.contract.dtypes)
      if (t->dtype_for(d) == DType::boolean) return true;
  return false;
}

// The first tensor (inputs, then outputs) whose dtype is the operator dtype: it decides the call's dtype,
// as the kernel's ABI prologue does. -1 when every tensor has a fixed dtype.
int op_dtype_tensor(const Model& m) {
  for (size_t j = 0; j < m.all.size(); ++j)
    if (!m.all[j]->fixed_dtype) return static_cast<int>(j);
  return -1;
}

// The typed entry point's parameter list. The header spells the contract's names (arg_name); the wrapper's
// definition prefixes them with a_ so they never meet its own identifiers.
std::string typed_args(const CheckedContract& c, const Model& m, DType d, bool definition = false) {
  auto nm = [&](const std::string& n) { return definition ? "a_" + n : arg_name(n); };
  std::vector<std::string> a;
  for (const TensorInfo* t : m.ins)
    a.push_back(fmt::format("const {}* {}", c_storage(t->dtype_for(d)), nm(t->name)));
  for (const TensorInfo* t : m.outs)
    a.push_back(fmt::format("{}* {}", c_storage(t->dtype_for(d)), nm(t->name)));
  for (const ParamDecl& p : c.contract.params) a.push_back("double " + nm(p.name));
  for (int s : m.typed_free) a.push_back("int64_t " + nm(c.sizes[static_cast<size_t>(s)].name));
  return a.empty() ? "void" : join(a, ", ");
}

std::string run_decl(const Model& m) {
  return fmt::format(
      "int cake_{}_run(const cake_tensor* in, int n_in, cake_tensor* out, int n_out, "
      "const double* params, int n_params)",
      m.op);
}

std::string torch_scalar_type(DType t) {
  switch (t) {
    case DType::f32:
      return "at::kFloat";
    case DType::f16:
      return "at::kHalf";
    case DType::bf16:
      return "at::kBFloat16";
    case DType::i32:
      return "at::kInt";
    case DType::i64:
      return "at::kLong";
    case DType::i8:
      return "at::kChar";
    case DType::boolean:
      return "at::kBool";
  }
  return "at::kFloat";
}

std::string torch_dtype_text(DType t) {
  switch (t) {
    case DType::f32:
      return "float32";
    case DType::f16:
      return "float16";
    case DType::bf16:
      return "bfloat16";
    case DType::i32:
      return "int32";
    case DType::i64:
      return "int64";
    case DType::i8:
      return "int8";
    case DType::boolean:
      return "bool";
  }
  return "?";
}

// How the torch op learns each free size: from an input dimension (S or k*S) or from a schema argument.
struct SizeSource {
  int slot = 0;
  int tensor = -1;  // index into Model::ins, -1: a schema argument
  int dim = 0;
  int64_t factor = 1;
};

std::vector<SizeSource> size_sources(const CheckedContract& c, const Model& m) {
  std::vector<SizeSource> v;
  for (int s : m.typed_free) {
    SizeSource src;
    src.slot = s;
    const std::string& name = c.sizes[static_cast<size_t>(s)].name;
    auto is_sym = [&](const te::Expr& e) {
      return (e.kind == te::ExprKind::Size || e.kind == te::ExprKind::Name) && e.name == name;
    };
    auto is_int = [](const te::Expr& e) {
      return e.kind == te::ExprKind::Number && e.int_literal && e.number >= 1 && e.number < 1e9;
    };
    for (size_t t = 0; t < m.ins.size() && src.tensor < 0; ++t) {
      for (size_t d = 0; d < m.ins[t]->dims.size(); ++d) {
        const te::Expr& e = *m.ins[t]->dims[d];
        int64_t k = 0;
        if (is_sym(e)) {
          k = 1;
        } else if (e.kind == te::ExprKind::Binary && e.op == te::Op::Mul && e.args.size() == 2) {
          if (is_int(*e.args[0]) && is_sym(*e.args[1])) k = static_cast<int64_t>(e.args[0]->number);
          if (is_sym(*e.args[0]) && is_int(*e.args[1])) k = static_cast<int64_t>(e.args[1]->number);
        }
        if (k > 0) {
          src.tensor = static_cast<int>(t);
          src.dim = static_cast<int>(d);
          src.factor = k;
          break;
        }
      }
    }
    v.push_back(src);
  }
  return v;
}

// A default value for a `float` schema argument, spelled so the schema parser reads a float.
std::string schema_float(double v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

bool is_c_identifier(std::string_view s) {
  if (s.empty()) return false;
  auto alpha = [](char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_'; };
  if (!alpha(s[0])) return false;
  return std::all_of(s.begin(), s.end(), [&](char ch) { return alpha(ch) || (ch >= '0' && ch <= '9'); });
}

std::string typed_entry_name(const CheckedContract& c, DType d) {
  return fmt::format("cake_{}_{}", c.contract.name, dtype_name(d));
}

std::string typed_entry_decl(const CheckedContract& c, DType d) {
  const Model m = model(c);
  return fmt::format("int {}({})", typed_entry_name(c, d), typed_args(c, m, d));
}

// ---------------------------------------------------------------------------------------------------
// include/cake_<op>.h

std::string header_source(const CheckedContract& c) {
  const Model m = model(c);
  const Contract& k = c.contract;
  std::string up = m.op;
  std::transform(up.begin(), up.end(), up.begin(), [](unsigned char ch) { return std::toupper(ch); });
  std::string s;
  s += fmt::format("/* cake_{}.h: the C interface of the CAKE operator package `{}` (libcake_{}.so).\n", m.op,
                   m.op, m.op);
  s += comment_safe(fmt::format("   {}\n", k.summary));
  s += fmt::format("   Contract hash: {}. Dtypes: {}.\n\n", c.hash, dtype_list(c));
  s += "   Math (the contract's tensor expressions; every output is judged against an f64 reference):\n";
  for (int i : c.order) s += comment_safe("     " + te::print_stmt(k.compute[static_cast<size_t>(i)]) + "\n");
  s += "\n   Tensors (dense row-major; `op` = the operator dtype of the call, one of the dtypes above):\n";
  for (const TensorInfo* t : m.all) {
    s += comment_safe(fmt::format("     {:6} {:8} {} {}\n", t->role == TensorRole::Input ? "input" : "output",
                                  t->name, t->fixed_dtype ? std::string(dtype_name(*t->fixed_dtype)) : "op",
                                  shape_text(*t)));
  }
  if (!k.params.empty()) {
    s += "   Params (double):";
    for (const ParamDecl& p : k.params) s += fmt::format(" {} (contract value {})", p.name, p.value);
    s += "\n";
  }
  std::vector<std::string> typed_order, abi_order;
  for (int z : m.typed_free) typed_order.push_back(c.sizes[static_cast<size_t>(z)].name);
  for (int z : m.free) abi_order.push_back(c.sizes[static_cast<size_t>(z)].name);
  s += fmt::format(
      "   Free sizes: {} (the typed entry points' order; cake_{}_run's params hold them as {}).\n",
      typed_order.empty() ? "none" : join(typed_order, ", "), m.op,
      abi_order.empty() ? "none" : join(abi_order, ", "));
  if (!m.derived.empty()) {
    s += "   Derived sizes:";
    for (int z : m.derived)
      s += comment_safe(fmt::format(" {} = {};", c.sizes[static_cast<size_t>(z)].name,
                                    te::print_expr(*c.sizes[static_cast<size_t>(z)].expr)));
    s += "\n";
  }
  if (!k.constraints.empty()) {
    s += "   Constraints:";
    for (const te::ExprPtr& e : k.constraints) s += comment_safe(" " + te::print_expr(*e) + ";");
    s += "\n";
  }
  s += fmt::format(
      "\n   Every entry point returns 0 on success, a CAKE_ERR_* code otherwise; cake_{0}_last_error() then\n"
      "   says what was wrong. The kernel (cake_{0}_kernel.so beside libcake_{0}.so) is loaded on first "
      "use.\n"
      "   All entry points are thread-safe; the kernel may use several threads (OpenMP) itself. */\n",
      m.op);
  s += fmt::format("#ifndef CAKE_OP_{0}_H\n#define CAKE_OP_{0}_H\n\n#include <stdint.h>\n", up);
  if (uses_bool(c, m)) s += "#include <stdbool.h>\n";
  s += "\n#include \"cake_kernel_abi.h\"\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  s += fmt::format(
      "#ifndef CAKE_ERR_LOAD\n#define CAKE_ERR_LOAD {} /* the package's kernel library could not be loaded "
      "*/\n"
      "#endif\n\n",
      kErrLoad);
  s += fmt::format("#define CAKE_{}_N_INPUTS {}\n#define CAKE_{}_N_OUTPUTS {}\n", up, m.ins.size(), up,
                   m.outs.size());
  s += fmt::format("#define CAKE_{}_N_PARAMS {} /* scalars of cake_{}_run: {} */\n\n", up, m.n_scalars, m.op,
                   scalar_list(c, m));
  s += fmt::format(
      "/* The uniform C ABI (cake_kernel_abi.h): inputs {}; outputs {}; params = {}.\n"
      "   Every tensor's dtype, rank, shape and layout is checked against the sizes in params. */\n",
      join(
          [&] {
            std::vector<std::string> v;
            for (const TensorInfo* t : m.ins) v.push_back(t->name + shape_text(*t));
            return v;
          }(),
          ", "),
      join(
          [&] {
            std::vector<std::string> v;
            for (const TensorInfo* t : m.outs) v.push_back(t->name + shape_text(*t));
            return v;
          }(),
          ", "),
      scalar_list(c, m));
  s += fmt::format(
      "int cake_{}_run(const cake_tensor* in, int n_in, cake_tensor* out, int n_out,\n"
      "    const double* params, int n_params);\n\n",
      m.op);
  for (DType d : k.dtypes) {
    std::string shapes;
    for (const TensorInfo* t : m.all)
      shapes += fmt::format(" {}: {} {};", t->name, dtype_name(t->dtype_for(d)), shape_text(*t));
    std::vector<std::string> order;
    for (int z : m.typed_free) order.push_back(c.sizes[static_cast<size_t>(z)].name);
    s += "/* " +
         comment_safe(fmt::format("{} entry point:{} then the params, then the free sizes ({}).",
                                  std::string(dtype_name(d)), shapes,
                                  order.empty() ? "none" : join(order, ", "))) +
         " */\n";
    s += typed_entry_decl(c, d) + ";\n\n";
  }
  s += fmt::format(
      "/* Loads the kernel now (otherwise the first call does): 0, or CAKE_ERR_LOAD with the reason in\n"
      "   cake_{0}_last_error(). */\nint cake_{0}_load(void);\n\n"
      "/* What the calling thread's last failing call reported (\"\" after a successful one). */\n"
      "const char* cake_{0}_last_error(void);\n\n"
      "/* The content hash of the contract this package implements. */\n"
      "const char* cake_{0}_contract_hash(void);\n\n",
      m.op);
  s += fmt::format("#ifdef __cplusplus\n}}\n#endif\n\n#endif /* CAKE_OP_{}_H */\n", up);
  return s;
}

// ---------------------------------------------------------------------------------------------------
// the wrapper library

std::string wrapper_source(const CheckedContract& c) {
  const Model m = model(c);
  const Contract& k = c.contract;
  const std::string& op = m.op;
  const size_t nin = m.ins.size(), nout = m.outs.size(), nt = m.all.size();
  std::string s;
  s += fmt::format(
      "/* libcake_{0}.so, generated by CAKE: validates every call against the contract of `{0}` and runs "
      "the\n"
      "   verified kernel cake_{0}_kernel.so from this library's own directory, loaded on first use with\n"
      "   RTLD_LOCAL so that several packages live in one program although every kernel exports cake_run. "
      "*/\n"
      "#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <pthread.h>\n#include <stdarg.h>\n#include "
      "<stdio.h>\n"
      "#include <string.h>\n\n#include \"cake_{0}.h\"\n\n"
      "#define CAKE_W_EXPORT __attribute__((visibility(\"default\")))\n"
      "#define CAKE_W_NIN {1}\n#define CAKE_W_NOUT {2}\n#define CAKE_W_NPARAMS {3}\n#define CAKE_W_NSCALARS "
      "{4}\n"
      "#define CAKE_W_NSIZES {5}\n#define CAKE_W_NFREE {6}\n\n",
      op, nin, nout, m.n_params, m.n_scalars, c.sizes.size(), m.free.size());
  // Tables.
  auto table = [&](const char* type, const char* name, const std::vector<std::string>& v) {
    s += fmt::format("static const {} {}[] = {{{}}};\n", type, name, v.empty() ? "0" : join(v, ", "));
  };
  std::vector<std::string> names, fixed, dims, dts, free_names;
  for (const TensorInfo* t : m.all) {
    names.push_back(c_string(t->name));
    fixed.push_back(t->fixed_dtype ? std::to_string(static_cast<int>(*t->fixed_dtype)) : "-1");
    dims.push_back(c_string(shape_text(*t)));
  }
  for (DType d : k.dtypes) dts.push_back(std::to_string(static_cast<int>(d)));
  for (int z : m.free) free_names.push_back(c_string(c.sizes[static_cast<size_t>(z)].name));
  table("char* const", "cake_w_names", names);
  table("int32_t", "cake_w_fixed", fixed);
  table("char* const", "cake_w_dims", dims);
  table("int32_t", "cake_w_dtypes", dts);
  table("char* const", "cake_w_free_names", free_names);
  s += fmt::format(
      "#define CAKE_W_NDTYPES {}\n#define CAKE_W_DTYPE_TEXT {}\n#define CAKE_W_SCALAR_TEXT {}\n\n",
      dts.size(), c_string(dtype_list(c)), c_string(scalar_list(c, m)));

  s += "static _Thread_local char cake_w_msg[1024];\nstatic _Thread_local int cake_w_divzero;\n\n";
  s += "static int cake_w_fail(int code, const char* fmt, ...) {\n  va_list ap;\n  va_start(ap, fmt);\n"
       "  vsnprintf(cake_w_msg, sizeof cake_w_msg, fmt, ap);\n  va_end(ap);\n  return code;\n}\n\n";
  s += size_helpers("cake_w_divzero = 1;", "static ");
  s += "\nstatic const char* cake_w_dtype_name(int32_t d) {\n"
       "  static const char* const n[] = {\"f32\", \"f16\", \"bf16\", \"i32\", \"i64\", \"i8\", \"bool\"};\n"
       "  return d >= 0 && d <= 6 ? n[d] : \"an unknown dtype\";\n}\n\n";
  s += "static const char* cake_w_code_text(int rc) {\n  switch (rc) {\n"
       "    case CAKE_ERR_ARGS: return \"wrong number of tensors or params\";\n"
       "    case CAKE_ERR_SHAPE: return \"a tensor's shape disagrees with the sizes\";\n"
       "    case CAKE_ERR_INDEX: return \"a data-dependent index is out of range\";\n"
       "    case CAKE_ERR_LAYOUT: return \"a tensor is not dense row-major\";\n"
       "    case CAKE_ERR_DTYPE: return \"a dtype the kernel was not built for\";\n"
       "    case CAKE_ERR_NOMEM: return \"scratch allocation failed\";\n"
       "    case CAKE_ERR_DEVICE: return \"the device failed\";\n"
       "    default: return \"unknown error code\";\n  }\n}\n\n";
  s += "static void cake_w_shape_str(char* buf, size_t n, const int64_t* shape, int rank) {\n"
       "  size_t u = (size_t)snprintf(buf, n, \"[\");\n"
       "  for (int i = 0; i < rank && u < n; ++i)\n"
       "    u += (size_t)snprintf(buf + u, n - u, \"%s%lld\", i ? \", \" : \"\", (long long)shape[i]);\n"
       "  if (u < n) snprintf(buf + u, n - u, \"]\");\n}\n\n";
  s += "static void cake_w_free_str(char* buf, size_t n, const int64_t* sz) {\n  size_t u = 0;\n  buf[0] = "
       "0;\n"
       "  for (int i = 0; i < CAKE_W_NFREE && u < n; ++i)\n"
       "    u += (size_t)snprintf(buf + u, n - u, \"%s%s = %lld\", i ? \", \" : \"\", cake_w_free_names[i], "
       "(long long)sz[i]);\n  (void)sz;\n}\n\n";

  // Sizes from the scalars.
  s += "/* Every size symbol from the scalars: free ones validated, derived ones computed, constraints "
       "checked. */\n"
       "static int cake_w_sizes(const char* fn, const double* params, int64_t* sz) {\n"
       "  char fs[512];\n  (void)fs;\n  (void)params;\n  cake_w_divzero = 0;\n";
  for (size_t i = 0; i < m.free.size(); ++i) {
    const std::string& name = c.sizes[static_cast<size_t>(m.free[i])].name;
    s += fmt::format(
        "  {{\n    const double v = params[CAKE_W_NPARAMS + {0}];\n"
        "    if (!(v >= 0.0 && v <= 9.0e15) || (double)(int64_t)v != v)\n"
        "      return cake_w_fail(CAKE_ERR_SHAPE, \"%s: size {1} = %g is not a non-negative integer\", fn, "
        "v);\n"
        "    sz[{2}] = (int64_t)v;\n  }}\n",
        i, name, m.free[i]);
  }
  for (int z : m.free)
    s += fmt::format("  const int64_t s_{0} = sz[{1}];\n  (void)s_{0};\n", c.sizes[z].name, z);
  s += "  cake_w_free_str(fs, sizeof fs, sz);\n";
  for (int z : m.derived) {
    const SizeInfo& si = c.sizes[static_cast<size_t>(z)];
    const std::string text = si.name + " = " + te::print_expr(*si.expr);
    s += fmt::format("  const int64_t s_{0} = {1};\n  (void)s_{0};\n  sz[{2}] = s_{0};\n", si.name,
                     size_expr(*si.expr), z);
    s += fmt::format(
        "  if (cake_w_divzero)\n    return cake_w_fail(CAKE_ERR_SHAPE, \"%s: size %s divides by zero (%s)\", "
        "fn, "
        "{}, fs);\n",
        c_string(text));
  }
  for (const auto& [expr, text] : constraints(c)) {
    s += fmt::format(
        "  if (!({}))\n    return cake_w_fail(CAKE_ERR_SHAPE, \"%s: constraint %s does not hold (%s)\", fn, "
        "{}, fs);\n",
        expr, c_string(text));
  }
  for (int z : m.derived) {
    const SizeInfo& si = c.sizes[static_cast<size_t>(z)];
    s += fmt::format(
        "  if (s_{0} < 0)\n    return cake_w_fail(CAKE_ERR_SHAPE, \"%s: size {0} = %lld is negative (%s)\", "
        "fn, "
        "(long long)s_{0}, fs);\n",
        si.name);
  }
  s += "  return CAKE_OK;\n}\n\n";

  // Shapes.
  s += "/* The contract's shape of tensor j (inputs, then outputs) for these sizes; returns its rank. */\n"
       "static int cake_w_shape(int j, const int64_t* sz, int64_t* shape) {\n";
  s += unpack_sizes(c, "sz");
  s += "  (void)shape;\n  switch (j) {\n";
  for (size_t j = 0; j < nt; ++j) {
    s += fmt::format("    case {}:\n", j);
    for (size_t d = 0; d < m.all[j]->dims.size(); ++d)
      s += fmt::format("      shape[{}] = {};\n", d, size_expr(*m.all[j]->dims[d]));
    s += fmt::format("      return {};\n", m.all[j]->dims.size());
  }
  s += "    default:\n      return 0;\n  }\n}\n\n";

  s += "static int cake_w_check(const char* fn, int j, const cake_tensor* t, int32_t want, const int64_t* "
       "sz) {\n"
       "  int64_t shape[CAKE_MAX_RANK];\n  char a[256], b[256];\n"
       "  const int rank = cake_w_shape(j, sz, shape);\n"
       "  const char* role = j < CAKE_W_NIN ? \"input\" : \"output\";\n"
       "  if (t->dtype != want)\n"
       "    return cake_w_fail(CAKE_ERR_DTYPE, \"%s: %s %s has dtype %s, expected %s\", fn, role, "
       "cake_w_names[j],\n"
       "                       cake_w_dtype_name(t->dtype), cake_w_dtype_name(want));\n"
       "  if (t->rank != rank)\n"
       "    return cake_w_fail(CAKE_ERR_SHAPE, \"%s: %s %s has rank %d, expected %d (%s)\", fn, role, "
       "cake_w_names[j],\n                       (int)t->rank, rank, cake_w_dims[j]);\n"
       "  for (int i = 0; i < rank; ++i)\n    if (t->shape[i] != shape[i]) {\n"
       "      cake_w_shape_str(a, sizeof a, t->shape, rank);\n      cake_w_shape_str(b, sizeof b, shape, "
       "rank);\n"
       "      return cake_w_fail(CAKE_ERR_SHAPE, \"%s: %s %s has shape %s, expected %s = %s\", fn, role, "
       "cake_w_names[j], a,\n                         cake_w_dims[j], b);\n    }\n"
       "  int64_t st = 1;\n  for (int i = rank - 1; i >= 0; --i) {\n"
       "    if (shape[i] > 1 && t->stride[i] != st)\n"
       "      return cake_w_fail(CAKE_ERR_LAYOUT, \"%s: %s %s is not dense row-major (stride[%d] = %lld, "
       "expected "
       "%lld)\", fn,\n                         role, cake_w_names[j], i, (long long)t->stride[i], (long "
       "long)st);\n"
       "    st *= shape[i];\n  }\n"
       "  if (st > 0 && !t->data) return cake_w_fail(CAKE_ERR_ARGS, \"%s: %s %s has no data\", fn, role, "
       "cake_w_names[j]);\n"
       "  return CAKE_OK;\n}\n\n";

  // Loading the kernel.
  s += fmt::format(
      "static pthread_mutex_t cake_w_lock = PTHREAD_MUTEX_INITIALIZER;\n"
      "static cake_run_fn cake_w_kernel; /* set once under the lock, read with acquire */\n\n"
      "static int cake_w_load(void) {{\n"
      "  if (__atomic_load_n(&cake_w_kernel, __ATOMIC_ACQUIRE)) return CAKE_OK;\n"
      "  static const char kFile[] = \"/cake_{0}_kernel.so\";\n"
      "  int rc = CAKE_OK;\n  pthread_mutex_lock(&cake_w_lock);\n"
      "  if (!cake_w_kernel) {{\n    Dl_info info;\n    char path[4096];\n"
      "    memset(&info, 0, sizeof info);\n"
      "    if (!dladdr((void*)&cake_w_load, &info) || !info.dli_fname) {{\n"
      "      rc = cake_w_fail(CAKE_ERR_LOAD, \"cake_{0}: cannot find where libcake_{0}.so lives (dladdr "
      "failed)\");\n"
      "    }} else {{\n"
      "      const char* slash = strrchr(info.dli_fname, '/');\n"
      "      const size_t n = slash ? (size_t)(slash - info.dli_fname) : 1;\n"
      "      if (n + sizeof kFile > sizeof path) {{\n"
      "        rc = cake_w_fail(CAKE_ERR_LOAD, \"cake_{0}: the path of libcake_{0}.so is too long\");\n"
      "      }} else {{\n"
      "        memcpy(path, slash ? info.dli_fname : \".\", n);\n        memcpy(path + n, kFile, sizeof "
      "kFile);\n"
      "        void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);\n"
      "        if (!h) {{\n          const char* e = dlerror();\n"
      "          rc = cake_w_fail(CAKE_ERR_LOAD, \"cake_{0}: cannot load the kernel %s: %s\", path, e ? e : "
      "\"?\");\n"
      "        }} else {{\n          void* f = dlsym(h, \"cake_run\");\n"
      "          if (!f) {{\n"
      "            rc = cake_w_fail(CAKE_ERR_LOAD, \"cake_{0}: the kernel %s does not export cake_run\", "
      "path);\n"
      "            dlclose(h);\n"
      "          }} else {{\n            cake_run_fn fp;\n            memcpy(&fp, &f, sizeof fp);\n"
      "            __atomic_store_n(&cake_w_kernel, fp, __ATOMIC_RELEASE);\n          }}\n        }}\n      "
      "}}\n"
      "    }}\n  }}\n  pthread_mutex_unlock(&cake_w_lock);\n  return rc;\n}}\n\n",
      op);

  s += fmt::format(
      "CAKE_W_EXPORT const char* cake_{0}_last_error(void) {{ return cake_w_msg; }}\n\n"
      "CAKE_W_EXPORT const char* cake_{0}_contract_hash(void) {{ return {1}; }}\n\n"
      "CAKE_W_EXPORT int cake_{0}_load(void) {{\n  const int rc = cake_w_load();\n"
      "  if (rc == CAKE_OK) cake_w_msg[0] = 0;\n  return rc;\n}}\n\n",
      op, c_string(c.hash));

  // cake_<op>_run.
  const int odt = op_dtype_tensor(m);
  std::string op_dtype = std::to_string(static_cast<int>(k.dtypes.front()));
  if (odt >= 0)
    op_dtype = static_cast<size_t>(odt) < nin ? fmt::format("in[{}].dtype", odt)
                                              : fmt::format("out[{}].dtype", static_cast<size_t>(odt) - nin);
  s += "CAKE_W_EXPORT " + run_decl(m) + " {\n";
  s += fmt::format("  static const char fn[] = \"cake_{}_run\";\n", op);
  s += "  if (n_in != CAKE_W_NIN || n_out != CAKE_W_NOUT)\n"
       "    return cake_w_fail(CAKE_ERR_ARGS, \"%s: expected %d input and %d output tensors, got %d and "
       "%d\", fn,\n"
       "                       CAKE_W_NIN, CAKE_W_NOUT, n_in, n_out);\n"
       "  if ((CAKE_W_NIN > 0 && !in) || (CAKE_W_NOUT > 0 && !out))\n"
       "    return cake_w_fail(CAKE_ERR_ARGS, \"%s: the tensor arrays must not be null\", fn);\n"
       "  if (n_params < CAKE_W_NSCALARS || (CAKE_W_NSCALARS > 0 && !params))\n"
       "    return cake_w_fail(CAKE_ERR_ARGS, \"%s: expected %d params (%s), got %d\", fn, CAKE_W_NSCALARS,\n"
       "                       CAKE_W_SCALAR_TEXT, n_params);\n"
       "  int64_t sz[CAKE_W_NSIZES > 0 ? CAKE_W_NSIZES : 1];\n"
       "  int rc = cake_w_sizes(fn, params, sz);\n  if (rc) return rc;\n";
  s += fmt::format("  const int32_t op_dtype = {};\n", op_dtype);
  s +=
      "  int known = 0;\n  for (int i = 0; i < CAKE_W_NDTYPES; ++i) known |= cake_w_dtypes[i] == op_dtype;\n";
  s += fmt::format(
      "  if (!known)\n    return cake_w_fail(CAKE_ERR_DTYPE, \"%s: %s has dtype %s; the operator supports "
      "%s\", fn, "
      "{}, cake_w_dtype_name(op_dtype), CAKE_W_DTYPE_TEXT);\n",
      odt >= 0 ? fmt::format("cake_w_names[{}]", odt) : "\"the call\"");
  s +=
      "  for (int j = 0; j < CAKE_W_NIN + CAKE_W_NOUT; ++j) {\n"
      "    const cake_tensor* t = j < CAKE_W_NIN ? &in[j] : &out[j - CAKE_W_NIN];\n"
      "    rc = cake_w_check(fn, j, t, cake_w_fixed[j] >= 0 ? cake_w_fixed[j] : op_dtype, sz);\n"
      "    if (rc) return rc;\n  }\n"
      "  rc = cake_w_load();\n  if (rc) return rc;\n"
      "  rc = cake_w_kernel(in, n_in, out, n_out, params, n_params);\n"
      "  if (rc) return cake_w_fail(rc, \"%s: the kernel returned %d (%s)\", fn, rc, cake_w_code_text(rc));\n"
      "  cake_w_msg[0] = 0;\n  return CAKE_OK;\n}\n\n";

  // Typed entry points.
  for (DType d : k.dtypes) {
    s += fmt::format("CAKE_W_EXPORT int {}({}) {{\n", typed_entry_name(c, d), typed_args(c, m, d, true));
    s += fmt::format("  static const char fn[] = \"{}\";\n", typed_entry_name(c, d));
    std::vector<std::string> sc;
    for (const ParamDecl& p : k.params) sc.push_back("a_" + p.name);
    for (int z : m.free) sc.push_back("(double)a_" + c.sizes[static_cast<size_t>(z)].name);
    s += fmt::format("  const double p[CAKE_W_NSCALARS > 0 ? CAKE_W_NSCALARS : 1] = {{{}}};\n",
                     sc.empty() ? "0" : join(sc, ", "));
    s += "  int64_t sz[CAKE_W_NSIZES > 0 ? CAKE_W_NSIZES : 1];\n  const int rc = cake_w_sizes(fn, p, sz);\n"
         "  if (rc) return rc;\n  cake_tensor t[CAKE_W_NIN + CAKE_W_NOUT > 0 ? CAKE_W_NIN + CAKE_W_NOUT : "
         "1];\n"
         "  memset(t, 0, sizeof t);\n";
    for (size_t j = 0; j < nt; ++j) {
      s += fmt::format(
          "  t[{0}].data = (void*){1};\n  t[{0}].dtype = {2};\n  t[{0}].rank = cake_w_shape({0}, sz, "
          "t[{0}].shape);\n",
          j, "a_" + m.all[j]->name, static_cast<int>(m.all[j]->dtype_for(d)));
    }
    s += "  for (int j = 0; j < CAKE_W_NIN + CAKE_W_NOUT; ++j) {\n    int64_t st = 1;\n"
         "    for (int i = t[j].rank - 1; i >= 0; --i) {\n      t[j].stride[i] = st;\n      st *= "
         "t[j].shape[i];\n"
         "    }\n  }\n";
    s += fmt::format(
        "  const int r = cake_{}_run(t, CAKE_W_NIN, t + CAKE_W_NIN, CAKE_W_NOUT, p, CAKE_W_NSCALARS);\n", op);
    s += "  if (r) {\n    char m[sizeof cake_w_msg];\n    memcpy(m, cake_w_msg, sizeof m);\n"
         "    const char* tail = strncmp(m, \"cake_\", 5) == 0 && strchr(m, ':') ? strchr(m, ':') + 2 : m;\n"
         "    snprintf(cake_w_msg, sizeof cake_w_msg, \"%s: %.900s\", fn, tail);\n  }\n  return r;\n}\n\n";
  }
  return s;
}

// ---------------------------------------------------------------------------------------------------
// CMake package

std::string cmake_config(const CheckedContract& c) {
  const Model m = model(c);
  const std::string& op = m.op;
  return fmt::format(
      "# CMake package of the CAKE operator `{0}` (generated by CAKE): the imported target cake::{0}.\n"
      "#   find_package(cake_{0} REQUIRED)\n#   target_link_libraries(app PRIVATE cake::{0})\n"
      "# Sets cake_{0}_INCLUDE_DIR, cake_{0}_LIBRARY, cake_{0}_KERNEL, cake_{0}_TORCH_DIR, "
      "cake_{0}_CONTRACT,\n"
      "# cake_{0}_CONTRACT_HASH and cake_{0}_DTYPES.\n"
      "get_filename_component(_cake_{0}_prefix \"${{CMAKE_CURRENT_LIST_DIR}}/../../..\" ABSOLUTE)\n"
      "foreach(_cake_{0}_file lib/libcake_{0}.so lib/cake_{0}_kernel.so include/cake_{0}.h "
      "include/cake_kernel_abi.h)\n"
      "  if(NOT EXISTS \"${{_cake_{0}_prefix}}/${{_cake_{0}_file}}\")\n"
      "    set(cake_{0}_FOUND FALSE)\n"
      "    set(cake_{0}_NOT_FOUND_MESSAGE \"the package at ${{_cake_{0}_prefix}} lacks "
      "${{_cake_{0}_file}}\")\n"
      "    return()\n  endif()\nendforeach()\n"
      "if(NOT TARGET cake::{0})\n"
      "  add_library(cake::{0} SHARED IMPORTED)\n"
      "  set_target_properties(cake::{0} PROPERTIES\n"
      "    IMPORTED_LOCATION \"${{_cake_{0}_prefix}}/lib/libcake_{0}.so\"\n"
      "    IMPORTED_SONAME \"libcake_{0}.so\"\n"
      "    INTERFACE_INCLUDE_DIRECTORIES \"${{_cake_{0}_prefix}}/include\")\n"
      "endif()\n"
      "set(cake_{0}_INCLUDE_DIR \"${{_cake_{0}_prefix}}/include\")\n"
      "set(cake_{0}_LIBRARY \"${{_cake_{0}_prefix}}/lib/libcake_{0}.so\")\n"
      "set(cake_{0}_KERNEL \"${{_cake_{0}_prefix}}/lib/cake_{0}_kernel.so\")\n"
      "set(cake_{0}_TORCH_DIR \"${{_cake_{0}_prefix}}/torch\")\n"
      "set(cake_{0}_CONTRACT \"${{_cake_{0}_prefix}}/share/contract.yaml\")\n"
      "set(cake_{0}_CONTRACT_HASH \"{1}\")\n"
      "set(cake_{0}_DTYPES {2})\n"
      "unset(_cake_{0}_prefix)\nunset(_cake_{0}_file)\n",
      op, c.hash, [&] {
        std::string s;
        for (DType d : c.contract.dtypes) s += (s.empty() ? "" : " ") + std::string(dtype_name(d));
        return s;
      }());
}

std::string cmake_config_version(std::string_view version) {
  return fmt::format(
      "# Version file of a CAKE operator package: compatible with any requested version of the same major\n"
      "# version not newer than this one; 64-bit only.\n"
      "set(PACKAGE_VERSION \"{}\")\n"
      "if(NOT CMAKE_SIZEOF_VOID_P STREQUAL \"8\" AND NOT CMAKE_SIZEOF_VOID_P STREQUAL \"\")\n"
      "  set(PACKAGE_VERSION_UNSUITABLE TRUE)\n"
      "  set(PACKAGE_VERSION \"${{PACKAGE_VERSION}} (64bit)\")\n"
      "  return()\nendif()\n"
      "if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)\n"
      "  set(PACKAGE_VERSION_COMPATIBLE FALSE)\n"
      "else()\n"
      "  string(REGEX MATCH \"^[0-9]+\" _cake_major \"${{PACKAGE_VERSION}}\")\n"
      "  if(PACKAGE_FIND_VERSION_MAJOR STREQUAL \"\" OR PACKAGE_FIND_VERSION_MAJOR STREQUAL _cake_major)\n"
      "    set(PACKAGE_VERSION_COMPATIBLE TRUE)\n"
      "  else()\n    set(PACKAGE_VERSION_COMPATIBLE FALSE)\n  endif()\n"
      "  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)\n    set(PACKAGE_VERSION_EXACT TRUE)\n  endif()\n"
      "  unset(_cake_major)\nendif()\n",
      version);
}

// ---------------------------------------------------------------------------------------------------
// PyTorch custom op

namespace {

// The dtype schema argument exists only when no input carries the operator dtype (a cast's output).
bool torch_needs_dtype_arg(const Model& m) {
  for (const TensorInfo* t : m.ins)
    if (!t->fixed_dtype) return false;
  for (const TensorInfo* t : m.outs)
    if (!t->fixed_dtype) return true;
  return false;
}

}  // namespace

std::string torch_schema(const CheckedContract& c) {
  const Model m = model(c);
  std::vector<std::string> a;
  for (const TensorInfo* t : m.ins) a.push_back("Tensor " + arg_name(t->name));
  for (const ParamDecl& p : c.contract.params)
    a.push_back("float " + arg_name(p.name) + (std::isfinite(p.value) ? "=" + schema_float(p.value) : ""));
  for (const SizeSource& z : size_sources(c, m))
    if (z.tensor < 0) a.push_back("int " + arg_name(c.sizes[static_cast<size_t>(z.slot)].name));
  if (torch_needs_dtype_arg(m)) a.push_back("ScalarType dtype");
  std::string ret = "Tensor";
  if (m.outs.size() != 1) {
    std::vector<std::string> r(m.outs.size(), "Tensor");
    ret = "(" + join(r, ", ") + ")";
  }
  return fmt::format("{}({}) -> {}", m.op, join(a, ", "), ret);
}

std::string torch_source(const CheckedContract& c) {
  const Model m = model(c);
  const Contract& k = c.contract;
  const std::string& op = m.op;
  const std::vector<SizeSource> srcs = size_sources(c, m);
  const bool dtype_arg = torch_needs_dtype_arg(m);
  std::string s;
  s += fmt::format(
      "// cake_{0}_torch.cpp, generated by CAKE: the PyTorch custom op cake::{0} over the operator package's "
      "C\n"
      "// library (cake_{0}_run). Schema: cake::{1}\n"
      "// Inputs must be CPU tensors of the contract's dtypes (non-contiguous ones are made contiguous); "
      "free sizes\n"
      "// come from the input shapes, or from the int arguments of the schema; outputs are allocated here.\n"
      "#include <ATen/core/Tensor.h>\n#include <ATen/ops/empty.h>\n#include <c10/util/Exception.h>\n"
      "#include <torch/library.h>\n\n#include <cstdint>\n#include <tuple>\n#include <vector>\n\n"
      "#include \"cake_{0}.h\"\n\nnamespace {{\n\n",
      op, torch_schema(c));
  s += size_helpers(fmt::format("TORCH_CHECK(false, \"cake::{}: a size expression divides by zero\");", op),
                    "");
  s += "\nint32_t cake_w_code(at::ScalarType t) {\n  switch (t) {\n"
       "    case at::kFloat: return 0;\n    case at::kHalf: return 1;\n    case at::kBFloat16: return 2;\n"
       "    case at::kInt: return 3;\n    case at::kLong: return 4;\n    case at::kChar: return 5;\n"
       "    case at::kBool: return 6;\n    default: return -1;\n  }\n}\n\n";
  s += "cake_tensor cake_w_view(const at::Tensor& t, int32_t code) {\n  cake_tensor v{};\n  v.data = "
       "t.data_ptr();\n"
       "  v.dtype = code;\n  v.rank = static_cast<int32_t>(t.dim());\n  int64_t st = 1;\n"
       "  for (int i = v.rank - 1; i >= 0; --i) {\n    v.shape[i] = t.size(i);\n    v.stride[i] = st;\n"
       "    st *= t.size(i);\n  }\n  return v;\n}\n\n";
  s += fmt::format(
      "void cake_w_expect(const char* name, const at::Tensor& t, const std::vector<int64_t>& want, const "
      "char* "
      "spelled) {{\n"
      "  TORCH_CHECK(t.sizes() == c10::IntArrayRef(want), \"cake::{}: \", name, \" has shape \", t.sizes(),\n"
      "              \", expected \", spelled, \" = \", c10::IntArrayRef(want));\n}}\n\n",
      op);

  // The impl's signature.
  std::vector<std::string> a;
  for (const TensorInfo* t : m.ins) a.push_back("const at::Tensor& a_" + t->name);
  for (const ParamDecl& p : k.params) a.push_back("double a_" + p.name);
  for (const SizeSource& z : srcs)
    if (z.tensor < 0) a.push_back("int64_t a_" + c.sizes[static_cast<size_t>(z.slot)].name);
  if (dtype_arg) a.push_back("at::ScalarType a_dtype");
  std::string ret = "at::Tensor";
  if (m.outs.size() != 1) {
    std::vector<std::string> r(m.outs.size(), "at::Tensor");
    ret = "std::tuple<" + join(r, ", ") + ">";
  }
  s += fmt::format("{} cake_w_{}({}) {{\n", ret, op, join(a, ", "));
  // Ranks.
  for (const TensorInfo* t : m.ins)
    s += fmt::format(
        "  TORCH_CHECK(a_{0}.dim() == {1}, \"cake::{2}: {0} must have rank {1} ({3}), got \", "
        "a_{0}.dim());\n",
        t->name, t->dims.size(), op, shape_text(*t));
  // Dtypes: the operator dtype comes from the first input without a fixed dtype, or the dtype argument.
  std::vector<std::string> allowed, allowed_text;
  for (DType d : k.dtypes) {
    allowed.push_back(fmt::format("op_dtype == {}", static_cast<int>(d)));
    allowed_text.push_back(torch_dtype_text(d));
  }
  const TensorInfo* lead = nullptr;
  for (const TensorInfo* t : m.ins)
    if (!t->fixed_dtype) {
      lead = t;
      break;
    }
  const std::string op_st = lead ? "a_" + lead->name + ".scalar_type()" : dtype_arg ? "a_dtype" : "";
  if (!op_st.empty()) {
    s += fmt::format("  const at::ScalarType op_st = {};\n  const int32_t op_dtype = cake_w_code(op_st);\n",
                     op_st);
    s += fmt::format("  TORCH_CHECK({}, \"cake::{}: {} \", op_st, \"; the operator supports {}\");\n",
                     join(allowed, " || "), op, lead ? lead->name + " has dtype" : "dtype is",
                     join(allowed_text, ", "));
  } else {
    s += fmt::format("  const int32_t op_dtype = {};\n  (void)op_dtype;\n",
                     static_cast<int>(k.dtypes.front()));
  }
  for (const TensorInfo* t : m.ins) {
    if (t == lead) continue;
    if (t->fixed_dtype) {
      s += fmt::format(
          "  TORCH_CHECK(a_{0}.scalar_type() == {1}, \"cake::{2}: {0} must be {3}, got \", "
          "a_{0}.scalar_type());\n",
          t->name, torch_scalar_type(*t->fixed_dtype), op, torch_dtype_text(*t->fixed_dtype));
    } else {
      s += fmt::format(
          "  TORCH_CHECK(a_{0}.scalar_type() == op_st, \"cake::{1}: {0} has dtype \", "
          "a_{0}.scalar_type(), \", expected \", op_st, \" (as {2})\");\n",
          t->name, op, lead->name);
    }
  }
  for (const TensorInfo* t : m.ins)
    s += fmt::format("  const at::Tensor {} = a_{}.contiguous();\n", tensor_local(t->name), t->name);
  // Sizes.
  for (const SizeSource& z : srcs) {
    const std::string& name = c.sizes[static_cast<size_t>(z.slot)].name;
    if (z.tensor < 0) {
      s +=
          fmt::format("  TORCH_CHECK(a_{0} >= 0, \"cake::{1}: {0} must be >= 0, got \", a_{0});\n", name, op);
      s += fmt::format("  const int64_t s_{0} = a_{0};\n", name);
    } else {
      const std::string tn = tensor_local(m.ins[static_cast<size_t>(z.tensor)]->name);
      if (z.factor == 1) {
        s += fmt::format("  const int64_t s_{} = {}.size({});\n", name, tn, z.dim);
      } else {
        s += fmt::format(
            "  TORCH_CHECK({0}.size({1}) % {2} == 0, \"cake::{3}: dim {1} of {4} must be a multiple "
            "of {2}, got \", {0}.size({1}));\n",
            tn, z.dim, z.factor, op, m.ins[static_cast<size_t>(z.tensor)]->name);
        s += fmt::format("  const int64_t s_{} = {}.size({}) / {};\n", name, tn, z.dim, z.factor);
      }
    }
    s += fmt::format("  (void)s_{};\n", name);
  }
  for (int z : m.derived) {
    const SizeInfo& si = c.sizes[static_cast<size_t>(z)];
    s += fmt::format("  const int64_t s_{0} = {1};\n  (void)s_{0};\n", si.name, size_expr(*si.expr));
  }
  for (const auto& [expr, text] : constraints(c))
    s += fmt::format("  TORCH_CHECK({}, \"cake::{}: constraint \", {}, \" does not hold\");\n", expr, op,
                     c_string(text));
  for (int z : m.derived)
    s += fmt::format("  TORCH_CHECK(s_{0} >= 0, \"cake::{1}: size {0} = \", s_{0}, \" is negative\");\n",
                     c.sizes[static_cast<size_t>(z)].name, op);
  auto shape_vec = [&](const TensorInfo& t) {
    std::vector<std::string> v;
    for (const te::ExprPtr& d : t.dims) v.push_back(size_expr(*d));
    return "std::vector<int64_t>{" + join(v, ", ") + "}";
  };
  for (const TensorInfo* t : m.ins)
    s += fmt::format("  cake_w_expect(\"{}\", {}, {}, {});\n", t->name, tensor_local(t->name), shape_vec(*t),
                     c_string(shape_text(*t)));
  // Outputs.
  for (const TensorInfo* t : m.outs) {
    const std::string st = t->fixed_dtype ? torch_scalar_type(*t->fixed_dtype) : "op_st";
    s += fmt::format("  at::Tensor {} = at::empty({}, at::TensorOptions().dtype({}).device(at::kCPU));\n",
                     tensor_local(t->name), shape_vec(*t), st);
  }
  auto code = [&](const TensorInfo& t) {
    return t.fixed_dtype ? std::to_string(static_cast<int>(*t.fixed_dtype)) : std::string("op_dtype");
  };
  std::vector<std::string> vin, vout, sc;
  for (const TensorInfo* t : m.ins)
    vin.push_back(fmt::format("cake_w_view({}, {})", tensor_local(t->name), code(*t)));
  for (const TensorInfo* t : m.outs)
    vout.push_back(fmt::format("cake_w_view({}, {})", tensor_local(t->name), code(*t)));
  for (const ParamDecl& p : k.params) sc.push_back("a_" + p.name);
  for (int z : m.free) sc.push_back("static_cast<double>(s_" + c.sizes[static_cast<size_t>(z)].name + ")");
  s += fmt::format("  const cake_tensor in[] = {{{}}};\n  cake_tensor out[] = {{{}}};\n", join(vin, ", "),
                   join(vout, ", "));
  if (sc.empty()) {
    s += "  const double* params = nullptr;\n";
  } else {
    s += fmt::format("  const double params[] = {{{}}};\n", join(sc, ", "));
  }
  s += fmt::format("  const int rc = cake_{}_run(in, {}, out, {}, params, {});\n", op, m.ins.size(),
                   m.outs.size(), sc.size());
  s += fmt::format("  TORCH_CHECK(rc == 0, \"cake::{0}: \", cake_{0}_last_error());\n", op);
  if (m.outs.size() == 1) {
    s += fmt::format("  return {};\n", tensor_local(m.outs[0]->name));
  } else {
    std::vector<std::string> r;
    for (const TensorInfo* t : m.outs) r.push_back(tensor_local(t->name));
    s += fmt::format("  return std::make_tuple({});\n", join(r, ", "));
  }
  s += "}\n\n}  // namespace\n\n";
  s += fmt::format("TORCH_LIBRARY_FRAGMENT(cake, m) {{\n  m.def({});\n}}\n\n", c_string(torch_schema(c)));
  s += fmt::format("TORCH_LIBRARY_IMPL(cake, CPU, m) {{\n  m.impl(\"{0}\", TORCH_FN(cake_w_{0}));\n}}\n", op);
  return s;
}

std::string torch_cmake(const CheckedContract& c) {
  const Model m = model(c);
  return fmt::format(
      "# Builds the PyTorch custom op cake::{0} (generated by CAKE) as the shared library cake_{0}_torch, "
      "against\n"
      "# libtorch (find_package(Torch)) and this operator package (found beside this folder). Load it with\n"
      "# torch.ops.load_library(\"libcake_{0}_torch.so\") or dlopen, then call torch.ops.cake.{0}(...).\n"
      "cmake_minimum_required(VERSION 3.18)\n"
      "project(cake_{0}_torch LANGUAGES CXX)\n"
      "find_package(Torch REQUIRED)\n"
      "if(NOT TARGET cake::{0})\n"
      "  find_package(cake_{0} REQUIRED HINTS \"${{CMAKE_CURRENT_LIST_DIR}}/..\")\n"
      "endif()\n"
      "add_library(cake_{0}_torch SHARED cake_{0}_torch.cpp)\n"
      "target_link_libraries(cake_{0}_torch PRIVATE cake::{0} ${{TORCH_LIBRARIES}})\n"
      "target_compile_features(cake_{0}_torch PRIVATE cxx_std_17)\n"
      "set_target_properties(cake_{0}_torch PROPERTIES INSTALL_RPATH \"${{cake_{0}_INCLUDE_DIR}}/../lib\")\n"
      "install(TARGETS cake_{0}_torch LIBRARY DESTINATION lib)\n",
      m.op);
}

// ---------------------------------------------------------------------------------------------------

std::string usage_markdown(const CheckedContract& c) {
  const Model m = model(c);
  const std::string& op = m.op;
  std::string s = "## Using the package\n\n";
  s += "```cmake\n";
  s += fmt::format(
      "find_package(cake_{0} REQUIRED)   # CMAKE_PREFIX_PATH=<this folder>\n"
      "target_link_libraries(app PRIVATE cake::{0})\n",
      op);
  s += "```\n\nC entry points (`include/cake_" + op + ".h`):\n\n```c\n";
  s += run_decl(m) + ";\n";
  for (DType d : c.contract.dtypes) s += typed_entry_decl(c, d) + ";\n";
  s += fmt::format("const char* cake_{}_last_error(void);\n```\n\n", op);
  s += fmt::format(
      "`params` of `cake_{}_run`: {}. The typed entry points take dense row-major buffers, then the "
      "params, then every free size.\n\n",
      op, scalar_list(c, m));
  s += fmt::format(
      "PyTorch: build `torch/` (`cmake -S torch -B torch/build -DCMAKE_PREFIX_PATH=<libtorch>`), load "
      "`libcake_{}_torch.so`, call `torch.ops.cake.{}`; schema `cake::{}`.\n",
      op, op, torch_schema(c));
  return s;
}

}  // namespace cake::deliver
