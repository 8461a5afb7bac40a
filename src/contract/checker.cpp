// The contract checker: resolves every TE name (variable, size, param, tensor), infers the shapes
// of intermediates and the ranges of reduction variables, types every expression, orders the
// statements by their dependencies (rejecting cycles) and proves that plain reads stay inside
// their tensors on the extreme sizes the case rules allow.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "contract/contract.h"
#include "contract/printer.h"
#include "contract/source_map.h"
#include "core/hash.h"

namespace cake {
namespace {

using te::Expr;
using te::ExprKind;
using te::ExprPtr;
using te::Op;
using te::Pos;
using te::Stmt;
using te::Type;

const std::set<std::string> kReserved = {"inf", "in", "cast", "where", "min", "max", "abs", "exp", "log",
                                         "sqrt", "rsqrt", "tanh", "erf", "sigmoid", "sin", "cos", "pow",
                                         "floor", "ceil", "round", "sum", "prod", "argmax", "argmin"};

Type join(Type a, Type b) {
  if (a == Type::Float || b == Type::Float) return Type::Float;
  return Type::Int;
}

void walk(const Expr& e, const std::function<void(const Expr&)>& f) {
  f(e);
  for (const auto& a : e.args) walk(*a, f);
  if (e.pad_value) walk(*e.pad_value, f);
  for (const auto& v : e.rvars) {
    if (v.lo) walk(*v.lo, f);
    if (v.hi) walk(*v.hi, f);
  }
}

// ---- interval arithmetic over index expressions (for the bounds proof) ----

struct Iv {
  double lo = 0, hi = 0;
  bool known = false;
};

Iv iv(double a, double b) { return {std::min(a, b), std::max(a, b), true}; }

class Checker {
 public:
  explicit Checker(Contract c) { cc_.contract = std::move(c); }

  CheckedContract run() {
    Contract& c = cc_.contract;
    file_ = c.file;
    names();
    sizes();
    tensors();
    statements();
    values();
    bounds();
    cc_.hash = hash_hex("cake-contract-v1\n" + print_contract(c));
    return std::move(cc_);
  }

 private:
  CheckedContract cc_;
  std::string file_;
  std::map<std::string, int> params_;    // name -> slot
  std::map<std::string, int> tensor_id_;  // name -> tensor id
  std::set<std::string> size_names_;

  [[noreturn]] void fail(Pos p, std::string msg, std::string hint = {}) const {
    fail_at(file_, p, std::move(msg), std::move(hint));
  }

  // ---- names ----

  void claim(std::map<std::string, std::string>& seen, const std::string& name, Pos p, const std::string& what) {
    if (kReserved.count(name)) fail(p, "'" + name + "' is a reserved word and cannot name " + what);
    auto [it, fresh] = seen.emplace(name, what);
    if (!fresh) fail(p, "'" + name + "' names both " + it->second + " and " + what, "give each its own name");
  }

  void names() {
    Contract& c = cc_.contract;
    std::map<std::string, std::string> seen;
    for (size_t i = 0; i < c.params.size(); ++i) {
      claim(seen, c.params[i].name, c.params[i].pos, "a param");
      params_[c.params[i].name] = static_cast<int>(i);
    }
    for (const auto& t : c.inputs) claim(seen, t.name, t.pos, "an input");
    for (const auto& t : c.outputs) claim(seen, t.name, t.pos, "an output");
    for (const auto& s : c.sizes) claim(seen, s.name, s.pos, "a derived size");
    // Size symbols: used in shapes or size definitions, or given a case rule.
    std::function<void(const Expr&)> collect = [&](const Expr& e) {
      walk(e, [&](const Expr& x) {
        if (x.kind == ExprKind::Name && !params_.count(x.name)) size_names_.insert(x.name);
      });
    };
    for (const auto& t : c.inputs)
      for (const auto& d : t.dims) collect(*d);
    for (const auto& t : c.outputs)
      for (const auto& d : t.dims) collect(*d);
    for (const auto& s : c.sizes) {
      size_names_.insert(s.name);
      collect(*s.expr);
    }
    for (const auto& r : c.standard.shapes) size_names_.insert(r.symbol);
    for (const auto& r : c.hidden.shapes) size_names_.insert(r.symbol);
    for (const auto& n : size_names_) {
      if (kReserved.count(n)) fail(c.compute_pos, "'" + n + "' is a reserved word and cannot be a size symbol");
      auto it = seen.find(n);
      if (it != seen.end() && it->second != "a derived size") {
        Pos p = c.compute_pos;
        for (const auto& t : c.inputs)
          if (t.name == n) p = t.pos;
        for (const auto& t : c.outputs)
          if (t.name == n) p = t.pos;
        fail(p, "'" + n + "' names both a size symbol and " + it->second, "give each its own name");
      }
    }
  }

  // ---- sizes ----

