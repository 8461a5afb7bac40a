// L1 of the router: the eight-feature structural profile of a checked contract and its
// difficulty (DESIGN §4). A pure function of the checked TE; versioned.
#pragma once

#include <array>
#include <nlohmann/json.hpp>
#include <string>

#include "contract/contract.h"

namespace cake::profile {

inline constexpr int kSchemaVersion = 1;

enum Feature : int {
  Contraction = 0,
  Reduction,
  Tiling,
  Fusion,
  DTypeSpread,
  DataMovement,
  SchedulingDepth,
  Blocking,
  kNumFeatures
};

std::string_view feature_name(int f);

struct Profile {
  std::array<int, kNumFeatures> x{};          // each 0..3
  int difficulty = 1;                         // 1..4: the contract's level, or derived_difficulty(x)
  bool difficulty_derived = false;            // the contract gives no level
  std::array<std::string, kNumFeatures> why;  // one phrase per feature: what decided it
  int version = kSchemaVersion;
};

Profile profile_of(const CheckedContract& c);

// The difficulty of a contract that gives no level, from its features, after the CAKE-Bench levels
// (DESIGN §11): 4 for chained contractions or a row reduction feeding a gather (attention, cross
// entropy); 3 for other contractions and windows, scatters, quantized I/O, and arithmetic over four or more
// axes with operand reuse (matmul, conv2d, pooling, scatter_add, quantize_int8, rope); 2 for reductions,
// gathers, multi-pass schedules and copies over four or more axes (softmax, argmax, embedding, permute);
// 1 for the rest (elementwise maps). On the 26 bench operators it gives each one's level but
// add_rms_norm's (2, not 3: its features equal rms_norm's).
int derived_difficulty(const std::array<int, kNumFeatures>& x);

// The contract's level, or the difficulty its profile derives: what bench tables group by.
int difficulty_of(const CheckedContract& c);

nlohmann::json to_json(const Profile& p);
std::string to_text(const Profile& p);  // "contraction=0 reduction=1 ... difficulty=2"

}  // namespace cake::profile
