// Paged block table generator (properties/block_table_gen.h).
#include "properties/block_table_gen.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>

namespace mlacheck::gen {

rc::Gen<PagedBlockTable> paged_block_table(std::vector<int64_t> needed, int64_t W) {
  return rc::gen::exec([needed, W] {
    const int64_t B = static_cast<int64_t>(needed.size());
    const int64_t total = std::accumulate(needed.begin(), needed.end(), int64_t{0});
    PagedBlockTable t;
    t.num_blocks = std::max<int64_t>(total + *rc::gen::inRange<int64_t>(0, 4), 1);
    std::vector<int32_t> pages(static_cast<size_t>(t.num_blocks));
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), std::mt19937_64(*rc::gen::arbitrary<uint64_t>()));
    const bool share = *rc::gen::arbitrary<bool>();
    t.table.assign(static_cast<size_t>(B * W), 0);
    size_t next = 0;
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t w = 0; w < W; ++w) {
        int32_t& page = t.table[static_cast<size_t>(b * W + w)];
        if (w < needed[static_cast<size_t>(b)]) {
          page = pages[next++];
          if (share && next > 1 && *rc::gen::inRange(0, 3) == 0) {
            page = pages[static_cast<size_t>(*rc::gen::inRange<size_t>(0, next))];
          }
        } else {
          const int32_t spare = t.num_blocks > total ? pages.back() : -1;
          page = *rc::gen::element<int32_t>(-1, static_cast<int32_t>(t.num_blocks),
                                            std::numeric_limits<int32_t>::max(), spare);
        }
      }
    }
    return t;
  });
}

}  // namespace mlacheck::gen
