// The operator contract (DESIGN §3): what the YAML file says (Contract) and what the checker
// proves about it (CheckedContract: resolved names, tensor table, sizes, execution order).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "contract/ast.h"
#include "core/dtype.h"

namespace cake {

struct TensorDecl {
  std::string name;
  std::optional<DType> fixed_dtype;  // `ids: i32[B, K]`; otherwise the operator dtype
  std::vector<te::ExprPtr> dims;     // size expressions
  te::Pos pos;
};

struct ParamDecl {
  std::string name;
  double value = 0;
  te::Pos pos;
};

struct SizeDef {  // sizes: { Ho: (H + 2*P - R) / S + 1 }
  std::string name;
  te::ExprPtr expr;
  te::Pos pos;
};

// How one free size symbol varies in a case set: a list of values, or a closed range lo..hi.
struct ShapeRule {
  std::string symbol;
  std::vector<int64_t> values;  // list form
  bool is_range = false;
  int64_t lo = 0, hi = 0;       // range form (inclusive)
  te::Pos pos;
};

struct CaseSetRule {
  int count = 0;
  uint64_t seed = 0;
  std::vector<ShapeRule> shapes;
  te::Pos pos;
};

// values: { x: normal(0, 1), ids: randint(0, V) } — arguments are size/param expressions.
enum class Distribution { Normal, Uniform, RandInt, Bernoulli, Constant };
struct ValueRule {
  std::string tensor;
  Distribution dist = Distribution::Normal;
  std::vector<te::ExprPtr> args;
  te::Pos pos;
};

struct Limits {
  double max_bytes = 256.0 * (1 << 20);  // per case: all inputs and outputs together
  double max_flops = 4.0e9;              // per case: keeps the reference interpreter practical
};

struct Contract {
  std::string file;    // path as given
  std::string source;  // the file's text
  std::string name;
  int level = 0;  // 1..4 as written; 0: not given (profile::difficulty_of derives one)
  std::string summary;
  std::vector<DType> dtypes;
  std::vector<TensorDecl> inputs, outputs;
  std::vector<ParamDecl> params;
  std::vector<SizeDef> sizes;
  std::vector<te::ExprPtr> constraints;  // boolean size expressions every case satisfies
  std::vector<te::Stmt> compute;
  te::Pos compute_pos;
  CaseSetRule standard, hidden;
  std::vector<ValueRule> values;
  Limits limits;
  std::string baseline = "torch";

  bool has_dtype(DType d) const;  // whether `dtypes` lists d
};

enum class TensorRole { Input, Output, Intermediate };

struct TensorInfo {
  std::string name;
  TensorRole role = TensorRole::Input;
  std::optional<DType> fixed_dtype;  // nullopt: the operator dtype of the case
  te::Type elem = te::Type::Float;   // intermediates: the type their definition computes
  std::vector<te::ExprPtr> dims;     // size expressions
  int index = 0;                     // position among inputs / outputs (ABI order)
  bool index_only = false;           // read only inside index positions (ids, offsets)
  DType dtype_for(DType op_dtype) const { return fixed_dtype.value_or(op_dtype); }
};

struct SizeInfo {
  std::string name;
  bool free = true;   // set per case by the case rules; otherwise derived
  te::ExprPtr expr;   // derived: its definition (sizes slots resolved)
};

struct CheckedContract {
  Contract contract;              // with every name resolved in place
  std::vector<SizeInfo> sizes;    // free symbols first, then derived in evaluation order
  std::vector<TensorInfo> tensors;  // inputs, outputs, then intermediates
  std::vector<int> order;         // statement indices in execution order
  std::string hash;               // content hash of the canonical contract text

  const TensorInfo* find_tensor(const std::string& name) const;
  int size_slot(const std::string& name) const;  // -1 if absent
  std::vector<int> input_ids() const;
  std::vector<int> output_ids() const;
};

// Loads and parses a contract file (YAML + TE). Throws ContractError on any malformed input.
Contract load_contract_file(const std::string& path);
Contract load_contract_text(const std::string& text, const std::string& file = "<input>");

// Resolves names, infers shapes and types, orders statements and checks index bounds.
// Throws ContractError naming file:line:col.
CheckedContract check_contract(Contract c);

inline CheckedContract load_and_check(const std::string& path) {
  return check_contract(load_contract_file(path));
}

// Evaluates integer size expressions for a concrete assignment of the free symbols; throws
// cake::Error on a division by zero. Values are indexed by size slot.
std::vector<int64_t> evaluate_sizes(const CheckedContract& c, const std::map<std::string, int64_t>& free);
int64_t eval_size_expr(const te::Expr& e, const std::vector<int64_t>& sizes);
std::vector<int64_t> tensor_shape(const CheckedContract& c, int tensor, const std::vector<int64_t>& sizes);

}  // namespace cake