  // Resolves a size-level expression in place. allow_params: distribution arguments may use params.
  void resolve_size_expr(Expr& e, bool allow_params, bool allow_bool, const std::string& what) {
    switch (e.kind) {
      case ExprKind::Number:
        if (!e.int_literal && !allow_params)
          fail(e.pos, what + " must be an integer expression, found " + te::print_expr(e));
        e.type = e.int_literal ? Type::Int : Type::Float;
        return;
      case ExprKind::Name: {
        if (allow_params && params_.count(e.name)) {
          e.kind = ExprKind::Param;
          e.slot = params_[e.name];
          e.type = Type::Float;
          return;
        }
        if (!size_names_.count(e.name))
          fail(e.pos, "unknown name '" + e.name + "' in " + what, "size expressions use size symbols and integers");
        e.kind = ExprKind::Size;
        e.slot = cc_.size_slot(e.name);  // -1 until slots exist; fixed in assign_size_slots
        e.type = Type::Int;
        return;
      }
      case ExprKind::Unary:
        resolve_size_expr(*e.args[0], allow_params, allow_bool, what);
        e.type = e.op == Op::Not ? Type::Bool : e.args[0]->type;
        if (e.op == Op::Not && !allow_bool) fail(e.pos, "'!' is not allowed in " + what);
        return;
      case ExprKind::Binary: {
        resolve_size_expr(*e.args[0], allow_params, allow_bool, what);
        resolve_size_expr(*e.args[1], allow_params, allow_bool, what);
        bool logic = e.op == Op::Lt || e.op == Op::Le || e.op == Op::Gt || e.op == Op::Ge || e.op == Op::Eq ||
                     e.op == Op::Ne || e.op == Op::And || e.op == Op::Or;
        if (logic && !allow_bool)
          fail(e.pos, "comparison '" + std::string(te::op_spelling(e.op)) + "' is not allowed in " + what,
               "conditions belong in constraints:");
        e.type = logic ? Type::Bool : join(e.args[0]->type, e.args[1]->type);
        return;
      }
      case ExprKind::Call:
        if (e.fn == te::Fn::Min || e.fn == te::Fn::Max) {
          for (auto& a : e.args) resolve_size_expr(*a, allow_params, allow_bool, what);
          e.type = join(e.args[0]->type, e.args[1]->type);
          return;
        }
        fail(e.pos, "function '" + std::string(te::fn_name(e.fn)) + "' is not allowed in " + what,
             "size expressions use + - * / % min max");
      default:
        fail(e.pos, what + " may use only size symbols, integers and + - * / % min max",
             "tensor reads and reductions belong in compute");
    }
  }

  void sizes() {
    Contract& c = cc_.contract;
    std::map<std::string, const SizeDef*> defs;
    for (const auto& s : c.sizes) defs[s.name] = &s;
    // Free symbols first (sorted by name for a stable slot order), then derived in dependency order.
    for (const auto& n : size_names_)
      if (!defs.count(n)) cc_.sizes.push_back({n, true, nullptr});
    std::map<std::string, int> state;  // 0 new, 1 visiting, 2 done
    std::function<void(const SizeDef&)> visit = [&](const SizeDef& s) {
      if (state[s.name] == 2) return;
      if (state[s.name] == 1)
        fail(s.pos, "cyclic definition of size '" + s.name + "'", "a derived size may use only free symbols and earlier sizes");
      state[s.name] = 1;
      walk(*s.expr, [&](const Expr& x) {
        if (x.kind == ExprKind::Name && defs.count(x.name)) visit(*defs[x.name]);
      });
      state[s.name] = 2;
      cc_.sizes.push_back({s.name, false, nullptr});
    };
    for (const auto& s : c.sizes) visit(s);
    for (auto& s : c.sizes) {
      resolve_size_expr(*s.expr, false, false, "size '" + s.name + "'");
      assign_size_slots(*s.expr);
      cc_.sizes[static_cast<size_t>(cc_.size_slot(s.name))].expr = s.expr->clone();
    }
    for (auto& e : c.constraints) {
      resolve_size_expr(*e, false, true, "a constraint");
      assign_size_slots(*e);
    }
    // Case rules: every free symbol has a standard rule; rules name only known free symbols.
    for (const CaseSetRule* r : {&c.standard, &c.hidden})
      for (const auto& sr : r->shapes) {
        if (defs.count(sr.symbol))
          fail(sr.pos, "'" + sr.symbol + "' is a derived size and cannot have a case rule",
               "derived sizes follow from the free ones");
      }
    for (const CaseSetRule* r : {&c.standard, &c.hidden})
      for (const auto& sr : r->shapes) {
        bool used = first_use(sr.symbol).line != 0;
        for (const auto& st : c.compute)
          walk(*st.rhs, [&](const Expr& x) { used |= x.kind == ExprKind::Name && x.name == sr.symbol; });
        if (!used)
          fail(sr.pos, "case rule for '" + sr.symbol + "', which the contract never uses",
               "remove the rule, or use the symbol in a shape");
      }
    for (const auto& s : cc_.sizes) {
      if (!s.free) continue;
      bool ruled = std::any_of(c.standard.shapes.begin(), c.standard.shapes.end(),
                               [&](const ShapeRule& r) { return r.symbol == s.name; });
      if (!ruled) fail(first_use(s.name), "unbound size symbol '" + s.name + "'",
                       "give it values in cases.standard.shapes or define it under sizes:");
    }
  }

