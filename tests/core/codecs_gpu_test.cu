// GPU test of core/fp8.h and core/fp16.h: the codecs in a kernel against the host, codec_reference.h
// and the device's own conversion instructions. Exits 0 on pass, 1 on failure, 77 without a GPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "core/fp16.h"
#include "core/fp8.h"
#include "tests/core/codec_reference.h"

namespace {

namespace ref = mlacheck::codec_ref;

// Every code decoded by the header's functions, and (hw_) by CUDA's conversions, which use the cvt
// instructions on sm_89 and later.
struct Decoded {
  float e4m3[256], e5m2[256], ue8m0[256], bf16[65536], fp16[65536];
  float hw_e4m3[256], hw_e5m2[256], hw_bf16[65536], hw_fp16[65536];
};

// Encodes of one input, by the header and by CUDA's conversions.
struct Encoded {
  uint8_t e4m3, e5m2, ue8m0_ceil, scale_ue8m0;
  uint16_t bf16, fp16;
  float scale_fp32;
  uint8_t hw_e4m3, hw_e5m2;
  uint16_t hw_bf16, hw_fp16;
};

__global__ void decode_all(Decoded* out) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= 65536) return;
  const uint16_t h = static_cast<uint16_t>(i);
  out->bf16[i] = mlacheck::bf16_to_float(h);
  out->fp16[i] = mlacheck::fp16_to_float(h);
  __nv_bfloat16_raw braw;
  braw.x = h;
  out->hw_bf16[i] = __bfloat162float(__nv_bfloat16(braw));
  __half_raw hraw;
  hraw.x = h;
  out->hw_fp16[i] = __half2float(__half(hraw));
  if (i < 256) {
    const uint8_t c = static_cast<uint8_t>(i);
    out->e4m3[i] = mlacheck::fp8_e4m3_to_float(c);
    out->e5m2[i] = mlacheck::fp8_e5m2_to_float(c);
    out->ue8m0[i] = mlacheck::ue8m0_to_float(c);
    __nv_fp8_e4m3 a;
    a.__x = c;
    out->hw_e4m3[i] = static_cast<float>(a);
    __nv_fp8_e5m2 b;
    b.__x = c;
    out->hw_e5m2[i] = static_cast<float>(b);
  }
}

__global__ void encode_all(const float* in, Encoded* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = in[i];
  Encoded e;
  e.e4m3 = mlacheck::float_to_fp8_e4m3(x);
  e.e5m2 = mlacheck::float_to_fp8_e5m2(x);
  e.ue8m0_ceil = mlacheck::float_to_ue8m0_ceil(x);
  e.scale_fp32 = mlacheck::fp8_e4m3_scale_fp32(fabsf(x));
  e.scale_ue8m0 = mlacheck::fp8_e4m3_scale_ue8m0(fabsf(x));
  e.bf16 = mlacheck::float_to_bf16(x);
  e.fp16 = mlacheck::float_to_fp16(x);
  e.hw_e4m3 = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
  e.hw_e5m2 = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
  e.hw_bf16 = static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(x)).x;
  e.hw_fp16 = static_cast<__half_raw>(__float2half_rn(x)).x;
  out[i] = e;
}

bool check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return true;
  std::printf("codecs_gpu_test: %s failed: %s\n", what, cudaGetErrorString(err));
  return false;
}

std::string code(uint32_t c, int digits) { return ref::hex(c, digits); }

// One comparison category: its name, and the mismatches found.
struct Category {
  explicit Category(const char* what) : name(what) {}
  const char* name;
  ref::Mismatches m;
};

// Decoded floats: bit-exact, except that NaN is compared as NaN-ness only when nan_loose.
bool same_float(float a, float b, bool nan_loose) {
  if (nan_loose && std::isnan(a) && std::isnan(b)) return true;
  return ref::bits_of_float(a) == ref::bits_of_float(b);
}

