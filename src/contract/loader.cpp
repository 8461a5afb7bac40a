// Loads a contract: YAML structure (yaml-cpp) into Contract, TE and size expressions through the
// TE parser with positions mapped back into the file. Every problem is a located ContractError.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "contract/contract.h"
#include "contract/parser.h"
#include "contract/source_map.h"

namespace cake {
namespace {

constexpr size_t kMaxContractBytes = 1 << 20;
constexpr int kMaxYamlNesting = 32;

class Loader {
 public:
  Loader(std::string text, std::string file) {
    c_.file = std::move(file);
    c_.source = std::move(text);
    split_lines();
  }

  Contract load() {
    precheck();
    YAML::Node root;
    try {
      root = YAML::Load(c_.source);
    } catch (const YAML::Exception& e) {
      fail_at(c_.file, {e.mark.line + 1, e.mark.column + 1}, "malformed YAML: " + e.msg,
              "check indentation and that every '{' or '[' is closed");
    }
    if (!root.IsMap())
      fail_at(c_.file, pos(root), "a contract is a YAML mapping of keys (name, dtypes, inputs, ...)");
    static const std::set<std::string> known = {"name",    "level",  "summary", "dtypes",      "inputs",
                                                "outputs", "params", "sizes",   "constraints", "compute",
                                                "cases",   "limits", "baseline"};
    for (auto it = root.begin(); it != root.end(); ++it) {
      std::string k = scalar(it->first, "a key");
      if (!known.count(k))
        fail_at(
            c_.file, pos(it->first), "unknown key '" + k + "'",
            "keys are name level summary dtypes inputs outputs params sizes constraints compute cases limits "
            "baseline");
    }
    c_.name = scalar(required(root, "name"), "the operator name");
    if (!valid_name(c_.name))
      fail_at(c_.file, pos(root["name"]), "invalid operator name '" + c_.name + "'",
              "use lower case letters, digits and '_', starting with a letter");
    if (root["level"]) {  // optional: without it the profile derives the difficulty (DESIGN §4)
      c_.level = static_cast<int>(integer(root["level"], "the level"));
      if (c_.level < 1 || c_.level > 4) {
        fail_at(c_.file, pos(root["level"]), "level must be 1..4, found " + std::to_string(c_.level),
                "or leave it out, and the structural profile derives a difficulty");
      }
    }
    if (root["summary"]) c_.summary = scalar(root["summary"], "the summary");
    dtypes(required(root, "dtypes"));
    tensors(required(root, "inputs"), c_.inputs, "inputs");
    tensors(required(root, "outputs"), c_.outputs, "outputs");
    if (root["params"]) params(root["params"]);
    if (root["sizes"]) sizes(root["sizes"]);
    if (root["constraints"]) constraints(root["constraints"]);
    compute(required(root, "compute"));
    cases(required(root, "cases"));
    if (root["limits"]) limits(root["limits"]);
    if (root["baseline"]) {
      c_.baseline = scalar(root["baseline"], "the baseline");
      static const std::set<std::string> peers = {"torch", "onednn", "openblas", "none"};
      if (!peers.count(c_.baseline))
        fail_at(c_.file, pos(root["baseline"]), "unknown baseline '" + c_.baseline + "'",
                "baselines are torch, onednn, openblas, none");
    }
    return std::move(c_);
  }

 private:
  Contract c_;
  std::vector<std::string> lines_;
  size_t consumed_ = 0;  // source offset up to which expression_text() has read

  void split_lines() {
    std::string cur;
    for (char ch : c_.source) {
      if (ch == '\n') {
        lines_.push_back(cur);
        cur.clear();
      } else {
        cur += ch;
      }
    }
    lines_.push_back(cur);
  }