  Pos first_use(const std::string& sym) const {
    const Contract& c = cc_.contract;
    Pos found{};
    auto look = [&](const Expr& e) {
      walk(e, [&](const Expr& x) {
        if (found.line == 0 && (x.kind == ExprKind::Name || x.kind == ExprKind::Size) && x.name == sym) found = x.pos;
      });
    };
    for (const auto& t : c.inputs)
      for (const auto& d : t.dims) look(*d);
    for (const auto& t : c.outputs)
      for (const auto& d : t.dims) look(*d);
    for (const auto& s : c.sizes) look(*s.expr);
    return found;
  }

  void assign_size_slots(Expr& e) {
    if (e.kind == ExprKind::Size) e.slot = cc_.size_slot(e.name);
    for (auto& a : e.args) assign_size_slots(*a);
    if (e.pad_value) assign_size_slots(*e.pad_value);
    for (auto& v : e.rvars) {
      if (v.lo) assign_size_slots(*v.lo);
      if (v.hi) assign_size_slots(*v.hi);
      if (v.extent) assign_size_slots(*v.extent);
    }
  }

  // ---- tensors ----

  void tensors() {
    Contract& c = cc_.contract;
    auto add = [&](TensorDecl& d, TensorRole role, int index) {
      TensorInfo t;
      t.name = d.name;
      t.role = role;
      t.fixed_dtype = d.fixed_dtype;
      t.index = index;
      for (auto& dim : d.dims) {
        resolve_size_expr(*dim, false, false, "the shape of '" + d.name + "'");
        assign_size_slots(*dim);
        t.dims.push_back(dim->clone());
      }
      t.elem = elem_type(t.fixed_dtype);
      tensor_id_[t.name] = static_cast<int>(cc_.tensors.size());
      cc_.tensors.push_back(std::move(t));
    };
    for (size_t i = 0; i < c.inputs.size(); ++i) add(c.inputs[i], TensorRole::Input, static_cast<int>(i));
    for (size_t i = 0; i < c.outputs.size(); ++i) add(c.outputs[i], TensorRole::Output, static_cast<int>(i));
  }

  Type elem_type(std::optional<DType> fixed) const {
    if (fixed) return *fixed == DType::boolean ? Type::Bool : (is_float(*fixed) ? Type::Float : Type::Int);
    const auto& ds = cc_.contract.dtypes;
    bool all_int = std::all_of(ds.begin(), ds.end(), [](DType d) { return !is_float(d); });
    return all_int ? Type::Int : Type::Float;
  }

  // ---- statements ----

  void statements() {
    Contract& c = cc_.contract;
    // Which statements define each tensor; intermediates get a tensor id here.
    std::map<std::string, std::vector<int>> defs;
    for (size_t i = 0; i < c.compute.size(); ++i) {
      Stmt& s = c.compute[i];
      if (params_.count(s.target) || size_names_.count(s.target))
        fail(s.pos, "cannot assign to '" + s.target + "', which is a " + (params_.count(s.target) ? "param" : "size"));
      if (kReserved.count(s.target)) fail(s.pos, "'" + s.target + "' is a reserved word");
      auto it = tensor_id_.find(s.target);
      if (it != tensor_id_.end() && cc_.tensors[static_cast<size_t>(it->second)].role == TensorRole::Input)
        fail(s.pos, "cannot assign to input '" + s.target + "'", "inputs are read-only; define a new tensor");
      auto& list = defs[s.target];
      if (!s.accumulate) {
        for (int j : list)
          if (!c.compute[static_cast<size_t>(j)].accumulate)
            fail(s.pos, "'" + s.target + "' is defined twice (first at line " +
                            std::to_string(c.compute[static_cast<size_t>(j)].pos.line) + ")",
                 "define each tensor once; use += to accumulate");
        if (!list.empty()) fail(s.pos, "'" + s.target + "' is defined after it was accumulated into",
                                "put the '=' definition before the '+=' statements");
      }
      list.push_back(static_cast<int>(i));
      if (!tensor_id_.count(s.target)) {
        if (s.accumulate)
          fail(s.pos, "cannot accumulate into '" + s.target + "': it is neither an output nor defined earlier",
               "declare it under outputs, or define it with '=' first");
        TensorInfo t;
        t.name = s.target;
        t.role = TensorRole::Intermediate;
        tensor_id_[t.name] = static_cast<int>(cc_.tensors.size());
        cc_.tensors.push_back(std::move(t));
      }
    }
    for (const auto& o : c.outputs)
      if (!defs.count(o.name)) fail(o.pos, "output '" + o.name + "' is never defined", "define it in compute");

    // Dependency order over tensors (statements of one tensor keep their textual order).
    std::map<std::string, std::set<std::string>> deps;
    for (const auto& entry : defs)
      for (int j : entry.second) {
        const std::string& name = entry.first;
        const Stmt& s = c.compute[static_cast<size_t>(j)];
        auto reads = [&](const Expr& e) {
          walk(e, [&](const Expr& x) {
            if (x.kind == ExprKind::Read && x.name == name)
              fail(x.pos, "cyclic definition: '" + name + "' reads itself",
                   "a recurrence must be written as a reduction");
            if (x.kind == ExprKind::Read && defs.count(x.name)) deps[name].insert(x.name);
            if (x.kind == ExprKind::Read && !tensor_id_.count(x.name))
              fail(x.pos, "unknown tensor '" + x.name + "'", "tensors are the inputs, outputs and defined names");
          });
        };
        reads(*s.rhs);
        for (const auto& ix : s.index) reads(*ix);
      }
    std::map<std::string, int> state;
    std::vector<std::string> path;
    std::function<void(const std::string&)> visit = [&](const std::string& n) {
      if (state[n] == 2) return;
      if (state[n] == 1) {
        std::string cyc;
        bool on = false;
        for (const auto& p : path) {
          if (p == n) on = true;
          if (on) cyc += p + " -> ";
        }
        const Stmt& s = c.compute[static_cast<size_t>(defs[n].front())];
        fail(s.pos, "cyclic definition: " + cyc + n, "a tensor cannot depend on itself; use a reduction instead");
      }
      state[n] = 1;
      path.push_back(n);
      for (const auto& d : deps[n]) visit(d);
      path.pop_back();
      state[n] = 2;
      for (int j : defs[n]) cc_.order.push_back(j);
    };
    for (size_t i = 0; i < c.compute.size(); ++i) visit(c.compute[i].target);

    for (int j : cc_.order) statement(c.compute[static_cast<size_t>(j)]);
  }

