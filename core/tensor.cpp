// Element access for host tensors: decode and encode every dtype.
#include "core/tensor.h"

#include <cstring>

#include "core/fp16.h"
#include "core/fp8.h"

namespace mlacheck {

HostTensor HostTensor::bind(void* buffer_start, int64_t buffer_bytes, const View& v) {
  const ByteSpan span = v.byte_span();
  MLA_REQUIRE(span.empty() || (span.begin >= 0 && span.end <= buffer_bytes), "view ", v.to_string(),
              " touches bytes [", span.begin, ", ", span.end, ") but the buffer has ", buffer_bytes, " bytes");
  return HostTensor(buffer_start, v);
}

double HostTensor::load(const std::vector<int64_t>& coords) const {
  return load_element(view.dtype(), element(coords));
}

void HostTensor::store(const std::vector<int64_t>& coords, double value) const {
  store_element(view.dtype(), element(coords), value);
}

namespace {
template <class T>
T read(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
void write(void* p, T v) {
  std::memcpy(p, &v, sizeof v);
}
}  // namespace

double load_element(DType t, const void* p) {
  switch (t) {
    case DType::kF64: return read<double>(p);
    case DType::kF32: return read<float>(p);
    case DType::kBF16: return bf16_to_float(read<uint16_t>(p));
    case DType::kF16: return fp16_to_float(read<uint16_t>(p));
    case DType::kFP8E4M3: return fp8_e4m3_to_float(read<uint8_t>(p));
    case DType::kFP8E5M2: return fp8_e5m2_to_float(read<uint8_t>(p));
    case DType::kUE8M0: return ue8m0_to_float(read<uint8_t>(p));
    case DType::kI64: return static_cast<double>(read<int64_t>(p));
    case DType::kI32: return read<int32_t>(p);
    case DType::kU8: return read<uint8_t>(p);
  }
  throw Error("load_element: unknown dtype");
}

void store_element(DType t, void* p, double value) {
  const float f = static_cast<float>(value);
  switch (t) {
    case DType::kF64: write(p, value); return;
    case DType::kF32: write(p, f); return;
    case DType::kBF16: write(p, float_to_bf16(f)); return;
    case DType::kF16: write(p, float_to_fp16(f)); return;
    case DType::kFP8E4M3: write(p, float_to_fp8_e4m3(f)); return;
    case DType::kFP8E5M2: write(p, float_to_fp8_e5m2(f)); return;
    case DType::kUE8M0: write(p, float_to_ue8m0_ceil(f)); return;
    case DType::kI64:
      MLA_REQUIRE(value >= -0x1p63 && value < 0x1p63, "store: ", value, " does not fit int64");
      write(p, static_cast<int64_t>(value));
      return;
    case DType::kI32:
      MLA_REQUIRE(value >= INT32_MIN && value <= INT32_MAX, "store: ", value, " does not fit int32");
      write(p, static_cast<int32_t>(value));
      return;
    case DType::kU8:
      MLA_REQUIRE(value >= 0 && value <= 255, "store: ", value, " does not fit uint8");
      write(p, static_cast<uint8_t>(value));
      return;
  }
  throw Error("store_element: unknown dtype");
}

}  // namespace mlacheck