  // Guards yaml-cpp against inputs it handles badly: huge files, NUL bytes, deep flow nesting.
  void precheck() {
    if (c_.source.size() > kMaxContractBytes)
      fail_at(c_.file, {1, 1}, "contract is larger than 1 MiB", "a contract describes one operator");
    int depth = 0, line = 1, col = 1;
    for (char ch : c_.source) {
      if (ch == '\0') fail_at(c_.file, {line, col}, "NUL byte in contract", "a contract is a text file");
      if (ch == '[' || ch == '{') {
        if (++depth > kMaxYamlNesting)
          fail_at(c_.file, {line, col}, "brackets nested more than 32 deep",
                  "a contract needs only a few levels");
      } else if ((ch == ']' || ch == '}') && depth > 0) {
        --depth;
      }
      if (ch == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
  }

  static bool valid_name(const std::string& s) {
    if (s.empty() || !(std::islower(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
    return std::all_of(s.begin(), s.end(), [](char ch) {
      return std::islower(static_cast<unsigned char>(ch)) || std::isdigit(static_cast<unsigned char>(ch)) ||
             ch == '_';
    });
  }
  static bool valid_ident(const std::string& s) {
    if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
    return std::all_of(s.begin(), s.end(),
                       [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; });
  }

  static te::Pos pos(const YAML::Node& n) {
    YAML::Mark m = n.Mark();
    if (m.line < 0) return {0, 0};
    return {m.line + 1, m.column + 1};
  }

  YAML::Node required(const YAML::Node& map, const char* key) {
    YAML::Node n = map[key];
    if (!n || n.IsNull())
      fail_at(c_.file, pos(map), std::string("missing required key '") + key + "'",
              std::string("every contract has ") + key);
    return n;
  }

  std::string scalar(const YAML::Node& n, const std::string& what) {
    if (!n.IsScalar()) fail_at(c_.file, pos(n), what + " must be a single value, not a list or map");
    return n.Scalar();
  }

  int64_t integer(const YAML::Node& n, const std::string& what) {
    std::string s = scalar(n, what);
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno == ERANGE)
      fail_at(c_.file, pos(n), what + " must be an integer, found '" + s + "'");
    return v;
  }

  double number(const YAML::Node& n, const std::string& what) {
    std::string s = scalar(n, what);
    errno = 0;
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
      fail_at(c_.file, pos(n), what + " must be a finite number, found '" + s + "'");
    return v;
  }

  // Where the text of a scalar node starts in the file, line by line (block scalars included).
  SourceMap scalar_map(const YAML::Node& n) {
    SourceMap m;
    m.file = c_.file;
    te::Pos p = pos(n);
    if (p.line < 1 || p.line > static_cast<int>(lines_.size())) {
      m.line_start.push_back(p);
      return m;
    }
    const std::string& l = lines_[p.line - 1];
    size_t c0 = static_cast<size_t>(p.col - 1);
    char lead = c0 < l.size() ? l[c0] : ' ';
    if (lead == '|' || lead == '>') {
      int indent = -1;
      for (size_t li = p.line; li < lines_.size(); ++li) {
        const std::string& t = lines_[li];
        size_t first = t.find_first_not_of(' ');
        if (first == std::string::npos) {
          m.line_start.push_back({static_cast<int>(li) + 1, 1});
          continue;
        }
        if (indent < 0) indent = static_cast<int>(first);
        if (static_cast<int>(first) < indent) break;
        m.line_start.push_back({static_cast<int>(li) + 1, indent + 1});
      }
      if (m.line_start.empty()) m.line_start.push_back(p);
      return m;
    }
    if (lead == '"' || lead == '\'') p.col += 1;
    m.line_start.push_back(p);
    return m;
  }

  // The text of an expression-valued scalar. YAML splits an unquoted flow value at its commas
  // ("{ w: uniform(0.5, 1.5) }" becomes "uniform(0.5" and a key "1.5)"), so plain scalars are
  // re-read from the source with parentheses balanced; the pieces YAML split off are skipped by
  // the callers through swallowed().
  std::string expression_text(const YAML::Node& n, const std::string& what) {
    std::string s = scalar(n, what);
    YAML::Mark m = n.Mark();
    if (m.pos < 0 || static_cast<size_t>(m.pos) >= c_.source.size()) return s;
    size_t start = static_cast<size_t>(m.pos);
    char lead = c_.source[start];
    if (lead == '"' || lead == '\'' || lead == '|' || lead == '>') return s;
    int depth = 0;
    size_t i = start;
    for (; i < c_.source.size(); ++i) {
      char ch = c_.source[i];
      if (ch == '\n') break;
      if (ch == '#' && i > start && c_.source[i - 1] == ' ') break;
      if (ch == '(' || ch == '[' || ch == '{') ++depth;
      if (ch == ')' || ch == ']' || ch == '}') {
        if (depth == 0) break;
        --depth;
      }
      if (ch == ',' && depth == 0) break;
    }
    consumed_ = std::max(consumed_, i);
    std::string raw = c_.source.substr(start, i - start);
    while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\t' || raw.back() == '\r')) raw.pop_back();
    return raw;
  }

  // A node that lies inside text an earlier expression_text() already took.
  bool swallowed(const YAML::Node& n) const {
    YAML::Mark m = n.Mark();
    return m.pos >= 0 && static_cast<size_t>(m.pos) < consumed_;
  }

  te::ExprPtr expression(const YAML::Node& n, const std::string& what) {
    std::string s = expression_text(n, what);
    return te::parse_expression(s, scalar_map(n));
  }

  void dtypes(const YAML::Node& n) {
    if (!n.IsSequence() || n.size() == 0)
      fail_at(c_.file, pos(n), "dtypes must be a non-empty list", "dtypes: [f32, bf16, f16]");
    for (const auto& d : n) {
      std::string s = scalar(d, "a dtype");
      auto t = parse_dtype(s);
      if (!t)
        fail_at(c_.file, pos(d), "unknown dtype '" + s + "'", "dtypes are f32 f16 bf16 i32 i64 i8 bool");
      if (c_.has_dtype(*t)) fail_at(c_.file, pos(d), "dtype '" + s + "' listed twice");
      c_.dtypes.push_back(*t);
    }
  }

  void tensors(const YAML::Node& n, std::vector<TensorDecl>& out, const char* key) {
    if (!n.IsMap() || n.size() == 0)
      fail_at(c_.file, pos(n), std::string(key) + " must map tensor names to shapes",
              "inputs: { x: [N, D] }");
    for (auto it = n.begin(); it != n.end(); ++it) {
      TensorDecl t;
      t.name = scalar(it->first, "a tensor name");
      t.pos = pos(it->first);
      if (!valid_ident(t.name)) fail_at(c_.file, t.pos, "invalid tensor name '" + t.name + "'");
      YAML::Node v = it->second;  // a copy: it->second is a temporary
      if (v.IsSequence()) {
        for (const auto& d : v)
          if (!swallowed(d)) t.dims.push_back(expression(d, "a dimension"));
      } else if (v.IsScalar()) {
        te::ShapeSpec sp = te::parse_shape(v.Scalar(), scalar_map(v));
        if (!sp.dtype.empty()) {
          auto dt = parse_dtype(sp.dtype);
          if (!dt)
            fail_at(c_.file, sp.dtype_pos,
                    "unknown dtype '" + sp.dtype + "' in the shape of '" + t.name + "'",
                    "dtypes are f32 f16 bf16 i32 i64 i8 bool");
          t.fixed_dtype = dt;
        }
        t.dims = std::move(sp.dims);
      } else {
        fail_at(c_.file, pos(v),
                "the shape of '" + t.name + "' must be a list like [N, D] or a string like i32[N]");
      }
      if (t.dims.size() > 8)
        fail_at(c_.file, t.pos, "tensor '" + t.name + "' has rank " + std::to_string(t.dims.size()),
                "the kernel ABI supports rank up to 8");
      out.push_back(std::move(t));
    }
  }

  void params(const YAML::Node& n) {
    if (!n.IsMap()) fail_at(c_.file, pos(n), "params must map names to numbers", "params: { eps: 1.0e-6 }");
    for (auto it = n.begin(); it != n.end(); ++it) {
      ParamDecl p;
      p.name = scalar(it->first, "a param name");
      p.pos = pos(it->first);
      if (!valid_ident(p.name)) fail_at(c_.file, p.pos, "invalid param name '" + p.name + "'");
      p.value = number(it->second, "param '" + p.name + "'");
      c_.params.push_back(std::move(p));
    }
  }

  void sizes(const YAML::Node& n) {
    if (!n.IsMap())
      fail_at(c_.file, pos(n), "sizes must map names to expressions", "sizes: { Ho: (H - R) / S + 1 }");
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (swallowed(it->first)) continue;
      SizeDef s;
      s.name = scalar(it->first, "a size name");
      s.pos = pos(it->first);
      if (!valid_ident(s.name)) fail_at(c_.file, s.pos, "invalid size name '" + s.name + "'");
      s.expr = expression(it->second, "size '" + s.name + "'");
      c_.sizes.push_back(std::move(s));
    }
  }

  void constraints(const YAML::Node& n) {
    if (!n.IsSequence())
      fail_at(c_.file, pos(n), "constraints must be a list of conditions", "constraints: [H >= R]");
    for (const auto& e : n)
      if (!swallowed(e)) c_.constraints.push_back(expression(e, "a constraint"));
  }

  void compute(const YAML::Node& n) {
    std::string s = scalar(n, "compute");
    c_.compute_pos = pos(n);
    c_.compute = te::parse_program(s, scalar_map(n));
    if (c_.compute.empty()) fail_at(c_.file, pos(n), "compute defines nothing", "write y[i] = f(x[i])");
  }

  void case_set(const YAML::Node& n, CaseSetRule& r, const char* set, int default_count,
                uint64_t default_seed) {
    r.count = default_count;
    r.seed = default_seed;
    if (!n) return;  // absent: defaults (a missing node has no mark)
    r.pos = pos(n);
    if (!n.IsMap())
      fail_at(c_.file, pos(n), std::string(set) + " must be a mapping", "{ count: 20, shapes: {...} }");
    for (auto it = n.begin(); it != n.end(); ++it) {
      std::string k = scalar(it->first, "a key");
      if (k != "count" && k != "seed" && k != "shapes")
        fail_at(c_.file, pos(it->first), "unknown key '" + k + "' in " + set, "keys are count, seed, shapes");
    }
    if (n["count"]) {
      int64_t cnt = integer(n["count"], "count");
      if (cnt < 1 || cnt > 10000)
        fail_at(c_.file, pos(n["count"]), "count must be 1..10000, found " + std::to_string(cnt));
      r.count = static_cast<int>(cnt);
    }
    if (n["seed"]) r.seed = static_cast<uint64_t>(integer(n["seed"], "seed"));
    YAML::Node shapes = n["shapes"];
    if (!shapes) return;
    if (!shapes.IsMap())
      fail_at(c_.file, pos(shapes), "shapes must map size symbols to values", "shapes: { N: [1, 64] }");
    for (auto it = shapes.begin(); it != shapes.end(); ++it) {
      ShapeRule sr;
      sr.symbol = scalar(it->first, "a size symbol");
      sr.pos = pos(it->first);
      YAML::Node v = it->second;  // a copy: it->second is a temporary
      if (v.IsSequence()) {
        if (v.size() == 0)
          fail_at(c_.file, pos(v), "no values for '" + sr.symbol + "'", "give at least one value");
        for (const auto& x : v) sr.values.push_back(integer(x, "a value of '" + sr.symbol + "'"));
      } else if (v.IsScalar() && v.Scalar().find("..") != std::string::npos) {
        std::string s = v.Scalar();
        size_t d = s.find("..");
        char* e1 = nullptr;
        char* e2 = nullptr;
        std::string a = s.substr(0, d), b = s.substr(d + 2);
        sr.lo = std::strtoll(a.c_str(), &e1, 10);
        sr.hi = std::strtoll(b.c_str(), &e2, 10);
        if (a.empty() || b.empty() || *e1 || *e2)
          fail_at(c_.file, pos(v), "malformed range '" + s + "' for '" + sr.symbol + "'",
                  "write lo..hi, as in 1..8192");
        if (sr.lo > sr.hi) fail_at(c_.file, pos(v), "empty range '" + s + "' for '" + sr.symbol + "'");
        sr.is_range = true;
      } else {
        sr.values.push_back(integer(v, "the value of '" + sr.symbol + "'"));
      }
      int64_t lo = sr.is_range ? sr.lo : *std::min_element(sr.values.begin(), sr.values.end());
      int64_t hi = sr.is_range ? sr.hi : *std::max_element(sr.values.begin(), sr.values.end());
      if (lo < 0 || hi > (int64_t(1) << 40))
        fail_at(c_.file, pos(v), "values of '" + sr.symbol + "' must lie in 0..2^40",
                "sizes are non-negative");
      for (const auto& prev : r.shapes)
        if (prev.symbol == sr.symbol) fail_at(c_.file, sr.pos, "'" + sr.symbol + "' given twice");
      r.shapes.push_back(std::move(sr));
    }
  }

  void cases(const YAML::Node& n) {
    if (!n.IsMap())
      fail_at(c_.file, pos(n), "cases must be a mapping", "cases: { standard: {...}, hidden: {...} }");
    for (auto it = n.begin(); it != n.end(); ++it) {
      std::string k = scalar(it->first, "a key");
      if (k != "standard" && k != "hidden" && k != "values")
        fail_at(c_.file, pos(it->first), "unknown key '" + k + "' in cases",
                "keys are standard, hidden, values");
    }
    if (!n["standard"])
      fail_at(c_.file, pos(n), "missing 'standard' in cases", "cases: { standard: { shapes: ... } }");
    case_set(n["standard"], c_.standard, "standard", 20, 0);
    case_set(n["hidden"], c_.hidden, "hidden", 80, 1);
    YAML::Node v = n["values"];
    if (!v) return;
    if (!v.IsMap())
      fail_at(c_.file, pos(v), "values must map inputs to distributions", "values: { x: normal(0, 1) }");
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (swallowed(it->first)) continue;
      ValueRule r;
      r.tensor = scalar(it->first, "a tensor name");
      r.pos = pos(it->first);
      std::string text = expression_text(it->second, "a distribution");
      te::Application a = te::parse_application(text, scalar_map(it->second));
      struct D {
        const char* name;
        Distribution d;
        size_t arity;
      };
      static const D kDists[] = {{"normal", Distribution::Normal, 2},
                                 {"uniform", Distribution::Uniform, 2},
                                 {"randint", Distribution::RandInt, 2},
                                 {"bernoulli", Distribution::Bernoulli, 1},
                                 {"constant", Distribution::Constant, 1}};
      const D* found = nullptr;
      for (const auto& d : kDists)
        if (a.name == d.name) found = &d;
      if (!found)
        fail_at(c_.file, a.pos, "unknown distribution '" + a.name + "'",
                "distributions are normal(m, s) uniform(lo, hi) randint(lo, hi) bernoulli(p) constant(v)");
      if (a.args.size() != found->arity)
        fail_at(c_.file, a.pos,
                "'" + a.name + "' takes " + std::to_string(found->arity) + " argument" +
                    (found->arity == 1 ? "" : "s") + ", given " + std::to_string(a.args.size()));
      r.dist = found->d;
      r.args = std::move(a.args);
      c_.values.push_back(std::move(r));
    }
  }

  void limits(const YAML::Node& n) {
    if (!n.IsMap())
      fail_at(c_.file, pos(n), "limits must be a mapping", "limits: { max_bytes: 1e8, max_flops: 2e9 }");
    for (auto it = n.begin(); it != n.end(); ++it) {
      std::string k = scalar(it->first, "a key");
      double v = number(it->second, k);
      if (v <= 0) fail_at(c_.file, pos(it->second), k + " must be positive");
      if (k == "max_bytes")
        c_.limits.max_bytes = v;
      else if (k == "max_flops")
        c_.limits.max_flops = v;
      else
        fail_at(c_.file, pos(it->first), "unknown key '" + k + "' in limits",
                "keys are max_bytes, max_flops");
    }
  }
};

}  // namespace

Contract load_contract_text(const std::string& text, const std::string& file) {
  try {
    return Loader(text, file).load();
  } catch (const ContractError&) {
    throw;
  } catch (const YAML::Exception& e) {
    throw ContractError(SourceLoc{file, e.mark.line + 1, e.mark.column + 1}, "malformed YAML: " + e.msg);
  }
}

Contract load_contract_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ContractError(SourceLoc{path, 0, 0}, "cannot open contract file", "check the path");
  std::ostringstream ss;
  ss << in.rdbuf();
  return load_contract_text(ss.str(), path);
}

}  // namespace cake
