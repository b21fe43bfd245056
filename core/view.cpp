// Tensor views: construction, queries and the view-returning operations.
#include "core/view.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace mlacheck {

std::string shape_string(const std::vector<int64_t>& dims) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < dims.size(); ++i) os << (i ? ", " : "") << dims[i];
  os << ']';
  return os.str();
}

View::View(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides, int64_t byte_offset)
    : dtype_(dtype), shape_(std::move(shape)), strides_(std::move(strides)), byte_offset_(byte_offset) {
  MLA_REQUIRE(shape_.size() == strides_.size(), "view: shape ", shape_string(shape_), " has ",
              shape_.size(), " dims but strides ", shape_string(strides_), " have ", strides_.size());
  MLA_REQUIRE(rank() <= kMaxRank, "view: rank ", rank(), " exceeds the maximum ", kMaxRank);
  for (int d = 0; d < rank(); ++d) {
    MLA_REQUIRE(shape_[d] >= 0, "view: negative size ", shape_[d], " in dim ", d, " of shape ",
                shape_string(shape_));
    MLA_REQUIRE(strides_[d] >= 0, "view: negative stride ", strides_[d], " in dim ", d,
                " (strides ", shape_string(strides_), "); mlacheck views use non-negative strides");
  }
  MLA_REQUIRE(byte_offset_ >= 0, "view: negative byte offset ", byte_offset_);
}

View View::contiguous(DType dtype, std::vector<int64_t> shape, int64_t byte_offset) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    strides[d] = s;
    s *= std::max<int64_t>(shape[d], 1);
  }
  return View(dtype, std::move(shape), std::move(strides), byte_offset);
}

View View::padded_rows(DType dtype, std::vector<int64_t> shape, int64_t row_stride, int64_t byte_offset) {
  View v = contiguous(dtype, shape, byte_offset);
  MLA_REQUIRE(v.rank() >= 1, "padded_rows: needs at least one dimension");
  const int64_t dense = v.rank() == 1 ? 1 : v.strides_[0];
  MLA_REQUIRE(row_stride >= dense, "padded_rows: row stride ", row_stride,
              " is smaller than the dense row of ", dense, " elements for shape ", shape_string(shape));
  v.strides_[0] = row_stride;
  return v;
}

int View::checked_dim(int dim, const char* op) const {
  MLA_REQUIRE(dim >= -rank() && dim < rank(), op, ": dim ", dim, " out of range for ", to_string());
  return dim < 0 ? dim + rank() : dim;
}

int64_t View::size(int dim) const { return shape_[checked_dim(dim, "size")]; }
int64_t View::stride(int dim) const { return strides_[checked_dim(dim, "stride")]; }
int64_t View::element_size() const { return static_cast<int64_t>(dtype_size(dtype_)); }

int64_t View::numel() const {
  int64_t n = 1;
  for (int64_t s : shape_) n *= s;
  return n;
}

bool View::is_contiguous() const {
  if (numel() == 0) return true;  // no element, no gap
  int64_t expected = 1;
  for (int d = rank() - 1; d >= 0; --d) {
    if (shape_[d] == 1) continue;
    if (strides_[d] != expected) return false;
    expected *= shape_[d];
  }
  return true;
}

ByteSpan View::byte_span() const {
  if (numel() == 0) return {byte_offset_, byte_offset_};
  int64_t last = 0;
  for (int d = 0; d < rank(); ++d) last += (shape_[d] - 1) * strides_[d];
  return {byte_offset_, byte_offset_ + (last + 1) * element_size()};
}

