// The reference interpreter: evaluates any checked contract on concrete tensors, accumulating
// in f64 and rounding to each output's dtype once, at the end. The source of truth; it shares
// no code with any track.
#pragma once

#include <vector>

#include "cases/cases.h"
#include "contract/contract.h"
#include "core/tensor.h"

namespace cake::reference {

// Runs the contract for one case. `inputs` in the contract's inputs order; returns the outputs
// in its outputs order, in their dtypes. Throws cake::Error on a data-dependent index out of
// range (naming the tensor, the value and the TE position).
std::vector<Tensor> run(const CheckedContract& c, const cases::Case& k, const std::vector<Tensor>& inputs);

// As run(), on the case's own inputs (make_inputs), served from the on-disk cache
// (cache_dir()/reference/<contract hash>/<case key>.bin) when present.
std::vector<Tensor> cached_outputs(const CheckedContract& c, const cases::Case& k);

}  // namespace cake::reference
