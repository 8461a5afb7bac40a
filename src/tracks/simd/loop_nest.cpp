// Loop-nest lowering of a checked contract to C++ with OpenMP (see loop_nest.h).
#include "tracks/simd/loop_nest.h"

#include <fmt/format.h>

#include <functional>
#include <optional>
#include <set>

#include "contract/printer.h"
#include "core/error.h"
#include "tracks/common/host_code.h"
#include "tracks/simd/cpp_expr.h"

namespace cake::tracks::simd {

using te::Expr;
using te::ExprKind;
using te::Stmt;
using te::uses_var;

LoopNestOptions loop_nest_options(const Knobs& k) {
  LoopNestOptions o;
  o.compute = k.choice("compute");
  o.acc = k.choice("acc");
  o.fuse_rows = k.choice("fusion") == "rows";
  o.vectorize = k.boolean("vectorize");
  o.interchange = k.boolean("interchange");
  o.scan = k.boolean("scan");
  o.scatter_rows = !k.has("scatter_rows") || k.boolean("scatter_rows");
  o.unroll = static_cast<int>(k.integer("unroll"));
  o.threads = static_cast<int>(k.integer("threads"));
  o.parallel_min_work = k.integer("parallel_min_work");
  o.serial_below = k.integer("serial_below");
  o.gemm = k.boolean("gemm");
  o.mr = static_cast<int>(k.integer("mr"));
  o.nv = static_cast<int>(k.integer("nv"));
  o.row_block = static_cast<int>(k.integer("row_block"));
  o.bf16_dot = k.has("bf16_dot") && k.boolean("bf16_dot");
  o.bf16_f32 = k.has("bf16_f32") && k.boolean("bf16_f32");
  o.f16_f32 = k.has("f16_f32") && k.boolean("f16_f32");
  o.f16c = k.has("f16c") && k.boolean("f16c");
  o.plane = k.has("plane") && k.boolean("plane");
  const std::string stream = k.has("stream") ? k.choice("stream") : "off";
  o.stream_elem_bytes = stream == "all" ? 1 : stream == "wide" ? 4 : 0;
  o.stage_rows = k.has("stage_rows") && k.boolean("stage_rows");
  return o;
}

namespace {

// In generated code: whether this instantiation multiplies bf16 pairs on the bf16 dot product (the CPU
// has it, and IO's operands are bf16). Contractions and row dots test the same condition.
constexpr const char* kBf16DotHere =
    "cake_gemm::kBf16Dot && std::is_same_v<typename IO::Src, cake_gemm::src_bf16>";

// A compute function without its OpenMP work sharing, renamed NAME_serial: `omp parallel` and `omp for` lines
// go (their blocks stay plain blocks, and omp_get_num_threads() is 1 outside a region), `omp parallel for
// simd` keeps only its `omp simd`, `omp for simd` its `omp simd` and collapse clause. (Keeping the collapse
// of a copy for inner sizes of 1 measured mixed on permute's serial cases: f32 H=16 S=1024 and f16 B=4 H=16
// S=7 1.5-1.8x slower, f16 H=12 S=512 and S=1024 0.66-0.69x; rope and embedding within noise.)
std::string serial_copy(const std::string& body, const std::string& name) {
  std::string out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t eol = body.find('\n', pos);
    if (eol == std::string::npos) eol = body.size();
    const std::string line = body.substr(pos, eol - pos);
    pos = eol + 1;
    const size_t at = line.find_first_not_of(' ');
    const std::string_view text =
        at == std::string::npos ? std::string_view() : std::string_view(line).substr(at);
    if (text.starts_with("#pragma omp parallel for simd")) {
      out += line.substr(0, at) + "#pragma omp simd\n";
    } else if (text.starts_with("#pragma omp for simd")) {
      const size_t collapse = text.find(" collapse(");
      const std::string clause =
          collapse == std::string_view::npos
              ? ""
              : std::string(text.substr(collapse, text.find(')', collapse) + 1 - collapse));
      out += line.substr(0, at) + "#pragma omp simd" + clause + "\n";
    } else if (!text.starts_with("#pragma omp parallel") && !text.starts_with("#pragma omp for")) {
      out += line + "\n";
    }
  }
  const std::string decl = "int " + name + "(";
  const size_t at = out.find(decl);
  if (at != std::string::npos) out.replace(at, decl.size(), "int " + name + "_serial(");
  return out;
}

// Appends three copies of a loop to `out`, under `if (STRIDE == 1)`, `else if (STRIDE == 2)` and `else`,
// the first two with STRIDE shadowed by its constant: a stride known at compile time makes strided loads
// permutes instead of gathers (2x on maxpool2d's stride-2 cases). `body` appends one copy at `ind`, which
// is one level deeper while it runs.
void stride_specialized(const std::string& stride, std::string& out, std::string& ind,
                        const std::function<void()>& body) {
  for (const int k : {1, 2}) {
    out += fmt::format("{}{}if ({} == {}) {{\n", ind, k == 1 ? "" : "} else ", stride, k);
    ind += "  ";
    out += fmt::format("{}const int64_t {} = {};\n", ind, stride, k);
    body();
    ind.resize(ind.size() - 2);
  }
  out += ind + "} else {\n";
  ind += "  ";
  body();
  ind.resize(ind.size() - 2);
  out += ind + "}\n";
}

// The head of a loop of `var` over [from, to) run as chunks of `chunk` lanes, the last chunk overlapping
// the one before, for a body that stores the same value when it runs twice for one var: `if (to - from >=
// chunk) { chunks of body } else `, the caller's plain loop to follow. A chunk is one vector step, so no
// scalar remainder is left (GCC leaves up to chunk - 1 iterations to scalar code). `body` is the chunk
// loop's statements, at indent ind + 6.
std::string overlapped_chunks(const std::string& ind, const std::string& var, const std::string& from,
                              const std::string& to, int chunk, const std::string& body) {
  std::string out = fmt::format("{}if ({} - {} >= {}) {{\n", ind, to, from, chunk);
  out += fmt::format("{}  for (int64_t ov0 = {};; ov0 += {}) {{\n", ind, from, chunk);
  out += fmt::format("{}    if (ov0 + {} > {}) ov0 = {} - {};\n", ind, chunk, to, to, chunk);
  out += fmt::format("{}    #pragma omp simd\n{}    for (int64_t ovk = 0; ovk < {}; ++ovk) {{\n", ind, ind,
                     chunk);
  out += fmt::format("{}      const int64_t {} = ov0 + ovk;\n", ind, var) + body;
  out += fmt::format("{}    }}\n{}    if (ov0 + {} >= {}) break;\n{}  }}\n{}}} else ", ind, ind, chunk, to,
                     ind, ind);
  return out;
}

enum class Storage { Input, Direct, Buffer, RowLocal };

// A run of statements in execution order; fused when `prefix` > 0 (their first `prefix` axes are shared).
struct Group {
  std::vector<int> stmts;
  int prefix = 0;
};

// A matmul-like statement: `reduce` = sum(k..: a * b). C's rows are domain axis `row`, its columns the
// domain axes after it (flattened row-major), its batch the axes before it; the reduction variables `k`,
// flattened row-major, are the contraction axis. a is a plain read that indexes the rows, no column axis,
// and the k variables as one run of consecutive axes in their order (so flattened k has one stride in a);
// b does not index the rows. In the classic form (one k, one column axis, b a plain read) B is packed by
// strides or read in place; otherwise b is evaluated while packing (convolution's window of a padded
// input: y[n, o, i, j] = Σ_{c,ky,kx} w[o, c, ky, kx] · x?[n, c, i·S + ky − P, j·S + kx − P], an implicit
// GEMM of O × (Ho·Wo) × (C·KH·KW) per image).
struct Contraction {
  const Expr* reduce = nullptr;
  const Expr* a = nullptr;
  const Expr* b = nullptr;
  std::vector<int> k;  // variable slots of the reduction, outermost first
  int row = -1;
  bool classic = true;
};

// Whether integer expression e is affine in variable j (the forms affine_in takes).
bool affine_along(const Expr& e, int j) {
  if (!uses_var(e, j) || e.kind == ExprKind::Var) return true;
  if (e.kind == ExprKind::Unary && e.op == te::Op::Neg) return affine_along(*e.args[0], j);
  if (e.kind != ExprKind::Binary) return false;
  if (e.op == te::Op::Add || e.op == te::Op::Sub)
    return affine_along(*e.args[0], j) && affine_along(*e.args[1], j);
  if (e.op != te::Op::Mul) return false;
  return (!uses_var(*e.args[0], j) && affine_along(*e.args[1], j)) ||
         (!uses_var(*e.args[1], j) && affine_along(*e.args[0], j));
}

// A window reduction over a statement's last two axes i, j (depthwise convolution, pooling):
// y[.., i, j] = red(taps: f · x?[.., Si·i + h, Sj·j + g]) (+ anything per element around it), where the taps
// are the reduction's variables (constant extents), x is the only tensor the reduction reads along i or j
// and reads along them in its last two axes only, Si, h and Sj, g involve no domain variable, x's other
// indices no tap, and the factor f (sums only; optional) indexes neither i nor j.
struct PlaneStencil {
  const Expr* reduce = nullptr;
  const Expr* window = nullptr;  // the read of x
  const Expr* factor = nullptr;  // f; null: the term is the read itself
};

std::optional<PlaneStencil> match_plane_stencil(const Stmt& s) {
  const int n = s.n_domain, i = n - 2, j = n - 1;
  if (n < 2 || s.accumulate) return std::nullopt;
  const Expr* red = te::only_reduction(*s.rhs);
  if (!red || red->args[0]->type != te::Type::Float) return std::nullopt;
  for (const te::ReduceVar& rv : red->rvars) {
    if (rv.lo ? te::contains(*rv.lo, ExprKind::Var) || te::contains(*rv.hi, ExprKind::Var) : !rv.extent)
      return std::nullopt;
  }
  if (red->reduce != te::ReduceOp::Sum && red->reduce != te::ReduceOp::Max &&
      red->reduce != te::ReduceOp::Min)
    return std::nullopt;
  PlaneStencil ps{red, red->args[0].get(), nullptr};
  const Expr& body = *red->args[0];
  if (body.kind == ExprKind::Binary && body.op == te::Op::Mul && red->reduce == te::ReduceOp::Sum) {
    for (size_t side = 0; side < 2; ++side) {
      if (body.args[side]->kind == ExprKind::Read && uses_var(*body.args[side], j)) {
        ps.window = body.args[side].get();
        ps.factor = body.args[1 - side].get();
      }
    }
  }
  const Expr& w = *ps.window;
  if (w.kind != ExprKind::Read || w.args.size() < 2) return std::nullopt;
  if (ps.factor &&
      (uses_var(*ps.factor, i) || uses_var(*ps.factor, j) || te::contains(*ps.factor, ExprKind::Reduce)))
    return std::nullopt;
  const size_t nd = w.args.size();
  for (size_t a = 0; a < nd; ++a) {
    const Expr& ix = *w.args[a];
    if (te::contains(ix, ExprKind::Read)) return std::nullopt;
    if (a + 2 < nd) {  // a leading index: outer variables only
      if (uses_var(ix, i) || uses_var(ix, j)) return std::nullopt;
      for (const te::ReduceVar& rv : red->rvars)
        if (uses_var(ix, rv.slot)) return std::nullopt;
      continue;
    }
    const int own = a + 2 == nd ? i : j;  // the row index uses i, the column index j, neither anything else
    if (!uses_var(ix, own) || !affine_along(ix, own)) return std::nullopt;
    for (int k = 0; k < n; ++k)
      if (k != own && uses_var(ix, k)) return std::nullopt;
  }
  return ps;
}

// A sum along d of two plain reads (unpadded inputs, d their last index alone and in no other), one free
// of the statement's innermost axis j (the vector: q[.., d]) and one that picks a row by j (k[.., j, d]): per
// j, a dot product of two contiguous rows (attention's scores sc[b, h, i, j] = Σ_d q[b, h, i, d] ·
// k[b, h, j, d]).
struct RowDots {
  const Expr* reduce = nullptr;
  const Expr* vec = nullptr;
  const Expr* rows = nullptr;
};

// unit_dispatch: reductions of up to this many terms run as short rows (ExprOptions::short_rows), where
// there are at least as many rows.
constexpr int kShortRowTerms = 16;

// A group's short rows (Lowering::short_rows): the size symbols of its reductions, and its row count.
struct ShortRows {
  std::vector<std::string> sizes;
  std::string rows;
};

class Lowering {
 public:
  Lowering(const CheckedContract& c, const LoopNestOptions& o) : c_(c), o_(o) {
    real_ = o.compute == "f64" ? "double" : "float";
    acc_ = o.acc == "f64" ? "double" : real_;
    plan();
  }

  std::string run(const std::string& header);

 private:
  const Stmt& stmt(int i) const { return c_.contract.compute[static_cast<size_t>(i)]; }
  const TensorInfo& tensor(int id) const { return c_.tensors[static_cast<size_t>(id)]; }
  std::string dim(int id, size_t k) const { return emit_size_expr(*tensor(id).dims[k]); }
  // The product of tensor id's dims from axis `from` on, as a C expression.
  std::string numel(int id, size_t from = 0) const {
    std::string n = "INT64_C(1)";
    for (size_t k = from; k < tensor(id).dims.size(); ++k) n += " * " + dim(id, k);
    return n;
  }
  // The declaration of row-local tensor id's buffer, for one row of its first `prefix` axes: a stack scalar
  // when a row holds one element (a thread_local scratch lookup costs more than a short row's work).
  // `rows` rows of it when the group runs in row blocks.
  std::string row_local(int id, size_t prefix, int rows = 1) const {
    if (prefix >= tensor(id).dims.size())
      return fmt::format("{} rl_{}[{}];\n", elem_type(id), tensor(id).name, rows);
    return fmt::format("{}* rl_{} = cake_scratch<{}>({}, (size_t)({} * {}));\n", elem_type(id),
                       tensor(id).name, elem_type(id), scratch_slot_[static_cast<size_t>(id)], rows,
                       numel(id, prefix));
  }
  std::string elem_type(int id) const { return tensor(id).elem == te::Type::Float ? real_ : "int64_t"; }

  void plan();
  bool fusable(const Group& g, int s, int p) const;
  std::string linear(int id, const std::vector<std::string>& idx, int from_axis) const;
  std::string access(int id, const std::vector<std::string>& idx, int prefix) const;
  std::string access_stored(int id, const std::vector<std::string>& idx) const;
  std::string store(int id, const std::string& lin, const std::string& value) const;
  std::string omp_threads() const {
    return o_.threads > 0 ? fmt::format(" num_threads({})", o_.threads) : "";
  }
  // The clause names `parallel`: on `parallel for simd`, an unqualified `if` applies to the simd part too
  // (OpenMP 5.0), and GCC then runs the loop below the threshold as scalar code. The work is recorded, in
  // size symbols (`in_sizes` when `work` names locals of the nest), for the serial dispatch in cake_run.
  std::string work_if(const std::string& work, const std::string& in_sizes = "") {
    const std::string& w = in_sizes.empty() ? work : in_sizes;
    if (std::find(region_work_.begin(), region_work_.end(), w) == region_work_.end())
      region_work_.push_back(w);
    return fmt::format(" if(parallel: ({}) >= INT64_C({}))", work, o_.parallel_min_work);
  }
  std::string extents_product(const Stmt& s, int from, int to) const;

  std::string emit_group(const Group& g);
  std::string emit_compute(const std::string& name, const std::string& args);
  bool flat_elementwise(int si) const;
  std::string emit_flat(int si);
  std::string emit_nest(const Group& g, bool unit_rows = true);
  std::string emit_loops(const Group& g);
  std::vector<std::string> unit_row_sizes(const Group& g) const;
  ShortRows short_rows(const Group& g) const;
  std::string unit_dispatch(const std::vector<std::string>& unit, const ShortRows& shorts,
                            const std::function<std::string(bool)>& nest);
  std::string emit_fused_rows(const Group& g, bool unit);
  std::string emit_fused_loops(const Group& g, bool unit, bool points);
  std::optional<Contraction> match_contraction(const Group& g) const;
  std::string emit_contraction(const Group& g, const Contraction& mm);
  std::string pack_b_expr(const Group& g, const Contraction& mm, const std::string& ind, bool bits = false);
  std::string k_loops(const Stmt& s, const Contraction& mm, std::string& in) const;
  std::string decode_columns(const Group& g, const Contraction& mm, const std::string& ind);
  bool windowed(const Group& g, const Contraction& mm) const;
  std::string k_extent(const Stmt& s, const Contraction& mm) const;
  std::string window_table(const Group& g, const Contraction& mm, const std::string& ind);
  std::string pack_b_window(const Group& g, const Contraction& mm, const std::string& ind, bool bits = false);
  std::string b_bits(const Stmt& s, const Contraction& mm, std::string& pre, const std::string& ind,
                     const std::string& test);
  std::string wide_elements(const Expr& rd) const;
  bool overlaps_tail(int si) const;
  std::string access_linear(int id, const std::string& lin) const;
  // The f16 conversions the kernel calls: F16C's, as simd functions (knob f16c), or the prelude's bit forms.
  const char* f16_load() const { return o_.f16c ? "cake_f16c_ld" : "cake_f16_to_f32"; }
  const char* f16_store() const { return o_.f16c ? "(uint16_t)cake_f16c_st" : "cake_f32_to_f16"; }
  std::string var_coefficient(const Expr& read, int slot) const;
  std::string emit_statement_body(int si, int prefix, const std::string& ind);
  std::string emit_statement_body_any(int si, int prefix, const std::string& ind);
  std::string sum_size(int si) const;
  std::string single_term_size(int si, int prefix) const;
  std::string emit_statement_loops(int si, int prefix, const std::string& ind);
  const Expr* stencil_reduction(int si, int prefix) const;
  std::optional<RowDots> row_dots(int si, int prefix) const;
  std::string emit_row_dots(int si, int prefix, const std::string& ind, const RowDots& rd);
  std::optional<PlaneStencil> plane_stencil(const Group& g) const;
  std::string emit_plane_stencil(const Group& g, const PlaneStencil& ps);
  std::string emit_interchanged(int si, int prefix, const std::string& ind, const Expr& red);
  std::vector<const Expr*> windows_along_row(int si, int prefix) const;
  std::string emit_range_regions(int si, int prefix, const std::string& ind,
                                 const std::vector<const Expr*>& reads);
  const Expr* running_sum(int si, int prefix) const;
  std::string emit_running_sum(int si, int prefix, const std::string& ind, const Expr& red);
  // Plain loops over statement s's axes [from, to), opened at indent ind (which then indents their body).
  std::string domain_loops(const Stmt& s, int from, int to, std::string& ind) const {
    std::string out;
    for (int k = from; k < to; ++k) {
      const std::string v = var_id(s.vars[static_cast<size_t>(k)]);
      out += fmt::format("{}for (int64_t {} = 0; {} < {}; ++{}) {{\n", ind, v, v,
                         emit_size_expr(*s.var_extent[static_cast<size_t>(k)]), v);
      ind += "  ";
    }
    return out;
  }
  // Closes the loops over axes [prefix, j) opened at indent ind0 (ind: the innermost one's body) and the
  // block around them.
  static std::string close_loops(std::string ind, const std::string& ind0, int prefix, int j) {
    std::string out;
    for (int k = j - 1; k >= prefix; --k) {
      ind.resize(ind.size() - 2);
      out += ind + "}\n";
    }
    return out + ind0 + "}\n";
  }
  // Statement si's target element at the domain variables := its rhs, emitted by em (statements the rhs
  // needs first go to pre); an element copied as it is moves as bits (moves_bits).
  std::string assign(int si, CppExprEmitter& em, std::string& pre, const std::string& ind) const;
  bool moves_bits(int si) const;
  std::vector<int> read_order(int si) const;
  bool copies_rows(int si) const;
  bool stages_rows(int si) const;
  std::string put_function(int id) const;
  // Inside a parallel region whose rows may be streamed: each thread's SFENCE before the region's barrier.
  std::string thread_fence(const std::string& ind = "      ") const {
    return o_.stream_elem_bytes > 0 ? ind + "cake_stream_fence();\n" : "";
  }
  std::string staged_row(int si, CppExprEmitter& em, const std::string& ind);
  // Element lin of tensor id as the statement being emitted writes it: the tensor's own, or, while a row
  // is staged (staged_row), the staging buffer's.
  std::string target_element(int id, const std::string& lin) const {
    if (id == stage_tensor_) return fmt::format("st_buf[({}) - ({})]", lin, stage_base_);
    return fmt::format("{}[{}]", tensor_id(tensor(id).name), lin);
  }
  // An expression emitter for statement s in this lowering's types, reading tensors through access().
  CppExprEmitter emitter(const Stmt& s) {
    return CppExprEmitter(c_, s, {real_, acc_, o_.vectorize, short_rows_ ? kShortRowTerms : 0},
                          [this](int id, const std::vector<std::string>& idx, bool stored) {
                            return stored ? access_stored(id, idx) : access(id, idx, 0);
                          });
  }
  std::string emit_accumulate(int si);
  bool scatters_rows(int si) const;
  std::string emit_scatter_rows(int si);