void compare_decodes(const Decoded& d, std::vector<Category>& cats) {
  Category dev_host{"decode: device vs host"}, dev_ref{"decode: device vs reference"},
      dev_hw{"decode: device vs cvt instructions"};
  struct Table {
    const char* name;
    const ref::Codec* codec;  // null for ue8m0
    const float* dev;
    const float* hw;  // null where CUDA has no float conversion to compare
    float (*host)(uint32_t);
  };
  const Table tables[] = {
      {"e4m3fn", &ref::e4m3fn(), d.e4m3, d.hw_e4m3,
       [](uint32_t c) { return mlacheck::fp8_e4m3_to_float(uint8_t(c)); }},
      {"e5m2", &ref::e5m2(), d.e5m2, d.hw_e5m2,
       [](uint32_t c) { return mlacheck::fp8_e5m2_to_float(uint8_t(c)); }},
      {"ue8m0", nullptr, d.ue8m0, nullptr, [](uint32_t c) { return mlacheck::ue8m0_to_float(uint8_t(c)); }},
      {"bf16", &ref::bf16(), d.bf16, d.hw_bf16,
       [](uint32_t c) { return mlacheck::bf16_to_float(uint16_t(c)); }},
      {"fp16", &ref::fp16(), d.fp16, d.hw_fp16,
       [](uint32_t c) { return mlacheck::fp16_to_float(uint16_t(c)); }},
  };
  for (const Table& t : tables) {
    const uint32_t n = t.codec ? t.codec->num_codes() : 256;
    const int digits = n > 256 ? 4 : 2;
    for (uint32_t c = 0; c < n; ++c) {
      const float dev = t.dev[c];
      auto at = [&] {
        return std::string(t.name) + " " + code(c, digits) + ": device " + ref::describe(dev);
      };
      const float host = t.host(c);
      if (!same_float(dev, host, false))
        dev_host.m.add([&] { return at() + ", host " + ref::describe(host); });
      const double want = t.codec ? t.codec->decode(c) : ref::ue8m0_decode(uint8_t(c));
      if (!same_float(dev, static_cast<float>(want), true)) {
        dev_ref.m.add([&] { return at() + ", reference " + ref::describe(static_cast<float>(want)); });
      }
      if (t.hw && !same_float(dev, t.hw[c], true))
        dev_hw.m.add([&] { return at() + ", cvt " + ref::describe(t.hw[c]); });
    }
  }
  cats.push_back(std::move(dev_host));
  cats.push_back(std::move(dev_ref));
  cats.push_back(std::move(dev_hw));
}

void compare_encodes(const std::vector<float>& in, const std::vector<Encoded>& out,
                     std::vector<Category>& cats) {
  Category dev_host{"encode: device vs host"}, dev_ref{"encode: device vs reference"},
      dev_hw{"encode: device vs cvt instructions"};
  for (size_t i = 0; i < in.size(); ++i) {
    const float x = in[i];
    const Encoded& e = out[i];
    auto at = [&] { return "of " + ref::describe(x) + ": "; };
    const bool nan = std::isnan(x);
    const float ax = std::fabs(x);
    // The same functions on the host: every result bit for bit.
    auto host = [&](const char* what, uint32_t dev, uint32_t h, int digits) {
      if (dev != h)
        dev_host.m.add([&] {
          return std::string(what) + " " + at() + "device " + code(dev, digits) + ", host " + code(h, digits);
        });
    };
    host("e4m3fn", e.e4m3, mlacheck::float_to_fp8_e4m3(x), 2);
    host("e5m2", e.e5m2, mlacheck::float_to_fp8_e5m2(x), 2);
    host("ue8m0_ceil", e.ue8m0_ceil, mlacheck::float_to_ue8m0_ceil(x), 2);
    host("scale_ue8m0", e.scale_ue8m0, mlacheck::fp8_e4m3_scale_ue8m0(ax), 2);
    if (nan) {
      // NaN amax gives a NaN scale; the payload after a division is the hardware's (the GPU returns
      // its canonical 0x7FFFFFFF), so only NaN-ness is compared.
      if (!std::isnan(e.scale_fp32))
        dev_host.m.add([&] { return "scale_fp32 " + at() + "device " + ref::describe(e.scale_fp32) + ", want NaN"; });
    } else {
      host("scale_fp32", ref::bits_of_float(e.scale_fp32), ref::bits_of_float(mlacheck::fp8_e4m3_scale_fp32(ax)), 8);
    }
    host("bf16", e.bf16, mlacheck::float_to_bf16(x), 4);
    host("fp16", e.fp16, mlacheck::float_to_fp16(x), 4);
    // The reference (the scales of a NaN amax are checked above: NaN, and 0xFF for ue8m0).
    auto reference = [&](const char* what, uint32_t dev, uint32_t want, int digits) {
      if (dev != want)
        dev_ref.m.add([&] {
          return std::string(what) + " " + at() + "device " + code(dev, digits) + ", reference " +
                 code(want, digits);
        });
    };
    reference("e4m3fn", e.e4m3, ref::e4m3fn().encode(x), 2);
    reference("e5m2", e.e5m2, ref::e5m2().encode(x), 2);
    reference("ue8m0_ceil", e.ue8m0_ceil, ref::ue8m0_ceil(x), 2);
    if (nan) {
      reference("scale_ue8m0", e.scale_ue8m0, 0xFF, 2);
    } else {
      reference("scale_ue8m0", e.scale_ue8m0, ref::e4m3_scale_ue8m0(ax), 2);
      reference("scale_fp32", ref::bits_of_float(e.scale_fp32), ref::bits_of_float(ref::e4m3_scale_fp32(ax)),
                8);
    }
    reference("bf16", e.bf16, ref::bf16().encode(x), 4);
    reference("fp16", e.fp16, ref::fp16().encode(x), 4);
    // The conversion instructions canonicalize NaN: for a NaN input both results must be NaN codes.
    auto hw = [&](const char* what, const ref::Codec& c, uint32_t dev, uint32_t cvt, int digits) {
      const bool same = nan ? c.is_nan(dev) && c.is_nan(cvt) : dev == cvt;
      if (!same)
        dev_hw.m.add([&] {
          return std::string(what) + " " + at() + "device " + code(dev, digits) + ", cvt " +
                 code(cvt, digits);
        });
    };
    hw("e4m3fn", ref::e4m3fn(), e.e4m3, e.hw_e4m3, 2);
    hw("e5m2", ref::e5m2(), e.e5m2, e.hw_e5m2, 2);
    hw("bf16", ref::bf16(), e.bf16, e.hw_bf16, 4);
    hw("fp16", ref::fp16(), e.fp16, e.hw_fp16, 4);
  }
  cats.push_back(std::move(dev_host));
  cats.push_back(std::move(dev_ref));
  cats.push_back(std::move(dev_hw));
}

