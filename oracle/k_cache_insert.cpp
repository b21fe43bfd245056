// The indexer's K-cache insert (oracle/k_cache_insert.h, docs/ops.md 2.3).
#include "oracle/k_cache_insert.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "core/error.h"
#include "core/fp16.h"
#include "core/fp8.h"

namespace mlacheck::oracle {

QuantizedKey quantize_indexer_key(const HostTensor& k, int64_t token, ScaleFormat format) {
  const View& v = k.view;
  MLA_REQUIRE(v.dtype() == DType::kBF16 && v.rank() == 2, "k cache insert: k must be bf16 [T, D], got ", v.to_string());
  const int64_t D = v.size(1);
  std::vector<float> x(static_cast<size_t>(D));
  float amax = 0;
  for (int64_t d = 0; d < D; ++d) {
    uint16_t bits = 0;
    std::memcpy(&bits, k.element({token, d}), 2);
    x[static_cast<size_t>(d)] = bf16_to_float(bits);
    amax = std::max(amax, std::fabs(x[static_cast<size_t>(d)]));
  }
  QuantizedKey q;
  q.scale = format == ScaleFormat::kFp32 ? fp8_e4m3_scale_fp32(amax) : ue8m0_to_float(fp8_e4m3_scale_ue8m0(amax));
  q.codes.resize(static_cast<size_t>(D));
  for (int64_t d = 0; d < D; ++d) q.codes[static_cast<size_t>(d)] = float_to_fp8_e4m3(x[static_cast<size_t>(d)] / q.scale);
  return q;
}

std::vector<int64_t> indexer_k_cache_insert(const KCacheInsertInputs& in, const PagedIndexerCache& cache) {
  const View& k = in.k.view;
  const View& slots = in.slot_mapping.view;
  MLA_REQUIRE(k.dtype() == DType::kBF16 && k.rank() == 2 && k.size(1) == cache.head_dim,
              "k cache insert: k must be bf16 [T, D = ", cache.head_dim, "], got ", k.to_string());
  MLA_REQUIRE(slots.dtype() == DType::kI32 && slots.rank() == 1 && slots.size(0) == k.size(0),
              "k cache insert: slot_mapping must be int32 [T = ", k.size(0), "], got ", slots.to_string());
  const int64_t capacity = cache.blocks.view.size(0) * cache.block_size;
  std::set<int64_t> taken;
  std::vector<int64_t> written;
  for (int64_t i = 0; i < k.size(0); ++i) {
    const int64_t s = in.slot_mapping.at<int32_t>({i});
    if (s == -1) continue;
    MLA_REQUIRE(s >= 0 && s < capacity, "k cache insert: token ", i, " has slot ", s, ", outside [0, ", capacity, ")");
    MLA_REQUIRE(taken.insert(s).second, "k cache insert: slot ", s, " is given twice");
    const QuantizedKey q = quantize_indexer_key(in.k, i, in.format);
    store_indexer_token(cache, s / cache.block_size, s % cache.block_size, q.codes.data(), q.scale);
    written.push_back(s);
  }
  return written;
}

std::vector<double> read_indexer_key(const PagedIndexerCache& cache, int64_t slot) {
  const View& v = cache.blocks.view;
  const int64_t block = slot / cache.block_size, s = slot % cache.block_size, D = cache.head_dim;
  MLA_REQUIRE(slot >= 0 && block < v.size(0), "k cache read: slot ", slot, " is outside ", v.to_string());
  const uint8_t* start = static_cast<const uint8_t*>(cache.blocks.element({block, 0}));
  float scale = 0;
  std::memcpy(&scale, start + cache.block_size * D + 4 * s, 4);
  std::vector<double> out(static_cast<size_t>(D));
  for (int64_t d = 0; d < D; ++d) out[static_cast<size_t>(d)] = double(fp8_e4m3_to_float(start[s * D + d])) * scale;
  return out;
}

}  // namespace mlacheck::oracle
