// Uniform random numbers for the data a case stages: the values libstdc++'s
// std::uniform_real_distribution<float> / <double> draws from a std::mt19937_64, bit for bit, but
// without the logl that its generate_canonical evaluates on every draw (three quarters of a small
// logits case's time went there). So case files keep the data they had, on any standard library.
#pragma once

#include <cmath>
#include <random>

namespace mlacheck {

// In [0, 1): one 64-bit draw over 2^64, as generate_canonical<T, digits> takes it.
inline float canonical_float(std::mt19937_64& rng) {
  const float r = static_cast<float>(rng()) / 18446744073709551616.0f;
  return r >= 1.0f ? std::nextafter(1.0f, 0.0f) : r;
}
inline double canonical_double(std::mt19937_64& rng) {
  const double r = static_cast<double>(rng()) / 18446744073709551616.0;
  return r >= 1.0 ? std::nextafter(1.0, 0.0) : r;
}

// std::uniform_real_distribution<float>(lo, hi)(rng).
inline float uniform(std::mt19937_64& rng, float lo, float hi) { return canonical_float(rng) * (hi - lo) + lo; }

}  // namespace mlacheck