int64_t View::byte_offset_of(const int64_t* coords, std::size_t n) const {
  MLA_REQUIRE(static_cast<int>(n) == rank(), "element access: ", n, " coordinates ",
              shape_string(std::vector<int64_t>(coords, coords + n)), " for a rank-", rank(), " view ", to_string());
  int64_t elem = 0;
  for (int d = 0; d < rank(); ++d) {
    MLA_REQUIRE(coords[d] >= 0 && coords[d] < shape_[d], "element access: coordinate ",
                shape_string(std::vector<int64_t>(coords, coords + n)), " out of range in dim ", d, " of ", to_string());
    elem += coords[d] * strides_[d];
  }
  return byte_offset_ + elem * element_size();
}

View View::slice(int dim, int64_t start, int64_t stop, int64_t step) const {
  const int d = checked_dim(dim, "slice");
  const int64_t n = shape_[d];
  const int64_t b = start < 0 ? start + n : start;
  const int64_t e = stop < 0 ? stop + n : stop;
  MLA_REQUIRE(step >= 1, "slice: step ", step, " must be >= 1 (dim ", d, " of ", to_string(), ")");
  MLA_REQUIRE(0 <= b && b <= e && e <= n, "slice: [", start, ", ", stop, ") is not within dim ", d,
              " of size ", n, " of ", to_string());
  View v = *this;
  v.shape_[d] = (e - b + step - 1) / step;
  v.strides_[d] = strides_[d] * step;
  v.byte_offset_ = byte_offset_ + b * strides_[d] * element_size();
  return v;
}

View View::select(int dim, int64_t index) const {
  const int d = checked_dim(dim, "select");
  const int64_t i = index < 0 ? index + shape_[d] : index;
  MLA_REQUIRE(0 <= i && i < shape_[d], "select: index ", index, " out of range for dim ", d,
              " of size ", shape_[d], " of ", to_string());
  View v = *this;
  v.byte_offset_ = byte_offset_ + i * strides_[d] * element_size();
  v.shape_.erase(v.shape_.begin() + d);
  v.strides_.erase(v.strides_.begin() + d);
  return v;
}

View View::transpose(int dim0, int dim1) const {
  const int a = checked_dim(dim0, "transpose");
  const int b = checked_dim(dim1, "transpose");
  View v = *this;
  std::swap(v.shape_[a], v.shape_[b]);
  std::swap(v.strides_[a], v.strides_[b]);
  return v;
}

View View::with_byte_offset(int64_t byte_offset) const {
  return View(dtype_, shape_, strides_, byte_offset);
}

