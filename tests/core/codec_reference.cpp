// Reference codecs for the narrow float formats and ue8m0, by value table and search, for tests.
#include "tests/core/codec_reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>

namespace mlacheck::codec_ref {

namespace {

// The magnitude of a code with the sign bit clear, by the textbook formula.
double magnitude(const FormatSpec& f, uint32_t code) {
  const uint32_t e = code >> f.man_bits;
  const uint32_t m = code & ((1u << f.man_bits) - 1);
  if (e == 0) return std::ldexp(static_cast<double>(m), 1 - f.bias - f.man_bits);
  return std::ldexp(static_cast<double>((1u << f.man_bits) + m), static_cast<int>(e) - f.bias - f.man_bits);
}

}  // namespace

float float_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint32_t bits_of_float(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

Codec::Codec(const FormatSpec& spec) : spec_(spec) {
  for (uint32_t code = 0; code <= spec_.max_finite; ++code) values_.push_back(magnitude(spec_, code));
  // The search in encode() relies on this; a wrong FormatSpec must not pass silently.
  for (size_t i = 1; i < values_.size(); ++i) {
    if (!(values_[i - 1] < values_[i]))
      throw std::logic_error(std::string("codec_ref: values not ascending in ") + spec_.name);
  }
}

double Codec::beyond_max_value() const {
  const size_t n = values_.size();
  return values_[n - 1] + (values_[n - 1] - values_[n - 2]);
}

bool Codec::is_inf(uint32_t code) const {
  return spec_.has_inf && (code & ~sign_bit()) == spec_.max_finite + 1;
}

bool Codec::is_nan(uint32_t code) const { return (code & ~sign_bit()) > spec_.max_finite && !is_inf(code); }

double Codec::decode(uint32_t code) const {
  const bool negative = (code & sign_bit()) != 0;
  double mag;
  if (is_nan(code)) {
    mag = std::numeric_limits<double>::quiet_NaN();
  } else if (is_inf(code)) {
    mag = std::numeric_limits<double>::infinity();
  } else {
    mag = magnitude(spec_, code & ~sign_bit());
  }
  return negative ? -mag : mag;
}

uint32_t Codec::encode(float x) const {
  const uint32_t sign = std::signbit(x) ? sign_bit() : 0;
  if (std::isnan(x)) {
    if (spec_.nan_encoding == NanEncoding::kCanonical) return spec_.canonical_nan;
    // All-ones exponent, quiet bit, then the payload bits that fit, from the top of fp32's.
    const uint32_t all_ones_exp = ((1u << spec_.exp_bits) - 1) << spec_.man_bits;
    const uint32_t quiet = 1u << (spec_.man_bits - 1);
    const uint32_t payload = (bits_of_float(x) & 0x7FFFFFu) >> (23 - spec_.man_bits);
    return sign | all_ones_exp | quiet | payload;
  }
  const double a = std::fabs(static_cast<double>(x));
  const double max = max_finite_value();
  if (a > max) {
    if (spec_.overflow == Overflow::kSaturate) return sign | spec_.max_finite;
    const double threshold = max + (beyond_max_value() - max) / 2;
    return sign | (a >= threshold ? spec_.max_finite + 1 : spec_.max_finite);
  }
  // values_[hi] is the first value >= a; a lies in [values_[hi - 1], values_[hi]].
  const uint32_t hi =
      static_cast<uint32_t>(std::lower_bound(values_.begin(), values_.end(), a) - values_.begin());
  if (values_[hi] == a) return sign | hi;
  const uint32_t lo = hi - 1;
  const double mid = (values_[lo] + values_[hi]) / 2;  // exact: both have few significant bits
  uint32_t code;
  if (a < mid) {
    code = lo;
  } else if (a > mid) {
    code = hi;
  } else {
    code = (lo % 2 == 0) ? lo : hi;  // a tie goes to the code whose last bit is 0
  }
  return sign | code;
}

const Codec& e4m3fn() {
  static const Codec c({"e4m3fn", 4, 3, 7, false, 0x7E, Overflow::kSaturate, NanEncoding::kCanonical, 0x7F});
  return c;
}

const Codec& e5m2() {
  static const Codec c({"e5m2", 5, 2, 15, true, 0x7B, Overflow::kSaturate, NanEncoding::kCanonical, 0x7F});
  return c;
}

const Codec& bf16() {
  static const Codec c(
      {"bf16", 8, 7, 127, true, 0x7F7F, Overflow::kToInfinity, NanEncoding::kKeepSignPayload, 0});
  return c;
}

const Codec& fp16() {
  static const Codec c(
      {"fp16", 5, 10, 15, true, 0x7BFF, Overflow::kToInfinity, NanEncoding::kKeepSignPayload, 0});
  return c;
}

double ue8m0_decode(uint8_t e) {
  if (e == 0xFF) return std::numeric_limits<double>::quiet_NaN();
  return std::ldexp(1.0, static_cast<int>(e) - 127);
}

uint8_t ue8m0_ceil(float x) {
  if (std::isnan(x)) return 0xFF;
  if (x == 0) return 0;
  if (x < 0) return 0xFF;
  static const std::vector<double> powers = [] {
    std::vector<double> p;
    for (int e = 0; e <= 254; ++e) p.push_back(ue8m0_decode(static_cast<uint8_t>(e)));
    return p;
  }();
  const auto it = std::lower_bound(powers.begin(), powers.end(), static_cast<double>(x));
  return it == powers.end() ? 254 : static_cast<uint8_t>(it - powers.begin());
}

float e4m3_scale_fp32(float amax) {
  // A float quotient computed in double and rounded once more to float is correctly rounded.
  return static_cast<float>(std::max(static_cast<double>(amax), static_cast<double>(1e-4f)) / 448.0);
}

uint8_t e4m3_scale_ue8m0(float amax) {
  // The smallest e with 2^(e - 127) * 448 >= max(amax, 1e-4f): exact products, no rounded quotient.
  static const std::vector<double> scaled_max = [] {
    std::vector<double> s;
    for (int e = 0; e <= 254; ++e) s.push_back(std::ldexp(448.0, e - 127));
    return s;
  }();
  const double clamped = std::max(static_cast<double>(amax), static_cast<double>(1e-4f));
  const auto it = std::lower_bound(scaled_max.begin(), scaled_max.end(), clamped);
  return it == scaled_max.end() ? 254 : static_cast<uint8_t>(it - scaled_max.begin());
}

std::vector<float> boundary_inputs(const Codec& c) {
  std::vector<double> points = c.values();
  points.push_back(c.beyond_max_value());
  std::vector<float> out;
  for (size_t i = 0; i + 1 < points.size(); ++i) {
    const double mid = (points[i] + points[i + 1]) / 2;
    const float fmid = static_cast<float>(mid);
    // The tie cases are only tested if the midpoint itself is a float.
    if (static_cast<double>(fmid) != mid)
      throw std::logic_error(std::string("codec_ref: inexact midpoint in ") + c.name());
    const float inf = std::numeric_limits<float>::infinity();
    for (float x :
         {static_cast<float>(points[i]), std::nextafter(fmid, 0.0f), fmid, std::nextafter(fmid, inf)}) {
      out.push_back(x);
      out.push_back(-x);
    }
  }
  out.push_back(static_cast<float>(points.back()));
  out.push_back(-static_cast<float>(points.back()));
  return out;
}

std::vector<float> random_bit_patterns(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> out(n);
  for (float& x : out) {
    const uint32_t u = static_cast<uint32_t>(rng());
    std::memcpy(&x, &u, sizeof x);
  }
  return out;
}

std::vector<float> random_floats_with_exponents(size_t n, int min_exp, int max_exp, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> exp(min_exp, max_exp);
  std::vector<float> out(n);
  for (float& x : out) {
    const uint32_t u = static_cast<uint32_t>(rng());
    const double significand = 1.0 + std::ldexp(static_cast<double>(u & 0x7FFFFFu), -23);
    const double v = std::ldexp(significand, exp(rng));
    x = static_cast<float>((u & 0x80000000u) ? -v : v);
  }
  return out;
}

std::vector<float> special_inputs() {
  const uint32_t patterns[] = {
      0x00000000u, 0x80000000u,                                         // zeros
      0x7F800000u, 0xFF800000u,                                         // infinities
      0x7FC00000u, 0xFFC00000u, 0x7FFFFFFFu, 0xFFFFFFFFu,               // quiet NaNs
      0x7F800001u, 0xFF800001u, 0x7FA00000u, 0x7F802000u, 0x7F810000u,  // signalling NaNs
      0x7FC00001u, 0x7FE00000u, 0x7FD55555u, 0xFFAAAAAAu,               // assorted payloads
      0x00000001u, 0x80000001u, 0x00400000u, 0x007FFFFFu, 0x807FFFFFu,  // fp32 subnormals
      0x00800000u, 0x80800000u,                                         // smallest normal
      0x7F7FFFFFu, 0xFF7FFFFFu,                                         // largest float
  };
  std::vector<float> out;
  for (uint32_t p : patterns) {
    out.push_back(float_from_bits(p));
  }
  return out;
}

std::string Mismatches::report() const {
  return std::to_string(count_) + (count_ == 1 ? " mismatch" : " mismatches") +
         (count_ > 0 ? ", first:" + first_ : std::string());
}

std::string describe(float x) {
  char buf[96];
  if (std::isnan(x)) {
    std::snprintf(buf, sizeof buf, "0x%08x (NaN)", bits_of_float(x));
  } else {
    std::snprintf(buf, sizeof buf, "0x%08x (%a = %.9g)", bits_of_float(x), static_cast<double>(x),
                  static_cast<double>(x));
  }
  return buf;
}

std::string hex(uint32_t code, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x", digits, code);
  return buf;
}

}  // namespace mlacheck::codec_ref