  const CheckedContract& c_;
  LoopNestOptions o_;
  std::string real_, acc_;
  std::vector<Storage> storage_;
  std::vector<int> row_prefix_;  // RowLocal tensors: the prefix of their group
  std::vector<Group> groups_;
  std::vector<int> scratch_slot_;
  int next_scratch_ = 0;
  bool unit_rows_ = false;   // while the copy for inner sizes of 1 is emitted (unit_dispatch)
  bool short_rows_ = false;  // while the copy for short reductions is emitted (unit_dispatch)
  std::string one_term_;     // while a copy for a sum of one term is emitted: the size symbol that is 1 there
  // Sizes whose value 1 a copy of the nest being emitted takes alone (unit_dispatch): the unit size where
  // it is the only one, the short reductions' sizes. No statement needs a copy of its own for them.
  std::vector<std::string> covered_sizes_;
  // While a row is staged (staged_row): the tensor whose stores go to the staging buffer, and the offset of
  // the buffer's first element in that tensor.
  int stage_tensor_ = -1;
  std::string stage_base_;
  bool stage_floats_ = false;  // the buffer holds f32 values (else the stored bits)
  std::string block_row_;      // while a row block is emitted: the row's index within it (row-local offsets)
  // While a flat elementwise statement is emitted (emit_flat): its loop variable, the offset of every
  // access whose indices are flat_idx_ (the domain variables in order).
  std::string flat_;
  std::vector<std::string> flat_idx_;
  std::vector<std::string> region_work_;  // each OpenMP region's work, in size symbols (work_if)
};

// Statement s may join group g with shared prefix p when its first p axes have the same extents as the
// group's and every read of a tensor defined in the group indexes those axes with the same variables.
bool Lowering::fusable(const Group& g, int si, int p) const {
  const Stmt& s = stmt(si);
  if (s.accumulate || s.n_domain < p) return false;
  const Stmt& first = stmt(g.stmts.front());
  for (int k = 0; k < p; ++k) {
    if (te::print_expr(*s.var_extent[static_cast<size_t>(k)]) !=
        te::print_expr(*first.var_extent[static_cast<size_t>(k)]))
      return false;
  }
  std::set<int> defined;
  for (int m : g.stmts) defined.insert(stmt(m).tensor);
  defined.insert(s.tensor);
  for (int m : g.stmts) {
    const Stmt& t = stmt(m);
    if (t.n_domain < p) return false;
  }
  std::vector<int> all = g.stmts;
  all.push_back(si);
  for (int m : all) {
    bool ok = !te::any_of(*stmt(m).rhs, [&](const Expr& e) {
      if (e.kind != ExprKind::Read || !defined.count(e.slot)) return false;
      if (e.padded || static_cast<int>(e.args.size()) < p) return true;
      for (int k = 0; k < p; ++k) {
        const Expr& ix = *e.args[static_cast<size_t>(k)];
        if (ix.kind != ExprKind::Var || ix.slot != k) return true;
      }
      return false;
    });
    if (!ok) return false;
  }
  return true;
}

void Lowering::plan() {
  const size_t nt = c_.tensors.size();
  storage_.assign(nt, Storage::Direct);
  row_prefix_.assign(nt, 0);
  // Which tensors are read by statements, and how many statements define each.
  std::vector<int> reads(nt, 0), defs(nt, 0), accum(nt, 0);
  for (const Stmt& s : c_.contract.compute) {
    defs[static_cast<size_t>(s.tensor)]++;
    if (s.accumulate) accum[static_cast<size_t>(s.tensor)]++;
    te::any_of(*s.rhs, [&](const Expr& e) {
      if (e.kind == ExprKind::Read) reads[static_cast<size_t>(e.slot)]++;
      return false;
    });
    for (const te::ExprPtr& ix : s.index) {
      te::any_of(*ix, [&](const Expr& e) {
        if (e.kind == ExprKind::Read) reads[static_cast<size_t>(e.slot)]++;
        return false;
      });
    }
  }
  for (size_t t = 0; t < nt; ++t) {
    const TensorInfo& ti = c_.tensors[t];
    if (ti.role == TensorRole::Input) {
      storage_[t] = Storage::Input;
    } else if (ti.role == TensorRole::Intermediate || reads[t] || defs[t] > 1 || accum[t]) {
      storage_[t] = Storage::Buffer;
    }
  }
  // An output defined by one scatter into data-chosen rows, read by nothing: written once, row by row.
  for (int si : c_.order) {
    const size_t t = static_cast<size_t>(stmt(si).tensor);
    if (c_.tensors[t].role == TensorRole::Output && !reads[t] && defs[t] == 1 && scatters_rows(si))
      storage_[t] = Storage::Direct;
  }
  // Groups, greedily in execution order.
  for (int si : c_.order) {
    const Stmt& s = stmt(si);
    if (o_.fuse_rows && !groups_.empty() && !s.accumulate) {
      Group& g = groups_.back();
      const int cur = g.stmts.size() == 1 ? stmt(g.stmts[0]).n_domain : g.prefix;
      for (int p = std::min(cur, s.n_domain); p >= 1; --p) {
        if (stmt(g.stmts.front()).accumulate) break;
        if (fusable(g, si, p)) {
          g.prefix = p;
          g.stmts.push_back(si);
          goto next;
        }
      }
    }
    groups_.push_back({{si}, 0});
  next:;
  }
  // Intermediates defined and read only inside their fused group live in a per-thread row buffer.
  for (const Group& g : groups_) {
    if (g.stmts.size() < 2) continue;
    for (int si : g.stmts) {
      const int t = stmt(si).tensor;
      if (tensor(t).role != TensorRole::Intermediate || defs[static_cast<size_t>(t)] != 1) continue;
      bool outside = false;
      for (const Group& h : groups_) {
        if (&h == &g) continue;
        for (int sj : h.stmts) {
          if (te::any_of(*stmt(sj).rhs,
                         [&](const Expr& e) { return e.kind == ExprKind::Read && e.slot == t; }))
            outside = true;
        }
      }
      if (!outside) {
        storage_[static_cast<size_t>(t)] = Storage::RowLocal;
        row_prefix_[static_cast<size_t>(t)] = g.prefix;
      }
    }
  }
  scratch_slot_.assign(nt, -1);
  int slot = 0;
  for (size_t t = 0; t < nt; ++t)
    if (storage_[t] == Storage::Buffer || storage_[t] == Storage::RowLocal) scratch_slot_[t] = slot++;
  next_scratch_ = slot;
}

std::string Lowering::linear(int id, const std::vector<std::string>& idx, int from) const {
  if (static_cast<int>(idx.size()) <= from) return "0";
  if (!flat_.empty() && from == 0 && idx == flat_idx_) return flat_;
  std::string s = idx[static_cast<size_t>(from)];
  for (size_t k = static_cast<size_t>(from) + 1; k < idx.size(); ++k)
    s = fmt::format("({}) * {} + {}", s, dim(id, k), idx[k]);
  return s;
}

std::string Lowering::access(int id, const std::vector<std::string>& idx, int prefix) const {
  const TensorInfo& t = tensor(id);
  if (storage_[static_cast<size_t>(id)] == Storage::RowLocal) {
    const std::string in_row = linear(id, idx, row_prefix_[static_cast<size_t>(id)]);
    if (block_row_.empty()) return fmt::format("rl_{}[{}]", t.name, in_row);
    return fmt::format("rl_{}[({}) * {} + {}]", t.name, block_row_,
                       numel(id, static_cast<size_t>(row_prefix_[static_cast<size_t>(id)])), in_row);
  }
  (void)prefix;
  return access_linear(id, linear(id, idx, 0));
}

// Element idx of an input or a directly stored tensor in the operator dtype, as it is held (moves_bits).
std::string Lowering::access_stored(int id, const std::vector<std::string>& idx) const {
  return fmt::format("{}[{}]", tensor_id(tensor(id).name), linear(id, idx, 0));
}

// Element `lin` (row-major offset) of an input or buffered tensor, as a compute-type value.
std::string Lowering::access_linear(int id, const std::string& lin) const {
  const TensorInfo& t = tensor(id);
  const std::string name = tensor_id(t.name);
  switch (storage_[static_cast<size_t>(id)]) {
    case Storage::Input:
    case Storage::Direct: {
      if (!t.fixed_dtype) return fmt::format("IO::ld({}, {})", name, lin);
      switch (*t.fixed_dtype) {
        case DType::f32:
          return fmt::format("(({}){}[{}])", real_, name, lin);
        case DType::f16:
          return fmt::format("(({}){}({}[{}]))", real_, f16_load(), name, lin);
        case DType::bf16:
          return fmt::format("(({})cake_bf16_to_f32({}[{}]))", real_, name, lin);
        default:
          return fmt::format("((int64_t){}[{}])", name, lin);
      }
    }
    case Storage::Buffer:
      return fmt::format("b_{}[{}]", t.name, lin);
    case Storage::RowLocal:
      break;
  }
  throw Error("simd: row-local tensor '" + t.name + "' read by offset");
}

// Writes value to element lin of an output in its storage dtype.
std::string Lowering::store(int id, const std::string& lin, const std::string& value) const {
  const TensorInfo& t = tensor(id);
  if (id == stage_tensor_ && stage_floats_)
    return fmt::format("{} = (float)({});", target_element(id, lin), value);
  if (!t.fixed_dtype) return fmt::format("IO::st({}, {}, {});", tensor_id(t.name), lin, value);
  const std::string at = target_element(id, lin);
  switch (*t.fixed_dtype) {
    case DType::f32:
      return fmt::format("{} = (float)({});", at, value);
    case DType::f16:
      return fmt::format("{} = {}((float)({}));", at, f16_store(), value);
    case DType::bf16:
      return fmt::format("{} = cake_f32_to_bf16((float)({}));", at, value);
    case DType::i8:
      return fmt::format("{} = cake_i8({});", at, value);
    case DType::i32:
      return fmt::format("{} = cake_to_i32((double)({}));", at, value);
    case DType::i64:
      return fmt::format("{} = cake_to_i64((double)({}));", at, value);
    case DType::boolean:
      return fmt::format("{} = (({}) != 0);", at, value);
  }
  return "";
}

std::string Lowering::extents_product(const Stmt& s, int from, int to) const {
  std::string w = "INT64_C(1)";
  for (int k = from; k < to; ++k) w += " * " + emit_size_expr(*s.var_extent[static_cast<size_t>(k)]);
  return w;
}

namespace {
// Rows shorter than this keep the reduction innermost (an interchanged update loop this short would run
// scalar with its loop overhead per reduction step).
constexpr int kInterchangeMinRow = 16;
constexpr int kInterchangeBlock = 4;  // emit_interchanged: vectors of a row block held in registers
constexpr int kRegionsMinRow = 64;    // emit_range_regions
constexpr int kFlatRowsBelow = 256;   // emit_loops: flat elementwise statements with shorter rows
constexpr int kRowDotsMinTerms = 8;   // emit_row_dots: sums of fewer terms keep the reduction loop
constexpr int kPointsMinRow = 16;     // emit_fused_rows: shorter rows of fused points keep the plain loops
// staged_row streams outputs of at least kStreamMinBytes, about the last-level cache (below it an output the
// caller writes again stays in cache, and streaming it out to memory loses: rms_norm f32 D=127 N=4096, 2 MiB,
// 3x slower streamed), in rows of at least kStreamMinRowBytes; its blocks (cake_math.h's kCakeStageBlock,
// 1024 elements) hold 4 KiB of f32 values: 4 KiB blocks measured faster than 1 and 16 KiB on a streamed bf16
// copy, and fit L1 beside the rows being read.
constexpr int64_t kStreamMinBytes = INT64_C(16) << 20;
constexpr int kStreamMinRowBytes = 256;
constexpr int kStageMinRow = 64;    // staged_row: 16-bit float rows converted by vector instructions
constexpr int kUnitRowUnroll = 16;  // unit_dispatch: rows of up to this constant length unroll whole
// emit_nest: a permuting copy runs its outer loops in the source's layout order (reads in one sequential
// stream, writes in as many as the source's second-innermost axis has points) while that axis has at most
// this many points. permute f32 [8, 1024, 16, 63] -> [8, 16, 1024, 63], one thread: 4.4 ms in the output's
// order (each read a row one page past the last, which the prefetchers do not follow), 3.1 ms in the
// source's; with 64 points (64 write streams) the output's order was the faster, 1.9 against 2.1 ms.
constexpr int kReadOrderMaxStreams = 16;
}  // namespace

// A copy whose one read takes the statement's own points permuted, the innermost axis last in both (rows
// stay contiguous): the loop positions in the source's layout order, outermost first. Empty otherwise (and
// where the permutation is the identity).
std::vector<int> Lowering::read_order(int si) const {
  const Stmt& s = stmt(si);
  const Expr& rd = *s.rhs;
  const int n = s.n_domain;
  if (s.accumulate || rd.kind != ExprKind::Read || rd.padded || int(rd.args.size()) != n || n < 3) return {};
  std::vector<int> order;
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (const te::ExprPtr& ix : rd.args) {
    if (ix->kind != ExprKind::Var || ix->slot < 0 || ix->slot >= n || seen[static_cast<size_t>(ix->slot)])
      return {};
    seen[static_cast<size_t>(ix->slot)] = true;
    order.push_back(ix->slot);
  }
  if (order.back() != n - 1) return {};
  for (int k = 0; k < n; ++k)
    if (order[static_cast<size_t>(k)] != k) return order;
  return {};
}

// The size symbol statement si's one sum runs over (`sum(d: ...)` over 0..D, one variable, no bounds), or "".
std::string Lowering::sum_size(int si) const {
  const Expr* sum = nullptr;
  int reductions = 0;
  te::any_of(*stmt(si).rhs, [&](const Expr& e) {
    if (e.kind == ExprKind::Reduce) ++reductions, sum = &e;
    return false;
  });
  if (reductions != 1 || sum->reduce != te::ReduceOp::Sum || sum->rvars.size() != 1) return "";
  const te::ReduceVar& rv = sum->rvars[0];
  if (rv.lo || !rv.extent || rv.extent->kind != ExprKind::Size) return "";
  return emit_size_expr(*rv.extent);
}

// sum_size(si) where a copy of the statement's body for that size = 1 pays: the statement has an axis of
// its own past `prefix` to vectorize once the sum's loop is gone. "" otherwise, and inside the unit,
// short-row and one-term copies, whose sizes are constants already.
std::string Lowering::single_term_size(int si, int prefix) const {
  if (!o_.vectorize || unit_rows_ || short_rows_ || !one_term_.empty() || stmt(si).n_domain <= prefix)
    return "";
  const std::string z = sum_size(si);
  return std::find(covered_sizes_.begin(), covered_sizes_.end(), z) != covered_sizes_.end() ? "" : z;
}

// Statement si's body (emit_statement_body_any), with a copy for a sum of one term where its extent is a
// size symbol: there the symbol is the constant 1, the sum's loop vanishes and the loop around it can
// vectorize (attention's scores with D = 1 had run one scalar dot product of one term per score).
std::string Lowering::emit_statement_body(int si, int prefix, const std::string& ind) {
  const std::string z = single_term_size(si, prefix);
  if (z.empty()) return emit_statement_body_any(si, prefix, ind);
  one_term_ = z;
  const std::string one = emit_statement_body_any(si, prefix, ind + "  ");
  one_term_.clear();
  return fmt::format(
      "{0}if ({1} == 1) {{ // a sum of one term\n{0}  constexpr int64_t {1} = 1;\n{2}{0}}} else "
      "{{\n{3}{0}}}\n",
      ind, z, one, emit_statement_body_any(si, prefix, ind + "  "));
}

// The loops over axes [prefix, n_domain) of statement si and the element computation inside them; a
// running sum carries its accumulator along the innermost axis; a stencil-like reduction is interchanged
// with the innermost axis when that axis is long enough.
std::string Lowering::emit_statement_body_any(int si, int prefix, const std::string& ind) {
  // In a copy for a sum of one term, this statement's sum is that term: its plain loops, with no dot
  // products or interchange to pay for, vectorize along the innermost axis.
  if (!one_term_.empty() && sum_size(si) == one_term_) return emit_statement_loops(si, prefix, ind);
  if (const Expr* scan = running_sum(si, prefix)) return emit_running_sum(si, prefix, ind, *scan);
  if (const auto rd = row_dots(si, prefix)) {
    // Sums of a few terms keep the loop: a horizontal sum per output costs more than they save there
    // (attention f32 D=1 S=128 T=1024: 1.5 ms loop, 2.0 ms row dots).
    return fmt::format("{}if ({} >= {}) {{\n{}{}}} else {{\n{}{}}}\n", ind,
                       emit_size_expr(*rd->reduce->rvars[0].extent), kRowDotsMinTerms, ind,
                       emit_row_dots(si, prefix, ind + "  ", *rd), ind,
                       emit_statement_loops(si, prefix, ind + "  "), ind);
  }
  const Expr* red = stencil_reduction(si, prefix);
  if (!red) {
    const std::vector<const Expr*> reads = windows_along_row(si, prefix);
    if (reads.empty()) return emit_statement_loops(si, prefix, ind);
    const Stmt& s = stmt(si);
    // Only for 16-bit storage: f32 rows vectorize with masked gathers already, and the regions cost more
    // than they save on them (rope f32 E=15 S=2048: 89 -> 166 µs) and on short rows (bf16 E=15: 17 -> 21-27
    // µs).
    return fmt::format("{}if ({} >= {} && sizeof(T) == 2) {{\n{}{}}} else {{\n{}{}}}\n", ind,
                       emit_size_expr(*s.var_extent[static_cast<size_t>(s.n_domain - 1)]), kRegionsMinRow,
                       emit_range_regions(si, prefix, ind + "  ", reads), ind,
                       emit_statement_loops(si, prefix, ind + "  "), ind);
  }
  const Stmt& s = stmt(si);
  return fmt::format("{}if ({} >= {}) {{\n{}{}}} else {{\n{}{}}}\n", ind,
                     emit_size_expr(*s.var_extent[static_cast<size_t>(s.n_domain - 1)]), kInterchangeMinRow,
                     emit_interchanged(si, prefix, ind + "  ", *red), ind,
                     emit_statement_loops(si, prefix, ind + "  "), ind);
}

// A statement that stores an element of an input in the operator dtype as it was read (a gather, a
// permutation): its bits move, with no round trip through the compute type. f16 index_select D=512
// K=8192: 1.2 -> 0.12 ms; a NaN keeps its payload, as libtorch's copy does.
bool Lowering::moves_bits(int si) const {
  const Stmt& s = stmt(si);
  if (s.rhs->kind != ExprKind::Read || s.rhs->padded) return false;
  if (storage_[static_cast<size_t>(s.tensor)] != Storage::Direct || tensor(s.tensor).fixed_dtype)
    return false;
  const Storage from = storage_[static_cast<size_t>(s.rhs->slot)];
  return (from == Storage::Input || from == Storage::Direct) && !tensor(s.rhs->slot).fixed_dtype;
}

namespace {
// The C identifiers of statement s's domain variables, outermost first: its target's index.
std::vector<std::string> domain_ids(const Stmt& s) {
  std::vector<std::string> idx;
  idx.reserve(static_cast<size_t>(s.n_domain));
  for (int k = 0; k < s.n_domain; ++k) idx.push_back(var_id(s.vars[static_cast<size_t>(k)]));
  return idx;
}
}  // namespace

std::string Lowering::assign(int si, CppExprEmitter& em, std::string& pre, const std::string& ind) const {
  const Stmt& s = stmt(si);
  const std::vector<std::string> idx = domain_ids(s);
  if (moves_bits(si)) {
    const std::string bits = em.emit_stored(*s.rhs, pre, ind);
    return fmt::format("{}{} = {};\n", ind, target_element(s.tensor, linear(s.tensor, idx, 0)), bits);
  }
  const std::string value = em.emit(*s.rhs, pre, ind);
  if (storage_[static_cast<size_t>(s.tensor)] != Storage::Direct)
    return fmt::format("{}{} = ({}){};\n", ind, access(s.tensor, idx, 0), elem_type(s.tensor), value);
  return ind + store(s.tensor, linear(s.tensor, idx, 0), value) + "\n";
}

namespace {
// e as c·j + o with c and o free of variable slot j, both as C expressions; nullopt when e is not of that
// form (j under a division, a call or a read, or multiplied by itself). A size symbol that multiplies j (a
// stride) is named in *stride, as its C identifier.
std::optional<std::pair<std::string, std::string>> affine_in(const Expr& e, int j, CppExprEmitter& em,
                                                             std::string& pre, const std::string& ind,
                                                             std::string* stride) {
  if (!uses_var(e, j)) return std::make_pair(std::string("INT64_C(0)"), "(" + em.emit(e, pre, ind) + ")");
  if (e.kind == ExprKind::Var) return std::make_pair(std::string("INT64_C(1)"), std::string("INT64_C(0)"));
  if (e.kind == ExprKind::Unary && e.op == te::Op::Neg) {
    const auto a = affine_in(*e.args[0], j, em, pre, ind, stride);
    if (!a) return std::nullopt;
    return std::make_pair("-(" + a->first + ")", "-(" + a->second + ")");
  }
  if (e.kind != ExprKind::Binary) return std::nullopt;
  if (e.op == te::Op::Add || e.op == te::Op::Sub) {
    const auto a = affine_in(*e.args[0], j, em, pre, ind, stride),
               b = affine_in(*e.args[1], j, em, pre, ind, stride);
    if (!a || !b) return std::nullopt;
    const char* op = e.op == te::Op::Add ? "+" : "-";
    return std::make_pair(fmt::format("({} {} {})", a->first, op, b->first),
                          fmt::format("({} {} {})", a->second, op, b->second));
  }
  if (e.op != te::Op::Mul) return std::nullopt;
  for (size_t side = 0; side < 2; ++side) {
    const Expr& k = *e.args[side];
    if (uses_var(k, j)) continue;
    const auto a = affine_in(*e.args[1 - side], j, em, pre, ind, stride);
    if (!a) return std::nullopt;
    const std::string f = em.emit(k, pre, ind);
    if (k.kind == ExprKind::Size && stride->empty()) *stride = f;
    return std::make_pair(fmt::format("({}) * {}", f, a->first), fmt::format("({}) * {}", f, a->second));
  }
  return std::nullopt;
}

// Narrows [lo, hi) (the C variables named) to exactly the j where the index c·j + o (co) lies in
// [0, extent): ceil(−o / c) <= j <= floor((extent − 1 − o) / c) when c > 0, ceil((o − extent + 1) / −c)
// <= j <= floor(o / −c) when c < 0, everything or nothing when c = 0. (hi may end below lo: empty.)
std::string narrow_to_interior(const std::pair<std::string, std::string>& co, const std::string& extent,
                               const std::string& lo, const std::string& hi, const std::string& ind) {
  std::string out = fmt::format("{}{{\n{}  const int64_t c = {}, o = {};\n", ind, ind, co.first, co.second);
  // Strides 1 and 2 by shifts: the bounds are found once per reduction step, and two 64-bit divisions per
  // step cost conv2d with one output channel a fifth of its time (bf16 C=64 H=W=56 KH=3 KW=1 N=2 O=1 P=1
  // 394 -> 311 µs).
  out += fmt::format("{}  if (c == 1 || c == 2) {{\n", ind);
  out += fmt::format("{}    {} = cake_max64({}, -(o >> (c - 1)));\n", ind, lo, lo);
  out += fmt::format("{}    {} = cake_min64({}, (({} - 1 - o) >> (c - 1)) + 1);\n", ind, hi, hi, extent);
  out += fmt::format("{}  }} else if (c > 0) {{\n", ind);
  out += fmt::format("{}    {} = cake_max64({}, -cake_floordiv(o, c));\n", ind, lo, lo);
  out += fmt::format("{}    {} = cake_min64({}, cake_floordiv({} - 1 - o, c) + 1);\n", ind, hi, hi, extent);
  out += fmt::format("{}  }} else if (c < 0) {{\n", ind);
  out += fmt::format("{}    {} = cake_max64({}, -cake_floordiv({} - 1 - o, -c));\n", ind, lo, lo, extent);
  out += fmt::format("{}    {} = cake_min64({}, cake_floordiv(o, -c) + 1);\n", ind, hi, hi);
  out += fmt::format("{}  }} else if (o < 0 || o >= {}) {{\n{}    {} = 0;\n{}  }}\n{}}}\n", ind, extent, ind,
                     hi, ind, ind);
  return out;
}
}  // namespace

// The one float sum / max / min of statement si's right-hand side when interchanging it with the
// innermost domain axis j makes a vectorizable loop over j: its reduction bounds do not depend on j,
// and its body reads some tensor along j in the last (contiguous) axis and reads none along j in any
// other axis. Stencils (convolutions, pooling) and i-k-j matrix products are of this kind.
const Expr* Lowering::stencil_reduction(int si, int prefix) const {
  const Stmt& s = stmt(si);
  if (!o_.interchange || !o_.vectorize || s.accumulate || s.n_domain - 1 < prefix) return nullptr;
  const int j = s.n_domain - 1;
  const Expr* red = te::only_reduction(*s.rhs);
  if (!red || red->args[0]->type != te::Type::Float) return nullptr;
  if (red->reduce != te::ReduceOp::Sum && red->reduce != te::ReduceOp::Max &&
      red->reduce != te::ReduceOp::Min)
    return nullptr;
  for (const te::ReduceVar& rv : red->rvars)
    if (rv.lo && (uses_var(*rv.lo, j) || uses_var(*rv.hi, j))) return nullptr;
  bool along_last = false, elsewhere = false;
  te::any_of(*red->args[0], [&](const Expr& e) {
    if (e.kind != ExprKind::Read) return false;
    for (size_t a = 0; a < e.args.size(); ++a) {
      if (te::contains(*e.args[a], ExprKind::Read)) elsewhere = true;  // data-dependent: a gather
      if (!uses_var(*e.args[a], j)) continue;
      (a + 1 == e.args.size() ? along_last : elsewhere) = true;
    }
    return false;
  });
  return along_last && !elsewhere ? red : nullptr;
}

// Statement si's innermost axis as row dot products (RowDots), where the rows can be read in place in the
// operator dtype.
std::optional<RowDots> Lowering::row_dots(int si, int prefix) const {
  const Stmt& s = stmt(si);
  const int j = s.n_domain - 1;
  if (!o_.vectorize || s.accumulate || j < prefix) return std::nullopt;
  const Expr* red = te::only_reduction(*s.rhs);
  if (!red || red->reduce != te::ReduceOp::Sum || red->rvars.size() != 1 || red->rvars[0].lo ||
      !red->rvars[0].extent)
    return std::nullopt;
  const int d = red->rvars[0].slot;
  const Expr& body = *red->args[0];
  if (body.kind != ExprKind::Binary || body.op != te::Op::Mul) return std::nullopt;
  const auto plain = [&](const Expr& e) {
    if (e.kind != ExprKind::Read || e.padded || e.args.empty() || tensor(e.slot).fixed_dtype ||
        storage_[static_cast<size_t>(e.slot)] != Storage::Input)
      return false;
    if (e.args.back()->kind != ExprKind::Var || e.args.back()->slot != d) return false;
    for (size_t a = 0; a + 1 < e.args.size(); ++a) {
      if (uses_var(*e.args[a], d) || te::contains(*e.args[a], ExprKind::Read)) return false;
    }
    return true;
  };
  const Expr &x = *body.args[0], &y = *body.args[1];
  if (!plain(x) || !plain(y) || uses_var(x, j) == uses_var(y, j)) return std::nullopt;
  return RowDots{red, uses_var(x, j) ? &y : &x, uses_var(x, j) ? &x : &y};
}

// Statement si over its innermost axis j as row dot products rd: the rows of six consecutive j at a time
// against the vector (cake_gemm::dot_rows: one vector of partial sums per row, each load of the vector
// serving all of them), both read in place and widened to the accumulation type; then the rest of the
// statement per j. The six rows' sums are folded together (cake_gemm::sum_lanes_of_rows) instead of a
// reduction loop per output.
std::string Lowering::emit_row_dots(int si, int prefix, const std::string& ind0, const RowDots& rd) {
  constexpr int kRows = 6;
  const Stmt& s = stmt(si);
  const int j = s.n_domain - 1;
  const std::string jv = var_id(s.vars[static_cast<size_t>(j)]);
  const std::string row = emit_size_expr(*s.var_extent[static_cast<size_t>(j)]);
  const std::string k = emit_size_expr(*rd.reduce->rvars[0].extent);
  std::string ind = ind0 + "  ";
  std::string out = ind0 + "{\n" + domain_loops(s, prefix, j, ind);
  CppExprEmitter em = emitter(s);
  std::string pre;
  // The element at d = 0 of read e (the other indices as the loops have them).
  const auto start = [&](const Expr& e) {
    std::vector<std::string> idx;
    for (size_t a = 0; a + 1 < e.args.size(); ++a) idx.push_back(em.emit(*e.args[a], pre, ind + "    "));
    idx.emplace_back("0");
    return fmt::format("{} + ({})", tensor_id(tensor(e.slot).name), linear(e.slot, idx, 0));
  };
  const std::string vec = start(*rd.vec);
  out += pre;
  pre.clear();
  out += fmt::format("{}const T* rd_vec = {};\n", ind, vec);
  out += fmt::format("{}for (int64_t rd_j0 = 0; rd_j0 < {}; rd_j0 += {}) {{\n", ind, row, kRows);
  const std::string in = ind + "  ";
  out += fmt::format("{}const int64_t rd_n = cake_min64({}, {} - rd_j0);\n", in, kRows, row);
  out += fmt::format("{}const T* rd_rows[{}];\n{}for (int r = 0; r < {}; ++r) {{\n", in, kRows, in, kRows);
  out += fmt::format("{}  const int64_t {} = rd_j0 + (r < rd_n ? r : rd_n - 1);\n", in, jv);
  const std::string rows = start(*rd.rows);
  out += pre + fmt::format("{}  rd_rows[r] = {};\n{}}}\n", in, rows, in);
  out += fmt::format("{}{} rd_dot[{}];\n", in, acc_, kRows);
  // Sums in f32 of two bf16 inputs go to the bf16 dot product (knob bf16_dot), as contractions do.
  const std::string dots = fmt::format(
      "cake_gemm::dot_rows<R, {}, typename IO::Src, typename IO::Src>({}, rd_rows, rd_vec, rd_dot, 1);\n",
      acc_, k);
  out += fmt::format(
      "{}cake_gemm::with_rows<{}>(rd_n, [&](auto rows_) {{\n{}  constexpr int R = decltype(rows_)::value;\n",
      in, kRows, in);
  if (o_.bf16_dot && acc_ == "float") {
    out += fmt::format("{}  if constexpr ({})\n", in, kBf16DotHere);
    out += fmt::format("{}    cake_gemm::dot_rows_bf16<R>({}, rd_rows, rd_vec, rd_dot, 1);\n", in, k);
    out += in + "  else " + dots;
  } else {
    out += in + "  " + dots;
  }
  out += in + "});\n";
  out +=
      fmt::format("{}for (int64_t r = 0; r < rd_n; ++r) {{\n{}  const int64_t {} = rd_j0 + r;\n", in, in, jv);
  CppExprEmitter rest = emitter(s);
  rest.substitute(rd.reduce, fmt::format("(({})rd_dot[r])", real_));
  std::string rpre;
  const std::string store_line = assign(si, rest, rpre, in + "  ");
  out += rpre + store_line + in + "}\n" + ind + "}\n";
  return out + close_loops(ind, ind0, prefix, j);
}

// Statement si's prefix sum (te::prefix_sum) when it is along an axis of the statement's own loops.
const Expr* Lowering::running_sum(int si, int prefix) const {
  const Stmt& s = stmt(si);
  return o_.scan && s.n_domain - 1 >= prefix ? te::prefix_sum(s) : nullptr;
}

namespace {
// A two-operand __builtin_shuffle mask of `lanes` lanes moving each lane up by `by` (zeros, lane `lanes` of
// the second operand, shifted in), or broadcasting lane `by` when `by` < 0 is its complement (~lane).
std::string lane_mask(const std::string& type, int lanes, int by) {
  std::string m = "(" + type + "){";
  for (int i = 0; i < lanes; ++i)
    m += std::to_string(by < 0 ? ~by : i >= by ? i - by : lanes) + (i + 1 < lanes ? ", " : "}");
  return m;
}
}  // namespace

// Statement si with its prefix sum `red` (running_sum): the loops over axes [prefix, j), then j in order
// with the accumulator carried along it, each output adding the terms from its predecessor's upper bound
// (the lower bound at first) to its own. Unvectorized, the terms are added one by one in the reduction's
// order and accumulator type, so each output is bit-identical to the sequential reduction's. Vectorized
// (o_.vectorize), once the outputs add one term each (past the first non-empty prefix), a block of 4
// vectors of L outputs takes its terms from an `omp simd` loop; each vector forms its prefix sums in
// log2(L) shift-and-add steps in registers, then adds the carry broadcast from the vector before: the
// dependent chain is one addition per vector instead of one per output. Those outputs round in that order
// (each still a sum of the same terms). A row's last partial block runs one by one.
std::string Lowering::emit_running_sum(int si, int prefix, const std::string& ind0, const Expr& red) {
  const Stmt& s = stmt(si);
  const int j = s.n_domain - 1;
  const te::ReduceVar& rv = red.rvars[0];
  const std::string vj = var_id(s.vars[static_cast<size_t>(j)]),
                    vk = var_id(s.vars[static_cast<size_t>(rv.slot)]), run = fmt::format("scan{}", si),
                    extent = emit_size_expr(*s.var_extent[static_cast<size_t>(j)]);
  const bool ints = red.args[0]->type != te::Type::Float;
  const std::string acc = ints ? "int64_t" : acc_;
  std::string ind = ind0 + "  ";
  std::string out = ind0 + "{\n" + domain_loops(s, prefix, j, ind);
  std::string pre;
  const std::string lo = emitter(s).emit(*rv.lo, pre, ind);
  out +=
      pre + fmt::format("{}{} {} = 0;\n{}const int64_t {}_lo = {};\n{}int64_t {}_next = {}_lo, {}_j = 0;\n",
                        ind, acc, run, ind, run, lo, ind, run, run, run);
  // The outputs from run_j on, one by one; `first`: stop after the first non-empty prefix.
  const auto scalar = [&](bool first) {
    const std::string in = ind + "  ";
    CppExprEmitter em = emitter(s);
    std::string hi_pre, body_pre, value_pre;
    const std::string hi = em.emit(*rv.hi, hi_pre, in);
    const std::string term = em.emit(*red.args[0], body_pre, in + "  ");
    em.substitute(&red, ints ? run : fmt::format("(({}){})", real_, run));
    const std::string store_line = assign(si, em, value_pre, in);
    return fmt::format(
        "{}for (; {}_j < {}; ++{}_j) {{\n{}const int64_t {} = {}_j;\n{}{}const int64_t {}_hi = {};\n"
        "{}for (; {}_next < {}_hi; ++{}_next) {{\n{}  const int64_t {} = {}_next;\n{}{}  {} += "
        "{};\n{}}}\n{}{}{}"
        "{}}}\n",
        ind, run, extent, run, in, vj, run, hi_pre, in, run, hi, in, run, run, run, in, vk, run, body_pre, in,
        run, term, in, value_pre, store_line,
        first ? fmt::format("{}if ({}_hi > {}_lo) {{\n{}  ++{}_j;\n{}  break;\n{}}}\n", in, run, run, in, run,
                            in, in)
              : "",
        ind);
  };
  if (!o_.vectorize) return out + scalar(false) + close_loops(ind, ind0, prefix, j);
  const int lanes = 64 / (acc == "float" ? 4 : 8);
  // Blocks of kChains vectors: the terms' loop and the outputs' loop long enough to pay for themselves.
  constexpr int kChains = 4;
  const int block = kChains * lanes;
  // vi: the vector blocks' indent, inside a test that a row has one (a row of a few outputs pays nothing
  // for them).
  const std::string v = run + "_V", m = run + "_M", vi = ind + "  ", in = vi + "  ", in2 = in + "  ";
  out += scalar(true);
  out += fmt::format("{}if ({}_j + {} <= {}) {{\n", ind, run, block, extent);
  out += fmt::format("{}typedef {} {} __attribute__((vector_size(64)));\n", vi, acc, v);
  out += fmt::format("{}typedef {} {} __attribute__((vector_size(64)));\n", vi,
                     lanes == 16 ? "int32_t" : "int64_t", m);
  out += fmt::format("{}{} {}_c = {} + {}{{}};\n", vi, v, run, run, v);
  out += fmt::format("{}for (; {}_j + {} <= {}; {}_j += {}, {}_next += {}) {{\n", vi, run, block, extent, run,
                     block, run, block);
  out += fmt::format("{}alignas(64) {} {}_t[{}];\n", in, acc, run, block);
  {
    CppExprEmitter em = emitter(s);
    std::string body_pre;
    const std::string term = em.emit(*red.args[0], body_pre, in2);
    out += fmt::format(
        "{}#pragma omp simd\n{}for (int {}_l = 0; {}_l < {}; ++{}_l) {{\n{}const int64_t {} = {}_next + "
        "{}_l;\n{}{}{}_t[{}_l] = {};\n{}}}\n",
        in, in, run, run, block, run, in2, vk, run, run, body_pre, in2, run, run, term, in);
  }
  for (int q = 0; q < kChains; ++q) {
    const std::string sq = fmt::format("{}_s{}", run, q);
    out += fmt::format("{}{} {} = *(const {}*)({}_t + {});\n", in, v, sq, v, run, q * lanes);
    for (int by = 1; by < lanes; by *= 2) {
      out +=
          fmt::format("{}{} += __builtin_shuffle({}, {}{{}}, {});\n", in, sq, sq, v, lane_mask(m, lanes, by));
    }
  }
  // The carry chain: one addition and one broadcast per vector.
  for (int q = 0; q < kChains; ++q) {
    const std::string sq = fmt::format("{}_s{}", run, q);
    out += fmt::format("{}{} += {}_c;\n{}{}_c = __builtin_shuffle({}, {});\n{}*({}*)({}_t + {}) = {};\n", in,
                       sq, run, in, run, sq, lane_mask(m, lanes, ~(lanes - 1)), in, v, run, q * lanes, sq);
  }
  {
    CppExprEmitter em = emitter(s);
    em.substitute(&red, ints ? run + "_t[" + run + "_l]" : fmt::format("(({}){}_t[{}_l])", real_, run, run));
    std::string value_pre;
    const std::string store_line = assign(si, em, value_pre, in2);
    out += fmt::format(
        "{}#pragma omp simd\n{}for (int {}_l = 0; {}_l < {}; ++{}_l) {{\n{}const int64_t {} = {}_j + "
        "{}_l;\n{}{}{}}}\n",
        in, in, run, run, block, run, in2, vj, run, run, value_pre, store_line, in);
  }
  out += vi + "}\n" + fmt::format("{}{} = {}_c[0];\n", vi, run, run) + ind + "}\n";
  return out + scalar(false) + close_loops(ind, ind0, prefix, j);
}

// Statement si with its reduction `red` outside the innermost axis j: a per-thread row of accumulators
// over j, updated by `omp simd` loops over j per reduction step (each output's terms combined in the
// reduction's order: bit-identical to the sequential reduction-innermost nest), then the rest of the
// right-hand side per element. Each step splits j into the interior, where every padded read along j is in
// range (its reads neither tested nor clamped there), and the guarded borders.
std::string Lowering::emit_interchanged(int si, int prefix, const std::string& ind0, const Expr& red) {
  const Stmt& s = stmt(si);
  const int j = s.n_domain - 1;
  const std::string jv = var_id(s.vars[static_cast<size_t>(j)]);
  const std::string row = emit_size_expr(*s.var_extent[static_cast<size_t>(j)]);
  const bool select = red.reduce != te::ReduceOp::Sum;
  const std::string acc = select ? real_ : acc_;
  const std::string a = fmt::format("row{}", next_scratch_);
  std::string out = fmt::format("{}{}* {} = cake_scratch<{}>({}, (size_t)({}));\n", ind0, acc, a, acc,
                                next_scratch_++, row);
  std::string ind = ind0;
  const auto open = [&](const std::string& v, const std::string& from, const std::string& to, bool simd) {
    if (simd) out += ind + "#pragma omp simd\n";
    out += fmt::format("{}for (int64_t {} = {}; {} < {}; ++{}) {{\n", ind, v, from, v, to, v);
    ind += "  ";
  };
  const auto close = [&] {
    ind.resize(ind.size() - 2);
    out += ind + "}\n";
  };
  out += domain_loops(s, prefix, j, ind);
  const char* identity = red.reduce == te::ReduceOp::Sum   ? "0"
                         : red.reduce == te::ReduceOp::Max ? "-INFINITY"
                                                           : "INFINITY";
  // One element's update from term x, in the reduction's order.
  const auto update = [&](const std::string& target) {
    if (select) {  // the first NaN sticks: no later comparison with it holds
      return fmt::format("{}{} = x != x || x {} {} ? x : {};\n", ind, target,
                         red.reduce == te::ReduceOp::Max ? ">" : "<", target, target);
    }
    return fmt::format("{}{} += x;\n", ind, target);
  };
  const auto open_taps = [&] {
    CppExprEmitter outer = emitter(s);
    for (const te::ReduceVar& rv : red.rvars) {
      const std::string v = var_id(s.vars.at(static_cast<size_t>(rv.slot)));
      std::string pre;
      const std::string lo = rv.lo ? outer.emit(*rv.lo, pre, ind) : "0";
      const std::string hi = rv.lo ? outer.emit(*rv.hi, pre, ind) : emit_size_expr(*rv.extent);
      out += pre;
      open(v, lo, hi, false);
    }
  };
  // Without padded reads along j there are no borders, and the row runs in blocks of kInterchangeBlock
  // vectors, then of one, whose partial results stay in registers over all reduction steps (the row in
  // memory costs a load and a store per step); the rest of the row (under a vector) as below.
  const bool blocked = !te::any_of(*red.args[0], [&](const Expr& e) {
    return e.kind == ExprKind::Read && e.padded && uses_var(*e.args.back(), j);
  });
  std::string from = "0";
  if (blocked && o_.vectorize) {
    from = "ib_" + a;
    out += fmt::format("{}int64_t {} = 0;\n", ind, from);
    // Blocks of kInterchangeBlock vectors, then of one vector.
    for (const int vectors : {kInterchangeBlock, 1}) {
      const int block = vectors * 64 / (acc == "float" ? 4 : 8);
      out += fmt::format("{}for (; {} + {} <= {}; {} += {}) {{\n", ind, from, block, row, from, block);
      ind += "  ";
      out += fmt::format("{}alignas(64) {} blk[{}];\n", ind, acc, block);
      out += fmt::format("{}#pragma omp simd\n{}for (int l = 0; l < {}; ++l) blk[l] = {};\n", ind, ind, block,
                         identity);
      open_taps();
      out += fmt::format("{}#pragma omp simd\n{}for (int l = 0; l < {}; ++l) {{\n", ind, ind, block);
      ind += "  ";
      out += fmt::format("{}const int64_t {} = {} + l;\n", ind, jv, from);
      CppExprEmitter em = emitter(s);
      std::string pre;
      const std::string term = em.emit(*red.args[0], pre, ind);
      out += pre + fmt::format("{}const {} x = ({}){};\n", ind, acc, acc, term) + update("blk[l]");
      ind.resize(ind.size() - 2);
      out += ind + "}\n";
      for (size_t d = 0; d < red.rvars.size(); ++d) close();
      out += fmt::format("{}#pragma omp simd\n{}for (int l = 0; l < {}; ++l) {}[{} + l] = blk[l];\n", ind,
                         ind, block, a, from);
      close();
    }
  }
  open(jv, from, row, true);
  out += fmt::format("{}{}[{}] = {};\n", ind, a, jv, identity);
  close();
  open_taps();
  CppExprEmitter outer = emitter(s);
  // One reduction step over j in [from, to).
  const auto step = [&](const std::string& from, const std::string& to, bool interior) {
    open(jv, from, to, true);
    CppExprEmitter em = emitter(s);
    if (interior) em.assume_in_range_along(j);
    std::string pre;
    const std::string term = em.emit(*red.args[0], pre, ind);
    out += pre + fmt::format("{}const {} x = ({}){};\n", ind, acc, acc, term) +
           update(fmt::format("{}[{}]", a, jv));
    close();
  };
  // The interior from each padded read's last index c·j + o and extent W: ceil(-o / c) <= j <= floor((W - 1
  // - o) / c) when c > 0; empty otherwise.
  std::string pre, bounds, stride;
  bool affine = true;
  te::any_of(*red.args[0], [&](const Expr& e) {
    if (e.kind != ExprKind::Read || !e.padded || !uses_var(*e.args.back(), j)) return false;
    const auto co = affine_in(*e.args.back(), j, outer, pre, ind, &stride);
    if (!co) {
      affine = false;
      return false;
    }
    bounds += narrow_to_interior(*co, emit_size_expr(*tensor(e.slot).dims.back()), "lo", "hi", ind);
    return false;
  });
  if (affine && !bounds.empty()) {
    out += pre + fmt::format("{}int64_t lo = 0, hi = {};\n", ind, row) + bounds;
    out += fmt::format("{}lo = cake_min64(lo, {});\n{}hi = cake_max64(hi, lo);\n", ind, row, ind);
    step("0", "lo", false);
    if (!stride.empty()) {
      stride_specialized(stride, out, ind, [&] { step("lo", "hi", true); });
    } else {
      step("lo", "hi", true);
    }
    step("hi", row, false);
  } else {
    step(from, row, false);
  }
  for (size_t d = 0; d < red.rvars.size(); ++d) close();
  open(jv, "0", row, true);
  CppExprEmitter rest = emitter(s);
  rest.substitute(&red, fmt::format("{}[{}]", a, jv));
  pre.clear();
  const std::string store_line = assign(si, rest, pre, ind);
  out += pre + store_line;
  close();
  for (int k = prefix; k < j; ++k) close();
  return out;
}

// The padded reads of an elementwise statement si that index along its innermost axis j, when there are
// one to three and each index using j is affine in it (rope: x?[.., j + E] and x?[.., j − E]). Each is then
// in range over one interval of j, and the row splits into regions where every such read is wholly in or
// wholly out of range: no bounds test, no conditional load per element (a conditional 16-bit load kept
// GCC from vectorizing rope's bf16 and f16 rows at all).
std::vector<const Expr*> Lowering::windows_along_row(int si, int prefix) const {
  const Stmt& s = stmt(si);
  const int j = s.n_domain - 1;
  if (!o_.vectorize || s.accumulate || j < prefix || te::contains(*s.rhs, ExprKind::Reduce)) return {};
  std::vector<const Expr*> reads;
  bool ok = true;
  te::any_of(*s.rhs, [&](const Expr& e) {
    if (e.kind != ExprKind::Read) return false;
    for (const te::ExprPtr& ix : e.args) {
      if (!uses_var(*ix, j)) continue;
      if (te::contains(*ix, ExprKind::Read) || !affine_along(*ix, j)) ok = false;
    }
    if (e.padded &&
        std::any_of(e.args.begin(), e.args.end(), [&](const te::ExprPtr& ix) { return uses_var(*ix, j); }))
      reads.push_back(&e);
    return false;
  });
  if (!ok || reads.size() > 3) return {};
  return reads;
}

// Statement si over its innermost axis in regions (windows_along_row): per row, each read's in-range
// interval [lo, hi) of j (exact), the cut points sorted, and each region between two cuts run by the copy
// of the loop for its pattern of reads in and out of range (2^reads copies, one chosen per region).
std::string Lowering::emit_range_regions(int si, int prefix, const std::string& ind0,
                                         const std::vector<const Expr*>& reads) {
  const Stmt& s = stmt(si);
  const int j = s.n_domain - 1;
  const std::string row = emit_size_expr(*s.var_extent[static_cast<size_t>(j)]);
  const std::string jv = var_id(s.vars[static_cast<size_t>(j)]);
  std::string ind = ind0;
  std::string out = domain_loops(s, prefix, j, ind);
  const size_t nr = reads.size();
  out += fmt::format("{}int64_t cut[{}];\n{}int ncut = 0;\n", ind, 2 * nr + 2, ind);
  out += fmt::format("{}cut[ncut++] = 0;\n{}cut[ncut++] = {};\n", ind, ind, row);
  CppExprEmitter outer = emitter(s);
  for (size_t r = 0; r < nr; ++r) {
    const Expr& e = *reads[r];
    out += fmt::format("{}int64_t wlo{} = 0, whi{} = {};\n", ind, r, r, row);
    for (size_t k = 0; k < e.args.size(); ++k) {
      if (!uses_var(*e.args[k], j)) continue;
      std::string pre, stride;
      const auto co = affine_in(*e.args[k], j, outer, pre, ind, &stride);
      out += pre + narrow_to_interior(*co, emit_size_expr(*tensor(e.slot).dims[k]), fmt::format("wlo{}", r),
                                      fmt::format("whi{}", r), ind);
    }
    out += fmt::format("{}wlo{} = cake_min64(wlo{}, {});\n{}whi{} = cake_max64(whi{}, wlo{});\n", ind, r, r,
                       row, ind, r, r, r);
    out += fmt::format("{}cut[ncut++] = wlo{};\n{}cut[ncut++] = whi{};\n", ind, r, ind, r);
  }
  out += ind + "for (int a = 1; a < ncut; ++a)\n";
  out += ind + "  for (int b = a; b > 0 && cut[b - 1] > cut[b]; --b) std::swap(cut[b - 1], cut[b]);\n";
  out += ind + "for (int q = 0; q + 1 < ncut; ++q) {\n";
  out += ind + "  const int64_t ja = cut[q], jb = cut[q + 1];\n";
  out += ind + "  if (ja >= jb) continue;\n";
  std::string mask = "0";
  for (size_t r = 0; r < nr; ++r)
    mask += fmt::format(" | (ja >= wlo{} && ja < whi{} ? {} : 0)", r, r, 1 << r);
  out += fmt::format("{}  switch ({}) {{\n", ind, mask);
  for (int m = 0; m < (1 << nr); ++m) {
    out += fmt::format("{}    case {}: {{\n", ind, m);
    const std::string in = ind + "      ";
    std::map<const Expr*, bool> known;
    for (size_t r = 0; r < nr; ++r) known[reads[r]] = ((m >> r) & 1) != 0;
    CppExprEmitter em = emitter(s);
    em.known_range_along(j, known);
    std::string pre;
    const std::string store_line = assign(si, em, pre, in + "  ");
    out += fmt::format("{}#pragma omp simd\n{}for (int64_t {} = ja; {} < jb; ++{}) {{\n", in, in, jv, jv, jv);
    out += pre;
    out += fmt::format("{}{}}}\n{}break;\n{}    }}\n", store_line, in, in, ind);
  }
  out += ind + "  }\n" + ind + "}\n";
  for (int k = j - 1; k >= prefix; --k) {
    ind.resize(ind.size() - 2);
    out += ind + "}\n";
  }
  return out;
}

// The loops over axes [prefix, n_domain) of statement si, in order, and the element computation inside.
std::string Lowering::emit_statement_loops(int si, int prefix, const std::string& ind0) {
  const Stmt& s = stmt(si);
  std::string inner_head, hoist, ind = ind0;
  const std::string outer = domain_loops(s, prefix, s.n_domain - 1, ind);
  if (prefix < s.n_domain) {
    // GCC takes one loop pragma: `omp simd` wins, and unroll applies to loops it does not vectorize.
    if (o_.vectorize && !te::contains(*s.rhs, ExprKind::Reduce)) {
      inner_head += ind + "#pragma omp simd\n";
    } else if (unit_rows_ && s.var_extent[static_cast<size_t>(s.n_domain - 1)]->kind != ExprKind::Size) {
      // A row of c elements in the copy for inner sizes of 1 (extent c·Size): unrolled whole, so the loop
      // across rows has no inner loop left. GCC's own complete unrolling gives up on larger bodies (rope
      // f16 E = 1, rows of 2 with their conversions: 24 -> 3 us). Rows of one need no pragma (and measured
      // slower with it on permute).
      inner_head += fmt::format("{}#pragma GCC unroll {}\n", ind, kUnitRowUnroll);
    } else if (o_.unroll > 1) {
      inner_head += fmt::format("{}#pragma GCC unroll {}\n", ind, o_.unroll);
    }
    inner_head += domain_loops(s, s.n_domain - 1, s.n_domain, ind);
  }
  CppExprEmitter em = emitter(s);
  if (prefix < s.n_domain) em.hoist_invariant_of(s.n_domain - 1, &hoist, ind.substr(2));
  std::string pre;
  const std::string store_line = assign(si, em, pre, ind);
  // Before `hoist` is read: the staged copy's invariants are hoisted too.
  const std::string staged = prefix < s.n_domain && stages_rows(si) ? staged_row(si, em, ind) : "";
  std::string out = outer + hoist;
  if (prefix < s.n_domain && copies_rows(si)) {
    // A row shorter than a 64-byte block: one masked copy at the addresses of its first element (an
    // emitter of its own: its index code, repeated, stays inside the block). Longer rows keep GCC's loop,
    // which measured no slower on them and at times faster (gathers of long rows from large tables).
    const std::string j = var_id(s.vars[static_cast<size_t>(s.n_domain - 1)]);
    const std::string row = emit_size_expr(*s.var_extent[static_cast<size_t>(s.n_domain - 1)]);
    const std::string at = ind.substr(2);
    CppExprEmitter block = emitter(s);
    const std::vector<std::string> idx = domain_ids(s);
    std::string block_pre;
    const std::string from = block.emit_stored(*s.rhs, block_pre, at + "  ");
    out +=
        fmt::format("{}if ({} * (int64_t)sizeof(T) < 64) {{ // the row as one masked block copy\n", at, row) +
        fmt::format("{}  constexpr int64_t {} = 0;\n", at, j) + block_pre +
        fmt::format("{}  cake_copy_short_row(&{}[{}], &{}, {});\n", at, tensor_id(tensor(s.tensor).name),
                    linear(s.tensor, idx, 0), from, row) +
        at + "} else\n";
  }
  out += staged;
  if (prefix < s.n_domain && overlaps_tail(si)) {
    // GCC vectorizes a loop by its narrowest type: 64 lanes for a 1-byte store, whatever the arithmetic,
    // which leaves up to 63 elements of a row to scalar code. Rows of 64 or more run as chunks of 64
    // instead, the last one overlapping the one before (its elements are stored again, with the same
    // values): quantize_int8 f32 D=127 N=2048 573 -> 361 us.
    out += overlapped_chunks(ind.substr(2), var_id(s.vars[static_cast<size_t>(s.n_domain - 1)]), "0",
                             emit_size_expr(*s.var_extent[static_cast<size_t>(s.n_domain - 1)]), 64,
                             pre + store_line) +
           "\n";
  }
  out += inner_head + pre + store_line;
  for (int k = s.n_domain - 1; k >= prefix; --k) {
    ind.resize(ind.size() - 2);
    out += ind + "}\n";
  }
  return out;
}

// Whether statement si's rows, when shorter than 64 bytes, run as one masked block copy
// (cake_copy_short_row): a statement that moves bits (moves_bits) of 2-, 4- or 8-byte elements, its read
// indexing along the innermost axis by that axis alone, in its last position, so both rows are contiguous.
// Not in the copies for inner sizes of 1 or short reductions, which vectorize across rows.
bool Lowering::copies_rows(int si) const {
  const Stmt& s = stmt(si);
  if (!o_.vectorize || unit_rows_ || short_rows_ || s.n_domain < 1 || !moves_bits(si)) return false;
  const int j = s.n_domain - 1;
  const Expr& rd = *s.rhs;
  if (rd.args.empty() || rd.args.back()->kind != ExprKind::Var || rd.args.back()->slot != j) return false;
  for (size_t a = 0; a + 1 < rd.args.size(); ++a)
    if (uses_var(*rd.args[a], j)) return false;
  return true;
}

// Whether statement si's rows may be staged (staged_row): it writes whole rows of an output that nothing
// reads back, vectorized, with no reduction in its element, in a nest of its own (not the copies for inner
// sizes of 1 or short reductions, which run across rows); a float output (its block then holds f32 values)
// or, streamed only, a copy of the bits (moves_bits) of 2 or more bytes.
bool Lowering::stages_rows(int si) const {
  const Stmt& s = stmt(si);
  if (!o_.vectorize || unit_rows_ || short_rows_ || s.n_domain < 1 || s.accumulate) return false;
  const auto t = static_cast<size_t>(s.tensor);
  if (storage_[t] != Storage::Direct || c_.tensors[t].role != TensorRole::Output ||
      tensor(s.tensor).dims.size() != static_cast<size_t>(s.n_domain))
    return false;
  if (te::contains(*s.rhs, ExprKind::Reduce) || overlaps_tail(si)) return false;
  if (moves_bits(si) ? o_.stream_elem_bytes <= 0
                     : put_function(s.tensor).empty() || (o_.stream_elem_bytes <= 0 && !o_.stage_rows))
    return false;
  const size_t j = static_cast<size_t>(s.n_domain - 1);
  return dim(s.tensor, j) == emit_size_expr(*s.var_extent[j]);
}

// The function that writes a staged block of f32 values out to float tensor id's storage (cake_math.h's
// cake_put_*, IO::put for the operator dtype); empty for other dtypes.
std::string Lowering::put_function(int id) const {
  const TensorInfo& t = tensor(id);
  if (!t.fixed_dtype) return "IO::put";
  switch (*t.fixed_dtype) {
    case DType::f32:
      return "cake_put_f32";
    case DType::bf16:
      return "cake_put_bf16";
    case DType::f16:
      return "cake_put_f16";
    default:
      return "";
  }
}

// Statement si's innermost loop (stages_rows) with each row in blocks of kCakeStageBlock elements computed
// into a buffer in L1, then written out: streamed by non-temporal stores, which do not read the output's
// lines first, for outputs of at least kStreamMinBytes whose elements have at least o_.stream_elem_bytes
// bytes (cake_stream_out); converted by vector instructions (cake_put_bf16 / _f16) for 16-bit float
// outputs with rows of at least kStageMinRow (o_.stage_rows). Ends in `else`: the plain loop follows.
std::string Lowering::staged_row(int si, CppExprEmitter& em, const std::string& ind) {
  const Stmt& s = stmt(si);
  const TensorInfo& t = tensor(s.tensor);
  const std::string at = ind.substr(2);
  const size_t last = static_cast<size_t>(s.n_domain - 1);
  const std::string j = var_id(s.vars[last]);
  const std::string row = emit_size_expr(*s.var_extent[last]);
  const std::string elem = t.fixed_dtype ? storage_type(*t.fixed_dtype) : "T";
  const bool bits = moves_bits(si);  // its block holds the bits, streamed only
  const std::string stream =
      o_.stream_elem_bytes <= 0
          ? "false"
          : fmt::format(
                "sizeof({0}) >= {1} && {2} * (int64_t)sizeof({0}) >= {3} && {4} * (int64_t)sizeof({0}) >= "
                "INT64_C({5})",
                elem, o_.stream_elem_bytes, row, kStreamMinRowBytes, numel(s.tensor), kStreamMinBytes);
  const std::string convert =
      !bits && o_.stage_rows ? fmt::format("sizeof({}) == 2 && {} >= {}", elem, row, kStageMinRow) : "false";
  std::vector<std::string> idx = domain_ids(s);
  idx.back() = "st_c";
  const std::string base = linear(s.tensor, idx, 0);
  stage_tensor_ = s.tensor;
  stage_base_ = base;
  stage_floats_ = !bits;
  std::string pre;
  const std::string store_line = assign(si, em, pre, ind + "    ");
  stage_tensor_ = -1;
  const std::string dst = "&" + target_element(s.tensor, base);
  std::string out = fmt::format(
      "{}if (const bool st_nt = {}; st_nt || ({})) {{ // the row staged: streamed past the caches, or "
      "converted by vector instructions\n",
      at, stream, convert);
  out += fmt::format("{0}  for (int64_t st_c = 0; st_c < {1}; st_c += kCakeStageBlock) {{\n", at, row);
  out += fmt::format(
      "{0}    const int64_t st_e = st_c + kCakeStageBlock < {1} ? st_c + kCakeStageBlock : {1};\n", at, row);
  out += fmt::format("{0}    alignas(64) {1} st_buf[kCakeStageBlock];\n", at, bits ? elem : "float");
  out +=
      fmt::format("{0}    #pragma omp simd\n{0}    for (int64_t {1} = st_c; {1} < st_e; ++{1}) {{\n", at, j);
  out += pre + store_line + at + "    }\n";
  out += bits ? fmt::format("{}    cake_stream_out({}, st_buf, (st_e - st_c) * (int64_t)sizeof({}));\n", at,
                            dst, elem)
              : fmt::format("{}    {}({}, st_buf, st_e - st_c, st_nt);\n", at, put_function(s.tensor), dst);
  return out + at + "  }\n" + at + "} else\n";
}

// Whether statement si's innermost loop may run as overlapping chunks (emit_statement_loops): it stores
// 1-byte elements, vectorized, each element's value computed from tensors the loop does not write (a plain
// `=`, not reading its target), so storing an element twice stores the same value.
bool Lowering::overlaps_tail(int si) const {
  const Stmt& s = stmt(si);
  const TensorInfo& t = tensor(s.tensor);
  if (!o_.vectorize || s.accumulate || te::contains(*s.rhs, ExprKind::Reduce) || !t.fixed_dtype ||
      dtype_size(*t.fixed_dtype) != 1)
    return false;
  return !te::any_of(*s.rhs, [&](const Expr& e) { return e.kind == ExprKind::Read && e.slot == s.tensor; });
}

// Scatter statement si sums into target rows chosen by data: its first target index is not a domain
// variable and uses none of the variables that index the other target axes (each a distinct domain
// variable). Its other domain variables ("row variables": index_add's i) then pick whole target rows.
bool Lowering::scatters_rows(int si) const {
  const Stmt& s = stmt(si);
  if (!o_.scatter_rows || !s.accumulate || s.index.empty() || s.index[0]->kind == ExprKind::Var) return false;
  std::set<int> cols;
  for (size_t a = 1; a < s.index.size(); ++a) {
    if (s.index[a]->kind != ExprKind::Var || !cols.insert(s.index[a]->slot).second) return false;
  }
  return !te::any_of(*s.index[0],
                     [&](const Expr& e) { return e.kind == ExprKind::Var && cols.count(e.slot); });
}

// Scatter si (scatters_rows) as a counting sort of its row-variable points by target row, then one pass
// over the target rows in parallel: each row's sources summed in ascending order (as the serial scatter
// sums them) in a per-thread row of accumulators, stored once in the output dtype; rows nothing lands in
// are stored as zeros. index_add f32 D=1024 N=8192 V=4096: no buffer over the whole target to clear, add
// into at random and convert, and no data-dependent branch inside the vectorized row.
std::string Lowering::emit_scatter_rows(int si) {
  const Stmt& s = stmt(si);
  const int id = s.tensor;
  const std::string acc_t = elem_type(id);
  std::vector<int> row_vars;
  std::set<int> cols;
  for (size_t a = 1; a < s.index.size(); ++a) cols.insert(s.index[a]->slot);
  for (int k = 0; k < s.n_domain; ++k)
    if (!cols.count(k)) row_vars.push_back(k);
  // The row variables of point r (row-major over their extents).
  const auto unflatten = [&](const std::string& r, const std::string& ind) {
    std::string out, rest = r;
    for (size_t q = row_vars.size(); q-- > 0;) {
      const std::string v = var_id(s.vars[static_cast<size_t>(row_vars[q])]);
      const std::string e = emit_size_expr(*s.var_extent[static_cast<size_t>(row_vars[q])]);
      out += q == 0 ? fmt::format("{}const int64_t {} = {};\n", ind, v, rest)
                    : fmt::format("{}const int64_t {} = ({}) % {};\n", ind, v, rest, e);
      if (q > 0) rest = fmt::format("({}) / {}", rest, e);
    }
    return out;
  };
  std::string points = "INT64_C(1)";
  for (int k : row_vars) points += " * " + emit_size_expr(*s.var_extent[static_cast<size_t>(k)]);
  const bool split = s.index.size() > 1;  // a target row has an axis to split into blocks
  const std::string d1 = split ? dim(id, 1) : "INT64_C(1)";
  const std::string simd = o_.vectorize ? "#pragma omp simd\n" : "";
  CppExprEmitter target_em = emitter(s);
  std::string target_pre;
  const std::string target = target_em.emit(*s.index[0], target_pre, "      ");
  CppExprEmitter em = emitter(s);
  std::string body_pre, ind = "          ";
  // The target axes after the first, in the target's order: the accumulator row is contiguous along the
  // last, and the first runs over the block [sr_lo, sr_hi).
  std::string loops, lin = "INT64_C(0)";
  for (size_t a = 1; a < s.index.size(); ++a) {
    const std::string v = var_id(s.vars[static_cast<size_t>(s.index[a]->slot)]);
    if (a + 1 == s.index.size()) loops += ind + simd;
    loops += fmt::format("{}for (int64_t {} = {}; {} < {}; ++{}) {{\n", ind, v, a == 1 ? "sr_lo" : "0", v,
                         a == 1 ? "sr_hi" : dim(id, a), v);
    ind += "  ";
    lin = a == 1 ? v : fmt::format("({}) * {} + {}", lin, dim(id, a), v);
  }
  const std::string value = em.emit(*s.rhs, body_pre, ind);
  loops += body_pre + fmt::format("{}sr_acc[{}] += ({}){};\n", ind, lin, acc_t, value);
  for (size_t a = 1; a < s.index.size(); ++a) {
    ind.resize(ind.size() - 2);
    loops += ind + "}\n";
  }
  // The next point's source rows are prefetched while this one's are summed: the points go in target
  // order, so their rows come from scattered pages the hardware prefetcher does not foresee (index_add
  // f32 D=1024 N=8192 V=4096, one thread: 4.3-5.7 -> 3.2-3.6 ms), two prefetches per cache line (one per
  // line: 4.0-4.6 ms; a prefetch that misses the TLB may be dropped). For reads along the one column axis
  // whose index is arithmetic on the variables (no data-dependent part).
  std::string prefetch;
  if (s.index.size() == 2) {
    const std::string vj = var_id(s.vars[static_cast<size_t>(s.index[1]->slot)]);
    std::set<int> row_set(row_vars.begin(), row_vars.end());
    te::any_of(*s.rhs, [&](const Expr& r) {
      if (r.kind != ExprKind::Read || r.padded || storage_[static_cast<size_t>(r.slot)] != Storage::Input)
        return false;
      bool arithmetic = true, by_row = false;
      for (const te::ExprPtr& ix : r.args) {
        arithmetic = arithmetic && !te::contains(*ix, ExprKind::Read);
        by_row = by_row || te::any_of(*ix, [&](const Expr& x) {
                   return x.kind == ExprKind::Var && row_set.count(x.slot);
                 });
      }
      if (!arithmetic || !by_row) return false;
      CppExprEmitter pem = emitter(s);
      std::string ppre;
      const std::string at_elem = pem.emit_stored(r, ppre, "");
      if (!ppre.empty()) return false;
      const std::string name = tensor_id(tensor(r.slot).name);
      prefetch += fmt::format(
          "            for (int64_t {} = sr_lo; {} < sr_hi; {} += 32 / (int64_t)sizeof({}[0])) "
          "__builtin_prefetch(&{});\n",
          vj, vj, vj, name, at_elem);
      return false;
    });
    if (!prefetch.empty()) {
      prefetch = "          if (q + 1 < sr_total) {\n" + unflatten("sr_order[q + 1]", "            ") +
                 prefetch + "          }\n";
    }
  }
  const int to = next_scratch_++, at = next_scratch_++, order = next_scratch_++, runs = next_scratch_++,
            acc = next_scratch_++;
  // A counting sort of the points by target row (stable: ascending within a row, the serial scatter's
  // order; with fewer than one point per 16 rows, a comparison sort of the points instead of a pass over
  // every row), the rows that receive points as runs, then the runs in parallel. Each run also stores zeros
  // into the rows between it and the previous run, so every output row is written once. With fewer than 4
  // runs per thread, each is split into a block per thread (of at least 128 elements) along its first axis
  // after the chosen one, so index_add with V = 1 still uses every core; one thread reads whole rows.
  return fmt::format(
      R"(  {{ // {} (points sorted by target row)
    const int64_t sr_n = {}, sr_v = {}, sr_row = {};
    int64_t* sr_to = cake_scratch<int64_t>({}, (size_t)sr_n);         // a point's target row (-1: none)
    int64_t* sr_at = cake_scratch<int64_t>({}, (size_t)sr_v);         // a row's count, start, then end
    int64_t* sr_order = cake_scratch<int64_t>({}, (size_t)sr_n);      // the points by target row
    int64_t* sr_runs = cake_scratch<int64_t>({}, (size_t)sr_n + 1);   // the rows receiving points
    const bool sr_few = sr_n * 16 < sr_v;  // few points among many rows: sorted, not counted row by row
    if (!sr_few) std::fill_n(sr_at, sr_v, INT64_C(0));
    for (int64_t sr_r = 0; sr_r < sr_n; ++sr_r) {{
{}{}      const int64_t o0 = {};
      if ((uint64_t)o0 >= (uint64_t)sr_v) {{ cake_set_error(&err, CAKE_ERR_INDEX); sr_to[sr_r] = -1; continue; }}
      sr_to[sr_r] = o0;
      if (!sr_few) ++sr_at[o0];
    }}
    int64_t sr_runs_n = 0, sr_total = 0;
    if (sr_few) {{  // only the rows receiving points get an end in sr_at
      for (int64_t sr_r = 0; sr_r < sr_n; ++sr_r)
        if (sr_to[sr_r] >= 0) sr_order[sr_total++] = sr_r;
      std::sort(sr_order, sr_order + sr_total, [&](int64_t a, int64_t b) {{
        return sr_to[a] < sr_to[b] || (sr_to[a] == sr_to[b] && a < b);
      }});
      for (int64_t q = 0; q < sr_total; ++q) {{
        const int64_t v = sr_to[sr_order[q]];
        if (sr_runs_n == 0 || sr_runs[sr_runs_n - 1] != v) sr_runs[sr_runs_n++] = v;
        sr_at[v] = q + 1;
      }}
    }} else {{
      for (int64_t v = 0; v < sr_v; ++v) {{
        const int64_t c = sr_at[v];
        sr_at[v] = sr_total;
        sr_total += c;
        sr_runs[sr_runs_n] = v;
        sr_runs_n += c != 0;
      }}
      for (int64_t sr_r = 0; sr_r < sr_n; ++sr_r)
        if (sr_to[sr_r] >= 0) sr_order[sr_at[sr_to[sr_r]]++] = sr_r;
    }}
    const int64_t sr_t = {};
    const int64_t sr_nb = sr_runs_n < 4 * sr_t ? std::max<int64_t>(1, std::min<int64_t>({{sr_t, {}, sr_row / 128}})) : 1;
    const int64_t sr_inner = sr_row / std::max<int64_t>(1, {});
    #pragma omp parallel{}{}
    {{
      {}* sr_acc = cake_scratch<{}>({}, (size_t)sr_row);
      #pragma omp for schedule(guided)
      for (int64_t sr_kb = 0; sr_kb < (sr_runs_n + 1) * sr_nb; ++sr_kb) {{
        const bool sr_whole = sr_nb == 1;
        const int64_t k = sr_whole ? sr_kb : sr_kb / sr_nb, sr_b = sr_whole ? 0 : sr_kb % sr_nb;
        if (sr_b == 0) {{  // the rows before this run (after the last one: k == sr_runs_n) receive nothing
          const int64_t gap_lo = k == 0 ? 0 : sr_runs[k - 1] + 1, gap_hi = k == sr_runs_n ? sr_v : sr_runs[k];
{}          for (int64_t e = gap_lo * sr_row; e < gap_hi * sr_row; ++e) {}
        }}
        if (k == sr_runs_n) continue;
        const int64_t v = sr_runs[k];
        const int64_t sr_lo = sr_whole ? 0 : {} * sr_b / sr_nb, sr_hi = sr_whole ? {} : {} * (sr_b + 1) / sr_nb;
{}        for (int64_t e = sr_lo * sr_inner; e < sr_hi * sr_inner; ++e) sr_acc[e] = ({})0;
        for (int64_t q = k == 0 ? 0 : sr_at[sr_runs[k - 1]]; q < sr_at[v]; ++q) {{
{}{}{}        }}
{}        for (int64_t e = sr_lo * sr_inner; e < sr_hi * sr_inner; ++e) {}
      }}
    }}
  }}
)",
      te::print_stmt(s), points, dim(id, 0), numel(id, 1), to, at, order, runs, unflatten("sr_r", "      "),
      target_pre, target, o_.threads > 0 ? std::to_string(o_.threads) : "omp_get_max_threads()", d1, d1,
      omp_threads(), work_if(fmt::format("INT64_C(1) * {} * {}", points, numel(id, 1))), acc_t, acc_t, acc,
      simd.empty() ? "" : "          " + simd, store(id, "e", "0"), d1, d1, d1,
      simd.empty() ? "" : "        " + simd, acc_t, unflatten("sr_order[q]", "          "), prefetch, loops,
      simd.empty() ? "" : "        " + simd, store(id, "v * sr_row + e", "sr_acc[e]"));
}

