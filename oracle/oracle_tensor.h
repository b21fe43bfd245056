// The oracle's result type: a dense row-major fp64 array that owns its values, with a HostTensor
// view of itself so core/compare.h can compare a kernel's output against it. Also the one fast way
// the oracle reads an input view: every element, in row-major order, decoded exactly to double.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/tensor.h"

namespace mlacheck::oracle {

struct OracleTensor {
  std::vector<int64_t> shape;
  std::vector<double> values;  // row-major

  OracleTensor() = default;
  explicit OracleTensor(std::vector<int64_t> dims, double fill = 0.0);

  int64_t numel() const { return static_cast<int64_t>(values.size()); }
  // Row-major offset of coords (checked against the shape).
  int64_t offset(std::initializer_list<int64_t> coords) const;
  double& at(std::initializer_list<int64_t> coords) { return values[static_cast<size_t>(offset(coords))]; }
  double at(std::initializer_list<int64_t> coords) const { return values[static_cast<size_t>(offset(coords))]; }
  // An fp64 C-contiguous view over values; valid while this tensor lives and is not resized.
  HostTensor tensor() const;
};

// Every element of t in row-major order, decoded exactly (fp8, bf16, ... and integers) to double.
OracleTensor load(const HostTensor& t);

}  // namespace mlacheck::oracle
