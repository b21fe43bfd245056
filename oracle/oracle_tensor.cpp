// OracleTensor and the row-major loader of input views.
#include "oracle/oracle_tensor.h"

#include "core/error.h"

namespace mlacheck::oracle {

OracleTensor::OracleTensor(std::vector<int64_t> dims, double fill) : shape(std::move(dims)) {
  int64_t n = 1;
  for (int64_t d : shape) {
    MLA_REQUIRE(d >= 0, "oracle tensor: negative dimension in ", shape_string(shape));
    n *= d;
  }
  values.assign(static_cast<size_t>(n), fill);
}

int64_t OracleTensor::offset(std::initializer_list<int64_t> coords) const {
  MLA_REQUIRE(coords.size() == shape.size(), "oracle tensor: ", coords.size(), " coordinates for shape ",
              shape_string(shape));
  int64_t off = 0;
  size_t d = 0;
  for (int64_t c : coords) {
    MLA_REQUIRE(c >= 0 && c < shape[d], "oracle tensor: coordinate ", c, " of dimension ", d, " outside shape ",
                shape_string(shape));
    off = off * shape[d++] + c;
  }
  return off;
}

HostTensor OracleTensor::tensor() const {
  return HostTensor(const_cast<double*>(values.data()), View::contiguous(DType::kF64, shape));
}

OracleTensor load(const HostTensor& t) {
  OracleTensor out(t.view.shape());
  double* dst = out.values.data();
  const DType dtype = t.view.dtype();
  t.view.for_each_byte_offset([&](int64_t byte) { *dst++ = load_element(dtype, t.bytes() + byte); });
  return out;
}

}  // namespace mlacheck::oracle
