// A tensor view: dtype, shape, strides in elements and a byte offset into a buffer it does not own.
//
// Views are plain values. They may be non-contiguous, offset into a larger allocation, padded (a
// row stride larger than the row) or broadcast (stride 0), as the views vLLM hands its kernels are.
// Operations that return views (slice, select, reshape, transpose) never copy data; those that
// cannot produce a valid view throw mlacheck::Error naming the shapes, strides and what was expected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace mlacheck {

// A half-open byte range [begin, end) relative to the start of a buffer.
struct ByteSpan {
  int64_t begin = 0;
  int64_t end = 0;
  bool empty() const { return end <= begin; }
  int64_t size() const { return end - begin; }
};

class View {
 public:
  static constexpr int kMaxRank = 8;

  View() = default;
  // Strides are in elements and must be >= 0; the byte offset must be >= 0.
  View(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides, int64_t byte_offset = 0);
  // The C-contiguous (row-major, dense) view of a shape.
  static View contiguous(DType dtype, std::vector<int64_t> shape, int64_t byte_offset = 0);
  // Row-major with the outermost stride widened: shape [rows, ...] with rows row_stride apart, as a
  // padded allocation (e.g. logits rows aligned to 256 elements) gives.
  static View padded_rows(DType dtype, std::vector<int64_t> shape, int64_t row_stride, int64_t byte_offset = 0);

  DType dtype() const { return dtype_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int64_t size(int dim) const;
  int64_t stride(int dim) const;
  int64_t byte_offset() const { return byte_offset_; }
  int64_t element_size() const;

  int64_t numel() const;
  // C-contiguous: dense row-major with no gaps. Strides of size-1 dimensions are ignored, as in
  // PyTorch, since they never move the address.
  bool is_contiguous() const;
  // The bytes from the lowest to one past the highest byte any element touches (gaps included);
  // empty for a view with no elements.
  ByteSpan byte_span() const;
  // Byte offset (from the buffer start) of the element at coords; coords must be in range.
  int64_t byte_offset_of(const std::vector<int64_t>& coords) const {
    return byte_offset_of(coords.data(), coords.size());
  }
  int64_t byte_offset_of(std::initializer_list<int64_t> coords) const {
    return byte_offset_of(coords.begin(), coords.size());
  }
  int64_t byte_offset_of(const int64_t* coords, std::size_t n) const;

  // Elements [start, stop) with the given step along dim; negative start/stop count from the end
  // and out-of-range bounds are an error (not clamped: a silently shortened view hides bugs).
  View slice(int dim, int64_t start, int64_t stop, int64_t step = 1) const;
  // Fixes dim at index and removes it.
  View select(int dim, int64_t index) const;
  // The same elements in row-major order under a new shape, without copying (PyTorch's view()).
  // One entry may be -1 and is inferred. Throws if the shape has another element count, or if the
  // strides cannot express it (e.g. merging two dimensions that are not adjacent in memory: the
  // mistake behind vLLM #42135).
  View reshape(std::vector<int64_t> shape) const;
  View transpose(int dim0, int dim1) const;
  // Same view with another byte offset.
  View with_byte_offset(int64_t byte_offset) const;

  // "fp32[4, 128] strides (256, 1) +1024B".
  std::string to_string() const;

  // Visits every coordinate in row-major order (an empty view visits nothing).
  template <class F>
  void for_each_index(F&& f) const {
    if (numel() == 0) return;
    std::vector<int64_t> idx(shape_.size(), 0);
    for (;;) {
      f(static_cast<const std::vector<int64_t>&>(idx));
      int d = rank() - 1;
      while (d >= 0 && ++idx[d] == shape_[d]) idx[d--] = 0;
      if (d < 0) return;
    }
  }

  // Calls f(byte_offset) for every element, in row-major order; faster than for_each_index.
  template <class F>
  void for_each_byte_offset(F&& f) const {
    if (numel() == 0) return;
    const int64_t es = element_size();
    if (rank() == 0) return f(byte_offset_);
    const int inner = rank() - 1;
    const int64_t n = shape_[inner];
    const int64_t step = strides_[inner] * es;
    std::vector<int64_t> idx(inner, 0);
    for (;;) {
      int64_t row = byte_offset_;
      for (int d = 0; d < inner; ++d) row += idx[d] * strides_[d] * es;
      for (int64_t i = 0; i < n; ++i) f(row + i * step);
      int d = inner - 1;
      while (d >= 0 && ++idx[d] == shape_[d]) idx[d--] = 0;
      if (d < 0) return;
    }
  }

  // Calls f(first_byte, bytes) for runs of adjacent elements covering every element once, in
  // row-major order: the whole view when it is contiguous, else each innermost row when its
  // elements are adjacent (stride 1), else each element. For bulk fills and copies.
  template <class F>
  void for_each_run(F&& f) const {
    if (numel() == 0) return;
    const int64_t es = element_size();
    if (is_contiguous()) return f(byte_offset_, numel() * es);
    if (rank() > 0 && (strides_.back() == 1 || shape_.back() == 1)) {
      const int64_t row = shape_.back() * es;
      return select_rows_([&](int64_t start) { f(start, row); });
    }
    for_each_byte_offset([&](int64_t off) { f(off, es); });
  }

  // The coordinates of the element that holds, or is nearest below, the given buffer byte, found by
  // dividing the distance from the view's start by its strides, outermost first. They are not
  // clamped to the shape: row 8 of an 8-row view is the row just past it, column 130 of a 128-column
  // row with stride 256 is in the row padding, and a byte before the view gives a negative outermost
  // coordinate. Meant for reports ("the stray write is at row 3, column 130").
  std::vector<int64_t> coords_of_byte(int64_t byte) const;

  friend bool operator==(const View& a, const View& b) {
    return a.dtype_ == b.dtype_ && a.shape_ == b.shape_ && a.strides_ == b.strides_ &&
           a.byte_offset_ == b.byte_offset_;
  }
  friend bool operator!=(const View& a, const View& b) { return !(a == b); }

 private:
  int checked_dim(int dim, const char* op) const;
  // Calls f(byte offset of element 0 of the innermost dimension) for every innermost row.
  template <class F>
  void select_rows_(F&& f) const {
    const int64_t es = element_size();
    const int outer = rank() - 1;
    std::vector<int64_t> idx(static_cast<size_t>(outer), 0);
    for (;;) {
      int64_t row = byte_offset_;
      for (int d = 0; d < outer; ++d) row += idx[d] * strides_[d] * es;
      f(row);
      int d = outer - 1;
      while (d >= 0 && ++idx[d] == shape_[d]) idx[d--] = 0;
      if (d < 0) return;
    }
  }

  DType dtype_ = DType::kU8;
  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;
  int64_t byte_offset_ = 0;
};

// "[4, 128]"
std::string shape_string(const std::vector<int64_t>& dims);

// Coordinates in v (from View::coords_of_byte) for a report: "row 8, column 0 (past the view's 8
// rows)", "row 2, column 130 (past the row's 128 columns, in its padding)", "index [1, 0, 3]".
std::string describe_coords(const View& v, const std::vector<int64_t>& coords);

}  // namespace mlacheck