std::string Lowering::emit_accumulate(int si) {
  const Stmt& s = stmt(si);
  const int id = s.tensor;
  if (storage_[static_cast<size_t>(id)] == Storage::Direct) return emit_scatter_rows(si);
  std::string out = fmt::format("  {{ // {}\n", te::print_stmt(s));
  // Zero-initialised unless an earlier statement defined it.
  bool defined_before = false;
  for (int sj : c_.order) {
    if (sj == si) break;
    if (stmt(sj).tensor == id) defined_before = true;
  }
  if (!defined_before)
    out += fmt::format("    std::fill_n(b_{}, {}, ({})0);\n", tensor(id).name, numel(id), elem_type(id));
  // A domain variable that indexes the target directly: each thread owns a contiguous range of it (and so
  // a slice of the target), looping over it innermost; the other variables run serially outside it.
  int par = -1;
  for (const te::ExprPtr& ix : s.index)
    if (ix->kind == ExprKind::Var && par < 0) par = ix->slot;
  std::vector<int> order;
  for (int k = 0; k < s.n_domain; ++k)
    if (k != par) order.push_back(k);
  if (par >= 0) order.push_back(par);
  std::string ind = "    ";
  if (par >= 0) {
    const std::string ext = emit_size_expr(*s.var_extent[static_cast<size_t>(par)]);
    out += fmt::format("{}#pragma omp parallel{}{}\n{}{{\n", ind, omp_threads(),
                       work_if(extents_product(s, 0, s.n_domain)), ind);
    ind += "  ";
    out += fmt::format("{}const int64_t nt = omp_get_num_threads(), tid = omp_get_thread_num();\n", ind);
    out += fmt::format("{}const int64_t lo = {} * tid / nt, hi = {} * (tid + 1) / nt;\n", ind, ext, ext);
  }
  for (int k : order) {
    const std::string v = var_id(s.vars[static_cast<size_t>(k)]);
    const bool mine = k == par;
    out += fmt::format("{}for (int64_t {} = {}; {} < {}; ++{}) {{\n", ind, v, mine ? "lo" : "0", v,
                       mine ? "hi" : emit_size_expr(*s.var_extent[static_cast<size_t>(k)]), v);
    ind += "  ";
  }
  CppExprEmitter em = emitter(s);
  std::string pre;
  std::vector<std::string> idx;
  for (size_t a = 0; a < s.index.size(); ++a) {
    const Expr& ix = *s.index[a];
    if (ix.kind == ExprKind::Var) {
      idx.push_back(var_id(s.vars[static_cast<size_t>(ix.slot)]));
      continue;
    }
    const std::string name = fmt::format("o{}", a);
    const std::string v = em.emit(ix, pre, ind);
    pre += fmt::format("{}const int64_t {} = {};\n", ind, name, v);
    pre += fmt::format(
        "{}if ((uint64_t){} >= (uint64_t){}) {{ cake_set_error(&err, CAKE_ERR_INDEX); continue; }}\n", ind,
        name, dim(id, a));
    idx.push_back(name);
  }
  const std::string value = em.emit(*s.rhs, pre, ind);
  out += pre + fmt::format("{}{} += ({}){};\n", ind, access(id, idx, 0), elem_type(id), value);
  for (size_t k = 0; k < order.size(); ++k) {
    ind.resize(ind.size() - 2);
    out += ind + "}\n";
  }
  if (par >= 0) out += "    }\n";
  return out + "  }\n";
}

