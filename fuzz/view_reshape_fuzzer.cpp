// libFuzzer harness: bytes -> (view, reshape target, slice) -> the view properties; aborts on a violation.
//
// Input layout, read front to back by FuzzedDataProvider (short inputs read zeros):
//   rank (0..4); per dim: size (0..6), stride (0..15); byte offset (0..15) * 4;
//   target rank (0..5); per dim: size (-1..8); slice dim, start, stop, step.
#include <cstdio>
#include <cstdlib>

#include <fuzzer/FuzzedDataProvider.h>

#include "properties/view_properties.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mlacheck;
  FuzzedDataProvider in(data, size);
  const int rank = in.ConsumeIntegralInRange(0, 4);
  std::vector<int64_t> shape(rank), strides(rank);
  for (int d = 0; d < rank; ++d) {
    shape[d] = in.ConsumeIntegralInRange<int64_t>(0, 6);
    strides[d] = in.ConsumeIntegralInRange<int64_t>(0, 15);
  }
  const View v(DType::kF32, shape, strides, in.ConsumeIntegralInRange<int64_t>(0, 15) * 4);
  std::vector<int64_t> target(in.ConsumeIntegralInRange(0, 5));
  for (int64_t& t : target) t = in.ConsumeIntegralInRange<int64_t>(-1, 8);

  Verdict bad = reshape_matches_brute_force(v, target);
  if (!bad && rank > 0) {
    const int dim = in.ConsumeIntegralInRange(0, rank - 1);
    const int64_t n = v.size(dim);
    const int64_t start = in.ConsumeIntegralInRange<int64_t>(0, n);
    const int64_t stop = in.ConsumeIntegralInRange<int64_t>(start, n);
    bad = view_ops_address_correctly(v, dim, start, stop, in.ConsumeIntegralInRange<int64_t>(1, 3));
  }
  if (bad) {
    std::fprintf(stderr, "view property violated: %s\n", bad->c_str());
    std::abort();
  }
  return 0;
}
