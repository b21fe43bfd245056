// View properties: brute-force reshape and address checks.
#include "properties/view_properties.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace mlacheck {
namespace {

// Element offsets (in elements, without the byte offset) of v in row-major order.
std::vector<int64_t> element_addresses(const View& v) {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(v.numel()));
  const int64_t es = v.element_size();
  v.for_each_byte_offset([&](int64_t b) { out.push_back((b - v.byte_offset()) / es); });
  return out;
}

}  // namespace

std::optional<std::vector<int64_t>> brute_force_reshape_strides(const View& v, const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  if (n != v.numel()) return std::nullopt;
  std::vector<int64_t> strides(shape.size(), 0);
  if (n == 0) return strides;
  const std::vector<int64_t> addr = element_addresses(v);
  // A unit step in dim d moves the row-major index by the product of the sizes after d.
  int64_t inner = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    strides[d] = shape[d] > 1 ? addr[static_cast<size_t>(inner)] - addr[0] : 0;
    if (strides[d] < 0) return std::nullopt;
    inner *= shape[d];
  }
  // Every element must then sit where those strides put it.
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t a = addr[0];
    for (size_t d = 0; d < shape.size(); ++d) a += idx[d] * strides[d];
    if (a != addr[static_cast<size_t>(i)]) return std::nullopt;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0 && ++idx[d] == shape[d]; --d) idx[d] = 0;
  }
  return strides;
}

Verdict reshape_matches_brute_force(const View& v, const std::vector<int64_t>& shape) {
  std::vector<int64_t> resolved = shape;
  int64_t known = 1;
  int inferred = -1, minus_ones = 0;
  bool negative = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      inferred = static_cast<int>(d);
      ++minus_ones;
    } else if (shape[d] < 0) {
      negative = true;
    } else {
      known *= shape[d];
    }
  }
  bool well_formed = !negative && minus_ones <= 1 && static_cast<int>(shape.size()) <= View::kMaxRank;
  if (well_formed && inferred >= 0) {
    well_formed = known != 0 && v.numel() % known == 0;
    if (well_formed) resolved[inferred] = v.numel() / known;
  }
  std::optional<std::vector<int64_t>> expect;
  if (well_formed) expect = brute_force_reshape_strides(v, resolved);

  std::optional<View> got;
  std::string error;
  try {
    got = v.reshape(shape);
  } catch (const Error& e) {
    error = e.what();
  }
  std::ostringstream os;
  if (!got && expect) {
    os << "reshape of " << v.to_string() << " to " << shape_string(shape) << " refused (" << error
       << ") but strides " << shape_string(*expect) << " express it";
    return os.str();
  }
  if (got && !expect) {
    os << "reshape of " << v.to_string() << " to " << shape_string(shape) << " gave " << got->to_string()
       << " but no strides can express it";
    return os.str();
  }
  if (!got) {
    if (error.find(v.to_string()) == std::string::npos && v.numel() > 0) {
      return "refusal does not name the source view: " + error;
    }
    return std::nullopt;
  }
  if (got->shape() != resolved || got->byte_offset() != v.byte_offset() || got->dtype() != v.dtype()) {
    return "reshape gave " + got->to_string() + " for " + v.to_string() + " to " + shape_string(shape);
  }
  const std::vector<int64_t> a = element_addresses(v), b = element_addresses(*got);
  if (a != b) {
    const size_t i = static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin()).first - a.begin());
    os << "reshape of " << v.to_string() << " to " << got->to_string() << ": element " << i << " is at "
       << b[i] << ", the source has it at " << a[i];
    return os.str();
  }
  return std::nullopt;
}

Verdict view_ops_address_correctly(const View& v, int dim, int64_t start, int64_t stop, int64_t step) {
  std::ostringstream os;
  // byte_span: covers every element, and its ends are elements' ends.
  const ByteSpan span = v.byte_span();
  if (v.numel() > 0) {
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    v.for_each_byte_offset([&](int64_t b) {
      lo = std::min(lo, b);
      hi = std::max(hi, b + v.element_size());
    });
    if (lo != span.begin || hi != span.end) {
      os << v.to_string() << ": byte_span [" << span.begin << ", " << span.end << ") but elements cover [" << lo
         << ", " << hi << ")";
      return os.str();
    }
  } else if (!span.empty()) {
    return v.to_string() + ": empty view with a non-empty byte span";
  }
  if (v.rank() == 0) return std::nullopt;
  // slice(dim, start, stop, step): element i along dim is source element start + i*step.
  const View s = v.slice(dim, start, stop, step);
  std::optional<std::string> bad;
  s.for_each_index([&](const std::vector<int64_t>& idx) {
    if (bad) return;
    std::vector<int64_t> src = idx;
    src[dim] = start + idx[dim] * step;
    if (s.byte_offset_of(idx) != v.byte_offset_of(src)) {
      bad = "slice " + s.to_string() + " of " + v.to_string() + ": element " + shape_string(idx) +
            " is not source element " + shape_string(src);
    }
  });
  if (bad) return bad;
  // select(dim, i) and transpose(0, dim).
  if (v.size(dim) > 0) {
    const int64_t i = v.size(dim) - 1;
    const View sel = v.select(dim, i);
    sel.for_each_index([&](const std::vector<int64_t>& idx) {
      if (bad) return;
      std::vector<int64_t> src = idx;
      src.insert(src.begin() + dim, i);
      if (sel.byte_offset_of(idx) != v.byte_offset_of(src)) bad = "select " + sel.to_string() + " of " + v.to_string();
    });
    if (bad) return bad;
  }
  const View t = v.transpose(0, dim);
  t.for_each_index([&](const std::vector<int64_t>& idx) {
    if (bad) return;
    std::vector<int64_t> src = idx;
    std::swap(src[0], src[dim]);
    if (t.byte_offset_of(idx) != v.byte_offset_of(src)) bad = "transpose " + t.to_string() + " of " + v.to_string();
  });
  return bad;
}

}  // namespace mlacheck