// The coefficient of variable `slot` in the row-major offset of a read whose indices are plain variables:
// the stride of the axis it indexes ("0" when it indexes none).
std::string Lowering::var_coefficient(const Expr& read, int slot) const {
  const int id = read.slot;
  for (size_t p = 0; p < read.args.size(); ++p) {
    if (read.args[p]->slot != slot) continue;
    std::string st = "INT64_C(1)";
    for (size_t q = p + 1; q < read.args.size(); ++q) st += " * " + dim(id, q);
    return "(" + st + ")";
  }
  return "INT64_C(0)";
}

std::optional<Contraction> Lowering::match_contraction(const Group& g) const {
  if (!o_.gemm) return std::nullopt;
  const Stmt& s = stmt(g.stmts.front());
  const int n = s.n_domain;
  if (s.accumulate || n < 2) return std::nullopt;
  if (g.stmts.size() > 1) {  // the rest must be elementwise over the same domain: the epilogue
    if (g.prefix != n) return std::nullopt;
    for (size_t m = 1; m < g.stmts.size(); ++m) {
      if (stmt(g.stmts[m]).n_domain != n || te::contains(*stmt(g.stmts[m]).rhs, ExprKind::Reduce))
        return std::nullopt;
    }
  }
  std::vector<const Expr*> reds;
  te::any_of(*s.rhs, [&](const Expr& e) {
    if (e.kind == ExprKind::Reduce) reds.push_back(&e);
    return false;
  });
  if (reds.size() != 1) return std::nullopt;
  const Expr& r = *reds[0];
  if (r.reduce != te::ReduceOp::Sum) return std::nullopt;
  std::vector<int> ks;
  for (const te::ReduceVar& rv : r.rvars) {
    if (rv.lo || rv.hi) return std::nullopt;
    ks.push_back(rv.slot);
  }
  const Expr& body = *r.args[0];
  if (body.kind != ExprKind::Binary || body.op != te::Op::Mul) return std::nullopt;
  const auto is_k = [&](int slot) { return std::find(ks.begin(), ks.end(), slot) != ks.end(); };
  const auto operand = [&](const Expr& x) {
    if (x.kind != ExprKind::Read || x.type != te::Type::Float || te::contains(x, ExprKind::Reduce))
      return false;
    const Storage st = storage_[static_cast<size_t>(x.slot)];
    return st == Storage::Input || st == Storage::Buffer;
  };
  const auto plain = [&](const Expr& x) {
    if (!operand(x) || x.padded) return false;
    std::set<int> seen;
    for (const te::ExprPtr& ix : x.args) {
      if (ix->kind != ExprKind::Var || !seen.insert(ix->slot).second || (ix->slot >= n && !is_k(ix->slot)))
        return false;
    }
    return true;
  };
  const auto uses = [](const Expr& x, int slot) {
    return te::any_of(x, [&](const Expr& e) { return e.kind == ExprKind::Var && e.slot == slot; });
  };
  const auto as = [&](const Expr* a, const Expr* b) -> std::optional<Contraction> {
    if (!plain(*a) || !operand(*b)) return std::nullopt;
    int row = -1;
    std::vector<int> kpos;  // the axes of a the k variables index, in their order
    for (size_t p = 0; p < a->args.size(); ++p) {
      const int slot = a->args[p]->slot;
      if (slot < n) row = std::max(row, slot);
    }
    for (int kv : ks) {
      for (size_t p = 0; p < a->args.size(); ++p)
        if (a->args[p]->slot == kv) kpos.push_back(static_cast<int>(p));
    }
    if (row < 0 || row > n - 2 || uses(*b, row) || kpos.size() != ks.size()) return std::nullopt;
    for (size_t m = 1; m < kpos.size(); ++m)
      if (kpos[m] != kpos[m - 1] + 1) return std::nullopt;
    const bool classic = ks.size() == 1 && row == n - 2 && plain(*b);
    return Contraction{&r, a, b, ks, row, classic};
  };
  const Expr* x = body.args[0].get();
  const Expr* y = body.args[1].get();
  if (auto mm = as(x, y)) return mm;
  return as(y, x);
}