  struct Scope {
    Stmt* s = nullptr;
    std::map<std::string, int> vars;  // name -> slot
    bool implicit = false;            // '+=' statements declare their domain by use
  };

  int add_var(Scope& sc, const std::string& name, Pos p) {
    if (sc.vars.count(name)) fail(p, "index variable '" + name + "' is already in use here", "pick another name");
    if (size_names_.count(name) || params_.count(name) || tensor_id_.count(name))
      fail(p, "index variable '" + name + "' shadows a " +
                  std::string(size_names_.count(name) ? "size symbol" : params_.count(name) ? "param" : "tensor"),
           "index variables are usually lower case: n for N");
    if (kReserved.count(name)) fail(p, "'" + name + "' is a reserved word");
    int slot = static_cast<int>(sc.s->vars.size());
    sc.vars[name] = slot;
    sc.s->vars.push_back(name);
    sc.s->var_extent.push_back(nullptr);
    return slot;
  }

  void statement(Stmt& s) {
    s.tensor = tensor_id_[s.target];
    TensorInfo& t = cc_.tensors[static_cast<size_t>(s.tensor)];
    Scope sc;
    sc.s = &s;
    bool declared = t.role == TensorRole::Output || !t.dims.empty() || s.accumulate;
    if (declared && s.index.size() != t.dims.size())
      fail(s.pos, "'" + s.target + "' has rank " + std::to_string(t.dims.size()) + " but is indexed with " +
                      std::to_string(s.index.size()) + " variable" + (s.index.size() == 1 ? "" : "s"),
           "index every axis of the tensor once");
    if (!s.accumulate) {
      for (auto& ix : s.index) {
        if (ix->kind != ExprKind::Name)
          fail(ix->pos, "the index of '" + s.target + "' must be a plain variable in an '=' definition",
               "write " + s.target + "[i, j] = ...; scatter with '+='");
        ix->kind = ExprKind::Var;
        ix->type = Type::Int;
        ix->slot = add_var(sc, ix->name, ix->pos);
      }
      s.n_domain = static_cast<int>(s.vars.size());
      resolve(*s.rhs, sc);
      for (int v = 0; v < s.n_domain; ++v) {
        if (declared) {
          s.var_extent[static_cast<size_t>(v)] = t.dims[static_cast<size_t>(v)]->clone();
        } else {
          ExprPtr ext = infer_extent(*s.rhs, v);
          if (!ext)
            fail(s.index[static_cast<size_t>(v)]->pos,
                 "cannot infer the extent of '" + s.vars[static_cast<size_t>(v)] + "' in '" + s.target + "'",
                 "use it directly as an index of a tensor on the right, or declare '" + s.target + "' as an output");
          s.var_extent[static_cast<size_t>(v)] = std::move(ext);
        }
      }
      if (!declared) {
        for (int v = 0; v < s.n_domain; ++v) t.dims.push_back(s.var_extent[static_cast<size_t>(v)]->clone());
        t.elem = s.rhs->type == Type::Bool ? Type::Int : s.rhs->type;
      }
    } else {
      // '+=': variables are declared by use, in the order they first appear (index, then rhs).
      sc.implicit = true;
      for (auto& ix : s.index) resolve(*ix, sc);
      resolve(*s.rhs, sc);
      s.n_domain = static_cast<int>(s.vars.size());
      for (auto& ix : s.index)
        if (ix->type == Type::Float) fail(ix->pos, "index must be an integer expression", "use cast<i64>(...)");
      for (int v = 0; v < s.n_domain; ++v) {
        ExprPtr ext;
        for (size_t a = 0; a < s.index.size() && !ext; ++a)
          if (s.index[a]->kind == ExprKind::Var && s.index[a]->slot == v) ext = t.dims[a]->clone();
        if (!ext) ext = infer_extent(*s.rhs, v);
        for (size_t a = 0; a < s.index.size() && !ext; ++a) ext = infer_extent(*s.index[a], v);
        if (!ext)
          fail(s.pos, "cannot infer the range of '" + s.vars[static_cast<size_t>(v)] + "'",
               "use it directly as an index of a tensor");
        s.var_extent[static_cast<size_t>(v)] = std::move(ext);
      }
    }
    // Reduction variables declared in the rhs get their inferred extents now.
    infer_reduction_extents(*s.rhs, s);
    // Output dtype compatibility.
    if (t.role == TensorRole::Output) {
      for (DType d : cc_.contract.dtypes) {
        DType od = t.dtype_for(d);
        if (is_integer(od) && s.rhs->type == Type::Float)
          fail(s.rhs->pos, "'" + s.target + "' is " + std::string(dtype_name(od)) + " but its definition is a float expression",
               "convert explicitly: cast<" + std::string(dtype_name(od)) + ">(...)");
      }
    }
    assign_size_slots(*s.rhs);
    for (auto& ix : s.index) assign_size_slots(*ix);
    for (auto& e : s.var_extent)
      if (e) assign_size_slots(*e);
    for (auto& d : t.dims) assign_size_slots(*d);
  }

