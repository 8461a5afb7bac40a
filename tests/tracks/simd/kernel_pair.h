// Support for the simd tests that build one contract twice, with different knobs, and compare the two
// kernels' outputs bit for bit (interchange_test, unit_rows_test, short_rows_test, overlapped_tail_test,
// row_blocks_test, in_place_test, implicit_gemm_test), or that
// edit a bench contract (bf16_dot_test, in_place_test).
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "build/build_service.h"
#include "build/kernel.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "core/paths.h"
#include "core/tensor.h"
#include "target/machine.h"
#include "tracks/track.h"

namespace cake::testing_simd {

using Edits = std::vector<std::pair<std::string, std::string>>;

// The contract in `file` with the first occurrence of each `from` replaced by its `to` (each must occur).
inline CheckedContract contract_with(const std::string& file, const Edits& edits) {
  std::string yaml = read_file(file).value_or("");
  for (const auto& [from, to] : edits) {
    const size_t at = yaml.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) yaml.replace(at, from.size(), to);
  }
  return check_contract(load_contract_text(yaml, file));
}

// The simd lowering of c with `knobs` (the rest at their defaults).
inline tracks::Artifact lower_simd(const CheckedContract& c, const nlohmann::json& knobs) {
  return tracks::find_track("simd")->lower(c, target::describe_machine(), tracks::Knobs::from_json(knobs));
}

// lower_simd, built; its source in *source.
inline build::BuildResult lower_and_build(const CheckedContract& c, const nlohmann::json& knobs,
                                          std::string* source) {
  const tracks::Artifact a = lower_simd(c, knobs);
  *source = a.files.front().text;
  return build::build(a);
}

// c lowered with `vectorize` on and off and built: the pair unit_rows_test, short_rows_test and
// overlapped_tail_test compare bit for bit.
struct VectorizePair {
  build::BuildResult on, off;
  std::string on_src, off_src;
};
inline VectorizePair build_vectorize_pair(const CheckedContract& c) {
  VectorizePair p;
  p.on = lower_and_build(c, {{"vectorize", "true"}}, &p.on_src);
  p.off = lower_and_build(c, {{"vectorize", "false"}}, &p.off_src);
  return p;
}
// Whether both kernels of p built and only the vectorized source carries `marker` (the path under test).
inline ::testing::AssertionResult built_with_path(const VectorizePair& p, const std::string& marker) {
  for (const build::BuildResult* r : {&p.on, &p.off}) {
    if (!r->ok()) return ::testing::AssertionFailure() << r->failure << "\n" << r->log;
  }
  if (p.on_src.find(marker) == std::string::npos)
    return ::testing::AssertionFailure() << "the vectorized kernel lacks \"" << marker << "\"";
  if (p.off_src.find(marker) != std::string::npos)
    return ::testing::AssertionFailure() << "the unvectorized kernel has \"" << marker << "\"";
  return ::testing::AssertionSuccess();
}

// Element i of a and b: equal bits, or both NaN (payloads may differ).
inline bool same_bits(const Tensor& a, const Tensor& b, int64_t i) {
  const double x = a.get(i), y = b.get(i);
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  return std::bit_cast<uint64_t>(x) == std::bit_cast<uint64_t>(y);
}

// Runs kernels a and b on inputs `in` of case k: empty when every output element has the same bits, else
// where the first differs.
inline std::string difference_on(const build::Kernel& a, const build::Kernel& b, const CheckedContract& c,
                                 const cases::Case& k, const std::vector<Tensor>& in) {
  std::vector<Tensor> out_a = cases::make_outputs(c, k), out_b = cases::make_outputs(c, k);
  const std::vector<double> params = cases::kernel_params(c, k);
  if (const int e = a.run(in, out_a, params); e != 0)
    return k.describe() + ": the first kernel returned " + std::to_string(e);
  if (const int e = b.run(in, out_b, params); e != 0)
    return k.describe() + ": the second kernel returned " + std::to_string(e);
  for (size_t t = 0; t < out_a.size(); ++t) {
    for (int64_t i = 0; i < out_a[t].numel(); ++i) {
      if (!same_bits(out_a[t], out_b[t], i)) {
        return k.describe() + " output " + std::to_string(t) + " element " + std::to_string(i) + ": " +
               std::to_string(out_a[t].get(i)) + " vs " + std::to_string(out_b[t].get(i));
      }
    }
  }
  return "";
}

// difference_on case k's inputs with NaNs and -infs sprinkled into its first float input (they must
// propagate alike).
inline std::string first_difference(const build::Kernel& a, const build::Kernel& b, const CheckedContract& c,
                                    const cases::Case& k) {
  std::vector<Tensor> in = cases::make_inputs(c, k);
  Tensor& x = in[in[0].dtype() == DType::i64 ? 1 : 0];
  for (int64_t i = 3; i < x.numel(); i += 101) x.set(i, std::nan(""));
  for (int64_t i = 5; i < x.numel(); i += 211) x.set(i, -INFINITY);
  return difference_on(a, b, c, k, in);
}

// difference_on small-integer inputs: every product and partial sum is exact, so any order of the sums
// gives the same bits.
inline std::string first_exact_difference(const build::Kernel& a, const build::Kernel& b,
                                          const CheckedContract& c, const cases::Case& k) {
  std::vector<Tensor> in = cases::make_inputs(c, k);
  for (size_t t = 0; t < in.size(); ++t) {
    for (int64_t i = 0; i < in[t].numel(); ++i)
      in[t].set(i, static_cast<double>((i * 7 + static_cast<int64_t>(t)) % 9) - 4);
  }
  return difference_on(a, b, c, k, in);
}

// Lines of the library's disassembly (objdump -d) for which `counts` holds; -1 where objdump cannot run.
inline int disassembly_lines(const std::filesystem::path& library,
                             const std::function<bool(const std::string&)>& counts) {
  const std::string cmd = "objdump -d --no-show-raw-insn '" + library.string() + "' 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  if (!p) return -1;
  int lines = 0, counted = 0;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), p.get())) {
    ++lines;
    if (counts(buf.data())) ++counted;
  }
  return lines == 0 ? -1 : counted;
}

}  // namespace cake::testing_simd