// The loops over the reduction variables of mm, outermost first, each at `in` and 2 more spaces per level
// (in is advanced past them); k counts the iterations in the body.
std::string Lowering::k_loops(const Stmt& s, const Contraction& mm, std::string& in) const {
  std::string out;
  for (int kv : mm.k) {
    const std::string v = var_id(s.vars[static_cast<size_t>(kv)]);
    out += fmt::format("{}for (int64_t {} = 0; {} < {}; ++{})\n", in, v, v,
                       emit_size_expr(*s.var_extent[static_cast<size_t>(kv)]), v);
    in += "  ";
  }
  return out;
}

// The packing of a panel of B (columns j0 + c, c < NR, zero from jn on) when b is evaluated (not the
// classic form): the column variables of each panel column are decoded once, the k variables once per k,
// and b's expression is evaluated across the panel's columns in vector lanes (a padded window read becomes
// masked gathers). With `bits`, the bf16 dot product's panel of a window (kDot): each element as stored
// (b_bits: the aligned 32-bit word holding it, gathered) into bh, with no work per run of columns as in
// the window's copies (pack_b_window).
std::string Lowering::pack_b_expr(const Group& g, const Contraction& mm, const std::string& ind, bool bits) {
  const Stmt& s = stmt(g.stmts.front());
  const int n = s.n_domain;
  const auto var = [&](int slot) { return var_id(s.vars[static_cast<size_t>(slot)]); };
  std::string out = ind + "{\n";
  for (int a = 0; a < mm.row; ++a) out += fmt::format("{}  const int64_t {} = ax{};\n", ind, var(a), a);
  out += ind + "  int64_t k = 0;\n";
  std::string in = ind + "  ";
  out += k_loops(s, mm, in);
  out += in + "{\n";
  out += in + (o_.vectorize ? "  #pragma omp simd\n" : "");
  out += in + "  for (int64_t c = 0; c < NR; ++c) {\n";
  for (int a = mm.row + 1; a < n; ++a)
    out += fmt::format("{}    const int64_t {} = colv{}[c];\n", in, var(a), a);
  std::string pre;
  if (bits) {
    const std::string value = b_bits(s, mm, pre, in + "    ", "c < jn");
    out += pre + fmt::format("{}    bh[k * NR + c] = {};\n", in, value);
  } else {
    CppExprEmitter em = emitter(s);
    const std::string value = em.emit(*mm.b, pre, in + "    ");
    out += pre;
    out += fmt::format("{}    bp[k * NR + c] = c < jn ? ({}){} : ({})0;\n", in, acc_, value, acc_);
  }
  out += in + "  }\n" + in + "  ++k;\n" + in + "}\n" + ind + "}\n";
  return out;
}

// The bits of b's element at the current point as stored, or its pad value's bits where an index is out of
// range (bf16: only the bf16 dot product reads bits): the index statements go to pre, with `test` (a
// further condition for an element, or empty) folded into the range test.
std::string Lowering::b_bits(const Stmt& s, const Contraction& mm, std::string& pre, const std::string& ind,
                             const std::string& test) {
  CppExprEmitter em = emitter(s);
  std::string in_range = test;
  std::vector<std::string> idx;
  for (size_t a = 0; a < mm.b->args.size(); ++a) {
    const std::string v = em.emit(*mm.b->args[a], pre, ind);
    pre += fmt::format("{}const int64_t bx{} = {};\n", ind, a, v);
    in_range +=
        fmt::format("{}(uint64_t)bx{} < (uint64_t){}", in_range.empty() ? "" : " && ", a, dim(mm.b->slot, a));
    idx.push_back(fmt::format("(bin ? bx{} : 0)", a));
  }
  const std::string pad =
      mm.b->pad_value ? fmt::format("cake_f32_to_bf16((float)({}))", em.emit(*mm.b->pad_value, pre, ind))
                      : "(uint16_t)0";
  pre += fmt::format("{}const bool bin = {};\n", ind, in_range.empty() ? "true" : in_range);
  return fmt::format("(bin ? cake_gemm::bits16({}, {}) : {})", tensor_id(tensor(mm.b->slot).name),
                     linear(mm.b->slot, idx, 0), pad);
}

// Whether b reads a window along the last column axis j (convolution's x?[.., j·S + kx − P]): j only in
// b's last index, affinely, with that index using no other domain variable and no data. Then each run of a
// panel's columns with one value of the other column variables packs as a strided copy along j, whose
// in-range interior depends on the k variables alone (a table per k), with vector loads instead of
// gathers.
bool Lowering::windowed(const Group& g, const Contraction& mm) const {
  const Stmt& s = stmt(g.stmts.front());
  const int n = s.n_domain, j = n - 1;
  const Expr& b = *mm.b;
  if (b.args.empty() || !uses_var(*b.args.back(), j) || te::contains(*b.args.back(), ExprKind::Read))
    return false;
  for (size_t p = 0; p + 1 < b.args.size(); ++p)
    if (uses_var(*b.args[p], j)) return false;
  const bool other = te::any_of(
      *b.args.back(), [&](const Expr& e) { return e.kind == ExprKind::Var && e.slot != j && e.slot < n; });
  return !other && affine_along(*b.args.back(), j);
}

// The extent of mm's flattened k: the product of its reduction variables' extents.
std::string Lowering::k_extent(const Stmt& s, const Contraction& mm) const {
  std::string k = "INT64_C(1)";
  for (int kv : mm.k) k += " * " + emit_size_expr(*s.var_extent[static_cast<size_t>(kv)]);
  return k;
}

// Per k (row-major over the k variables), the interior [lo, hi) of j where b's padded last index is in
// range, as kwin[2k], kwin[2k + 1]: ceil(−o / c) <= j <= floor((W − 1 − o) / c) for the index c·j + o.
std::string Lowering::window_table(const Group& g, const Contraction& mm, const std::string& ind) {
  const Stmt& s = stmt(g.stmts.front());
  const int j = s.n_domain - 1;
  const std::string ext_j = emit_size_expr(*s.var_extent[static_cast<size_t>(j)]);
  std::string out =
      fmt::format("{}int64_t* kwin = cake_scratch<int64_t>({}, (size_t)(2 * cK));\n", ind, next_scratch_++);
  out += ind + "{\n" + ind + "  int64_t k = 0;\n";
  std::string in = ind + "  ";
  out += k_loops(s, mm, in);
  CppExprEmitter em = emitter(s);
  std::string pre, stride;
  const auto co = affine_in(*mm.b->args.back(), j, em, pre, in + "  ", &stride);
  const std::string extent = emit_size_expr(*tensor(mm.b->slot).dims.back());
  out += in + "{\n" + pre + fmt::format("{}  int64_t wlo = 0, whi = {};\n", in, ext_j);
  out += narrow_to_interior(*co, extent, "wlo", "whi", in + "  ");
  out += fmt::format("{}  wlo = cake_min64(wlo, {});\n", in, ext_j);
  out += fmt::format("{}  kwin[2 * k] = wlo;\n{}  kwin[2 * k + 1] = cake_max64(whi, wlo);\n{}  ++k;\n", in,
                     in, in);
  out += in + "}\n" + ind + "}\n";
  return out;
}

// The window packing of a panel (windowed): per k, each run of columns [seg[g], seg[g + 1]) with one value
// of the other column variables is j over [ja, jb): edges with their bounds tests, the interior without,
// strides 1 and 2 as constants (permutes instead of gathers). With `bits`, the bf16 dot product's panel:
// the elements' bits as stored, into bh.
std::string Lowering::pack_b_window(const Group& g, const Contraction& mm, const std::string& ind,
                                    bool bits) {
  const std::string elem = bits ? "uint16_t" : acc_;
  const Stmt& s = stmt(g.stmts.front());
  const int n = s.n_domain, j = n - 1;
  const auto var = [&](int slot) { return var_id(s.vars[static_cast<size_t>(slot)]); };
  const std::string ext_j = emit_size_expr(*s.var_extent[static_cast<size_t>(j)]), jv = var(j);
  std::string out = ind + "{\n";
  for (int a = 0; a < mm.row; ++a) out += fmt::format("{}  const int64_t {} = ax{};\n", ind, var(a), a);
  out += ind + "  int64_t seg[NR + 1];\n" + ind + "  int nseg = 0;\n";
  out += fmt::format(
      "{}  for (int64_t c = 0; c < jn; c += std::min<int64_t>(jn - c, {} - colv{}[c])) seg[nseg++] = c;\n",
      ind, ext_j, j);
  out += ind + "  seg[nseg] = jn;\n" + ind + "  int64_t k = 0;\n";
  std::string in = ind + "  ";
  out += k_loops(s, mm, in);
  out += in + "{\n";
  in += "  ";
  out += fmt::format("{}{}* prow = {} + k * NR;\n", in, elem, bits ? "bh" : "bp");
  out += in + "for (int64_t c = jn; c < NR; ++c) prow[c] = 0;\n";
  out += in + "for (int sg = 0; sg < nseg; ++sg) {\n";
  in += "  ";
  for (int a = mm.row + 1; a < j; ++a)
    out += fmt::format("{}const int64_t {} = colv{}[seg[sg]];\n", in, var(a), a);
  out += fmt::format("{}const int64_t ja = colv{}[seg[sg]], jb = ja + seg[sg + 1] - seg[sg];\n", in, j);
  out += fmt::format("{}{}* dst = prow + seg[sg] - ja;\n", in, elem);
  if (mm.b->padded) {
    out += in + "const int64_t lo = cake_min64(cake_max64(kwin[2 * k], ja), jb);\n";
    out += in + "const int64_t hi = cake_max64(cake_min64(kwin[2 * k + 1], jb), lo);\n";
  } else {
    out += in + "const int64_t lo = ja, hi = jb;\n";
  }
  // A run whose other indices (the window's row) are out of range is the pad value throughout; in the
  // others, the interior's reads are tested for nothing (a conditional 16-bit load does not vectorize).
  if (mm.b->padded) {
    CppExprEmitter em = emitter(s);
    std::string pre, in_range;
    for (size_t a = 0; a + 1 < mm.b->args.size(); ++a) {
      const std::string v = em.emit(*mm.b->args[a], pre, in);
      in_range += fmt::format("{}(uint64_t)({}) < (uint64_t){}", in_range.empty() ? "" : " && ", v,
                              dim(mm.b->slot, a));
    }
    std::string pad = mm.b->pad_value ? em.emit(*mm.b->pad_value, pre, in) : "0";
    if (bits) pad = mm.b->pad_value ? fmt::format("cake_f32_to_bf16((float)({}))", pad) : "0";
    out += pre + fmt::format(
                     "{}if (!({})) {{\n{}  for (int64_t {} = ja; {} < jb; ++{}) dst[{}] = ({}){};\n{}  "
                     "continue;\n{}}}\n",
                     in, in_range.empty() ? "true" : in_range, in, jv, jv, jv, jv, elem, pad, in, in);
  }
  const auto step = [&](const std::string& from, const std::string& to, bool interior,
                        const std::string& i2) {
    CppExprEmitter em = emitter(s);
    if (interior) em.assume_in_range(mm.b);  // every index: the run's row was tested above
    std::string pre, value;
    if (!bits) {
      value = em.emit(*mm.b, pre, i2 + "  ");
    } else {
      value = interior ? em.emit_stored(*mm.b, pre, i2 + "  ") : b_bits(s, mm, pre, i2 + "  ", "");
    }
    std::string loop = fmt::format(
        "{}{}for (int64_t {} = {}; {} < {}; ++{}) {{\n{}{}  dst[{}] = ({}){};\n{}}}\n", i2,
        o_.vectorize ? "#pragma omp simd\n" + i2 : "", jv, from, jv, to, jv, pre, i2, jv, elem, value, i2);
    if (!interior || !o_.vectorize) return loop;
    // An interior of 16 or more runs as chunks of 16, the last overlapping the one before (a copy stores
    // the same values again), instead of a vector loop and up to 15 scalar iterations (runs of 28 at
    // stride 2 in conv2d's bf16 56x56 case: one 16-lane permute and 12 scalar copies).
    return overlapped_chunks(i2, jv, from, to, 16,
                             pre + fmt::format("{}      dst[{}] = ({}){};\n", i2, jv, elem, value)) +
           "{\n" + loop + i2 + "}\n";
  };
  out += step("ja", "lo", false, in);
  std::string stride, pre;
  {
    CppExprEmitter em = emitter(s);
    affine_in(*mm.b->args.back(), j, em, pre, in, &stride);
  }
  if (!stride.empty() && o_.vectorize) {
    stride_specialized(stride, out, in, [&] { out += step("lo", "hi", true, in); });
  } else {
    out += step("lo", "hi", true, in);
  }
  out += step("hi", "jb", false, in);
  in.resize(in.size() - 2);
  out += in + "}\n" + in + "++k;\n";
  in.resize(in.size() - 2);
  out += in + "}\n" + ind + "}\n";
  return out;
}

// A C++ constant expression: whether the tensor rd reads stores elements of 32 bits or more (in the operator
// dtype, that depends on the instantiation; an intermediate holds the compute type).
std::string Lowering::wide_elements(const Expr& rd) const {
  const TensorInfo& t = tensor(rd.slot);
  const Storage st = storage_[static_cast<size_t>(rd.slot)];
  if (st == Storage::Buffer || st == Storage::RowLocal) return "true";
  if (!t.fixed_dtype) return "(sizeof(typename IO::T) >= 4)";
  return dtype_size(*t.fixed_dtype) >= 4 ? "true" : "false";
}

// The column variables of a panel's columns j0 + c (c < NR; past jn, those of the last column), decoded
// from j0 once and carried along (no division per column).
std::string Lowering::decode_columns(const Group& g, const Contraction& mm, const std::string& ind) {
  const Stmt& s = stmt(g.stmts.front());
  const int n = s.n_domain;
  const auto extent = [&](int slot) { return emit_size_expr(*s.var_extent[static_cast<size_t>(slot)]); };
  std::string out;
  for (int a = mm.row + 1; a < n; ++a) out += fmt::format("{}int64_t colv{}[NR];\n", ind, a);
  out += ind + "{\n" + ind + "  int64_t col = j0;\n";
  for (int a = n - 1; a > mm.row; --a)
    out += fmt::format("{}  int64_t cur{} = col % {};\n{}  col /= {};\n", ind, a, extent(a), ind, extent(a));
  out += ind + "  (void)col;\n";
  out += ind + "  for (int64_t c = 0; c < NR; ++c) {\n";
  for (int a = mm.row + 1; a < n; ++a) out += fmt::format("{}    colv{}[c] = cur{};\n", ind, a, a);
  out += ind + "    if (c + 1 >= jn) continue;\n";
  for (int a = n - 1; a > mm.row; --a) {
    out += fmt::format("{}    if (++cur{} < {}) continue;\n{}    cur{} = 0;\n", ind, a, extent(a), ind, a);
  }
  out += ind + "  }\n" + ind + "}\n";
  return out;
}

