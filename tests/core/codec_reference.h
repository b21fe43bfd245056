// Reference codecs for the narrow float formats and ue8m0, by value table and search, for tests.
//
// Deliberately independent of core/fp8.h and core/fp16.h: no bit tricks, only the format's
// parameters, std::ldexp in double (exact for every value involved) and a search over the list of
// representable values, so that agreement with the headers means something.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mlacheck::codec_ref {

// What a finite value beyond the largest finite one becomes.
enum class Overflow {
  kSaturate,    // the largest finite value, whatever the distance (SATFINITE quantizers)
  kToInfinity,  // infinity from max + half an ulp on (IEEE round to nearest)
};

// What a NaN input encodes to.
enum class NanEncoding {
  kCanonical,        // one fixed code, whatever the sign and payload
  kKeepSignPayload,  // sign, the payload's leading bits, and the quiet bit forced on
};

// A binary float of 1 + exp_bits + man_bits bits, with subnormals. Codes with the sign bit clear
// order like their values, so the finite non-negative codes are 0..max_finite. Codes above
// max_finite are NaN, except max_finite + 1, which is infinity in formats that have one.
struct FormatSpec {
  const char* name;
  int exp_bits;
  int man_bits;
  int bias;
  bool has_inf;
  uint32_t max_finite;
  Overflow overflow;
  NanEncoding nan_encoding;
  uint32_t canonical_nan;  // for NanEncoding::kCanonical
};

class Codec {
 public:
  explicit Codec(const FormatSpec& spec);

  const FormatSpec& spec() const { return spec_; }
  const char* name() const { return spec_.name; }
  uint32_t num_codes() const { return 1u << (1 + spec_.exp_bits + spec_.man_bits); }
  uint32_t sign_bit() const { return 1u << (spec_.exp_bits + spec_.man_bits); }

  // The finite non-negative values, ascending; values()[c] is the value of code c.
  const std::vector<double>& values() const { return values_; }
  double max_finite_value() const { return values_.back(); }
  // The value the code after max_finite would have with an unbounded exponent: max + one ulp.
  double beyond_max_value() const;

  bool is_nan(uint32_t code) const;
  bool is_inf(uint32_t code) const;

  // The value of a code: the formula (-1)^s * 2^(e - bias) * (1 + m / 2^man_bits) for normals,
  // (-1)^s * 2^(1 - bias) * m / 2^man_bits for subnormals; infinity; a quiet NaN with the code's
  // sign for NaN codes.
  double decode(uint32_t code) const;

  // Round to nearest, ties to the even code, then the overflow and NaN rules of the format.
  uint32_t encode(float x) const;

 private:
  FormatSpec spec_;
  std::vector<double> values_;
};

const Codec& e4m3fn();  // OCP e4m3fn, saturating: max 448, NaN 0x7F
const Codec& e5m2();    // e5m2, saturating: max 57344, inf 0x7C, NaN -> 0x7F
const Codec& bf16();    // bfloat16, overflow to inf, NaN keeps sign and payload
const Codec& fp16();    // IEEE binary16, overflow to inf, NaN keeps sign and payload

// ue8m0: code e is 2^(e - 127); 0xFF is NaN.
double ue8m0_decode(uint8_t e);
// The smallest code whose value is >= x: 0 for x <= 2^-127 (zero included, of either sign),
// 254 for x > 2^127 (infinity included), 0xFF for NaN and negative x.
uint8_t ue8m0_ceil(float x);

// max(amax, 1e-4f) / 448, correctly rounded to float.
float e4m3_scale_fp32(float amax);
// 2^ceil(log2(max(amax, 1e-4f) / 448)) computed exactly (no intermediate rounding), as ue8m0.
uint8_t e4m3_scale_ue8m0(float amax);

// Inputs at every rounding boundary of a format, both signs: for each pair of adjacent non-negative
// values, including (0, smallest subnormal) and (max, beyond_max_value()), the lower value, the
// exact midpoint and the floats just below and above it; then beyond_max_value() itself.
std::vector<float> boundary_inputs(const Codec& c);
// n uniformly random 32-bit patterns as floats: NaNs, infinities, subnormals and huge values.
std::vector<float> random_bit_patterns(size_t n, uint32_t seed);
// n floats of random sign and 23-bit fraction with a binary exponent uniform in
// [min_exp, max_exp] (rounded to a subnormal or infinity where fp32 has none).
std::vector<float> random_floats_with_exponents(size_t n, int min_exp, int max_exp, uint32_t seed);
// Zeros, infinities, NaNs of both signs with several payloads (quiet, signalling, payload only
// in the low bits), fp32 subnormals, and the largest float.
std::vector<float> special_inputs();

