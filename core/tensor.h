// A view bound to host memory, with element access by coordinates.
//
// HostTensor does not own memory: `base` is the start of the buffer the view's byte offset is
// relative to, and must outlive the tensor. Values go in and out as double, decoded exactly (every
// supported dtype is exact in double); storing rounds through float for fp8/bf16/fp16 formats.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/error.h"
#include "core/view.h"

namespace mlacheck {

struct HostTensor {
  void* base = nullptr;
  View view;

  HostTensor() = default;
  HostTensor(void* buffer_start, View v) : base(buffer_start), view(std::move(v)) {}
  // Checks that the view's bytes lie inside a buffer of buffer_bytes bytes.
  static HostTensor bind(void* buffer_start, int64_t buffer_bytes, const View& v);

  uint8_t* bytes() const { return static_cast<uint8_t*>(base); }
  // Coordinates as a vector or a braced list ({r, c}: no allocation).
  void* element(const std::vector<int64_t>& coords) const { return bytes() + view.byte_offset_of(coords); }
  void* element(std::initializer_list<int64_t> coords) const { return bytes() + view.byte_offset_of(coords); }

  double load(const std::vector<int64_t>& coords) const;
  void store(const std::vector<int64_t>& coords, double value) const;

  // Typed access; T must be the view's storage type (float for fp32, int32_t for int32, ...).
  template <class T>
  T& at(const std::vector<int64_t>& coords) const {
    check_typed(dtype_of<T>::value);
    return *static_cast<T*>(element(coords));
  }
  template <class T>
  T& at(std::initializer_list<int64_t> coords) const {
    check_typed(dtype_of<T>::value);
    return *static_cast<T*>(element(coords));
  }

 private:
  void check_typed(DType t) const {
    MLA_REQUIRE(t == view.dtype(), "typed access as ", dtype_name(t), " to a ", view.to_string(), " view");
  }
};

// Decodes one element of dtype t at p to double / encodes a double into it.
double load_element(DType t, const void* p);
void store_element(DType t, void* p, double value);

}  // namespace mlacheck
