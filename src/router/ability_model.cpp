// Eq. 3 abilities: centring, Newton fit of the penalized logistic regression, Laplace uncertainty.
#include "router/ability_model.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"

namespace cake::router {

namespace {

double sigmoid(double z) {
  return 1.0 / (1.0 + std::exp(-z));
}

Vec penalty(const FitOptions& o) {
  Vec p;
  p.fill(o.lambda);
  p[0] = o.lambda_intercept;
  return p;
}

// Solves A·x = b by Gaussian elimination with partial pivoting (A is symmetric positive definite here,
// penalized, so a pivot is never zero).
Vec solve(Mat a, Vec b) {
  for (int c = 0; c < kNumParams; ++c) {
    int piv = c;
    for (int r = c + 1; r < kNumParams; ++r)
      if (std::abs(a[r][c]) > std::abs(a[piv][c])) piv = r;
    std::swap(a[c], a[piv]);
    std::swap(b[c], b[piv]);
    for (int r = c + 1; r < kNumParams; ++r) {
      const double f = a[r][c] / a[c][c];
      for (int k = c; k < kNumParams; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  Vec x{};
  for (int r = kNumParams - 1; r >= 0; --r) {
    double s = b[r];
    for (int k = r + 1; k < kNumParams; ++k) s -= a[r][k] * x[k];
    x[r] = s / a[r][r];
  }
  return x;
}

Mat inverse(const Mat& a) {
  Mat inv{};
  for (int c = 0; c < kNumParams; ++c) {
    Vec e{};
    e[c] = 1;
    const Vec col = solve(a, e);
    for (int r = 0; r < kNumParams; ++r) inv[r][c] = col[r];
  }
  return inv;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (int i = 0; i < kNumParams; ++i) s += a[i] * b[i];
  return s;
}

Mat prior_cov(const FitOptions& o) {
  Mat c{};
  const Vec p = penalty(o);
  for (int i = 0; i < kNumParams; ++i) c[i][i] = 1.0 / p[i];
  return c;
}

}  // namespace

Outcome outcome_of(const profile::Profile& p, std::string op, std::string hash, std::string track,
                   double score) {
  Outcome o{std::move(op), std::move(hash), std::move(track), {}, static_cast<double>(p.difficulty), score};
  for (int k = 0; k < kNumFeatures; ++k) o.x[k] = p.x[k];
  return o;
}

Vec design(const Model& m, const std::array<double, kNumFeatures>& x, double difficulty) {
  Vec phi{};
  phi[0] = 1;
  for (int k = 0; k < kNumFeatures; ++k) phi[1 + k] = x[k] - m.x_mean[k];
  phi[kNumParams - 1] = -(difficulty - m.d_mean);
  return phi;
}

Model fit(const std::vector<Outcome>& data, const FitOptions& o) {
  Model m;
  m.options = o;
  // Corpus mean over distinct operators, so an operator measured on three tracks counts once.
  std::map<std::string, const Outcome*> ops;
  for (const Outcome& d : data) ops.emplace(d.contract_hash.empty() ? d.op : d.contract_hash, &d);
  for (const auto& [key, d] : ops) {
    for (int k = 0; k < kNumFeatures; ++k) m.x_mean[k] += d->x[k] / static_cast<double>(ops.size());
    m.d_mean += d->difficulty / static_cast<double>(ops.size());
  }
  std::set<std::string> tracks;
  for (const Outcome& d : data) tracks.insert(d.track);
  const Vec pen = penalty(o);
  for (const std::string& t : tracks) {
    std::vector<std::pair<Vec, double>> rows;
    for (const Outcome& d : data)
      if (d.track == t)
        rows.emplace_back(design(m, d.x, d.difficulty), std::clamp(d.score / 100.0, 0.0, 1.0));
    Ability a;
    a.observations = static_cast<int>(rows.size());
    Mat h{};
    for (int it = 0; it < o.iterations; ++it) {
      Vec g{};
      h = Mat{};
      for (int i = 0; i < kNumParams; ++i) {
        g[i] = pen[i] * a.w[i];
        h[i][i] = pen[i];
      }
      for (const auto& [phi, y] : rows) {
        const double s = sigmoid(dot(a.w, phi));
        const double wgt = std::max(s * (1 - s), 1e-9);
        for (int i = 0; i < kNumParams; ++i) {
          g[i] += (s - y) * phi[i];
          for (int j = 0; j < kNumParams; ++j) h[i][j] += wgt * phi[i] * phi[j];
        }
      }
      const Vec step = solve(h, g);
      double norm = 0;
      for (int i = 0; i < kNumParams; ++i) {
        a.w[i] -= step[i];
        norm = std::max(norm, std::abs(step[i]));
      }
      if (norm < 1e-10) break;
    }
    a.cov = inverse(h);
    m.tracks[t] = a;
  }
  return m;
}

Prediction predict(const Model& m, const std::string& track, const std::array<double, kNumFeatures>& x,
                   double difficulty, double c) {
  const Vec phi = design(m, x, difficulty);
  const auto it = m.tracks.find(track);
  const Ability prior{Vec{}, prior_cov(m.options), 0};
  const Ability& a = it == m.tracks.end() ? prior : it->second;
  Vec cp{};
  for (int i = 0; i < kNumParams; ++i) cp[i] = dot(a.cov[i], phi);
  const double z = dot(a.w, phi);
  Prediction p;
  p.sd_z = std::sqrt(std::max(0.0, dot(phi, cp)));
  p.score = sigmoid(z);
  p.upper = sigmoid(z + c * p.sd_z);
  p.observations = a.observations;
  return p;
}

nlohmann::json ability_to_json(const Ability& a) {
  nlohmann::json cov = nlohmann::json::array();
  for (const Vec& r : a.cov) cov.push_back(r);
  return {{"a", a.w[0]},
          {"theta", std::vector<double>(a.w.begin() + 1, a.w.end() - 1)},
          {"b", a.w[kNumParams - 1]},
          {"cov", cov},
          {"observations", a.observations}};
}

Ability ability_from_json(const nlohmann::json& j) {
  try {
    Ability a;
    a.w[0] = j.at("a").get<double>();
    const auto theta = j.at("theta").get<std::vector<double>>();
    if (theta.size() != kNumFeatures) throw Error("theta has " + std::to_string(theta.size()) + " entries");
    for (int k = 0; k < kNumFeatures; ++k) a.w[1 + k] = theta[k];
    a.w[kNumParams - 1] = j.at("b").get<double>();
    const auto& cov = j.at("cov");
    if (cov.size() != kNumParams) throw Error("cov is not " + std::to_string(kNumParams) + " rows");
    for (int i = 0; i < kNumParams; ++i) a.cov[i] = cov[i].get<Vec>();
    a.observations = j.value("observations", 0);
    return a;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("router ability record: ") + e.what());
  }
}

}  // namespace cake::router