std::string Lowering::emit_contraction(const Group& g, const Contraction& mm) {
  const Stmt& s = stmt(g.stmts.front());
  const int n = s.n_domain;
  const std::string acc_t = acc_;
  const auto extent = [&](int slot) { return emit_size_expr(*s.var_extent[static_cast<size_t>(slot)]); };
  const std::string ext_i = extent(mm.row);
  const std::string ext_j = mm.classic ? extent(n - 1) : extents_product(s, mm.row + 1, n);
  const std::string ext_k = mm.classic ? extent(mm.k[0]) : k_extent(s, mm);
  std::string out =
      fmt::format("  {{ // contraction, {}x{}-vector register tiles over packed panels of {}:\n", o_.mr,
                  o_.nv, tensor(mm.b->slot).name);
  for (int si : g.stmts) out += "    //   " + te::print_stmt(stmt(si)) + "\n";
  // bf16 operands taken as they are stored (an input in the operator dtype) can go through the bf16
  // dot-product path: the instantiation for bf16 packs pairs along k and multiplies them with VDPBF16PS.
  const auto raw_bf16 = [&](const Expr& rd) {
    return storage_[static_cast<size_t>(rd.slot)] == Storage::Input && !tensor(rd.slot).fixed_dtype;
  };
  const bool window = !mm.classic && windowed(g, mm);
  // (An implicit GEMM's window packs to the accumulation type first, then to pairs: its values are bf16's.)
  const bool dot = o_.bf16_dot && (mm.classic || window) && raw_bf16(*mm.a) && raw_bf16(*mm.b);
  // Operands read in place, B not packed (docs/tracks.md): matrix times vector and its transpose (one
  // column or one row of C, A and B contiguous along k) as dot products along k, where a register tile
  // would fill one lane or one row; and the full panels of B for an A of at most 4·MR rows. The operands'
  // pointers and how their elements widen to the accumulation type:
  const auto in_place = [&](const Expr& rd) -> std::pair<std::string, std::string> {
    const TensorInfo& t = tensor(rd.slot);
    if (storage_[static_cast<size_t>(rd.slot)] == Storage::Buffer) {
      return {"b_" + t.name, real_ == "double" ? "cake_gemm::src_f64" : "cake_gemm::src_f32"};
    }
    if (!t.fixed_dtype) return {tensor_id(t.name), "typename IO::Src"};
    switch (*t.fixed_dtype) {
      case DType::f32:
        return {tensor_id(t.name), "cake_gemm::src_f32"};
      case DType::bf16:
        return {tensor_id(t.name), "cake_gemm::src_bf16"};
      case DType::f16:
        return {tensor_id(t.name), "cake_gemm::src_f16"};
      default:
        return {};
    }
  };
  const auto [a_ptr, a_src] = in_place(*mm.a);
  const auto [b_ptr, b_src] = mm.classic ? in_place(*mm.b) : std::pair<std::string, std::string>{};
  // (An intermediate's buffer holds the compute type, never wider than the accumulation type.) Whether
  // the dot products apply depends on the sizes (matmul's b[k, n] is contiguous along k when N = 1); the
  // in-place panels need B contiguous along j by its layout.
  const bool gemv = !a_src.empty() && !b_src.empty();
  const bool direct = !b_src.empty() && !mm.b->args.empty() && mm.b->args.back()->slot == n - 1;
  out += fmt::format("    constexpr int MR = {}, NV = {};\n", o_.mr, o_.nv);
  if (dot) {
    out += fmt::format("    constexpr bool kDot = {};\n", kBf16DotHere);
    out += fmt::format(
        "    constexpr int64_t NR = NV * (kDot ? cake_gemm::kBf16DotLanes : cake_gemm::lanes<{}>());\n",
        acc_t);
  } else {
    out += fmt::format("    constexpr int64_t NR = NV * cake_gemm::lanes<{}>();\n", acc_t);
  }
  out += fmt::format("    const int64_t cI = {}, cJ = {}, cK = {};\n", ext_i, ext_j, ext_k);
  const std::string nb = extents_product(s, 0, mm.row);
  out += fmt::format("    const int64_t nbatch = {}, npanel = (cJ + NR - 1) / NR;\n", nb);
  out += fmt::format(
      "    #pragma omp parallel{}{}\n    {{\n", omp_threads(),
      work_if("nbatch * cI * cJ * cK", fmt::format("{} * {} * {} * {}", nb, ext_i, ext_j, ext_k)));
  if (dot) {
    out += fmt::format("      {}* bp = cake_scratch<{}>({}, kDot ? 0 : (size_t)(cK * NR));\n", acc_t, acc_t,
                       next_scratch_++);
    out += fmt::format(
        "      uint32_t* bq = cake_scratch<uint32_t>({}, kDot ? (size_t)((cK + 1) / 2 * NR) : 0);\n",
        next_scratch_++);
  } else {
    out += fmt::format("      {}* bp = cake_scratch<{}>({}, (size_t)(cK * NR));\n", acc_t, acc_t,
                       next_scratch_++);
  }
  if (window && mm.b->padded) out += window_table(g, mm, "      ");
  if (!mm.classic) {  // A packed in the accumulation type, per row tile [k][MR], once per batch it depends on
    out += fmt::format("      {}* ap = cake_scratch<{}>({}, (size_t)((cI + MR - 1) / MR * MR * cK));\n",
                       acc_t, acc_t, next_scratch_++);
    out += "      int64_t ap_batch = -1;\n";
  }
  out += fmt::format("      alignas(64) {} tile[MR * NR];\n", acc_t);
  for (int si : g.stmts) {
    const int t = stmt(si).tensor;
    if (storage_[static_cast<size_t>(t)] == Storage::RowLocal) {
      out += "      " + row_local(t, tensor(t).dims.size());
    }
  }
  out += "      #pragma omp for collapse(2) schedule(static)\n";
  out += "      for (int64_t bt = 0; bt < nbatch; ++bt)\n      for (int64_t jp = 0; jp < npanel; ++jp) {\n";
  std::string ind = "        ";
  // batch axes from bt (row-major over the batch extents)
  if (mm.row > 0) {
    out += ind + "int64_t rest = bt;\n";
    for (int b = mm.row - 1; b >= 0; --b) {
      const std::string e = emit_size_expr(*s.var_extent[static_cast<size_t>(b)]);
      out += fmt::format("{}const int64_t ax{} = rest % {};\n{}rest /= {};\n", ind, b, e, ind, e);
    }
    out += ind + "(void)rest;\n";
  }
  // offsets of the batch part of a and b, and their strides along i / j / k
  auto base = [&](const Expr& rd) {
    std::string o = "INT64_C(0)";
    for (int b = 0; b < mm.row; ++b) o += fmt::format(" + ax{} * {}", b, var_coefficient(rd, b));
    return o;
  };
  out += fmt::format("{}const int64_t abase = {}, asi = {}, ask = {};\n", ind, base(*mm.a),
                     var_coefficient(*mm.a, mm.row), var_coefficient(*mm.a, mm.k.back()));
  if (mm.classic) {
    out += fmt::format("{}const int64_t bbase = {}, bsj = {}, bsk = {};\n", ind, base(*mm.b),
                       var_coefficient(*mm.b, n - 1), var_coefficient(*mm.b, mm.k[0]));
  }
  out += ind + "const int64_t j0 = jp * NR, jn = std::min<int64_t>(NR, cJ - j0);\n";
  // One column of C (A's rows dotted with B's column), or one row of C (B's columns dotted with A's row).
  out += ind + fmt::format("const bool gemv = {};\n", gemv ? "cJ == 1 && ask == 1 && bsk == 1" : "false");
  out += ind + fmt::format("const bool gemv_t = {};\n",
                           gemv ? "!gemv && cI == 1 && ask == 1 && bsk == 1" : "false");
  // An A of a few row tiles (at most 4·MR rows) meets each panel of B a few times: its full panels are
  // read in place, not packed (f32 K=64 N=256 at M = 7 / 12 / 24: 10.5 / 10.5 / 14.5 → 6.4 / 7.6 / 12.8 µs).
  out += ind + fmt::format("const bool direct = {};\n",
                           direct ? fmt::format("!gemv && !gemv_t && cI <= 4 * MR && bsj == 1 && jn == NR{}",
                                                dot ? " && !kDot" : "")
                                  : "false");
  if (!mm.classic) {
    bool batched_a = false;
    for (int b = 0; b < mm.row; ++b) batched_a = batched_a || uses_var(*mm.a, b);
    // (The bf16 dot product reads A in place.)
    out += fmt::format("{}if ({}ap_batch != {}) {{\n", ind, dot ? "!kDot && " : "", batched_a ? "bt" : "0");
    out += fmt::format("{}  ap_batch = {};\n", ind, batched_a ? "bt" : "0");
    out += ind + "  for (int64_t i0 = 0; i0 < cI; i0 += MR)\n";
    out += ind + "    for (int r = 0; r < MR; ++r) {\n";
    out += ind + "      const int64_t o = abase + std::min<int64_t>(i0 + r, cI - 1) * asi;\n";
    out += ind + "      for (int64_t k = 0; k < cK; ++k)\n";
    out += fmt::format("{}        ap[i0 * cK + k * MR + r] = ({}){};\n", ind, acc_t,
                       access_linear(mm.a->slot, "o + k * ask"));
    out += ind + "    }\n" + ind + "}\n";
    out += decode_columns(g, mm, ind);
  }
  out += ind + "if (!gemv && !gemv_t && !direct) {\n";
  // A window's strided copies pay per run of a panel's columns (one output row each), so a panel over
  // short rows pays per few elements; 32-bit elements gather per column instead, which measured faster on
  // every f32 conv2d shape tried, from 13 to 56 columns per row (docs/tracks.md). 16-bit elements have no
  // vector gather and keep the copies.
  const std::string window_pack =
      window ? fmt::format("{}if constexpr ({}) {{\n{}{}}} else {{\n{}{}}}\n", ind, wide_elements(*mm.b),
                           pack_b_expr(g, mm, ind + "  "), ind, pack_b_window(g, mm, ind + "  "), ind)
             : "";
  // A panel's copy of B, each element as `value`.
  const auto copy_b = [&](const std::string& at, const std::string& value) {
    return fmt::format(
        "{0}for (int64_t k = 0; k < cK; ++k)\n{0}  for (int64_t c = 0; c < NR; ++c)\n"
        "{0}    bp[k * NR + c] = {1};\n",
        at, value);
  };
  // A whole panel copies without the column test: around the load it became a masked load, which GCC 12
  // does not vectorize (matmul f32 K=256 M=64 N=1024 420 -> 394 µs, K=33 M=64 N=16 0.97 -> 0.84 µs).
  const std::string b_value =
      fmt::format("({}){}", acc_t, access_linear(mm.b->slot, "bbase + (j0 + c) * bsj + k * bsk"));
  const std::string pack_b =
      window ? window_pack
      : !mm.classic
          ? pack_b_expr(g, mm, ind)
          : fmt::format("{0}if (jn == NR) {{\n{1}{0}}} else {{\n{2}{0}}}\n", ind, copy_b(ind + "  ", b_value),
                        copy_b(ind + "  ", fmt::format("c < jn ? {} : ({})0", b_value, acc_t)));
  const std::string a_name = tensor_id(tensor(mm.a->slot).name), b_name = tensor_id(tensor(mm.b->slot).name);
  if (dot && window) {
    // The bf16 dot product's panel from B's bits: rows of at most 24 columns gathered per column
    // (pack_b_expr), longer rows copied per run, which repays its overhead there (docs/tracks.md); then
    // paired along k.
    out += ind + "if constexpr (kDot) {\n";
    out += fmt::format("{}  uint16_t* bh = cake_scratch<uint16_t>({}, (size_t)(cK * NR));\n", ind,
                       next_scratch_++);
    out +=
        fmt::format("{}  if ({} <= 24) {{\n", ind, emit_size_expr(*s.var_extent[static_cast<size_t>(n - 1)]));
    out += pack_b_expr(g, mm, ind + "    ", true) + ind + "  } else {\n";
    out += pack_b_window(g, mm, ind + "    ", true) + ind + "  }\n";
    out += ind + "  for (int64_t k2 = 0; k2 < (cK + 1) / 2; ++k2)\n";
    out += ind + "    #pragma omp simd\n";
    out += ind + "    for (int64_t c = 0; c < NR; ++c)\n";
    out += ind + "      bq[k2 * NR + c] = (uint32_t)bh[2 * k2 * NR + c] |\n";
    out +=
        ind + "                        (2 * k2 + 1 < cK ? (uint32_t)bh[(2 * k2 + 1) * NR + c] : 0u) << 16;\n";
    out += ind + "} else {\n" + pack_b + ind + "}\n";
  } else if (dot) {
    out += ind + "if constexpr (kDot) {\n";
    out += fmt::format("{}  cake_gemm::pack_bf16_pairs<NR>({} + bbase + j0 * bsj, bsj, bsk, cK, jn, bq);\n",
                       ind, b_name);
    out += ind + "} else {\n" + pack_b + ind + "}\n";
  } else {
    out += pack_b;
  }
  out += ind + "}\n";
  out += ind + "for (int64_t i0 = 0; i0 < cI; i0 += MR) {\n";
  ind += "  ";
  out += ind + "const int64_t in = std::min<int64_t>(MR, cI - i0);\n";
  out += ind + "int64_t arow[MR];\n";
  out += ind + "for (int r = 0; r < MR; ++r) arow[r] = abase + std::min<int64_t>(i0 + r, cI - 1) * asi;\n";
  // A call of `rows` dot products: row r of one operand (the pointers rows[r]) with the other operand's
  // vector vec, the sum to dst[r · stride].
  const auto dots = [&](const std::string& rows, const std::string& rows_src, const std::string& vec_src,
                        const std::string& vec, const std::string& dst, const std::string& stride) {
    std::string call = fmt::format("cake_gemm::dot_rows<{}, {}, {}, {}>(cK, rows, {}, {}, {});\n", rows,
                                   acc_t, rows_src, vec_src, vec, dst, stride);
    if (!dot) return call;
    return fmt::format("if constexpr (kDot) cake_gemm::dot_rows_bf16<{}>(cK, rows, {}, {}, {});\n{}  else {}",
                       rows, vec, dst, stride, ind, call);
  };
  if (gemv) {  // one row of C: chunks of MR of its columns
    out += ind + "if (gemv_t) {\n";
    out += ind + "  for (int64_t c0 = 0; c0 < jn; c0 += MR) {\n";
    out += fmt::format("{}    const {}::T* rows[MR];\n", ind, b_src);
    out += fmt::format(
        "{}    for (int r = 0; r < MR; ++r) rows[r] = {} + bbase + (j0 + std::min<int64_t>(c0 + r, jn - 1)) "
        "* bsj;\n",
        ind, b_ptr);
    out += ind + "    " + dots("MR", b_src, a_src, a_ptr + " + arow[0]", "tile + c0", "1");
    out += ind + "  }\n";
    out += ind + "} else\n";
  }
  // The other paths run R rows of A: MR, or about the `in` rows of a last partial tile.
  out += ind + "cake_gemm::with_rows<MR>(in, [&](auto rows_) {\n";
  out += ind + "  constexpr int R = decltype(rows_)::value;\n";
  ind += "  ";
  if (gemv) {
    out += ind + "if (gemv) {\n";
    out += fmt::format("{}  const {}::T* rows[R];\n{}  for (int r = 0; r < R; ++r) rows[r] = {} + arow[r];\n",
                       ind, a_src, ind, a_ptr);
    out += ind + "  " + dots("R", a_src, b_src, b_ptr + " + bbase", "tile", "NR");
    out += ind + "} else ";
  } else {
    out += ind;
  }
  const std::string a_elem = mm.classic ? fmt::format("[&](int r, int64_t k) {{ return ({}){}; }}", acc_t,
                                                      access_linear(mm.a->slot, "arow[r] + k * ask"))
                                        : "[&](int r, int64_t k) { return ap[i0 * cK + k * MR + r]; }";
  if (direct) {
    out += "if (direct) {\n";
    // The first row tile of a panel prefetches the panel after next; the last two panels, B's last NR
    // columns (measured: 13 % faster on a cold batched B than no prefetch there).
    out += fmt::format(
        "{}  cake_gemm::tile_in_place<R, NV, {}, {}>(cK, {} + bbase + j0, bsk, {}, tile,\n"
        "{}    i0 == 0 ? {} + bbase + std::min<int64_t>(j0 + 2 * NR, cJ - NR) : nullptr);\n",
        ind, acc_t, b_src, b_ptr, a_elem, ind, b_ptr);
    out += ind + "} else ";
  }
  const std::string tile_call = fmt::format("cake_gemm::tile<R, NV, {}>(cK, bp, {}, tile);\n", acc_t, a_elem);
  if (dot) {
    out += "if constexpr (kDot) {\n";
    out += ind + "  if (ask == 1) {\n";
    out +=
        fmt::format("{}    const uint16_t* ar[R];\n{}    for (int r = 0; r < R; ++r) ar[r] = {} + arow[r];\n",
                    ind, ind, a_name);
    out += ind + "    cake_gemm::tile_bf16_rows<R, NV>(cK, bq, ar, tile);\n";
    out += ind + "  } else\n";
    out += ind + "  cake_gemm::tile_bf16<R, NV>((cK + 1) / 2, bq, [&](int r, int64_t k2) {\n";
    out += ind + "    const int64_t k = 2 * k2, o = arow[r] + k * ask;\n";
    out += fmt::format("{}    return (uint32_t){}[o] | (k + 1 < cK ? (uint32_t){}[o + ask] : 0u) << 16;\n",
                       ind, a_name, a_name);
    out += ind + "  }, tile);\n";
    out += ind + "} else {\n" + ind + "  " + tile_call + ind + "}\n";
  } else {
    out += "{\n" + ind + "  " + tile_call + ind + "}\n";
  }
  ind.resize(ind.size() - 2);
  out += ind + "});\n";
  // The output's row-major offset is the domain's, so a panel's columns are contiguous in it: with the
  // columns decoded from arrays, one statement storing directly stores at a row's offset plus c, in vector
  // lanes (not one scalar store per element).
  const bool flat_store = !mm.classic && g.stmts.size() == 1 &&
                          storage_[static_cast<size_t>(s.tensor)] == Storage::Direct && o_.vectorize;
  if (flat_store) {
    std::vector<std::string> at_j0;
    at_j0.reserve(static_cast<size_t>(n));
    for (int a = 0; a < n; ++a) {
      at_j0.push_back(a < mm.row    ? fmt::format("ax{}", a)
                      : a == mm.row ? "(i0 + r)"
                                    : fmt::format("colv{}[0]", a));
    }
    out += ind + "for (int64_t r = 0; r < in; ++r) {\n";
    out += fmt::format("{}  const int64_t ybase = {};\n", ind, linear(s.tensor, at_j0, 0));
    out += ind + "  #pragma omp simd\n" + ind + "  for (int64_t c = 0; c < jn; ++c) {\n";
  } else {
    out += ind + "for (int64_t r = 0; r < in; ++r)\n" + ind + "  for (int64_t c = 0; c < jn; ++c) {\n";
  }
  ind += "    ";
  if (mm.row == n - 2) {
    out += fmt::format("{}const int64_t ax{} = i0 + r, ax{} = j0 + c;\n", ind, n - 2, n - 1);
  } else {
    out += fmt::format("{}const int64_t ax{} = i0 + r;\n", ind, mm.row);
    for (int a = mm.row + 1; a < n; ++a) out += fmt::format("{}const int64_t ax{} = colv{}[c];\n", ind, a, a);
  }
  out += fmt::format("{}const {} acc = tile[r * NR + c];\n", ind, acc_t);
  for (size_t m = 0; m < g.stmts.size(); ++m) {
    const Stmt& st = stmt(g.stmts[m]);
    out += ind + "{\n";
    for (int a = 0; a < n; ++a)
      out += fmt::format("{}  const int64_t {} = ax{};\n", ind, var_id(st.vars[static_cast<size_t>(a)]), a);
    CppExprEmitter em = emitter(st);
    if (m == 0) em.substitute(mm.reduce, fmt::format("(({})acc)", real_));
    std::string pre;
    const std::string value = em.emit(*st.rhs, pre, ind + "  ");
    std::vector<std::string> idx;
    idx.reserve(static_cast<size_t>(n));
    for (int a = 0; a < n; ++a) idx.push_back(var_id(st.vars[static_cast<size_t>(a)]));
    out += pre;
    if (flat_store) {
      out += ind + "  " + store(st.tensor, "ybase + c", value) + "\n";
    } else if (storage_[static_cast<size_t>(st.tensor)] == Storage::Direct) {
      out += ind + "  " + store(st.tensor, linear(st.tensor, idx, 0), value) + "\n";
    } else {
      out += fmt::format("{}  {} = ({}){};\n", ind, access(st.tensor, idx, 0), elem_type(st.tensor), value);
    }
    out += ind + "}\n";
  }
  out += std::string(flat_store ? "          }\n          }\n" : "          }\n") +
         "        }\n      }\n    }\n  }\n";
  return out;
}

// Group g's one statement as a plane stencil (match_plane_stencil), where the lowering can run it: its
// sums accumulate in the compute type, and no row-local tensor is involved.
std::optional<PlaneStencil> Lowering::plane_stencil(const Group& g) const {
  if (!o_.plane || !o_.vectorize || g.stmts.size() != 1) return std::nullopt;
  const Stmt& s = stmt(g.stmts.front());
  const auto ps = match_plane_stencil(s);
  if (!ps || (ps->reduce->reduce == te::ReduceOp::Sum && acc_ != real_)) return std::nullopt;
  if (storage_[static_cast<size_t>(s.tensor)] == Storage::RowLocal ||
      storage_[static_cast<size_t>(ps->window->slot)] == Storage::RowLocal)
    return std::nullopt;
  return ps;
}

namespace {
// A plane stencil runs where its taps and rows pay for packing the plane; the nest runs otherwise.
// depthwise_conv2d's standard cases, one thread: 3×5 taps over rows of 7 outputs 146 -> 36 µs (f32),
// 5×5 taps at stride 2 over 56×56 outputs 24.6 -> 8.1 ms (bf16); but one tap (a 1×1 filter) 204 -> 293 µs,
// 1×3 taps over 28×4 outputs 8.5 -> 18 µs, one output row 18 -> 24 µs. maxpool2d's columns of one output
// (3×2 taps, 57 rows): 61 -> 115 µs. bf16 rows shorter than a vector, copied and stored as whole vectors
// (no scalar conversions): maxpool2d N=8 C=64 112×8 2×3 1.04 -> 0.58 ms, depthwise_conv2d N=8 C=32 112×9
// 3×5 0.62 -> 0.44 ms. The same with f32 gains nothing (0.52, 0.60 ms either way) and costs 14% on
// maxpool2d's rows of 8, and rounding longer bf16 rows up to whole vectors cost 4.5% (N=8 C=128 56×56
// outputs, 5×5 taps at stride 2), so both keep exact rows. Since then (stop 32), two and three taps pay
// too where rows are short or the nest's rows of accumulators are not used: maxpool2d bf16 N=2 C=64
// 112×8 2×1 588 -> 96 µs, f32 N=2 C=128 112×55 3×1 stride 2 843 -> 650 µs, a column of one output
// (bf16 3×1 over W=1) 114 -> 99 µs; but a column of one output whose window adds columns (2×3 taps,
// padding 1, stride 2: packed rows of Wq = 2) 60 -> 111 µs, so such columns keep the nest. Geomean over the
// standard cases 0.87× (maxpool2d) and 0.97× (depthwise_conv2d), old and new kernels alternated five times.
// Stop 35: a column (Wq = 1) packs and stores as one loop down it: that bf16 3×1 column 90 -> 13 µs.
constexpr int kPlaneMinTaps = 2;
constexpr int kPlaneMinRows = 4;
constexpr int kPlaneMinWork = 32768;  // outputs × taps
constexpr int kPlaneVectors = 4;      // output vectors held in registers over all taps
}  // namespace

