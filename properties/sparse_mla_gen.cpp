// The entries of sparse MLA decode cases and their schema's wrappers (properties/sparse_mla_gen.h).
#include "properties/sparse_mla_gen.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "oracle/sparse_mla.h"
#include "properties/random_values.h"

namespace mlacheck {

bool SparseMlaCase::counted_valid(int64_t b, int64_t s, int64_t i) const {
  return i < row_length(b) && oracle::sparse_mla_index_valid(index(b, s, i), num_slots());
}

void fill_sparse_mla_entries(SparseMlaCase& c, int64_t live, int invalid_mix, bool empty_rows) {
  std::mt19937_64 rng(c.seed ^ 0x5eed5eedULL);
  const int64_t pages = c.num_blocks - c.block_base;  // entries count slots from block_base's first
  std::vector<int32_t> blocks(static_cast<size_t>(pages));
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  const auto pick = [&](int64_t first, int64_t count) {
    return static_cast<int32_t>(blocks[static_cast<size_t>(first + static_cast<int64_t>(rng() % count))] * c.page +
                                static_cast<int64_t>(rng() % c.page));
  };
  c.trap = pick(live, pages - live);
  if (c.has_length) {
    c.lengths.resize(static_cast<size_t>(c.B));
    for (int32_t& l : c.lengths) {
      const uint64_t kind = rng() % 6;
      l = static_cast<int32_t>(kind == 0 ? 0 : kind == 1 ? c.topk : static_cast<int64_t>(rng() % (c.topk + 1)));
    }
  }
  const int32_t slots = static_cast<int32_t>(pages * c.page);
  std::array<int32_t, 8> invalid = {-1,
                                          -1,
                                          -2,
                                          std::numeric_limits<int32_t>::min(),
                                          -static_cast<int32_t>(c.page),
                                          slots,
                                          slots + static_cast<int32_t>(rng() % c.page),
                                          std::numeric_limits<int32_t>::max()};
  if (c.invalid == SparseMlaCase::Invalid::kMinusOne) invalid.fill(-1);
  const double invalid_p = std::array<double, 4>{0.0, 0.2, 0.5, 0.9}[static_cast<size_t>(invalid_mix)];
  c.indices.resize(static_cast<size_t>(c.B * c.S * c.topk));
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t s = 0; s < c.S; ++s) {
      const bool none_valid = empty_rows && rng() % 8 == 0;
      std::vector<int32_t> named;
      for (int64_t i = 0; i < c.topk; ++i) {
        int32_t& e = c.indices[static_cast<size_t>((b * c.S + s) * c.topk + i)];
        if (i >= c.row_length(b) && rng() % 2 == 0) {
          e = rng() % 2 == 0 ? pick(live, pages - live) : pick(0, live);  // not counted: may be poison
        } else if (none_valid || canonical_double(rng) < invalid_p) {
          e = invalid[rng() % invalid.size()];
        } else if (!named.empty() && rng() % 4 == 0) {
          e = named[rng() % named.size()];  // a duplicate counts twice
        } else {
          e = pick(0, live);
          named.push_back(e);
        }
      }
    }
  }
  if (c.has_sink) {
    c.sink.resize(static_cast<size_t>(c.H));
    for (float& v : c.sink) {
      const uint64_t kind = rng() % 12;
      v = kind == 0 ? HUGE_VALF : kind == 1 ? -HUGE_VALF : uniform(rng, -4, 8);
    }
  }
}

void sparse_mla_to_text(const SparseMlaCase& c, CaseText& out) { write_case(c, out); }

SparseMlaCase sparse_mla_from_text(const CaseText& t) { return read_case<SparseMlaCase>(t); }
SparseMlaCase sparse_mla_far_from_text(const CaseText& t) {
  gen::SparseMlaShape far;
  far.far_slots = true;
  return read_case<SparseMlaCase>(t, far);
}

namespace gen {

rc::Gen<SparseMlaCase> sparse_mla_case(SparseMlaShape shape) { return draw_case<SparseMlaCase>(2, shape); }

}  // namespace gen
}  // namespace mlacheck
