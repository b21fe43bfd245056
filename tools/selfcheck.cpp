// The self-checks: codecs, views, guarded buffers and the comparison library, each also shown to
// reject a planted fault, so a pass means the checker itself works here.
#include "tools/selfcheck.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "core/compare.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/fp8.h"
#include "core/guarded_buffer.h"
#include "core/poison.h"
#include "core/topk_check.h"
#include "properties/view_gen.h"
#include "properties/view_properties.h"

namespace mlacheck {
namespace {

// A check returns "" on success, else what went wrong; `detail` says what was covered.
struct SelfCheck {
  const char* name;
  std::function<std::string(std::string& detail)> run;
};

std::string fp8_round_trip(const char* fmt, float (*dec)(uint8_t), uint8_t (*enc)(float), std::string& detail) {
  for (int c = 0; c < 256; ++c) {
    const float f = dec(static_cast<uint8_t>(c));
    if (std::isnan(f)) continue;
    if (std::isinf(f)) continue;  // e5m2 infinities saturate when encoded
    if (enc(f) != c) {
      std::ostringstream os;
      os << fmt << " code 0x" << std::hex << c << " decodes to " << f << " which encodes to 0x" << int(enc(f));
      return os.str();
    }
  }
  detail = "256 codes decode and re-encode to themselves";
  return "";
}

// Encoding is monotone: a larger float never gets a smaller fp8 value.
std::string fp8_monotone(uint64_t seed, int64_t samples, std::string& detail) {
  std::mt19937_64 rng(seed);
  std::vector<float> xs(static_cast<size_t>(samples));
  for (float& x : xs) x = std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng), std::uniform_int_distribution<int>(-20, 18)(rng));
  std::sort(xs.begin(), xs.end());
  for (size_t i = 1; i < xs.size(); ++i) {
    if (fp8_e4m3_to_float(float_to_fp8_e4m3(xs[i])) < fp8_e4m3_to_float(float_to_fp8_e4m3(xs[i - 1])) ||
        fp8_e5m2_to_float(float_to_fp8_e5m2(xs[i])) < fp8_e5m2_to_float(float_to_fp8_e5m2(xs[i - 1]))) {
      std::ostringstream os;
      os << "encode is not monotone between " << xs[i - 1] << " and " << xs[i];
      return os.str();
    }
  }
  detail = std::to_string(samples) + " sorted random floats encode monotonically (e4m3, e5m2)";
  return "";
}

std::string half_round_trip(std::string& detail) {
  // Codes that fail are collected first and described after the loop: clang 14 at -O2 miscompiled
  // the earlier form of this loop that built the message inside it (g++, and clang at -O1, were right).
  int64_t bad_bf16 = -1, bad_fp16 = -1, lost_nan = -1;
  for (uint32_t c = 0; c < 65536; ++c) {
    const uint16_t h = static_cast<uint16_t>(c);
    const float b = bf16_to_float(h), f = fp16_to_float(h);
    if (bad_bf16 < 0 && !std::isnan(b) && float_to_bf16(b) != h) bad_bf16 = c;
    if (bad_fp16 < 0 && !std::isnan(f) && float_to_fp16(f) != h) bad_fp16 = c;
    if (lost_nan < 0 && std::isnan(b) && !std::isnan(bf16_to_float(float_to_bf16(b)))) lost_nan = c;
  }
  if (bad_bf16 >= 0) return "bf16 code " + std::to_string(bad_bf16) + " does not round-trip";
  if (bad_fp16 >= 0) return "fp16 code " + std::to_string(bad_fp16) + " does not round-trip";
  if (lost_nan >= 0) return "bf16 NaN code " + std::to_string(lost_nan) + " re-encodes to a number";
  detail = "65536 codes of bf16 and fp16 round-trip, NaN stays NaN";
  return "";
}

std::string reshape_vs_brute_force(uint64_t seed, int64_t samples, std::string& detail) {
  int64_t refused = 0;
  for (int64_t i = 0; i < samples; ++i) {
    const rc::Random random(seed + static_cast<uint64_t>(i));
    const View v = gen::view()(random, 50).value();
    const std::vector<int64_t> shape = gen::reshape_target(v.numel())(random, 50).value();
    if (Verdict bad = reshape_matches_brute_force(v, shape)) return *bad;
    try {
      v.reshape(shape);
    } catch (const Error&) {
      ++refused;
    }
  }
  // The vLLM #42135 view: a sliced [B, next_n'] window of a [max_num_seqs, next_n] buffer.
  try {
    View::contiguous(DType::kI32, {8, 4}).slice(0, 0, 3).slice(1, 0, 2).reshape({6});
    return "the vLLM #42135 reshape of a non-contiguous slice was accepted";
  } catch (const Error&) {
  }
  detail = std::to_string(samples) + " random reshapes agree with brute force (" + std::to_string(refused) +
           " rightly refused), #42135 refused";
  return "";
}

