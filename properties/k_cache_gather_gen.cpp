// Cases of the indexer's K-cache gather (properties/k_cache_gather_gen.h).
#include "properties/k_cache_gather_gen.h"

#include <algorithm>
#include <limits>
#include <random>

namespace mlacheck {

int64_t KCacheGatherCase::first_block(int64_t b) const {
  int64_t n = 0;
  for (int64_t i = 0; i < b; ++i) n += blocks_of(i);
  return n;
}

int64_t KCacheGatherCase::most_blocks() const {
  int64_t most = 0;
  for (int64_t b = 0; b < B(); ++b) most = std::max(most, blocks_of(b));
  return most;
}

std::vector<int32_t> KCacheGatherCase::cu_seq_lens() const {
  std::vector<int32_t> cu = {0};
  for (int32_t len : seq_lens) cu.push_back(cu.back() + len);
  return cu;
}

int64_t KCacheGatherCase::total() const { return cu_seq_lens().back(); }

std::vector<int32_t> KCacheGatherCase::table_entries() const {
  const int64_t stride = table_row_stride(), n = table_lead + B() * stride;
  std::vector<int32_t> e(static_cast<size_t>(n));
  std::mt19937_64 rng(seed ^ 0x7ab1e5eedull);
  for (int64_t i = 0; i < n; ++i) {
    switch (unused) {
      case UnusedEntries::kMinusOne: e[static_cast<size_t>(i)] = -1; break;
      case UnusedEntries::kPastTheCache: {
        const int64_t past = num_blocks() + static_cast<int64_t>(rng() % 1024);
        e[static_cast<size_t>(i)] = static_cast<int32_t>(std::min<int64_t>(past, std::numeric_limits<int32_t>::max()));
        break;
      }
      case UnusedEntries::kAny: e[static_cast<size_t>(i)] = static_cast<int32_t>(static_cast<uint32_t>(rng())); break;
    }
  }
  for (int64_t b = 0; b < B(); ++b) {
    for (int64_t j = 0; j < blocks_of(b); ++j) {
      e[static_cast<size_t>(table_lead + b * stride + j)] = block_order[static_cast<size_t>(first_block(b) + j)];
    }
  }
  return e;
}

std::vector<int32_t> draw_gather_lengths(int64_t block_size) {
  const int64_t B = *rc::gen::weightedElement<int64_t>({{4, 1}, {4, 2}, {3, 3}, {2, 5}, {2, 8}, {1, 16}});
  const int64_t bs = block_size, most = std::min<int64_t>(kMaxGatherLength, 3 * bs + 2);
  std::vector<int32_t> lens;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t kind = *rc::gen::inRange<int64_t>(0, 8);
    int64_t len = 0;
    switch (kind) {
      case 0: len = 0; break;
      case 1: len = 1; break;
      case 2: len = bs - 1; break;
      case 3: len = bs; break;
      case 4: len = bs + 1; break;
      default: len = *rc::gen::inRange<int64_t>(0, most + 1); break;
    }
    lens.push_back(static_cast<int32_t>(std::clamp<int64_t>(len, 0, kMaxGatherLength)));
  }
  return lens;
}

KCacheGatherCase k_cache_gather_from_text(const CaseText& t) { return read_case<KCacheGatherCase>(t); }

namespace gen {
rc::Gen<KCacheGatherCase> k_cache_gather_case() { return draw_case<KCacheGatherCase>(2); }
}  // namespace gen

}  // namespace mlacheck