  // The extent of variable `slot` from a read that uses it directly as an index.
  ExprPtr infer_extent(const Expr& e, int slot) {
    ExprPtr found;
    walk(e, [&](const Expr& x) {
      if (found || x.kind != ExprKind::Read) return;
      const TensorInfo& t = cc_.tensors[static_cast<size_t>(x.slot)];
      for (size_t a = 0; a < x.args.size() && a < t.dims.size(); ++a)
        if (x.args[a]->kind == ExprKind::Var && x.args[a]->slot == slot) {
          found = t.dims[a]->clone();
          return;
        }
    });
    return found;
  }

  void infer_reduction_extents(Expr& e, Stmt& s) {
    for (auto& a : e.args) infer_reduction_extents(*a, s);
    if (e.kind != ExprKind::Reduce) return;
    for (auto& v : e.rvars) {
      if (v.lo) continue;
      ExprPtr ext = infer_extent(*e.args[0], v.slot);
      if (!ext)
        fail(v.pos, "cannot infer the range of reduction variable '" + v.name + "'",
             "use it directly as a tensor index, or give a range: " + v.name + " in 0..N");
      v.extent = ext->clone();
      s.var_extent[static_cast<size_t>(v.slot)] = std::move(ext);
    }
  }

  void resolve(Expr& e, Scope& sc) {
    switch (e.kind) {
      case ExprKind::Number:
        e.type = e.int_literal ? Type::Int : Type::Float;
        return;
      case ExprKind::Name: {
        if (auto it = sc.vars.find(e.name); it != sc.vars.end()) {
          e.kind = ExprKind::Var;
          e.slot = it->second;
          e.type = Type::Int;
          return;
        }
        if (params_.count(e.name)) {
          e.kind = ExprKind::Param;
          e.slot = params_[e.name];
          e.type = Type::Float;
          return;
        }
        if (size_names_.count(e.name)) {
          e.kind = ExprKind::Size;
          e.type = Type::Int;
          return;
        }
        if (tensor_id_.count(e.name))
          fail(e.pos, "tensor '" + e.name + "' used without indices",
               cc_.tensors[static_cast<size_t>(tensor_id_[e.name])].dims.empty() && !sc.implicit
                   ? "read a scalar as " + e.name + "[]"
                   : "read it as " + e.name + "[i, ...]");
        if (sc.implicit && !kReserved.count(e.name)) {
          e.kind = ExprKind::Var;
          e.slot = add_var(sc, e.name, e.pos);
          e.type = Type::Int;
          return;
        }
        fail(e.pos, "unknown name '" + e.name + "'",
             "names are index variables, params, size symbols, or tensors read as t[...]");
      }
      case ExprKind::Read: {
        auto it = tensor_id_.find(e.name);
        if (it == tensor_id_.end()) fail(e.pos, "unknown tensor '" + e.name + "'");
        e.slot = it->second;
        if (e.slot == sc.s->tensor)
          fail(e.pos, "cyclic definition: '" + e.name + "' reads itself", "a recurrence must be written as a reduction");
        const TensorInfo& t = cc_.tensors[static_cast<size_t>(e.slot)];
        if (e.args.size() != t.dims.size())
          fail(e.pos, "'" + e.name + "' has rank " + std::to_string(t.dims.size()) + " but is read with " +
                          std::to_string(e.args.size()) + " ind" + (e.args.size() == 1 ? "ex" : "ices"),
               "index every axis once");
        for (auto& a : e.args) {
          resolve(*a, sc);
          if (a->type == Type::Float)
            fail(a->pos, "index of '" + e.name + "' must be an integer expression, found " + te::print_expr(*a),
                 "use cast<i64>(...) or an integer tensor");
        }
        if (e.pad_value) {
          resolve(*e.pad_value, sc);
          if (te::contains(*e.pad_value, ExprKind::Read)) fail(e.pad_value->pos, "the padding value cannot read a tensor");
        }
        e.type = t.elem;
        return;
      }
      case ExprKind::Unary:
        resolve(*e.args[0], sc);
        e.type = e.op == Op::Not ? Type::Bool : (e.args[0]->type == Type::Float ? Type::Float : Type::Int);
        return;
      case ExprKind::Binary: {
        resolve(*e.args[0], sc);
        resolve(*e.args[1], sc);
        switch (e.op) {
          case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: case Op::Eq: case Op::Ne: case Op::And: case Op::Or:
            e.type = Type::Bool;
            break;
          default:
            e.type = join(e.args[0]->type, e.args[1]->type);
        }
        return;
      }
      case ExprKind::Call: {
        for (auto& a : e.args) resolve(*a, sc);
        switch (e.fn) {
          case te::Fn::Where: e.type = join(e.args[1]->type, e.args[2]->type); break;
          case te::Fn::Min: case te::Fn::Max: e.type = join(e.args[0]->type, e.args[1]->type); break;
          case te::Fn::Abs: case te::Fn::Floor: case te::Fn::Ceil: case te::Fn::Round:
            e.type = e.args[0]->type == Type::Float ? Type::Float : Type::Int;
            break;
          default: e.type = Type::Float;
        }
        return;
      }
      case ExprKind::Cast:
        resolve(*e.args[0], sc);
        e.type = e.cast_to == DType::boolean ? Type::Bool : (is_float(e.cast_to) ? Type::Float : Type::Int);
        return;
      case ExprKind::Reduce: {
        std::vector<std::string> added;
        for (auto& v : e.rvars) {
          if (v.lo) {
            resolve(*v.lo, sc);
            resolve(*v.hi, sc);
            if (v.lo->type == Type::Float || v.hi->type == Type::Float)
              fail(v.pos, "the range of '" + v.name + "' must have integer bounds");
            if (te::contains(*v.lo, ExprKind::Read) || te::contains(*v.hi, ExprKind::Read))
              fail(v.pos, "the range of '" + v.name + "' cannot depend on tensor values");
            Iv lo = const_iv(*v.lo), hi = const_iv(*v.hi);
            if (lo.known && hi.known && hi.hi <= lo.lo)
              fail(v.pos, "reduction over nothing: '" + v.name + "' in " + te::print_expr(*v.lo) + ".." +
                              te::print_expr(*v.hi) + " is empty",
                   "ranges are half-open: k in 0..N covers 0, 1, ..., N-1");
          }
          v.slot = add_var(sc, v.name, v.pos);
          added.push_back(v.name);
        }
        resolve(*e.args[0], sc);
        // Each variable must matter: a reduction whose body ignores a variable is almost always a typo.
        for (const auto& v : e.rvars) {
          bool used = false;
          walk(*e.args[0], [&](const Expr& x) { used |= x.kind == ExprKind::Var && x.slot == v.slot; });
          if (!used)
            fail(v.pos, "reduction variable '" + v.name + "' is not used in the reduced expression",
                 "a reduction over nothing; remove it or index with it");
        }
        for (const auto& n : added) sc.vars.erase(n);  // out of scope after the reduction
        if (e.reduce == te::ReduceOp::ArgMax || e.reduce == te::ReduceOp::ArgMin) e.type = Type::Int;
        else e.type = e.args[0]->type == Type::Float ? Type::Float : Type::Int;
        return;
      }
      default:
        return;
    }
  }

