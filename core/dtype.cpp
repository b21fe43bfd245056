// DType names and sizes.
#include "core/dtype.h"

#include <array>

namespace mlacheck {
namespace {

struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
  bool is_float;
};

constexpr std::array<DTypeInfo, 10> kDTypes = {{
    {DType::kF64, "fp64", 8, true},
    {DType::kF32, "fp32", 4, true},
    {DType::kBF16, "bf16", 2, true},
    {DType::kF16, "fp16", 2, true},
    {DType::kFP8E4M3, "fp8_e4m3", 1, true},
    {DType::kFP8E5M2, "fp8_e5m2", 1, true},
    {DType::kUE8M0, "ue8m0", 1, true},
    {DType::kI64, "int64", 8, false},
    {DType::kI32, "int32", 4, false},
    {DType::kU8, "uint8", 1, false},
}};

constexpr bool table_in_enum_order() {
  for (size_t i = 0; i < kDTypes.size(); ++i) {
    if (static_cast<size_t>(kDTypes[i].type) != i) return false;
  }
  return true;
}
static_assert(table_in_enum_order(), "kDTypes must list the DType values in declaration order");

const DTypeInfo& info(DType t) { return kDTypes[static_cast<size_t>(t)]; }

}  // namespace

size_t dtype_size(DType t) { return info(t).size; }
std::string_view dtype_name(DType t) { return info(t).name; }
bool dtype_is_float(DType t) { return info(t).is_float; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const DTypeInfo& d : kDTypes) {
    if (d.name == name) return d.type;
  }
  return std::nullopt;
}

}  // namespace mlacheck
