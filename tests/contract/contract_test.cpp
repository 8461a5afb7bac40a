// Correctness of the contract loader, TE parser, checker and printer on well-formed input.
#include <gtest/gtest.h>

#include <filesystem>

#include "contract/contract.h"
#include "contract/parser.h"
#include "contract/printer.h"

namespace cake {
namespace {

const char* kRmsNorm = R"(name: rms_norm
level: 2
summary: Root-mean-square normalization over the last axis with a learned scale.
dtypes: [f32, bf16, f16]
inputs:  { x: [N, D], w: [D] }
outputs: { y: [N, D] }
params:  { eps: 1.0e-6 }
compute: |
  y[n, d] = x[n, d] * r[n] * w[d]
  r[n]    = rsqrt(ss[n] / D + eps)
  ss[n]   = sum(d: x[n, d] * x[n, d])
cases:
  standard: { count: 20, shapes: { N: [1, 7, 64, 1000, 4096], D: [64, 127, 1024, 4096] } }
  hidden:   { count: 80, shapes: { N: 1..8192, D: 1..8192 }, seed: 7 }
  values:   { x: normal(0, 1), w: uniform(0.5, 1.5) }
baseline: torch
)";

std::vector<std::filesystem::path> bench_ops() {
  std::vector<std::filesystem::path> r;
  for (const auto& e : std::filesystem::directory_iterator(std::string(CAKE_SOURCE_DIR) + "/bench/ops"))
    if (e.path().extension() == ".yaml") r.push_back(e.path());
  std::sort(r.begin(), r.end());
  return r;
}

TEST(Contract, DesignExampleChecks) {
  CheckedContract c = check_contract(load_contract_text(kRmsNorm, "rms_norm.yaml"));
  EXPECT_EQ(c.contract.name, "rms_norm");
  ASSERT_EQ(c.contract.dtypes.size(), 3u);
  EXPECT_EQ(c.contract.dtypes[1], DType::bf16);
  // Statements are ordered by dependency, not by their textual order.
  ASSERT_EQ(c.order.size(), 3u);
  EXPECT_EQ(c.contract.compute[static_cast<size_t>(c.order[0])].target, "ss");
  EXPECT_EQ(c.contract.compute[static_cast<size_t>(c.order[2])].target, "y");
  // Intermediates get inferred shapes.
  const TensorInfo* ss = c.find_tensor("ss");
  ASSERT_NE(ss, nullptr);
  EXPECT_EQ(ss->role, TensorRole::Intermediate);
  ASSERT_EQ(ss->dims.size(), 1u);
  EXPECT_EQ(te::print_expr(*ss->dims[0]), "N");
  EXPECT_EQ(c.contract.standard.count, 20);
  EXPECT_EQ(c.contract.hidden.seed, 7u);
  EXPECT_EQ(c.contract.params[0].value, 1.0e-6);
  // Unquoted distributions in a flow map keep their commas: uniform(0.5, 1.5) has two arguments.
  ASSERT_EQ(c.contract.values.size(), 2u);
  EXPECT_EQ(c.contract.values[1].tensor, "w");
  EXPECT_EQ(c.contract.values[1].dist, Distribution::Uniform);
  ASSERT_EQ(c.contract.values[1].args.size(), 2u);
  EXPECT_EQ(c.contract.values[1].args[1]->number, 1.5);
}

TEST(Contract, TEPositionsAreFilePositions) {
  // "ss" of the third compute line: file line 11, column 3.
  CheckedContract c = check_contract(load_contract_text(kRmsNorm, "rms_norm.yaml"));
  const te::Stmt& s = c.contract.compute[2];
  EXPECT_EQ(s.target, "ss");
  EXPECT_EQ(s.pos.line, 11);
  EXPECT_EQ(s.pos.col, 3);
  EXPECT_EQ(s.rhs->pos.line, 11);
  EXPECT_EQ(s.rhs->pos.col, 13);  // 'sum'
}

TEST(Contract, HashIgnoresFormattingButNotMeaning) {
  CheckedContract a = check_contract(load_contract_text(kRmsNorm));
  std::string spaced = kRmsNorm;
  spaced.replace(spaced.find("x[n, d] * x[n, d]"), 17, "x[n,d]*x[n,d]");
  CheckedContract b = check_contract(load_contract_text(spaced));
  EXPECT_EQ(a.hash, b.hash);
  std::string changed = kRmsNorm;
  changed.replace(changed.find("1.0e-6"), 6, "1.0e-5");
  CheckedContract d = check_contract(load_contract_text(changed));
  EXPECT_NE(a.hash, d.hash);
}

// `level` is optional (DESIGN §4: the profile derives a difficulty without it); a contract without it
// prints without it and round-trips, and differs in hash from the one with it.
TEST(Contract, TheLevelMayBeLeftOut) {
  std::string yaml = kRmsNorm;
  yaml.erase(yaml.find("level: 2\n"), 9);
  const CheckedContract c = check_contract(load_contract_text(yaml, "no_level.yaml"));
  EXPECT_EQ(c.contract.level, 0);
  const std::string printed = print_contract(c.contract);
  EXPECT_EQ(printed.find("level"), std::string::npos) << printed;
  const CheckedContract again = check_contract(load_contract_text(printed, "printed.yaml"));
  EXPECT_EQ(again.hash, c.hash);
  EXPECT_NE(check_contract(load_contract_text(kRmsNorm, "rms_norm.yaml")).hash, c.hash);
}

TEST(Contract, EveryBenchOperatorChecksAndRoundTrips) {
  auto files = bench_ops();
  ASSERT_GE(files.size(), 26u);
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    CheckedContract c = load_and_check(f.string());
    std::string printed = print_contract(c.contract);
    CheckedContract again = check_contract(load_contract_text(printed, "printed.yaml"));
    EXPECT_EQ(again.hash, c.hash) << printed;
    EXPECT_EQ(print_contract(again.contract), printed);
  }
}