  // Constant interval of an expression with no variables or sizes (literal arithmetic only).
  static Iv const_iv(const Expr& e) {
    if (e.kind == ExprKind::Number) return iv(e.number, e.number);
    if (e.kind == ExprKind::Unary && e.op == Op::Neg) {
      Iv a = const_iv(*e.args[0]);
      return a.known ? iv(-a.lo, -a.hi) : Iv{};
    }
    if (e.kind == ExprKind::Binary && (e.op == Op::Add || e.op == Op::Sub || e.op == Op::Mul)) {
      Iv a = const_iv(*e.args[0]), b = const_iv(*e.args[1]);
      if (!a.known || !b.known) return {};
      double v = e.op == Op::Add ? a.lo + b.lo : e.op == Op::Sub ? a.lo - b.lo : a.lo * b.lo;
      return iv(v, v);
    }
    return {};
  }

  // ---- values ----

  void values() {
    Contract& c = cc_.contract;
    std::set<std::string> seen;
    for (auto& v : c.values) {
      auto it = tensor_id_.find(v.tensor);
      if (it == tensor_id_.end() || cc_.tensors[static_cast<size_t>(it->second)].role != TensorRole::Input)
        fail(v.pos, "values given for '" + v.tensor + "', which is not an input", "values describe input tensors");
      if (!seen.insert(v.tensor).second) fail(v.pos, "values for '" + v.tensor + "' given twice");
      for (auto& a : v.args) {
        resolve_size_expr(*a, true, false, "a distribution argument");
        assign_size_slots(*a);
      }
    }
    // Inputs read only as indices.
    std::map<int, std::pair<int, int>> uses;  // tensor -> (index uses, value uses)
    std::function<void(const Expr&, bool)> scan = [&](const Expr& e, bool in_index) {
      if (e.kind == ExprKind::Read) {
        (in_index ? uses[e.slot].first : uses[e.slot].second)++;
        for (const auto& a : e.args) scan(*a, true);
        return;
      }
      for (const auto& a : e.args) scan(*a, in_index);
      for (const auto& rv : e.rvars) {
        if (rv.lo) scan(*rv.lo, true);
        if (rv.hi) scan(*rv.hi, true);
      }
    };
    for (const auto& s : c.compute) {
      scan(*s.rhs, false);
      for (const auto& ix : s.index) scan(*ix, true);
    }
    for (auto& t : cc_.tensors) {
      int id = tensor_id_[t.name];
      t.index_only = t.role == TensorRole::Input && uses[id].first > 0 && uses[id].second == 0;
      if (t.index_only && is_float(t.dtype_for(c.dtypes.front())))
        fail(c.inputs[static_cast<size_t>(t.index)].pos, "input '" + t.name + "' is used as an index but is a float tensor",
             "give it an integer dtype: " + t.name + ": \"i64[...]\"");
      if (t.index_only && std::none_of(c.values.begin(), c.values.end(), [&](const ValueRule& v) { return v.tensor == t.name; }))
        fail(c.inputs[static_cast<size_t>(t.index)].pos, "index input '" + t.name + "' has no value rule",
             "give its range under cases.values, e.g. " + t.name + ": randint(0, V)");
    }
  }