// Plane stencil ps (group g's one statement): per point of the axes before i and j, the window's plane is
// packed once, converted to the compute type, into Si·Sj phase planes (the rows and columns of one residue
// modulo the strides, the pad value where the window is out of range), so that each tap reads one phase
// plane at a fixed offset from its output: over the outputs flattened in rows of Wq = Wo + (max g − min
// g) / Sj (the last Wq − Wo of each row discarded), a tap is one contiguous vector update. A block of
// kPlaneVectors vectors of outputs stays in registers over all taps, which run in the reduction's order;
// then the rest of the statement per element. Elsewhere (strides that differ between taps or are not
// positive, few taps, rows or outputs) the statement's nest runs.
std::string Lowering::emit_plane_stencil(const Group& g, const PlaneStencil& ps) {
  const int si = g.stmts.front();
  const Stmt& s = stmt(si);
  const int n = s.n_domain, i = n - 2, j = n - 1;
  const Expr& red = *ps.reduce;
  const Expr& win = *ps.window;
  const size_t nd = win.args.size();
  const std::string vi = var_id(s.vars[static_cast<size_t>(i)]), vj = var_id(s.vars[static_cast<size_t>(j)]);
  const std::string ho = emit_size_expr(*s.var_extent[static_cast<size_t>(i)]),
                    wo = emit_size_expr(*s.var_extent[static_cast<size_t>(j)]);
  const std::string hx = dim(win.slot, nd - 2), wx = dim(win.slot, nd - 1), r = real_;
  const int lanes = 64 / (r == "float" ? 4 : 8), block = kPlaneVectors * lanes;
  const size_t per_tap = 4 + red.rvars.size();  // h, g, Si (then the tap's offset), Sj, the taps' values
  const int tab = next_scratch_++, buf = next_scratch_++, acc = next_scratch_++, wts = next_scratch_++;
  std::string out =
      fmt::format("  {{ // {}\n    // plane stencil over the last two axes\n", te::print_stmt(s));
  // Each tap variable's range [lo, hi): its bounds, or 0 and its inferred extent.
  std::vector<std::pair<std::string, std::string>> range;
  std::string taps = "INT64_C(1)";
  for (const te::ReduceVar& rv : red.rvars) {
    range.emplace_back(rv.lo ? emit_size_expr(*rv.lo) : "INT64_C(0)",
                       emit_size_expr(rv.lo ? *rv.hi : *rv.extent));
    taps += fmt::format(" * cake_max64(INT64_C(0), ({}) - ({}))", range.back().second, range.back().first);
  }
  out += fmt::format("    const int64_t ps_K = {};\n", taps);
  out += fmt::format("    int64_t* ps_tab = cake_scratch<int64_t>({}, (size_t)(ps_K * {}));\n", tab, per_tap);
  out += "    int64_t ps_n = 0;\n";
  std::string ind = "    ";
  for (size_t k = 0; k < red.rvars.size(); ++k) {
    const std::string v = var_id(s.vars[static_cast<size_t>(red.rvars[k].slot)]);
    out += fmt::format("{}for (int64_t {} = {}; {} < {}; ++{}) {{\n", ind, v, range[k].first, v,
                       range[k].second, v);
    ind += "  ";
  }
  {
    CppExprEmitter em = emitter(s);
    std::string pre, stride;
    const auto row = affine_in(*win.args[nd - 2], i, em, pre, ind, &stride);
    stride.clear();
    const auto col = affine_in(*win.args[nd - 1], j, em, pre, ind, &stride);
    if (!row || !col) throw Error("simd: a plane stencil's window is not affine in its axes");
    out += pre + fmt::format("{}int64_t* ps_e = ps_tab + ps_n++ * {};\n", ind, per_tap);
    out += fmt::format("{}ps_e[0] = {};\n{}ps_e[1] = {};\n{}ps_e[2] = {};\n{}ps_e[3] = {};\n", ind,
                       row->second, ind, col->second, ind, row->first, ind, col->first);
    for (size_t k = 0; k < red.rvars.size(); ++k) {
      out += fmt::format("{}ps_e[{}] = {};\n", ind, 4 + k,
                         var_id(s.vars[static_cast<size_t>(red.rvars[k].slot)]));
    }
  }
  for (size_t k = 0; k < red.rvars.size(); ++k) {
    ind.resize(ind.size() - 2);
    out += ind + "}\n";
  }
  const std::string work = extents_product(s, 0, n);
  // One pair of strides for all taps; the span of h and g; each tap's offset into the phase planes.
  out += fmt::format(
      "    const int64_t ps_Si = ps_K > 0 ? ps_tab[2] : 0, ps_Sj = ps_K > 0 ? ps_tab[3] : 0;\n"
      "    bool ps_ok = ps_Si >= 1 && ps_Sj >= 1;\n"
      "    int64_t ps_hmin = 0, ps_hmax = 0, ps_gmin = 0, ps_gmax = 0;\n"
      "    for (int64_t t = 0; t < ps_K; ++t) {{\n"
      "      const int64_t* e = ps_tab + t * {0};\n"
      "      ps_ok = ps_ok && e[2] == ps_Si && e[3] == ps_Sj;\n"
      "      ps_hmin = t ? cake_min64(ps_hmin, e[0]) : e[0];\n"
      "      ps_hmax = t ? cake_max64(ps_hmax, e[0]) : e[0];\n"
      "      ps_gmin = t ? cake_min64(ps_gmin, e[1]) : e[1];\n"
      "      ps_gmax = t ? cake_max64(ps_gmax, e[1]) : e[1];\n"
      "    }}\n"
      "    const int64_t ps_Wq = {6} + (ps_ok ? (ps_gmax - ps_gmin) / ps_Sj : 0);\n"
      "    if (ps_ok && ps_K >= {1} && {2} >= {3} && ({6} >= 2 || ps_Wq == 1) && ({4}) * ps_K >= {5}) {{\n"
      "      const int64_t ps_Hq = {2} + (ps_hmax - ps_hmin) / ps_Si + 1;\n"
      "      const int64_t ps_Lp = ({2} * ps_Wq + {7}) / {8} * {8}, ps_plane = ps_Hq * ps_Wq;\n"
      "      const int64_t ps_bufn = ps_Si * ps_Sj * ps_plane + ps_Lp;\n"
      "      for (int64_t t = 0; t < ps_K; ++t) {{\n"
      "        int64_t* e = ps_tab + t * {0};\n"
      "        const int64_t dy = e[0] - ps_hmin, dx = e[1] - ps_gmin;\n"
      "        e[2] = ((dy % ps_Si) * ps_Sj + dx % ps_Sj) * ps_plane + (dy / ps_Si) * ps_Wq + dx / ps_Sj;\n"
      "      }}\n",
      per_tap, kPlaneMinTaps, ho, kPlaneMinRows, work, kPlaneMinWork, wo, block - 1, block);
  ind = "      ";
  if (i > 0) {
    out += fmt::format("{}#pragma omp parallel for{} schedule(static){}{}\n", ind,
                       i > 1 ? fmt::format(" collapse({})", i) : "", omp_threads(), work_if(work));
  }
  out += domain_loops(s, 0, i, ind);
  out += fmt::format("{}{}* ps_buf = cake_scratch<{}>({}, (size_t)ps_bufn);\n", ind, r, r, buf);
  out += fmt::format("{}{}* ps_acc = cake_scratch<{}>({}, (size_t)ps_Lp);\n", ind, r, r, acc);
  // Packing: each phase plane's rows, the pad value where the window is out of range.
  CppExprEmitter em = emitter(s);
  std::string pre;
  std::vector<std::string> at;
  for (size_t a = 0; a + 2 < nd; ++a) at.push_back(em.emit(*win.args[a], pre, ind));
  const std::string pad =
      win.pad_value ? fmt::format("({}){}", r, em.emit(*win.pad_value, pre, ind)) : fmt::format("({})0", r);
  at.push_back("ps_Y");
  at.push_back("ps_o + ps_Sj * ps_q");
  const std::string element = access(win.slot, at, 0);
  out += pre;
  out += fmt::format(
      "{0}for (int64_t ps_py = 0; ps_py < ps_Si; ++ps_py) {{\n"
      "{0}  for (int64_t ps_px = 0; ps_px < ps_Sj; ++ps_px) {{\n"
      "{0}    const int64_t ps_o = ps_gmin + ps_px;\n"
      "{0}    int64_t ps_hi = ps_o > {1} - 1 ? 0 : cake_min64(({1} - 1 - ps_o) / ps_Sj + 1, ps_Wq);\n"
      "{0}    const int64_t ps_lo = cake_min64(ps_o >= 0 ? 0 : (ps_Sj - 1 - ps_o) / ps_Sj, ps_hi);\n",
      ind, wx);
  // A column (rows of Wq = 1, a window of one column over an output of one): its rows [r0, r1) inside x
  // pack as one loop, the others as pads, instead of a row's loops per element (measured at
  // kPlaneMinWork's note).
  out += fmt::format(
      "{0}    if (ps_Wq == 1) {{\n"
      "{0}      {2}* ps_d = ps_buf + (ps_py * ps_Sj + ps_px) * ps_Hq;\n"
      "{0}      const int64_t ps_y0 = ps_hmin + ps_py;\n"
      "{0}      int64_t ps_r0 = ps_y0 >= 0 ? 0 : cake_min64((ps_Si - 1 - ps_y0) / ps_Si, ps_Hq);\n"
      "{0}      int64_t ps_r1 = ps_y0 >= {1} ? 0 : cake_min64(({1} - 1 - ps_y0) / ps_Si + 1, ps_Hq);\n"
      "{0}      if (ps_lo >= ps_hi) ps_r0 = ps_Hq;\n"
      "{0}      ps_r1 = cake_max64(ps_r1, ps_r0);\n"
      "{0}      for (int64_t ps_r = 0; ps_r < ps_r0; ++ps_r) ps_d[ps_r] = {3};\n"
      "{0}      #pragma omp simd\n"
      "{0}      for (int64_t ps_r = ps_r0; ps_r < ps_r1; ++ps_r) {{\n"
      "{0}        const int64_t ps_Y = ps_y0 + ps_Si * ps_r, ps_q = 0;\n"
      "{0}        ps_d[ps_r] = {4};\n"
      "{0}      }}\n"
      "{0}      for (int64_t ps_r = ps_r1; ps_r < ps_Hq; ++ps_r) ps_d[ps_r] = {3};\n"
      "{0}      continue;\n"
      "{0}    }}\n",
      ind, hx, r, pad, element);
  out += fmt::format(
      "{0}    for (int64_t ps_r = 0; ps_r < ps_Hq; ++ps_r) {{\n"
      "{0}      const int64_t ps_Y = ps_hmin + ps_py + ps_Si * ps_r;\n"
      "{0}      {2}* ps_d = ps_buf + ((ps_py * ps_Sj + ps_px) * ps_Hq + ps_r) * ps_Wq;\n"
      "{0}      const bool ps_in = (uint64_t)ps_Y < (uint64_t){3};\n"
      "{0}      const int64_t lo = ps_in ? ps_lo : ps_Wq, hi = ps_in ? ps_hi : ps_Wq;\n"
      "{0}      for (int64_t ps_q = 0; ps_q < lo; ++ps_q) ps_d[ps_q] = {4};\n",
      ind, wx, r, hx, pad);
  // Where x's elements are narrower than the compute type (bf16, f16), a row shorter than a vector (all
  // scalar conversions) is copied as one vector if its reads stay inside x (an input): the excess lands in
  // the right pad, written next, or in later rows and the slack after the last phase plane (at least a
  // block), packed later. Measured in kPlaneMinWork's note.
  std::string copy_end = "hi";
  if (storage_[static_cast<size_t>(win.slot)] == Storage::Input) {
    std::vector<std::string> last(at.begin(), at.end() - 1);
    last.push_back("ps_o + ps_Sj * (ps_hv - 1)");
    out += fmt::format(
        "{0}      int64_t ps_hv = sizeof({1}[0]) < sizeof({2}) && hi > lo && hi - lo < {3} ? lo + {3} : hi;\n"
        "{0}      if (ps_hv > hi && ({4}) >= {5}) ps_hv = hi;\n",
        ind, tensor_id(tensor(win.slot).name), r, lanes, linear(win.slot, last, 0), numel(win.slot));
    copy_end = "ps_hv";
  }
  std::string row_ind = ind + "      ";
  stride_specialized("ps_Sj", out, row_ind, [&] {
    out +=
        fmt::format("{0}#pragma omp simd\n{0}for (int64_t ps_q = lo; ps_q < {1}; ++ps_q) ps_d[ps_q] = {2};\n",
                    row_ind, copy_end, element);
  });
  out += fmt::format(
      "{0}      for (int64_t ps_q = hi; ps_q < ps_Wq; ++ps_q) ps_d[ps_q] = {1};\n{0}    }}\n{0}  }}\n{0}}}\n",
      ind, pad);
  // The taps over blocks of outputs held in registers.
  const bool sum = red.reduce == te::ReduceOp::Sum;
  const char* identity = sum ? "0" : red.reduce == te::ReduceOp::Max ? "-INFINITY" : "INFINITY";
  out +=
      fmt::format("{}typedef {} ps_V __attribute__((vector_size(64), aligned(alignof({}))));\n", ind, r, r);
  // The taps' factors (a depthwise filter's weights) once per plane, not once per block of outputs: per tap
  // and block, the table lookup, the weight's index, load and conversion had cost more than the tap's four
  // vector updates (depthwise_conv2d bf16 N=1 C=32, 3×5 taps over 112×56 outputs 254 -> 211 µs, 5×5 taps
  // over 112×9 104 -> 88 µs).
  if (ps.factor) {
    CppExprEmitter fe = emitter(s);
    std::string fpre;
    const std::string in = ind + "  ";
    const std::string f = fe.emit(*ps.factor, fpre, in);
    out += fmt::format("{0}{1}* ps_wv = cake_scratch<{1}>({2}, (size_t)ps_K);\n", ind, r, wts);
    out += fmt::format("{}for (int64_t ps_t = 0; ps_t < ps_K; ++ps_t) {{\n", ind);
    out += fmt::format("{}const int64_t* ps_e = ps_tab + ps_t * {};\n", in, per_tap);
    for (size_t k = 0; k < red.rvars.size(); ++k) {
      out += fmt::format("{}const int64_t {} = ps_e[{}];\n", in,
                         var_id(s.vars[static_cast<size_t>(red.rvars[k].slot)]), 4 + k);
    }
    out += fpre + fmt::format("{}ps_wv[ps_t] = ({})({});\n{}}}\n", in, r, f, ind);
  }
  out += fmt::format("{}for (int64_t ps_f = 0; ps_f < ps_Lp; ps_f += {}) {{\n", ind, block);
  for (int k = 0; k < kPlaneVectors; ++k)
    out += fmt::format("{}  ps_V ps_a{} = ps_V{{}} + ({}){};\n", ind, k, r, identity);
  out += fmt::format("{}  for (int64_t ps_t = 0; ps_t < ps_K; ++ps_t) {{\n", ind);
  const std::string in = ind + "    ";
  out += fmt::format("{}const {}* ps_p = ps_buf + ps_tab[ps_t * {} + 2] + ps_f;\n", in, r, per_tap);
  std::string factor;
  if (ps.factor) {
    out += fmt::format("{}const {} ps_w = ps_wv[ps_t];\n", in, r);
    factor = "ps_w * ";
  }
  for (int k = 0; k < kPlaneVectors; ++k) {
    const std::string x = fmt::format("*(const ps_V*)(ps_p + {})", k * lanes);
    if (sum) {
      out += fmt::format("{}ps_a{} += {}{};\n", in, k, factor, x);
    } else {  // the first NaN sticks: no later comparison with it holds
      out += fmt::format(
          "{}{{\n{}  const ps_V x = {};\n{}  ps_a{} = (x != x | x {} ps_a{}) ? x : ps_a{};\n{}}}\n", in, in,
          x, in, k, red.reduce == te::ReduceOp::Max ? ">" : "<", k, k, in);
    }
  }
  out += ind + "  }\n";
  for (int k = 0; k < kPlaneVectors; ++k)
    out += fmt::format("{}  *(ps_V*)(ps_acc + ps_f + {}) = ps_a{};\n", ind, k * lanes, k);
  out += ind + "}\n";
  // The rest of the statement per element. Where it reads nothing along j, stores straight to the output
  // and converts to a narrower type, a row shorter than a vector is stored as one vector, running on into
  // the rows after it (stored later, in order), except where that would pass the plane's last output.
  const auto uses_of_j = [&](const Expr& e) {
    int uses = 0;
    te::any_of(e, [&](const Expr& x) {
      uses += x.kind == ExprKind::Var && x.slot == j;
      return false;
    });
    return uses;
  };
  std::string row_end = wo;
  if (uses_of_j(*s.rhs) == uses_of_j(red) && storage_[static_cast<size_t>(s.tensor)] == Storage::Direct) {
    out += fmt::format("{}const int64_t ps_Wv = sizeof({}[0]) < sizeof({}) && {} < {} ? {} : {};\n", ind,
                       tensor_id(tensor(s.tensor).name), r, wo, lanes, lanes, wo);
    row_end = "ps_jn";
  }
  CppExprEmitter rest = emitter(s);
  rest.substitute(&red, fmt::format("ps_acc[{} * ps_Wq + {}]", vi, vj));
  std::string rpre;
  const std::string store_line = assign(si, rest, rpre, ind + "    ");
  // A column (Wq = 1): one loop down it, not a row's loop per output.
  out += fmt::format(
      "{0}if (ps_Wq == 1) {{\n{0}  #pragma omp simd\n{0}  for (int64_t {1} = 0; {1} < {2}; ++{1}) {{\n"
      "{0}    const int64_t {3} = 0;\n{4}{0}  }}\n{0}}} else {{\n",
      ind, vi, ho, vj, rpre + store_line);
  out += fmt::format("{}for (int64_t {} = 0; {} < {}; ++{}) {{\n", ind, vi, vi, ho, vi);
  if (row_end != wo) {
    out += fmt::format("{}  const int64_t ps_jn = {} * {} + ps_Wv <= {} * {} ? ps_Wv : {};\n", ind, vi, wo,
                       ho, wo, wo);
  }
  out += fmt::format("{}  #pragma omp simd\n{}  for (int64_t {} = 0; {} < {}; ++{}) {{\n", ind, ind, vj, vj,
                     row_end, vj);
  out += rpre + store_line + ind + "  }\n" + ind + "}\n" + ind + "}\n";
  for (int k = 0; k < i; ++k) {
    ind.resize(ind.size() - 2);
    out += ind + "}\n";
  }
  return out + "    } else {\n" + emit_loops(g) + "    }\n  }\n";
}

std::string Lowering::emit_group(const Group& g) {
  if (auto mm = match_contraction(g)) {
    const Stmt& s = stmt(g.stmts.front());
    std::string packed;
    if (mm->classic) {
      packed = emit_contraction(g, *mm);
    } else {
      // Packing B costs about as much per element as the few rows of C that reuse it: with few rows, the
      // stencil nest (vectorized along the last axis, no packing) is faster. Measured on conv2d's standard
      // cases: O = 1, C·KH·KW = 192: 0.36 ms nest, 1.0 ms packed; O = 8, C·KH·KW = 3: 35 µs nest, 74 µs
      // packed; O = 8, C·KH·KW = 9: 2.9× faster packed (docs/tracks.md).
      const std::string k = k_extent(s, *mm);
      const std::string rows = emit_size_expr(*s.var_extent[static_cast<size_t>(mm->row)]);
      packed = fmt::format("  if ({} >= 4 && {} * {} >= 32) {{\n", rows, rows, k) + emit_contraction(g, *mm) +
               "  } else {\n" + emit_loops(g) + "  }\n";
    }
    // A contraction over one term (K = 1, an outer product) is elementwise: the nest with the sum's size the
    // constant 1, vectorized along the last axis, instead of packed panels of one term.
    const Expr* kext = mm->k.size() == 1 ? s.var_extent[static_cast<size_t>(mm->k[0])].get() : nullptr;
    if (!o_.vectorize || !kext || kext->kind != ExprKind::Size) return packed;
    const std::string z = emit_size_expr(*kext);
    one_term_ = z;
    const std::string one = emit_loops(g);
    one_term_.clear();
    return fmt::format(
        "  if ({0} == 1) {{ // a contraction over one term\n  constexpr int64_t {0} = 1;\n{1}  }} else "
        "{{\n{2}  }}\n",
        z, one, packed);
  }
  if (const auto ps = plane_stencil(g)) return emit_plane_stencil(g, *ps);
  return emit_loops(g);
}

// Statement si reads and writes every tensor at its domain's own row-major offset (each read indexes the
// domain variables in order, no padding, its dims the domain's extents) and uses the variables nowhere
// else: an elementwise statement whose nest is one loop over the flattened domain.
bool Lowering::flat_elementwise(int si) const {
  const Stmt& s = stmt(si);
  const size_t n = static_cast<size_t>(s.n_domain);
  if (n < 2 || s.accumulate || te::contains(*s.rhs, ExprKind::Reduce)) return false;
  const auto domain_shaped = [&](int id) {
    if (storage_[static_cast<size_t>(id)] == Storage::RowLocal || tensor(id).dims.size() != n) return false;
    for (size_t k = 0; k < n; ++k) {
      if (dim(id, k) != emit_size_expr(*s.var_extent[k])) return false;
    }
    return true;
  };
  if (!domain_shaped(s.tensor)) return false;
  size_t vars = 0, indexing = 0;
  const bool other = te::any_of(*s.rhs, [&](const Expr& e) {
    if (e.kind == ExprKind::Var) ++vars;
    if (e.kind != ExprKind::Read) return false;
    if (e.padded || e.args.size() != n || !domain_shaped(e.slot)) return true;
    for (size_t k = 0; k < n; ++k) {
      if (e.args[k]->kind != ExprKind::Var || e.args[k]->slot != static_cast<int>(k)) return true;
    }
    indexing += n;
    return false;
  });
  return !other && vars == indexing;
}

// Flat elementwise statement si (flat_elementwise) as one parallel vector loop over its whole domain: no
// per-row remainder (rows of 33 or 127 elements left a scalar tail of up to 15 per row, each an erf in
// gelu's case).
std::string Lowering::emit_flat(int si) {
  const Stmt& s = stmt(si);
  const std::string total = extents_product(s, 0, s.n_domain);
  std::string out =
      fmt::format("  {{ // {}\n    // elementwise over the flattened domain\n", te::print_stmt(s));
  out += fmt::format("    #pragma omp parallel for{} schedule(static){}{}\n", o_.vectorize ? " simd" : "",
                     omp_threads(), work_if(total));
  out += fmt::format("    for (int64_t flat_i = 0; flat_i < {}; ++flat_i) {{\n", total);
  flat_ = "flat_i";
  flat_idx_.clear();
  for (int k = 0; k < s.n_domain; ++k) flat_idx_.push_back(var_id(s.vars[static_cast<size_t>(k)]));
  CppExprEmitter em = emitter(s);
  std::string pre;
  const std::string store_line = assign(si, em, pre, "      ");
  flat_.clear();
  return out + pre + store_line + "    }\n  }\n";
}

// Group g as loop nests (no contraction skeleton).
std::string Lowering::emit_loops(const Group& g) {
  const Stmt& first = stmt(g.stmts.front());
  if (g.stmts.size() == 1 && first.accumulate) return emit_accumulate(g.stmts.front());
  if (g.stmts.size() == 1 && flat_elementwise(g.stmts.front())) {
    // Short rows run flat: each row's scalar remainder (up to 15 elements) costs more there than the
    // nest's long rows gain over the flat loop (silu f32 D=127 N=2048: 105 µs nest, 69 µs flat; D=4096:
    // 2.1 ms nest, 2.3 ms flat).
    const std::string row = emit_size_expr(*first.var_extent[static_cast<size_t>(first.n_domain - 1)]);
    return fmt::format("  if ({} < {}) {{\n", row, kFlatRowsBelow) + emit_flat(g.stmts.front()) +
           "  } else {\n" + emit_nest(g, false) + "  }\n";
  }
  return emit_nest(g);
}