std::string guard_catches_planted_writes(std::string& detail) {
  GuardedBuffer buf("logits", 4096);
  const View out = View::padded_rows(DType::kF32, {4, 100}, 128, 256);
  buf.declare_output("out", out);
  struct Plant {
    int64_t offset;
    StrayRegion region;
    std::vector<int64_t> coords;
  };
  const Plant plants[] = {
      {out.byte_offset_of({1, 99}) + 4, StrayRegion::kBetweenViews, {1, 100}},  // one past a row
      {out.byte_span().end, StrayRegion::kBetweenViews, {3, 100}},             // one past the view
      {100, StrayRegion::kBetweenViews, {-1, 89}},                             // before the view
      {-1, StrayRegion::kBeforeAllocation, {-1, 63}},
      {4096, StrayRegion::kAfterAllocation, {7, 64}},
  };
  for (const Plant& p : plants) {
    buf.arm();
    out.for_each_index([&](const std::vector<int64_t>& i) { buf.tensor(out).at<float>(i) = 1.0f; });
    if (!buf.check().ok()) return "a correct write was reported: " + buf.check().describe();
    buf.data()[p.offset] ^= 0x5A;
    const GuardReport r = buf.check();
    if (r.ok() || r.first.offset != p.offset || r.first.region != p.region || r.first.coords != p.coords) {
      return "planted stray byte at " + std::to_string(p.offset) + " reported as: " + r.describe();
    }
  }
  detail = "5 planted stray bytes found with region and coordinates; correct writes pass";
  return "";
}

std::string compare_rejects_planted_faults(std::string& detail) {
  std::vector<double> expected = {1.0, -INFINITY, 2.0, 3.0};
  std::vector<float> actual = {1.0f, NAN, 2.0f, 3.0f};
  const Tolerance tol{1e-3, 1e-3, 1e-6, "selfcheck"};
  HostTensor a(actual.data(), View::contiguous(DType::kF32, {4}));
  HostTensor b(expected.data(), View::contiguous(DType::kF64, {4}));
  if (compare_close(a, b, tol).ok) return "NaN where the reference has -inf was accepted";
  actual[1] = -INFINITY;
  if (!compare_close(a, b, tol).ok) return "an exact result was rejected: " + compare_close(a, b, tol).describe();
  actual[3] = 3.01f;
  if (compare_close(a, b, tol).ok) return "an element off by 0.33% was accepted at rtol 1e-3";

  std::vector<float> row = {5, 1, 4, 2, 3};
  HostTensor logits(row.data(), View::contiguous(DType::kF32, {1, 5}));
  const std::vector<std::vector<int32_t>> bad = {{0, 0, 2}, {0, 2, 5}, {0, 2, 3}, {0, -1, 2}};
  std::vector<int32_t> good = {2, 4, 0};
  if (!check_topk({good.data(), View::contiguous(DType::kI32, {1, 3})}, logits, {5}).ok) return "valid top-k rejected";
  for (auto idx : bad) {
    if (check_topk({idx.data(), View::contiguous(DType::kI32, {1, 3})}, logits, {5}).ok) {
      return "an invalid top-k row was accepted";
    }
  }
  detail = "NaN-for--inf and an off element rejected; top-k duplicate, out-of-range, wrong value and -1 rejected";
  return "";
}

}  // namespace

int run_selfcheck(std::ostream& out, uint64_t seed, int64_t samples) {
  const std::vector<SelfCheck> checks = {
      {"fp8 e4m3 codec", [](std::string& d) { return fp8_round_trip("e4m3", fp8_e4m3_to_float, float_to_fp8_e4m3, d); }},
      {"fp8 e5m2 codec", [](std::string& d) { return fp8_round_trip("e5m2", fp8_e5m2_to_float, float_to_fp8_e5m2, d); }},
      {"fp8 encode monotone", [&](std::string& d) { return fp8_monotone(seed, samples * 100, d); }},
      {"bf16/fp16 codecs", half_round_trip},
      {"view reshape", [&](std::string& d) { return reshape_vs_brute_force(seed, samples, d); }},
      {"guarded buffers", guard_catches_planted_writes},
      {"comparison", compare_rejects_planted_faults},
  };
  out << "mlacheck selfcheck (seed " << seed << "): the toolkit's own foundations on this machine\n";
  int failed = 0;
  for (const SelfCheck& c : checks) {
    std::string detail;
    const auto t0 = std::chrono::steady_clock::now();
    std::string error;
    try {
      error = c.run(detail);
    } catch (const std::exception& e) {
      error = std::string("threw: ") + e.what();
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    char line[64];
    std::snprintf(line, sizeof line, "  %-4s  %-20s %7.1f ms  ", error.empty() ? "PASS" : "FAIL", c.name, ms);
    out << line << (error.empty() ? detail : error) << '\n';
    failed += error.empty() ? 0 : 1;
  }
  out << "selfcheck: " << (checks.size() - failed) << " passed, " << failed << " failed\n";
  return failed;
}

}  // namespace mlacheck
