// The conversions and refusals every call into a plugin shares (kernels/plugin_calls.h).
#include "kernels/plugin_calls.h"

#include "core/error.h"

namespace mlacheck::kernels::plugin_calls {

int32_t c_dtype(DType t) {
  switch (t) {
    case DType::kF64: return MLACHECK_F64;
    case DType::kF32: return MLACHECK_F32;
    case DType::kBF16: return MLACHECK_BF16;
    case DType::kF16: return MLACHECK_F16;
    case DType::kFP8E4M3: return MLACHECK_FP8_E4M3;
    case DType::kFP8E5M2: return MLACHECK_FP8_E5M2;
    case DType::kUE8M0: return MLACHECK_UE8M0;
    case DType::kI64: return MLACHECK_I64;
    case DType::kI32: return MLACHECK_I32;
    case DType::kU8: return MLACHECK_U8;
  }
  return -1;
}

mlacheck_tensor c_tensor(const DeviceTensor& t) {
  mlacheck_tensor c{};
  c.dtype = c_dtype(t.view.dtype());
  if (t.base == nullptr) return c;
  c.data = static_cast<uint8_t*>(t.base) + t.view.byte_offset();
  c.rank = t.view.rank();
  for (int d = 0; d < c.rank; ++d) c.shape[d] = t.view.size(d), c.strides[d] = t.view.stride(d);
  return c;
}

mlacheck_device c_device(Device& device) {
  mlacheck_device d{};
  switch (device.backend()) {
    case Backend::kHost: d.backend = MLACHECK_BACKEND_HOST; break;
    case Backend::kCuda: d.backend = MLACHECK_BACKEND_CUDA, d.stream = device.stream(); break;
    case Backend::kHip: d.backend = MLACHECK_BACKEND_HIP, d.stream = device.stream(); break;
  }
  return d;
}

DeviceTensor cpp_tensor(const mlacheck_tensor& t, const std::vector<DeviceTensor>& known) {
  if (t.data == nullptr || t.rank < 0 || t.rank > MLACHECK_MAX_RANK) return {};
  DType dtype = DType::kI32;
  for (DType d : {DType::kF64, DType::kF32, DType::kBF16, DType::kF16, DType::kFP8E4M3, DType::kFP8E5M2, DType::kUE8M0,
                  DType::kI64, DType::kI32, DType::kU8}) {
    if (c_dtype(d) == t.dtype) dtype = d;
  }
  const std::vector<int64_t> shape(t.shape, t.shape + t.rank), strides(t.strides, t.strides + t.rank);
  const auto* p = static_cast<const uint8_t*>(t.data);
  const uint8_t* base = nullptr;
  for (const DeviceTensor& k : known) {
    const auto* b = static_cast<const uint8_t*>(k.base);
    if (b != nullptr && b <= p && (base == nullptr || b > base)) base = b;  // the closest base at or below p
  }
  if (base == nullptr) base = p;
  try {
    return {const_cast<uint8_t*>(base), View(dtype, shape, strides, p - base)};
  } catch (const Error&) {
    return {const_cast<uint8_t*>(p), View(dtype, {0}, {1})};  // a view no buffer holds: reported as such
  }
}

void refused(const PluginImpl& impl, const std::string& what, int rc, const char* error) {
  const bool said = error != nullptr && error[0] != '\0';
  throw Error(impl.qualified + " (plugin " + impl.plugin + ") refused " + what + " (returned " + std::to_string(rc) +
              "): " + (said ? std::string(error) : "it gave no reason"));
}

}  // namespace mlacheck::kernels::plugin_calls
