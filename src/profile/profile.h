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
  std::array<int, kNumFeatures> x{};  // each 0..3
  int difficulty = 1;                 // 1..4
  std::array<std::string, kNumFeatures> why;  // one phrase per feature: what decided it
  int version = kSchemaVersion;
};

Profile profile_of(const CheckedContract& c);
nlohmann::json to_json(const Profile& p);
std::string to_text(const Profile& p);  // "contraction=0 reduction=1 ... difficulty=2"

}  // namespace cake::profile
