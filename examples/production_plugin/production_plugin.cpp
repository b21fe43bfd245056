// A plugin around a production-style top-k decode (production_topk.h), registered with the
// contract such a kernel really has: `mlacheck check` draws cases only inside it, so every failure
// is a defect the kernel's users can hit. Built with PRODUCTION_PLUGIN_BUG=1 it is its buggy twin.
//
//   mlacheck check --plugin ./libmlacheck_production_plugin.so                   # PASS
//   mlacheck check --plugin ./libmlacheck_production_plugin.so --contract-probe  # and what lies outside
//   mlacheck check --plugin ./libmlacheck_production_plugin_buggy.so             # FAIL, row and column
#include <algorithm>
#include <cstring>
#include <vector>

#include "production_topk.h"

namespace production {

// The same algorithm's shortcuts on the host: unclamped lengths, a contiguous output, unit column
// stride; the selection by the same order keys.
int topk_decode_host(const mlacheck_topk_decode_args& a, char*, size_t) {
  const int64_t rows = a.logits.shape[0], k = a.k;
  const auto* logits = static_cast<const float*>(a.logits.data);
  const auto* seq_lens = static_cast<const int32_t*>(a.seq_lens.data);
  auto* out = static_cast<int32_t*>(a.out.data);
  std::vector<std::pair<uint32_t, int32_t>> keys;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = seq_lens[r / a.next_n] - a.next_n + r % a.next_n + 1;
    const float* row = logits + r * a.logits.strides[0];
    int32_t* dst = out + r * k;
    if (n <= k) {
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<int32_t>(i);
      for (int64_t i = fill_start(n); i < k; ++i) dst[i] = -1;
      continue;
    }
    keys.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      uint32_t bits;
      std::memcpy(&bits, row + i, 4);
      keys[static_cast<size_t>(i)] = {order_key(bits), static_cast<int32_t>(i)};
    }
    std::nth_element(keys.begin(), keys.begin() + k, keys.end(),
                     [](const auto& x, const auto& y) { return x.first > y.first; });
    for (int64_t i = 0; i < k; ++i) dst[i] = keys[static_cast<size_t>(i)].second;
  }
  return 0;
}

#if !defined(PRODUCTION_PLUGIN_CUDA)
int topk_decode_cuda(const mlacheck_topk_decode_args&, void*, char* error, size_t error_size) {
  return mlacheck_error(error, error_size, "the production plugin was built without CUDA");
}
#endif

}  // namespace production

namespace {

int topk_decode(const mlacheck_device* device, const mlacheck_topk_decode_args* a, char* error, size_t error_size) {
  return device->backend == MLACHECK_BACKEND_CUDA ? production::topk_decode_cuda(*a, device->stream, error, error_size)
                                                  : production::topk_decode_host(*a, error, error_size);
}

#if PRODUCTION_PLUGIN_BUG
constexpr const char* kName = "production_buggy";
constexpr const char* kSummary = "production-style top-k's twin: a short row's -1 fill starts one past its length";
#else
constexpr const char* kName = "production";
constexpr const char* kSummary = "production-style top-k: radix select per row, k indices in shared memory";
#endif

// What the kernel assumes, in mlacheck's words (production_topk.h says why each holds).
constexpr const char* kContract =
    "k <= 2048              # k x 4 bytes of shared memory per block\n"
    "out contiguous         # row r at out + r * k\n"
    "logits padded-rows     # column stride 1\n"
    "seq_lens rank 1\n"
    "seq_lens >= next_n     # row lengths are not clamped at 0\n"
    "finite                 # a NaN key would sort as the largest\n";

int register_impls(const mlacheck_plugin_api* api) {
  if (MLACHECK_ADD_TOPK_DECODE(api, kName, kSummary, topk_decode) != 0) return 1;
  return MLACHECK_CONTRACT(api, "topk_decode", kName, kContract);
}

}  // namespace

MLACHECK_DEFINE_PLUGIN("mlacheck production-style plugin", register_impls)
