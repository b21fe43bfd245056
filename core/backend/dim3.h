// Grid and block shapes, shared by the portability header and the host executor.
#pragma once

#include "core/hd.h"

namespace mlacheck::simt {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  Dim3() = default;
  MLA_HD constexpr Dim3(unsigned x_, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

}  // namespace mlacheck::simt
