// Uniform random numbers for the data a case stages. uniform() and the canonical draws are the
// values libstdc++'s std::uniform_real_distribution<float> / <double> draws from a std::mt19937_64,
// bit for bit, but without the logl that its generate_canonical evaluates on every draw (three
// quarters of a small logits case's time went there), so case data does not depend on the standard
// library; the bulk fills below are faster still.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "core/view.h"

namespace mlacheck {

// static_cast<float>(x) and static_cast<double>(x), bit for bit, without the branch a compiler emits
// for x of 2^63 or more: half of all draws, so a misprediction every other value, which was most of
// a generator's time. Below 2^63 the signed conversion rounds as the unsigned one does; from 2^63,
// x halved with its dropped bit kept (round to odd) converts and doubles to the same value; x's top
// bit picks one of the two, bitwise.
template <class Real, class Bits>
inline Real u64_to_real(uint64_t x) {
  static_assert(sizeof(Real) == sizeof(Bits), "a real and its bits");
  const Real below = static_cast<Real>(static_cast<int64_t>(x));
  const Real above = static_cast<Real>(static_cast<int64_t>((x >> 1) | (x & 1))) * Real(2);
  Bits a, b;
  std::memcpy(&a, &below, sizeof a);
  std::memcpy(&b, &above, sizeof b);
  const Bits pick = Bits(0) - static_cast<Bits>(x >> 63);
  const Bits bits = (b & pick) | (a & ~pick);
  Real r;
  std::memcpy(&r, &bits, sizeof r);
  return r;
}
inline float u64_to_float(uint64_t x) { return u64_to_real<float, uint32_t>(x); }
inline double u64_to_double(uint64_t x) { return u64_to_real<double, uint64_t>(x); }

// In [0, 1): one 64-bit draw over 2^64, as generate_canonical<T, digits> takes it.
inline float canonical_float(std::mt19937_64& rng) {
  const float r = u64_to_float(rng()) / 18446744073709551616.0f;
  return r >= 1.0f ? std::nextafter(1.0f, 0.0f) : r;
}
inline double canonical_double(std::mt19937_64& rng) {
  const double r = u64_to_double(rng()) / 18446744073709551616.0;
  return r >= 1.0 ? std::nextafter(1.0, 0.0) : r;
}

// std::uniform_real_distribution<float>(lo, hi)(rng).
inline float uniform(std::mt19937_64& rng, float lo, float hi) { return canonical_float(rng) * (hi - lo) + lo; }

// Fills every element of the fp8 e4m3 view v over base with the code of a value uniform in
// [-2, 2): a 16-bit grid of that interval encoded once into a table, four codes per 64-bit draw. A
// case's q was the one staging cost that did not shrink with its work (millions of values for a
// batch whose keys are few), and a draw, a float and an encode per value made it most of a small
// logits case's time.
void fill_uniform_fp8(uint8_t* base, const View& v, std::mt19937_64& rng);
// Fills every element of the fp32 view v over base with scale x uniform(rng, lo, hi), in row-major
// order (the same values as drawing them one by one).
void fill_uniform_f32(uint8_t* base, const View& v, std::mt19937_64& rng, float lo, float hi, float scale);

}  // namespace mlacheck