  // ---- bounds proof on the extreme sizes of the case rules ----

  std::vector<std::map<std::string, int64_t>> sample_assignments() const {
    const Contract& c = cc_.contract;
    std::vector<std::string> free;
    std::vector<std::pair<int64_t, int64_t>> ends;
    for (const auto& s : cc_.sizes) {
      if (!s.free) continue;
      int64_t lo = INT64_MAX, hi = INT64_MIN;
      for (const CaseSetRule* r : {&c.standard, &c.hidden})
        for (const auto& sr : r->shapes)
          if (sr.symbol == s.name) {
            int64_t a = sr.is_range ? sr.lo : *std::min_element(sr.values.begin(), sr.values.end());
            int64_t b = sr.is_range ? sr.hi : *std::max_element(sr.values.begin(), sr.values.end());
            lo = std::min(lo, a);
            hi = std::max(hi, b);
          }
      free.push_back(s.name);
      ends.emplace_back(lo, hi);
    }
    std::vector<std::map<std::string, int64_t>> out;
    size_t n = free.size();
    if (n <= 8) {
      for (uint32_t mask = 0; mask < (1u << n); ++mask) {
        std::map<std::string, int64_t> a;
        for (size_t i = 0; i < n; ++i) a[free[i]] = (mask >> i) & 1 ? ends[i].second : ends[i].first;
        out.push_back(std::move(a));
      }
    } else {
      for (size_t k = 0; k <= n + 1; ++k) {
        std::map<std::string, int64_t> a;
        for (size_t i = 0; i < n; ++i) a[free[i]] = (k == n + 1 || i == k) ? ends[i].second : ends[i].first;
        out.push_back(std::move(a));
      }
    }
    return out;
  }

  void bounds() {
    const Contract& c = cc_.contract;
    int valid = 0;
    for (const auto& a : sample_assignments()) {
      std::vector<int64_t> sz;
      bool ok = true;
      try {
        sz = evaluate_sizes(cc_, a);
        ok = std::all_of(sz.begin(), sz.end(), [](int64_t v) { return v >= 0; });
        for (const auto& k : c.constraints) ok = ok && eval_size_expr(*k, sz) != 0;
      } catch (const Error&) {
        ok = false;  // e.g. a stride of zero at a range end: no case can have it
      }
      if (!ok) continue;
      ++valid;
      for (int j : cc_.order) check_stmt_bounds(c.compute[static_cast<size_t>(j)], sz, a);
    }
    if (valid == 0)
      fail(c.constraints.empty() ? c.standard.pos : c.constraints.front()->pos,
           "no combination of the case rules' extreme sizes satisfies the constraints",
           "check the shapes and constraints: derived sizes must be non-negative");
  }

  static std::string describe_sizes(const std::map<std::string, int64_t>& a) {
    std::string s;
    for (const auto& [k, v] : a) s += (s.empty() ? "" : ", ") + k + "=" + std::to_string(v);
    return s;
  }

  void check_stmt_bounds(const Stmt& s, const std::vector<int64_t>& sz, const std::map<std::string, int64_t>& a) {
    std::vector<Iv> range(s.vars.size());
    for (int v = 0; v < s.n_domain; ++v) {
      int64_t ext = eval_size_expr(*s.var_extent[static_cast<size_t>(v)], sz);
      if (ext <= 0) return;  // empty domain: nothing is read
      range[static_cast<size_t>(v)] = iv(0, static_cast<double>(ext - 1));
    }
    bool empty = false;
    check_expr_bounds(*s.rhs, range, sz, a, empty);
    if (empty) return;
    if (s.accumulate) {
      const TensorInfo& t = cc_.tensors[static_cast<size_t>(s.tensor)];
      for (size_t ax = 0; ax < s.index.size(); ++ax)
        check_axis(*s.index[ax], t, ax, range, sz, a, "writes to");
    }
  }

