// A kernel project's own tests, written with mlacheck's installed package: its top-k is run through
// mlacheck's generator of top-k cases and its rows_admissible property (every buffer guarded, ties,
// NaN and -inf rows, padded views), and a hand-made case is checked against mlacheck's oracle.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

// Only the public headers (include/mlacheck/): the catalogue test checks this file includes no other.
#include "mlacheck/properties.h"

namespace {

using namespace mlacheck;

// The project's kernel (here a host loop): top-k of each decode row, with docs/ops.md 3's row lengths.
kernels::TopkPath my_topk(kernels::Device&, const kernels::DeviceTensor& logits, int64_t next_n,
                          const kernels::DeviceTensor& seq_lens, int64_t k, const kernels::DeviceTensor& out,
                          const kernels::DeviceTensor&, const kernels::DeviceTensor&) {
  const View& lv = logits.view;
  const float* x = logits.data<float>();
  const int32_t* lens = seq_lens.data<int32_t>();
  int32_t* o = out.data<int32_t>();
  for (int64_t r = 0; r < lv.size(0); ++r) {
    int64_t n = seq_lens.view.rank() == 2 ? lens[r] : lens[(r / next_n) * seq_lens.view.stride(0)] - next_n + r % next_n + 1;
    n = std::max<int64_t>(0, n);
    std::vector<int32_t> idx(static_cast<size_t>(n));
    std::iota(idx.begin(), idx.end(), 0);
    const auto value = [&](int32_t i) {
      const float v = x[r * lv.stride(0) + i * lv.stride(1)];
      return std::isnan(v) ? -INFINITY : v;
    };
    // A row that fits is [0, 1, ..., n-1, -1, ...] in order (docs/ops.md 3); a longer one, its k largest.
    if (n > k) std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return value(a) > value(b); });
    for (int64_t i = 0; i < k; ++i) o[r * out.view.stride(0) + i] = i < n ? idx[static_cast<size_t>(i)] : -1;
  }
  return kernels::TopkPath::kGeneral;
}

RC_GTEST_PROP(MyTopk, RowsAreAdmissibleOnMlacheckCases, ()) {
  const TopkCase c = *gen::topk_decode_case();
  const auto device = kernels::make_device(Backend::kHost);
  CaseText text = case_header("topk_decode.rows_admissible", "topk_decode@mine");
  topk_to_text(c, text);
  rc_require(topk_decode_rows_admissible(*device, &my_topk, c), text);
}

TEST(MyTopk, AWrongKernelIsCaught) {
  // The same kernel with each row's last candidate dropped must fail on some generated case.
  const auto wrong = [](kernels::Device&, const kernels::DeviceTensor&, int64_t, const kernels::DeviceTensor&,
                        int64_t k, const kernels::DeviceTensor& out, const kernels::DeviceTensor&,
                        const kernels::DeviceTensor&) {
    for (int64_t r = 0; r < out.view.size(0); ++r) {
      for (int64_t i = 0; i < k; ++i) out.data<int32_t>()[r * out.view.stride(0) + i] = -1;
    }
    return kernels::TopkPath::kGeneral;
  };
  const auto device = kernels::make_device(Backend::kHost);
  const auto result = rc::check([&] {
    const TopkCase c = *gen::topk_decode_case();
    RC_ASSERT(!topk_decode_rows_admissible(*device, +wrong, c).has_value());
  });
  EXPECT_FALSE(result) << "a kernel that writes -1 everywhere must be caught";
}

TEST(MyTopk, TheOracleAndAGuardedBufferWorkDirectly) {
  // A row of 5 values, k 2: the oracle's choice, the kernel's output in a guarded buffer, and a
  // stray write one element past the output view caught by the guard.
  const double values[5] = {0.5, 4.0, -1.0, 9.0, 2.0};
  std::vector<int32_t> want = oracle::topk_reference_row(values, 5, 2);
  std::sort(want.begin(), want.end());
  EXPECT_EQ(want, (std::vector<int32_t>{1, 3}));
  GuardedBuffer buf("out", 64);
  const View row = View::contiguous(DType::kI32, {1, 2});
  buf.declare_output("row", row);
  buf.arm();
  int32_t* o = reinterpret_cast<int32_t*>(buf.data());
  o[0] = 3, o[1] = 1;
  EXPECT_TRUE(buf.check().ok());
  o[2] = 7;  // one element past the view
  const GuardReport g = buf.check();
  EXPECT_FALSE(g.ok());
  EXPECT_NE(g.describe().find("at row 1, column 0 (past the view's 1 rows)"), std::string::npos) << g.describe();
}

}  // namespace
