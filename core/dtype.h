// Element types of the tensors that mlacheck's ops read and write, with their names and sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace mlacheck {

enum class DType : uint8_t {
  kF64,       // the oracle's results
  kF32,
  kBF16,
  kF16,
  kFP8E4M3,   // OCP e4m3fn
  kFP8E5M2,
  kUE8M0,     // power-of-two scale exponents
  kI64,
  kI32,       // every index and length tensor (docs/ops.md "Conventions")
  kU8,        // raw bytes: KV caches with mixed fields
};

size_t dtype_size(DType t);
// Short lower-case name used in messages and case files: "fp32", "bf16", "fp8_e4m3", "int32", ...
std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view name);
bool dtype_is_float(DType t);  // decodes to a floating value (fp8, bf16, fp16, fp32, fp64, ue8m0)

// The DType of a C++ storage type, for typed element access (bf16/fp16/fp8 are stored as raw
// integers and so have no mapping; access them through load/store by value).
template <class T> struct dtype_of;
template <> struct dtype_of<double> { static constexpr DType value = DType::kF64; };
template <> struct dtype_of<float> { static constexpr DType value = DType::kF32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::kI64; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::kI32; };

}  // namespace mlacheck
