// The backend test kernels of one backend (host, cuda or hip: whichever compiler includes this).
#pragma once

#include "core/backend/simt.h"
#include "tests/core/backend/simt_test_checks.h"

namespace mlacheck::simt_test_kernels::MLA_BACKEND_NS {

// The table the checks drive; launches go to the default stream.
SimtKernels kernels();

// block_sum on a given stream, for stream capture and graph replay tests.
void block_sum(const float* in, float* out, int rows, int cols, int threads, simt::Stream stream);

}  // namespace mlacheck::simt_test_kernels::MLA_BACKEND_NS