View View::reshape(std::vector<int64_t> shape) const {
  const std::string request = shape_string(shape);
  // Resolve a single -1 from the element count.
  int inferred = -1;
  int64_t known = 1;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (shape[d] == -1) {
      MLA_REQUIRE(inferred < 0, "reshape of ", to_string(), " to ", request, ": more than one -1");
      inferred = d;
    } else {
      MLA_REQUIRE(shape[d] >= 0, "reshape of ", to_string(), " to ", request, ": negative size ", shape[d]);
      known *= shape[d];
    }
  }
  const int64_t n = numel();
  if (inferred >= 0) {
    MLA_REQUIRE(known != 0 && n % known == 0, "reshape of ", to_string(), " to ", request, ": ",
                n, " elements cannot fill the -1");
    shape[inferred] = n / known;
  } else {
    MLA_REQUIRE(known == n, "reshape of ", to_string(), " to ", request, ": ", known,
                " elements requested, the view has ", n);
  }
  MLA_REQUIRE(static_cast<int>(shape.size()) <= kMaxRank, "reshape to ", request, ": rank ",
              shape.size(), " exceeds the maximum ", kMaxRank);
  if (n == 0 || rank() == 0) return contiguous(dtype_, shape, byte_offset_);

  // Walk the source from its innermost dim, in chunks of dims that are adjacent in memory (each
  // one's stride is the next one's extent). A run of new dims must cover whole chunks: inside a
  // chunk addresses advance evenly, so any split of it has strides; across a chunk boundary they
  // jump, and no single stride can express that.
  const int new_rank = static_cast<int>(shape.size());
  std::vector<int64_t> strides(new_rank, 1);
  int view_d = new_rank - 1;
  int64_t chunk_stride = strides_.back();
  int chunk_inner = rank() - 1;
  int64_t chunk_numel = 1;
  int64_t view_numel = 1;
  for (int d = rank() - 1; d >= 0; --d) {
    chunk_numel *= shape_[d];
    const bool chunk_ends = d == 0 || (shape_[d - 1] != 1 && strides_[d - 1] != chunk_numel * chunk_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < chunk_numel || shape[view_d] == 1)) {
      strides[view_d] = view_numel * chunk_stride;
      view_numel *= shape[view_d];
      --view_d;
    }
    if (view_numel != chunk_numel) {
      // The new dims that end inside this chunk also need elements of the dims outside it.
      const int outer = d - 1;
      MLA_REQUIRE(false, "reshape of ", to_string(), " to ", shape_string(shape),
                  " cannot be a view: it merges dim ", outer, " with dims ", d, "..", chunk_inner,
                  ", which are not adjacent in memory (stride[", outer, "] = ",
                  outer >= 0 ? strides_[outer] : 0, ", a merge needs ", chunk_numel * chunk_stride,
                  "); slice to a contiguous copy first or keep those dims apart (vLLM #42135)");
    }
    if (d > 0) {
      chunk_stride = strides_[d - 1];
      chunk_inner = d - 1;
      chunk_numel = 1;
      view_numel = 1;
    }
  }
  MLA_REQUIRE(view_d < 0, "reshape of ", to_string(), " to ", shape_string(shape),
              " cannot be a view: dims left over");
  return View(dtype_, std::move(shape), std::move(strides), byte_offset_);
}

std::vector<int64_t> View::coords_of_byte(int64_t byte) const {
  std::vector<int64_t> coords(rank(), 0);
  const int64_t es = element_size();
  const int64_t rel = byte - byte_offset_;
  int64_t elem = rel >= 0 ? rel / es : -((-rel + es - 1) / es);  // floor division
  // Dims by decreasing stride; stride-0 dims stay at 0. Ties keep the outer dim first.
  std::vector<int> order;
  for (int d = 0; d < rank(); ++d) {
    if (strides_[d] > 0) order.push_back(d);
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return strides_[a] > strides_[b]; });
  for (int d : order) {
    int64_t c = elem >= 0 ? elem / strides_[d] : -((-elem + strides_[d] - 1) / strides_[d]);
    coords[d] = c;
    elem -= c * strides_[d];
  }
  return coords;
}

std::string View::to_string() const {
  std::ostringstream os;
  os << dtype_name(dtype_) << shape_string(shape_) << " strides " << '(';
  for (size_t i = 0; i < strides_.size(); ++i) os << (i ? ", " : "") << strides_[i];
  os << ')';
  if (byte_offset_ != 0) os << " +" << byte_offset_ << 'B';
  return os.str();
}

std::string describe_coords(const View& v, const std::vector<int64_t>& c) {
  std::ostringstream os;
  if (v.rank() == 2) {
    os << "row " << c[0] << ", column " << c[1];
  } else {
    os << "index " << shape_string(c);
  }
  // Say in words where the coordinates fall outside the view.
  for (int d = 0; d < v.rank(); ++d) {
    const char* dim = v.rank() == 2 ? (d == 0 ? "row" : "column") : "index";
    if (c[d] < 0) {
      os << " (before the view's first " << dim << ")";
      break;
    }
    if (c[d] >= v.size(d)) {
      if (v.rank() == 2 && d == 1) {
        os << " (past the row's " << v.size(1) << " columns, in its padding)";
      } else {
        os << " (past the view's " << v.size(d) << (v.rank() == 2 ? " rows" : " in dim ");
        if (v.rank() != 2) os << d;
        os << ")";
      }
      break;
    }
  }
  return os.str();
}

}  // namespace mlacheck
