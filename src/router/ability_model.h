// L2 of the router (DESIGN §7, Eq. 3): one ability set per track, fitted from measured outcomes by
// regularized logistic regression on score/100, predicting a track's normalized score on an operator
//   ŝ_t(x) = σ(a_t + Σ_k θ_t,k · x̃_k − b_t · d̃)
// with x̃ the eight-feature profile and d̃ the difficulty, both centred on the corpus mean. The fit is
// Newton's method on the penalized cross-entropy; its Hessian also gives each prediction's uncertainty
// (a Laplace approximation), which drives exploration.
#pragma once

#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "profile/profile.h"

namespace cake::router {

inline constexpr int kNumFeatures = profile::kNumFeatures;
// Parameters of one track: a, θ_0..θ_7, b; the design vector is φ = [1, x̃_0..x̃_7, −d̃].
inline constexpr int kNumParams = kNumFeatures + 2;
using Vec = std::array<double, kNumParams>;
using Mat = std::array<Vec, kNumParams>;

// What the router learns from: an operator's profile and the score (0..100) one track reached on it.
struct Outcome {
  std::string op;
  std::string contract_hash;
  std::string track;
  std::array<double, kNumFeatures> x{};
  double difficulty = 1;
  double score = 0;  // CAKE-Bench operator score, 0..100
};

Outcome outcome_of(const profile::Profile& p, std::string op, std::string hash, std::string track,
                   double score);

struct Ability {
  Vec w{};    // a, θ, b
  Mat cov{};  // inverse Hessian of the penalized loss at w (Laplace covariance)
  int observations = 0;
};

struct FitOptions {
  double lambda = 1.0;            // ridge penalty on θ and b
  double lambda_intercept = 0.1;  // weaker penalty on a (a track's overall level)
  int iterations = 30;
};

struct Model {
  std::array<double, kNumFeatures> x_mean{};
  double d_mean = 0;
  std::map<std::string, Ability> tracks;  // tracks never observed are absent (prior: ŝ = 0.5, wide)
  FitOptions options;
};

// Fits every track that appears in `data`. The corpus mean is taken over distinct operators.
Model fit(const std::vector<Outcome>& data, const FitOptions& o = {});

struct Prediction {
  double score = 0.5;  // ŝ, 0..1
  double upper = 1;    // σ(z + c·sd(z)): the optimistic bound used to explore
  double sd_z = 0;     // standard deviation of the logit
  int observations = 0;
};

// The design vector φ of a profile under the model's centring.
Vec design(const Model& m, const std::array<double, kNumFeatures>& x, double difficulty);
// ŝ for `track` (the prior when the model has never seen it); c scales the exploration bound.
Prediction predict(const Model& m, const std::string& track, const std::array<double, kNumFeatures>& x,
                   double difficulty, double c = 1.0);

nlohmann::json ability_to_json(const Ability& a);
Ability ability_from_json(const nlohmann::json& j);  // throws cake::Error on a malformed record

}  // namespace cake::router