  void check_axis(const Expr& ix, const TensorInfo& t, size_t ax, const std::vector<Iv>& range,
                  const std::vector<int64_t>& sz, const std::map<std::string, int64_t>& a, const char* verb) {
    if (te::contains(ix, ExprKind::Read)) return;  // data-dependent: checked per element at run time
    Iv r = interval(ix, range, sz);
    if (!r.known) return;
    int64_t ext = eval_size_expr(*t.dims[ax], sz);
    if (r.lo < 0 || r.hi > static_cast<double>(ext - 1)) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "%.0f..%.0f", r.lo, r.hi);
      fail(ix.pos, "index " + te::print_expr(ix) + " " + verb + " '" + t.name + "' axis " + std::to_string(ax) +
                       " over " + buf + ", outside 0.." + std::to_string(ext - 1) + " (at " + describe_sizes(a) + ")",
           std::string(verb) == "reads" ? "use a padded read " + t.name + "?[...] where the index may leave the tensor"
                                        : "keep scatter indices inside the output");
    }
  }

  void check_expr_bounds(const Expr& e, std::vector<Iv>& range, const std::vector<int64_t>& sz,
                         const std::map<std::string, int64_t>& a, bool& empty) {
    if (e.kind == ExprKind::Reduce) {
      for (const auto& v : e.rvars) {
        Iv r;
        if (v.lo) {
          Iv lo = interval(*v.lo, range, sz), hi = interval(*v.hi, range, sz);
          if (lo.known && hi.known) r = iv(lo.lo, hi.hi - 1);
          if (r.known && r.hi < r.lo) r = iv(lo.lo, lo.lo);  // empty everywhere: nothing is read
        } else {
          int64_t ext = eval_size_expr(*v.extent, sz);
          if (ext <= 0) {
            empty = true;
            return;
          }
          r = iv(0, static_cast<double>(ext - 1));
        }
        range[static_cast<size_t>(v.slot)] = r;
      }
    }
    if (e.kind == ExprKind::Read && !e.padded) {
      const TensorInfo& t = cc_.tensors[static_cast<size_t>(e.slot)];
      for (size_t ax = 0; ax < e.args.size(); ++ax) check_axis(*e.args[ax], t, ax, range, sz, a, "reads");
    }
    for (const auto& x : e.args) check_expr_bounds(*x, range, sz, a, empty);
  }

  static Iv interval(const Expr& e, const std::vector<Iv>& range, const std::vector<int64_t>& sz) {
    switch (e.kind) {
      case ExprKind::Number: return iv(e.number, e.number);
      case ExprKind::Size: {
        double v = static_cast<double>(sz[static_cast<size_t>(e.slot)]);
        return iv(v, v);
      }
      case ExprKind::Var: return range[static_cast<size_t>(e.slot)];
      case ExprKind::Unary: {
        Iv x = interval(*e.args[0], range, sz);
        if (!x.known || e.op != Op::Neg) return {};
        return iv(-x.hi, -x.lo);
      }
      case ExprKind::Binary: {
        Iv x = interval(*e.args[0], range, sz), y = interval(*e.args[1], range, sz);
        if (!x.known || !y.known) return {};
        switch (e.op) {
          case Op::Add: return iv(x.lo + y.lo, x.hi + y.hi);
          case Op::Sub: return iv(x.lo - y.hi, x.hi - y.lo);
          case Op::Mul: {
            double p[4] = {x.lo * y.lo, x.lo * y.hi, x.hi * y.lo, x.hi * y.hi};
            return iv(*std::min_element(p, p + 4), *std::max_element(p, p + 4));
          }
          case Op::Div:
            if (y.lo <= 0) return {};
            return iv(std::floor(std::min(x.lo / y.lo, x.lo / y.hi)), std::floor(std::max(x.hi / y.lo, x.hi / y.hi)));
          case Op::Mod:
            if (y.lo <= 0) return {};
            return iv(0, y.hi - 1);
          default: return {};
        }
      }
      case ExprKind::Call: {
        if (e.fn == te::Fn::Min || e.fn == te::Fn::Max) {
          Iv x = interval(*e.args[0], range, sz), y = interval(*e.args[1], range, sz);
          if (!x.known || !y.known) return {};
          return e.fn == te::Fn::Min ? iv(std::min(x.lo, y.lo), std::min(x.hi, y.hi))
                                     : iv(std::max(x.lo, y.lo), std::max(x.hi, y.hi));
        }
        if (e.fn == te::Fn::Where) {
          Iv x = interval(*e.args[1], range, sz), y = interval(*e.args[2], range, sz);
          if (!x.known || !y.known) return {};
          return iv(std::min(x.lo, y.lo), std::max(x.hi, y.hi));
        }
        return {};
      }
      default: return {};
    }
  }
};

}  // namespace

CheckedContract check_contract(Contract c) { return Checker(std::move(c)).run(); }

}  // namespace cake