te::ExprPtr parse(const std::string& s) {
  return te::parse_expression(s, SourceMap::single("t", {1, 1}));
}

TEST(TE, PrecedenceAndAssociativity) {
  EXPECT_EQ(te::print_expr(*parse("a - (b - c)")), "a - (b - c)");
  EXPECT_EQ(te::print_expr(*parse("(a - b) - c")), "a - b - c");
  EXPECT_EQ(te::print_expr(*parse("a * (b + c)")), "a * (b + c)");
  EXPECT_EQ(te::print_expr(*parse("(a * b) + c")), "a * b + c");
  EXPECT_EQ(te::print_expr(*parse("a < b && c || !d")), "a < b && c || !d");
  EXPECT_EQ(te::print_expr(*parse("-(a + b)")), "-(a + b)");
  EXPECT_EQ(te::print_expr(*parse("a / (b / c)")), "a / (b / c)");
  EXPECT_EQ(te::print_expr(*parse("x?(-inf)[i * 2 + r - 1]")), "x?(-inf)[i * 2 + r - 1]");
  EXPECT_EQ(te::print_expr(*parse("sum(k in 0..i + 1, l: x[k, l])")), "sum(k in 0..i + 1, l: x[k, l])");
  EXPECT_EQ(te::print_expr(*parse("max(a, b)")), "max(a, b)");
  EXPECT_EQ(te::print_expr(*parse("max(k: x[k])")), "max(k: x[k])");
  EXPECT_EQ(te::print_expr(*parse("cast<i8>(round(x[i] / 0.1))")), "cast<i8>(round(x[i] / 0.1))");
}

TEST(TE, NumbersPrintExactly) {
  for (const char* s :
       {"0.1", "1e-06", "3.0", "7", "0.7071067811865476", "1.0000000000000002", "inf", "-inf"}) {
    te::ExprPtr e = parse(s);
    te::ExprPtr again = parse(te::print_expr(*e));
    EXPECT_EQ(again->number, e->number) << s;
    EXPECT_EQ(again->int_literal, e->int_literal) << s;
  }
  EXPECT_TRUE(parse("7")->int_literal);
  EXPECT_FALSE(parse("7.0")->int_literal);
  EXPECT_FALSE(parse("7e0")->int_literal);
}

TEST(TE, RangeLexesAfterInteger) {
  te::ExprPtr e = parse("sum(k in 0..5: x[k])");
  ASSERT_EQ(e->rvars.size(), 1u);
  EXPECT_EQ(e->rvars[0].lo->number, 0);
  EXPECT_EQ(e->rvars[0].hi->number, 5);
}

TEST(Contract, DerivedSizesEvaluateWithFloorDivision) {
  std::string text = R"(name: conv1d
level: 3
dtypes: [f32]
inputs: { x: [L], w: [R] }
outputs: { y: [Lo] }
sizes: { Lo: (L + 2*P - R) / S + 1 }
constraints: [L + 2*P >= R]
compute: |
  y[i] = sum(r: w[r] * x?[i*S + r - P])
cases:
  standard: { shapes: { L: [5, 9], R: [3], S: [2], P: [0, 1] } }
)";
  CheckedContract c = check_contract(load_contract_text(text));
  auto sz = evaluate_sizes(c, {{"L", 9}, {"R", 3}, {"S", 2}, {"P", 0}});
  EXPECT_EQ(sz[static_cast<size_t>(c.size_slot("Lo"))], 4);  // (9 - 3) / 2 + 1
  sz = evaluate_sizes(c, {{"L", 10}, {"R", 3}, {"S", 2}, {"P", 0}});
  EXPECT_EQ(sz[static_cast<size_t>(c.size_slot("Lo"))], 4);  // floor(7 / 2) + 1
  auto shape = tensor_shape(c, c.output_ids()[0], sz);
  EXPECT_EQ(shape, (std::vector<int64_t>{4}));
}

TEST(Contract, ScatterDeclaresItsDomainByUse) {
  std::string text = R"(name: scatter_add
level: 3
dtypes: [f32]
inputs: { src: [N, D], idx: "i64[N]" }
outputs: { out: [M, D] }
compute: |
  out[idx[i], j] += src[i, j]
cases:
  standard: { shapes: { N: [1, 9], D: [3], M: [4] } }
  values: { idx: randint(0, M) }
)";
  CheckedContract c = check_contract(load_contract_text(text));
  const te::Stmt& s = c.contract.compute[0];
  ASSERT_EQ(s.n_domain, 2);
  EXPECT_EQ(s.vars[0], "i");
  EXPECT_EQ(te::print_expr(*s.var_extent[0]), "N");
  EXPECT_EQ(te::print_expr(*s.var_extent[1]), "D");
  EXPECT_TRUE(c.find_tensor("idx")->index_only);
}

}  // namespace
}  // namespace cake
