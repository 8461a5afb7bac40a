// CAKE-Bench case sets (standard / hidden) from a contract's shape and value rules, and the
// deterministic materialisation of each case's inputs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "contract/contract.h"
#include "core/tensor.h"

namespace cake::cases {

enum class Set { Standard, Hidden };
std::string_view set_name(Set s);

struct Case {
  Set set = Set::Standard;
  int index = 0;                        // position in its set
  DType dtype = DType::f32;             // the operator dtype of this case
  std::map<std::string, int64_t> free;  // free size symbols
  std::vector<int64_t> sizes;           // every size symbol by slot (free and derived)
  std::vector<double> params;           // in the contract's params order
  uint64_t seed = 0;                    // drives the input values
  std::string id() const;               // "standard/3"
  std::string describe() const;         // "f32 N=64 D=127"
};

// The case set; count, seed and shapes from the contract (standard 20 / hidden 80 by default).
// Deterministic: the same contract gives the same cases on every machine.
std::vector<Case> make_cases(const CheckedContract& c, Set set);

// Input tensors of a case, in the contract's inputs order, values from its `values` rules
// (default normal(0, 1) for floats), rounded to each tensor's dtype.
std::vector<Tensor> make_inputs(const CheckedContract& c, const Case& k);

// Output tensors of a case (zero-filled), in the contract's outputs order.
std::vector<Tensor> make_outputs(const CheckedContract& c, const Case& k);

// One case outside the sets (benchmarks, a user's own shape): every free size must be given.
Case make_case(const CheckedContract& c, const std::map<std::string, int64_t>& free, DType dtype,
               uint64_t seed = 1);

// The scalars a kernel receives (core/kernel_abi.h): the case's params, then every free size symbol in
// CheckedContract::sizes order.
std::vector<double> kernel_params(const CheckedContract& c, const Case& k);

// Total bytes of inputs and outputs, and a flop estimate (reductions count body ops per point).
double case_bytes(const CheckedContract& c, const Case& k);
double case_flops(const CheckedContract& c, const Case& k);

}  // namespace cake::cases
