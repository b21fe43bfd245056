// RapidCheck generator for paged KV block tables, shared by every paged op's properties.
#pragma once

#include <cstdint>
#include <vector>

#include <rapidcheck.h>

namespace mlacheck {

// A block table [B, W] (row-major) over a cache of num_blocks pages.
struct PagedBlockTable {
  int64_t num_blocks = 1;
  std::vector<int32_t> table;
};

namespace gen {

// needed[b] pages for request b (each <= W), shuffled over a cache with 0..3 spare pages that
// nothing references; some columns share an earlier page (prefix sharing); the columns past what a
// request needs hold garbage (-1, a page past the cache, INT32_MAX or a spare page) that a kernel
// must not read. The cache has at least one page.
rc::Gen<PagedBlockTable> paged_block_table(std::vector<int64_t> needed, int64_t W);

}  // namespace gen
}  // namespace mlacheck
