// The precision gate of DESIGN §6.
#include "eval/precision.h"

#include <cmath>
#include <cstdio>

namespace cake::eval {

double precision_threshold(DType t) {
  switch (t) {
    case DType::f32: return std::ldexp(1.0, -13);
    case DType::f16: return std::ldexp(1.0, -10);
    case DType::bf16: return std::ldexp(1.0, -7);
    default: return 0.0;  // exact
  }
}

std::string GateResult::str() const {
  char buf[256];
  if (reason == "shape" || reason == "dtype") return "output " + reason + " differs from the reference";
  std::snprintf(buf, sizeof buf, "%s MERE=%.3g MARE=%.3g mismatches=%lld worst[%lld]: got %.9g want %.9g",
                pass ? "pass" : ("fail(" + reason + ")").c_str(), mere, mare, static_cast<long long>(mismatches),
                static_cast<long long>(worst), worst_got, worst_want);
  return buf;
}

GateResult precision_gate(const Tensor& got, const Tensor& want) {
  GateResult r;
  if (got.shape() != want.shape()) {
    r.reason = "shape";
    return r;
  }
  if (got.dtype() != want.dtype()) {
    r.reason = "dtype";
    return r;
  }
  const int64_t n = want.numel();
  const bool exact = !is_float(want.dtype());
  const double T = precision_threshold(want.dtype());
  double sum = 0, worst_e = -1;
  bool nan_mismatch = false;
  for (int64_t i = 0; i < n; ++i) {
    double a = got.get(i), g = want.get(i);
    double e;
    if (exact) {
      e = a == g ? 0.0 : 1.0;
    } else if (std::isnan(g) || std::isnan(a)) {
      e = (std::isnan(g) && std::isnan(a)) ? 0.0 : INFINITY;
      if (e != 0.0) nan_mismatch = true;
    } else if (std::isinf(g) || std::isinf(a)) {
      e = a == g ? 0.0 : INFINITY;
    } else if (std::fabs(g) < T) {
      e = std::fabs(a - g);  // near-zero reference: absolute error against T
    } else {
      e = std::fabs(a - g) / (std::fabs(g) + 1e-7);
    }
    if (exact ? e != 0.0 : !(e < 10 * T)) ++r.mismatches;
    sum += e;
    if (e > worst_e) {
      worst_e = e;
      r.worst = i;
      r.worst_got = a;
      r.worst_want = g;
    }
  }
  r.mere = n ? sum / static_cast<double>(n) : 0.0;
  r.mare = n ? worst_e : 0.0;
  if (nan_mismatch) r.reason = "nan-position";
  else if (exact && r.mismatches) r.reason = "exact";
  else if (!exact && !(r.mare < 10 * T)) r.reason = "mare";
  else if (!exact && !(r.mere < T)) r.reason = "mere";
  r.pass = r.reason.empty();
  if (r.pass && n == 0) r.worst = -1;
  return r;
}

}  // namespace cake::eval