// Group g as loop nests: one statement's nest, or a fused group's parallel loop over its shared axes.
// `unit_rows`: a single statement's nest may have its copy for inner sizes of 1 (false where the flat
// loop already takes them).
std::string Lowering::emit_nest(const Group& g, bool unit_rows) {
  const Stmt& first = stmt(g.stmts.front());
  std::string out;
  if (g.stmts.size() == 1) {
    const Stmt& s = first;
    out += fmt::format("  {{ // {}\n", te::print_stmt(s));
    const int n = s.n_domain;
    if (n == 0) return out + emit_statement_body(g.stmts[0], 0, "    ") + "  }\n";
    // Parallel over all axes but the innermost (collapsed), or over the only axis. The outer loops run in
    // `order` (loop positions, outermost first).
    const int outer = n == 1 ? 1 : n - 1;
    std::vector<int> output_order(static_cast<size_t>(outer));
    for (int k = 0; k < outer; ++k) output_order[static_cast<size_t>(k)] = k;
    const auto loops = [&](bool unit, const std::vector<int>& order, std::string ind) {
      const bool simd_on_parallel =
          unit || (n == 1 && o_.vectorize && !te::contains(*s.rhs, ExprKind::Reduce));
      // Streamed rows: a region of its own, so each thread fences its streamed lines before the barrier.
      const std::string region = ind;
      const std::string fence = unit || n == 1 || !stages_rows(g.stmts[0]) ? "" : thread_fence(region);
      std::string text =
          fence.empty()
              ? fmt::format("{}#pragma omp parallel for{}{} schedule(static){}{}\n", ind,
                            simd_on_parallel ? " simd" : "",
                            outer > 1 ? fmt::format(" collapse({})", outer) : "", omp_threads(),
                            work_if(extents_product(s, 0, n)))
              : fmt::format("{0}#pragma omp parallel{1}{2}\n{0}{{\n{0}#pragma omp for{3} schedule(static)\n",
                            ind, omp_threads(), work_if(extents_product(s, 0, n)),
                            outer > 1 ? fmt::format(" collapse({})", outer) : "");
      for (const int k : order) {
        const std::string v = var_id(s.vars[static_cast<size_t>(k)]);
        text += fmt::format("{}for (int64_t {} = 0; {} < {}; ++{}) {{\n", ind, v, v,
                            emit_size_expr(*s.var_extent[static_cast<size_t>(k)]), v);
        ind += "  ";
      }
      if (n == 1) {
        // The single loop is the parallel one; its body has no loop of its own.
        CppExprEmitter em = emitter(s);
        std::string pre;
        const std::string store_line = assign(g.stmts[0], em, pre, ind);
        text += pre + store_line;
      } else {
        text += emit_statement_body(g.stmts[0], outer, ind);
      }
      for (int k = 0; k < outer; ++k) {
        ind.resize(ind.size() - 2);
        text += ind + "}\n";
      }
      if (!fence.empty()) text += fence + region + "}\n";
      return text;
    };
    // A permuting copy (read_order): the source's order while its second-innermost axis is short enough
    // (kReadOrderMaxStreams), the output's otherwise. Not for unit rows, vectorized across the rows.
    std::vector<int> by_source = read_order(g.stmts[0]);
    if (!by_source.empty()) by_source.pop_back();
    const auto nest = [&](bool unit) {
      if (unit || by_source.empty()) return loops(unit, output_order, "    ");
      const std::string streams = emit_size_expr(*s.var_extent[static_cast<size_t>(by_source.back())]);
      return fmt::format("    if ({} <= {}) {{ // the source's order\n", streams, kReadOrderMaxStreams) +
             loops(false, by_source, "    ") + "    } else {\n" + loops(false, output_order, "    ") +
             "    }\n";
    };
    // One axis and no reduction: already vectorized across it.
    const bool across = n == 1 && !te::contains(*s.rhs, ExprKind::Reduce);
    const bool rows = o_.vectorize && !across && unit_rows;
    const Group alone{{g.stmts[0]}, outer};
    const std::vector<std::string> unit = rows ? unit_row_sizes(alone) : std::vector<std::string>();
    return out + unit_dispatch(unit, rows ? short_rows(alone) : ShortRows{}, nest) + "  }\n";
  }
  // A fused group: one parallel loop over the shared axes, the statements in order inside.
  out += "  { // fused over the leading " + std::to_string(g.prefix) + " axes:\n";
  for (int si : g.stmts) out += "    //   " + te::print_stmt(stmt(si)) + "\n";
  const std::vector<std::string> unit = o_.vectorize ? unit_row_sizes(g) : std::vector<std::string>();
  return out +
         unit_dispatch(unit, o_.vectorize ? short_rows(g) : ShortRows{},
                       [&](bool u) { return emit_fused_rows(g, u); }) +
         "  }\n";
}

// `nest(false)`; or, when there are unit sizes, `nest(true)` where they are all 1 (shadowed by constants
// there, and the statements emitted without vector pragmas of their own); and when there are short sizes
// (Lowering::short_rows), `nest(true)` again where each lies in [1, kShortRowTerms] and there are at least
// kShortRowTerms rows, its reductions in straight-line code (ExprOptions::short_rows); `nest(false)`
// elsewhere.
std::string Lowering::unit_dispatch(const std::vector<std::string>& unit, const ShortRows& shorts,
                                    const std::function<std::string(bool)>& nest) {
  const std::vector<std::string>& short_sizes = shorts.sizes;
  if (unit.empty() && short_sizes.empty()) return nest(false);
  covered_sizes_ = short_sizes;
  if (unit.size() == 1) covered_sizes_.push_back(unit.front());
  std::string out;
  // nest(true) with `mode` set and no vector pragmas of the statements' own, closing the branch.
  const auto straight_rows = [&](bool& mode) {
    const bool vectorize = o_.vectorize;
    o_.vectorize = false;
    mode = true;
    out += nest(true);
    mode = false;
    o_.vectorize = vectorize;
    out += "    } else ";
  };
  if (!unit.empty()) {
    std::string all_one;
    for (const std::string& z : unit) all_one += (all_one.empty() ? "" : " && ") + z + " == 1";
    out += fmt::format("    if ({}) {{ // inner sizes of 1: straight-line rows, vectorized across rows\n",
                       all_one);
    for (const std::string& z : unit) out += fmt::format("    constexpr int64_t {} = 1;\n", z);
    straight_rows(unit_rows_);
  }
  if (!short_sizes.empty()) {
    std::string all_short = fmt::format("{} >= {}", shorts.rows, kShortRowTerms);
    for (const std::string& z : short_sizes)
      all_short += fmt::format(" && {} >= 1 && {} <= {}", z, z, kShortRowTerms);
    out += fmt::format("{}if ({}) {{ // short reductions: straight-line rows, vectorized across rows\n",
                       unit.empty() ? "    " : "", all_short);
    for (const std::string& z : short_sizes) out += short_row_constants(z, kShortRowTerms, "    ");
    straight_rows(short_rows_);
  }
  out += "{\n" + nest(false) + "    }\n";
  covered_sizes_.clear();
  return out;
}

// Group g's short rows (unit_dispatch): one axis of rows, every statement one value per row, not
// accumulated, every reduction short_reducible, and at least one of them an argmax / argmin or a sum, max
// or min of a transcendental function (empty sizes otherwise). Those pay a branch per term or a call's
// scalar code per term in a plain loop: argmax f16 D=13 N=8192 392 -> 51 µs, cross_entropy f32 C=10
// N=1024 56 -> 10 µs. A plain sum or max of reads does not: its straight-line terms are gathers, 12-15%
// slower than the plain loop (reduce_sum f32 D=13 N=4096, bf16 D=13 N=8192); nor do fewer rows than
// kShortRowTerms, which run the 16 terms in scalar code (cross_entropy bf16 C=10 N=7: 1.8x slower).
ShortRows Lowering::short_rows(const Group& g) const {
  ShortRows sr;
  bool worth = false;
  for (int si : g.stmts) {
    const Stmt& s = stmt(si);
    if (s.accumulate || s.n_domain != 1 || g.prefix != 1) return {};
    bool ok = true;
    te::any_of(*s.rhs, [&](const Expr& e) {
      if (e.kind != ExprKind::Reduce) return false;
      if (!short_reducible(e)) {
        ok = false;
        return true;
      }
      worth = worth || e.reduce == te::ReduceOp::ArgMax || e.reduce == te::ReduceOp::ArgMin ||
              te::any_of(*e.args[0], transcendental_call);
      const std::string z = emit_size_expr(*e.rvars[0].extent);
      if (std::find(sr.sizes.begin(), sr.sizes.end(), z) == sr.sizes.end()) sr.sizes.push_back(z);
      return false;
    });
    if (!ok) return {};
  }
  if (!worth) return {};
  sr.rows = emit_size_expr(*stmt(g.stmts[0]).var_extent[0]);
  return sr;
}

// The size symbols of every inner extent of fused group g (its statements' axes past the shared ones, and
// their reductions' variables), when each extent is a plain size symbol or a constant multiple of one
// (rope's row of 2·E) and the row-local buffers span plain size symbols only; empty otherwise. When all of
// them are 1, each row is straight-line code of a constant length (emit_fused_rows, unit): rope with E = 1
// ran its rows of two elements as a vector loop each, 18x slower than across rows.
std::vector<std::string> Lowering::unit_row_sizes(const Group& g) const {
  std::vector<std::string> sizes;
  const auto add = [&](const Expr* e, bool scaled) {
    if (e && scaled && e->kind == ExprKind::Binary && e->op == te::Op::Mul &&
        e->args[0]->kind == ExprKind::Number)
      e = e->args[1].get();
    if (!e || e->kind != ExprKind::Size) return false;
    const std::string z = emit_size_expr(*e);
    if (std::find(sizes.begin(), sizes.end(), z) == sizes.end()) sizes.push_back(z);
    return true;
  };
  for (int si : g.stmts) {
    const Stmt& s = stmt(si);
    if (s.accumulate) return {};
    for (size_t k = static_cast<size_t>(g.prefix); k < s.var_extent.size(); ++k) {
      if (!add(s.var_extent[k].get(), true)) return {};  // null: a reduction with bounds
    }
    if (storage_[static_cast<size_t>(s.tensor)] == Storage::RowLocal) {
      // unit rows declare these buffers of one element per row
      for (size_t k = static_cast<size_t>(g.prefix); k < tensor(s.tensor).dims.size(); ++k) {
        if (!add(tensor(s.tensor).dims[k].get(), false)) return {};
      }
    }
  }
  return sizes;
}

// The parallel loop over fused group g's shared axes, its statements in order inside. `unit` (every inner
// extent 1, the sizes shadowed by constants): the row loop is `omp for simd`, the statements are emitted
// without vector pragmas of their own (their loops run once and fold away) and the row-local buffers are
// declared per row, so the compiler vectorizes across rows. Otherwise, over one shared axis with
// row_block > 1, the parallel loop is over blocks of rows and each statement runs over the block's rows in
// turn (row-locals hold the block; a per-row scalar step is `omp simd` across it).
std::string Lowering::emit_fused_rows(const Group& g, bool unit) {
  // Statements with no axis past the shared ones and no sum (elementwise ones fused over all their axes)
  // have no loop of their own to vectorize: the innermost shared loop is the vectorized one, each point with
  // its own row-locals, as in the copy for inner sizes of 1 (t = x + y; z = t * t - t, bf16 M=7 N=4096:
  // 42 -> 5.7 us). Where that loop is short the plain loops stay (f32 M=4096 N=1: 2x slower vectorized).
  const bool points =
      !unit && o_.vectorize && g.prefix > 1 && std::all_of(g.stmts.begin(), g.stmts.end(), [&](int si) {
        const Stmt& s = stmt(si);
        return s.n_domain == g.prefix && !s.accumulate && !te::contains(*s.rhs, ExprKind::Reduce);
      });
  if (!points) return emit_fused_loops(g, unit, false);
  const std::string row = emit_size_expr(*stmt(g.stmts[0]).var_extent[static_cast<size_t>(g.prefix - 1)]);
  return fmt::format("    if ({} >= {}) {{\n", row, kPointsMinRow) + emit_fused_loops(g, false, true) +
         "    } else {\n" + emit_fused_loops(g, false, false) + "    }\n";
}

// emit_fused_rows' loops: `unit` for the copy for inner sizes of 1, `points` with the innermost shared
// loop vectorized.
std::string Lowering::emit_fused_loops(const Group& g, bool unit, bool points) {
  const Stmt& first = stmt(g.stmts[0]);
  const int block = !unit && g.prefix == 1 ? std::max(1, o_.row_block) : 1;
  std::string out;
  std::vector<std::string> locals;
  std::string work = extents_product(first, 0, g.prefix) + " * (INT64_C(0)";
  for (int si : g.stmts) work += " + " + extents_product(stmt(si), g.prefix, stmt(si).n_domain);
  work += ")";
  out += fmt::format("    #pragma omp parallel{}{}\n    {{\n", omp_threads(), work_if(work));
  for (int si : g.stmts) {
    const int t = stmt(si).tensor;
    if (storage_[static_cast<size_t>(t)] != Storage::RowLocal) continue;
    if (unit || points) {
      locals.push_back(fmt::format("{} rl_{}[1];\n", elem_type(t), tensor(t).name));
    } else {
      out += "      " + row_local(t, static_cast<size_t>(g.prefix), block);
    }
  }
  if (block > 1) {
    // Row blocks: each statement over the block's rows before the next; row-locals hold the whole block.
    const std::string rows = emit_size_expr(*first.var_extent[0]);
    out += fmt::format(
        "      #pragma omp for schedule(static)\n      for (int64_t gb = 0; gb < {0}; gb += {1}) {{\n"
        "        const int64_t ge = gb + {1} < {0} ? gb + {1} : {0};\n",
        rows, block);
    block_row_ = "g0 - gb";
    for (int si : g.stmts) {
      const Stmt& s = stmt(si);
      // A per-row scalar step (no axis of its own, no reduction) vectorizes across the block's rows.
      if (o_.vectorize && s.n_domain == g.prefix && !te::contains(*s.rhs, ExprKind::Reduce))
        out += "        #pragma omp simd\n";
      out +=
          fmt::format("        for (int64_t g0 = gb; g0 < ge; ++g0) {{\n          const int64_t {} = g0;\n",
                      var_id(s.vars[0]));
      out += emit_statement_body(si, g.prefix, "          ");
      out += "        }\n";
    }
    block_row_.clear();
    return out + "      }\n" + thread_fence() + "    }\n";
  }
  const int shared = points ? g.prefix - 1 : g.prefix;  // the loops `omp for` shares out
  out += fmt::format("      #pragma omp for{}{} schedule(static)\n", unit ? " simd" : "",
                     shared > 1 ? fmt::format(" collapse({})", shared) : "");
  std::string ind = "      ";
  for (int k = 0; k < g.prefix; ++k) {
    if (points && k == shared) out += ind + "#pragma omp simd\n";
    out += fmt::format("{}for (int64_t g{} = 0; g{} < {}; ++g{}) {{\n", ind, k, k,
                       emit_size_expr(*first.var_extent[static_cast<size_t>(k)]), k);
    ind += "  ";
  }
  for (const std::string& l : locals) out += ind + l;  // per row, inside the row loop
  for (int si : g.stmts) {
    const Stmt& s = stmt(si);
    out += ind + "{\n";
    for (int k = 0; k < g.prefix; ++k)
      out += fmt::format("{}  const int64_t {} = g{};\n", ind, var_id(s.vars[static_cast<size_t>(k)]), k);
    out += emit_statement_body(si, g.prefix, ind + "  ");
    out += ind + "}\n";
  }
  for (int k = 0; k < g.prefix; ++k) {
    ind.resize(ind.size() - 2);
    out += ind + "}\n";
  }
  return out + thread_fence() + "    }\n";
}

// compute<IO>(in, out, params.., sizes..) in this lowering's types, named `name`: every group's nest, then
// the outputs held in buffers converted into the caller's tensors.
std::string Lowering::emit_compute(const std::string& name, const std::string& args) {
  std::string body =
      fmt::format("template <class IO>\nint {}(const cake_tensor* in, cake_tensor* out{}) {{\n", name, args);
  body += "  using T = typename IO::T;\n  int err = 0;\n";
  for (size_t t = 0; t < c_.tensors.size(); ++t) {
    const TensorInfo& ti = c_.tensors[t];
    const std::string ty = ti.fixed_dtype ? storage_type(*ti.fixed_dtype) : "T";
    if (ti.role == TensorRole::Input) {
      body += fmt::format("  const {}* {} = (const {}*)in[{}].data;\n", ty, tensor_id(ti.name), ty, ti.index);
    } else if (ti.role == TensorRole::Output) {
      body += fmt::format("  {}* {} = ({}*)out[{}].data;\n", ty, tensor_id(ti.name), ty, ti.index);
    }
    if (storage_[t] == Storage::Buffer) {
      body +=
          fmt::format("  {}* b_{} = cake_scratch<{}>({}, (size_t)({}));\n", elem_type(static_cast<int>(t)),
                      ti.name, elem_type(static_cast<int>(t)), scratch_slot_[t], numel(static_cast<int>(t)));
    }
  }
  body += "  (void)err;\n";
  for (const Group& g : groups_) body += emit_group(g);
  // Outputs computed in a buffer: convert into the caller's tensor.
  for (size_t t = 0; t < c_.tensors.size(); ++t) {
    const TensorInfo& ti = c_.tensors[t];
    if (ti.role != TensorRole::Output || storage_[t] != Storage::Buffer) continue;
    const std::string n = numel(static_cast<int>(t));
    body += fmt::format(
        "  // {}: from its buffer to the output dtype\n  #pragma omp parallel for simd schedule(static){}{}\n"
        "  for (int64_t i = 0; i < {}; ++i) {}\n",
        ti.name, omp_threads(), work_if(n), n, store(static_cast<int>(t), "i", "b_" + ti.name + "[i]"));
  }
  // Streamed rows (staged_row) leave their last lines in write-combining buffers: fence them before the
  // caller reads the outputs.
  if (o_.stream_elem_bytes > 0) body += "  cake_stream_fence();\n";
  body += "  return err;\n}\n\n";
  // Shape-regime dispatch: below o_.serial_below elements of I/O the same nest runs without any OpenMP
  // region (entering one costs far more than a small case's work, even when its if() clause says serial).
  if (o_.serial_below > 0) {
    body += "// The same computation without OpenMP regions, for cases below the serial threshold.\n" +
            serial_copy(body, name);
  }
  return body;
}

std::string Lowering::run(const std::string& header) {
  const Contract& k = c_.contract;
  std::string src = header;
  src +=
      "#include <algorithm>\n#include <cmath>\n#include <cstdint>\n#include <cstring>\n#include "
      "<type_traits>\n#include <vector>\n\n#include <omp.h>\n\n";
  src += "#include \"cake_prelude.h\"\n#include \"cake_math.h\"\n#include \"cake_gemm.h\"\n\nnamespace {\n\n";
  src += "// Loads and stores of the operator dtype, converting to and from the compute type R.\n";
  // put: a staged block of f32 values out to T (staged_row).
  const auto io_struct = [](const char* name, const char* src_t, const char* t, const std::string& ld,
                            const std::string& st, const char* put) {
    return fmt::format(
        "template <class R>\nstruct {} {{\n  using Src = {};\n  using T = {};\n"
        "  static inline R ld(const T* p, int64_t i) {{ return (R){}; }}\n"
        "  static inline void st(T* p, int64_t i, R v) {{ p[i] = {}; }}\n"
        "  static inline void put(T* p, const float* s, int64_t n, bool nt) {{ {}(p, s, n, nt); }}\n}};\n",
        name, src_t, t, ld, st, put);
  };
  src += io_struct("io_f32", "cake_gemm::src_f32", "float", "p[i]", "(float)v", "cake_put_f32");
  src += io_struct("io_bf16", "cake_gemm::src_bf16", "uint16_t", "cake_bf16_to_f32(p[i])",
                   "cake_f32_to_bf16((float)v)", "cake_put_bf16");
  src += io_struct("io_f16", "cake_gemm::src_f16", "uint16_t", fmt::format("{}(p[i])", f16_load()),
                   fmt::format("{}((float)v)", f16_store()), "cake_put_f16") +
         "\n";
  src +=
      "// Scratch memory per calling thread, kept across calls: fresh pages cost far more than the kernel.\n";
  src +=
      "template <class E>\nE* cake_scratch(int slot, size_t n) {\n  thread_local std::vector<std::vector<E>> "
      "bufs;\n"
      "  if (bufs.size() <= (size_t)slot) bufs.resize((size_t)slot + 1);\n"
      "  if (bufs[(size_t)slot].size() < n) bufs[(size_t)slot].resize(n);\n  return "
      "bufs[(size_t)slot].data();\n}\n\n";
  // compute<IO>(...)
  std::string args, call_args;
  for (const ParamDecl& p : k.params) {
    args += ", const double " + param_id(p.name);
    call_args += ", " + param_id(p.name);
  }
  for (const SizeInfo& z : c_.sizes) {
    args += ", const int64_t " + size_id(z.name);
    call_args += ", " + size_id(z.name);
  }
  const std::string real = real_;
  const int scratch = next_scratch_;  // the copy below reuses the slots: the two never run at once
  const std::string body = emit_compute("compute", args);
  src += body;
  // The bf16 and f16 instantiations in f32 (o_.bf16_f32, o_.f16_f32): their I/O converts to float, and
  // their body is a copy emitted in f32 types, unless that copy is the same text (the types only in the
  // I/O: compute<IO> serves both). The copy's nests repeat the OpenMP regions' work terms.
  const bool wide = real_ != "float" || acc_ != "float";
  const bool bf16_f32 = o_.bf16_f32 && wide && k.has_dtype(DType::bf16);
  const bool f16_f32 = o_.f16_f32 && wide && k.has_dtype(DType::f16);
  bool f32_copy = false;
  if (bf16_f32 || f16_f32) {
    const std::string acc = acc_;
    const size_t regions = region_work_.size();
    real_ = acc_ = "float";
    next_scratch_ = scratch;
    const std::string copy = emit_compute("compute_f32", args);
    real_ = real;
    acc_ = acc;
    region_work_.resize(regions);
    std::string renamed = copy;
    for (size_t at = renamed.find("compute_f32"); at != std::string::npos;
         at = renamed.find("compute_f32", at))
      renamed.replace(at, 11, "compute");
    f32_copy = renamed != body;
    if (f32_copy) src += "// The 16-bit instantiations' copy, computed and summed in f32.\n" + copy;
  }
  src += "}  // namespace\n\n";
  src +=
      "extern \"C\" __attribute__((visibility(\"default\")))\nint cake_run(const cake_tensor* in, int n_in, "
      "cake_tensor* out, "
      "int n_out, const double* params, int n_params) {\n";
  src += emit_abi_prologue(c_);
  if (o_.serial_below > 0) {
    std::string n = "INT64_C(0)";
    for (size_t t = 0; t < c_.tensors.size(); ++t) {
      const TensorInfo& ti = c_.tensors[t];
      if (ti.role != TensorRole::Input && ti.role != TensorRole::Output) continue;
      n += " + " + numel(static_cast<int>(t));
    }
    src += fmt::format("  const int64_t io_elements = {};\n", n);
    // Every region below its parallel threshold (a gather from a large table, an elementwise case of a
    // few thousand elements): entering even a one-thread region costs about 1.5 µs, so the serial copy runs.
    std::string serial = fmt::format("io_elements < INT64_C({})", o_.serial_below);
    if (!region_work_.empty() && o_.parallel_min_work > 0) {
      serial += " || (true";
      for (const std::string& w : region_work_)
        serial += fmt::format(" && ({}) < INT64_C({})", w, o_.parallel_min_work);
      serial += ")";
    }
    src += fmt::format("  const bool serial = {};\n", serial);
  }
  src += "  switch (op_dtype) {\n";
  for (DType d : k.dtypes) {
    const bool narrow = (bf16_f32 && d == DType::bf16) || (f16_f32 && d == DType::f16);
    const std::string fn = narrow && f32_copy ? "compute_f32" : "compute",
                      io = fmt::format("{}<{}>",
                                       d == DType::bf16  ? "io_bf16"
                                       : d == DType::f16 ? "io_f16"
                                                         : "io_f32",
                                       narrow ? "float" : real);
    if (o_.serial_below > 0) {
      src += fmt::format("    case {}: return serial ? {}_serial<{}>(in, out{}) : {}<{}>(in, out{});\n",
                         static_cast<int>(d), fn, io, call_args, fn, io, call_args);
    } else {
      src += fmt::format("    case {}: return {}<{}>(in, out{});\n", static_cast<int>(d), fn, io, call_args);
    }
  }
  src += "    default: return CAKE_ERR_DTYPE;\n  }\n}\n";
  return src;
}

}  // namespace

std::string lower_loop_nest(const CheckedContract& c, const LoopNestOptions& o, const std::string& header) {
  return Lowering(c, o).run(header);
}

bool has_plane_stencil(const CheckedContract& c) {
  return std::any_of(c.contract.compute.begin(), c.contract.compute.end(),
                     [](const te::Stmt& s) { return match_plane_stencil(s).has_value(); });
}

}  // namespace cake::tracks::simd