// Counts mismatches and keeps the first few, so that a broken codec fails with a short, readable
// message naming the inputs instead of millions of lines. The line is only built when kept.
class Mismatches {
 public:
  template <class MakeLine>
  void add(MakeLine&& make_line) {
    if (count_++ < kKept) first_ += "\n  " + make_line();
  }
  int count() const { return count_; }
  std::string report() const;

 private:
  static constexpr int kKept = 12;
  int count_ = 0;
  std::string first_;
};

float float_from_bits(uint32_t u);
uint32_t bits_of_float(float x);

// "0x3f800000 (0x1p+0 = 1)": the bits, hex float and decimal of a float, for failure messages.
std::string describe(float x);
std::string hex(uint32_t code, int digits);

// A codec under test: the header's functions for one format, its reference, and CUDA's host
// conversions where the toolkit's headers are present (null otherwise).
template <class Code>
struct CodecUnderTest {
  const Codec& ref;
  Code (*encode)(float);
  float (*decode)(Code);
  Code (*cuda_encode)(float);
  float (*cuda_decode)(Code);
};

// The differences a comparison found, against the reference and against CUDA.
struct Comparison {
  Mismatches vs_ref;
  Mismatches vs_cuda;
};

// Encodes every input: against the reference bit for bit (NaN payloads included); against CUDA,
// which canonicalizes NaN, bit for bit except that a NaN input only needs NaN codes from both.
template <class Code>
Comparison compare_encodes(const CodecUnderTest<Code>& f, const std::vector<float>& inputs) {
  Comparison out;
  const int digits = 2 * static_cast<int>(sizeof(Code));
  for (float x : inputs) {
    const uint32_t got = f.encode(x);
    const uint32_t want = f.ref.encode(x);
    if (got != want) {
      out.vs_ref.add([&] {
        return std::string(f.ref.name()) + " encode of " + describe(x) + ": got " + hex(got, digits) +
               ", reference " + hex(want, digits);
      });
    }
    if (f.cuda_encode != nullptr) {
      const uint32_t cuda = f.cuda_encode(x);
      const bool same = std::isnan(x) ? f.ref.is_nan(got) && f.ref.is_nan(cuda) : got == cuda;
      if (!same) {
        out.vs_cuda.add([&] {
          return std::string(f.ref.name()) + " encode of " + describe(x) + ": got " + hex(got, digits) +
                 ", CUDA " + hex(cuda, digits);
        });
      }
    }
  }
  return out;
}

// Decodes every code: against the reference bit for bit, NaN codes as a NaN of the code's sign;
// against CUDA by bits, NaN as any NaN.
template <class Code>
Comparison compare_decodes(const CodecUnderTest<Code>& f) {
  Comparison out;
  const int digits = 2 * static_cast<int>(sizeof(Code));
  for (uint32_t c = 0; c < f.ref.num_codes(); ++c) {
    const float got = f.decode(static_cast<Code>(c));
    const double want = f.ref.decode(c);
    // Every fp8, bf16 and fp16 value is a float, so the reference's double converts exactly.
    const bool ok = f.ref.is_nan(c) ? std::isnan(got) && std::signbit(got) == std::signbit(want)
                                    : bits_of_float(got) == bits_of_float(static_cast<float>(want));
    if (!ok) {
      out.vs_ref.add([&] {
        return std::string(f.ref.name()) + " decode of " + hex(c, digits) + ": got " + describe(got) +
               ", reference " + describe(static_cast<float>(want));
      });
    }
    if (f.cuda_decode != nullptr) {
      const float cuda = f.cuda_decode(static_cast<Code>(c));
      if (std::isnan(got) ? !std::isnan(cuda) : bits_of_float(got) != bits_of_float(cuda)) {
        out.vs_cuda.add([&] {
          return std::string(f.ref.name()) + " decode of " + hex(c, digits) + ": got " + describe(got) +
                 ", CUDA " + describe(cuda);
        });
      }
    }
  }
  return out;
}

}  // namespace mlacheck::codec_ref
