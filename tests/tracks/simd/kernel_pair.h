// Support for the simd tests that build one contract twice, with different knobs, and compare the two
// kernels' outputs bit for bit (interchange_test, unit_rows_test).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

#include "build/build_service.h"
#include "contract/contract.h"
#include "core/tensor.h"
#include "target/machine.h"
#include "tracks/track.h"

namespace cake::testing_simd {

// The simd lowering of c with `knobs` (the rest at their defaults), built; its source in *source.
inline build::BuildResult lower_and_build(const CheckedContract& c, const nlohmann::json& knobs,
                                          std::string* source) {
  const tracks::Artifact a =
      tracks::find_track("simd")->lower(c, target::describe_machine(), tracks::Knobs::from_json(knobs));
  *source = a.files.front().text;
  return build::build(a);
}

// Element i of a and b: equal bits, or both NaN (payloads may differ).
inline bool same_bits(const Tensor& a, const Tensor& b, int64_t i) {
  const double x = a.get(i), y = b.get(i);
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  return std::bit_cast<uint64_t>(x) == std::bit_cast<uint64_t>(y);
}

}  // namespace cake::testing_simd