// Every rounding boundary of the four formats, the special inputs, powers of two for ue8m0, and
// random samples (fixed seeds).
std::vector<float> inputs() {
  std::vector<float> in;
  auto append = [&](const std::vector<float>& v) { in.insert(in.end(), v.begin(), v.end()); };
  append(ref::boundary_inputs(ref::e4m3fn()));
  append(ref::boundary_inputs(ref::e5m2()));
  append(ref::boundary_inputs(ref::bf16()));
  append(ref::boundary_inputs(ref::fp16()));
  append(ref::special_inputs());
  for (int e = 0; e <= 254; ++e) {
    const float p = std::ldexp(1.0f, e - 127);
    in.insert(in.end(), {p, std::nextafter(p, 0.0f), std::nextafter(p, INFINITY)});
  }
  append(ref::random_bit_patterns(1'000'000, 0x6B01u));
  append(ref::random_floats_with_exponents(500'000, -27, 18, 0x6B02u));
  return in;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("skipped: no GPU\n");
    return 77;
  }

  Decoded* d_dec = nullptr;
  if (!check(cudaMalloc(&d_dec, sizeof(Decoded)), "cudaMalloc")) return 1;
  decode_all<<<65536 / 256, 256>>>(d_dec);
  if (!check(cudaGetLastError(), "decode_all launch")) return 1;
  std::vector<Decoded> dec(1);
  if (!check(cudaMemcpy(dec.data(), d_dec, sizeof(Decoded), cudaMemcpyDeviceToHost), "decode_all")) return 1;

  const std::vector<float> in = inputs();
  const int n = static_cast<int>(in.size());
  float* d_in = nullptr;
  Encoded* d_out = nullptr;
  if (!check(cudaMalloc(&d_in, in.size() * sizeof(float)), "cudaMalloc")) return 1;
  if (!check(cudaMalloc(&d_out, in.size() * sizeof(Encoded)), "cudaMalloc")) return 1;
  if (!check(cudaMemcpy(d_in, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy"))
    return 1;
  encode_all<<<(n + 255) / 256, 256>>>(d_in, d_out, n);
  if (!check(cudaGetLastError(), "encode_all launch")) return 1;
  std::vector<Encoded> out(in.size());
  if (!check(cudaMemcpy(out.data(), d_out, in.size() * sizeof(Encoded), cudaMemcpyDeviceToHost),
             "encode_all"))
    return 1;
  cudaFree(d_dec);
  cudaFree(d_in);
  cudaFree(d_out);

  std::vector<Category> cats;
  compare_decodes(dec[0], cats);
  compare_encodes(in, out, cats);
  int failed = 0;
  for (const Category& c : cats) {
    if (c.m.count() == 0) continue;
    ++failed;
    std::printf("FAIL %s: %s\n", c.name, c.m.report().c_str());
  }
  std::printf(
      "codecs_gpu_test: %s: every code decoded and %d floats encoded on the device; %d of %zu comparisons "
      "(vs host, reference, cvt) failing\n",
      failed ? "FAIL" : "pass", n, failed, cats.size());
  return failed ? 1 : 0;
}
