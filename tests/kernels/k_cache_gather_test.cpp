// Tests of kernels/k_cache_gather_glue.h: the gather through the shared properties of
// properties/k_cache_gather_properties.h on the host device (and cuda when usable), every buffer
// guarded; its launches bit-identical under shuffled schedules; the properties reporting wrong
// readers (seeded variants G1, G2 and G3, a scale copied through a double, a write to a spare row); the
// case schema's round trip; bad views refused before any launch.
#include "kernels/k_cache_gather_glue.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/read_fence.h"
#include "harness/rc_verdict.h"
#include "harness/testbed.h"
#include "kernels/registry.h"
#include "properties/k_cache_gather_properties.h"
#include "properties/property_registry.h"
#include "tests/support/in_child.h"
#include "tests/support/round_trip.h"

namespace mlacheck::kernels {
namespace {

CaseText gather_text(const std::string& property, const KCacheGatherCase& c) {
  CaseText t = case_header(property, "indexer_k_cache_gather@ref");
  write_case(c, t);
  return t;
}

RC_GTEST_PROP(KCacheGather, EveryRowHoldsItsTokensBytesAndNothingElseChanges, ()) {
  const KCacheGatherCase c = *gen::k_cache_gather_case();
  RC_TAG(c.total() == 0 ? "no row" : c.spare_rows > 0 ? "spare rows" : "rows to the end");
  RC_TAG(c.table_row_pad > 0 ? "padded table rows" : "contiguous table");
  rc_require(k_cache_gather_equals_oracle(*make_device(Backend::kHost), &indexer_k_cache_gather, c),
             gather_text("indexer_k_cache_gather.equals_oracle", c));
}

RC_GTEST_PROP(KCacheGather, GetsBackWhatTheInsertWrote, ()) {
  const KCacheGatherCase c = *gen::k_cache_gather_case();
  rc_require(k_cache_gather_inverts_insert(*make_device(Backend::kHost), &indexer_k_cache_gather, c),
             gather_text("indexer_k_cache_gather.inverts_insert", c));
}

// indexer_k_cache_gather.deterministic: each case launched 4 times, the later ones under shuffled
// schedules, bit-identical outputs.
RC_GTEST_PROP(KCacheGather, LaunchesAreBitIdentical, ()) {
  const KCacheGatherCase c = *gen::k_cache_gather_case();
  const ScopedRepeats repeats(4);
  rc_require(k_cache_gather_equals_oracle(*make_device(Backend::kHost), &indexer_k_cache_gather, c),
             gather_text("indexer_k_cache_gather.deterministic", c));
}

TEST(KCacheGather, TheCaseFileReadsBackAsTheSameCase) {
  test_support::expect_case_text_round_trips<KCacheGatherCase>(gen::k_cache_gather_case(), &k_cache_gather_from_text,
                                                               200);
}

TEST(KCacheGather, TheDeterministicPropertyIsRegistered) {
  const PropertyEntry& e = property_registry().find("indexer_k_cache_gather.deterministic");
  EXPECT_EQ(e.op, "indexer_k_cache_gather");
}

// ---- the properties catch wrong readers ------------------------------------------------------------

// A case by its text (the keys the schema reads, in its order).
KCacheGatherCase case_of(const std::string& keys) {
  return k_cache_gather_from_text(CaseText::parse(keys + "\nwarp 32\nshuffled 0\n"));
}

// G1: three requests of one block each, table rows of W = 1 in rows of 2 entries (padding -1), the
// cache's lead as wide as a block: request 1's row read at entry 1 takes row 0's padding (-1: the
// lead's bytes), request 2's at entry 2 takes request 1's block.
const char kG1Case[] =
    "head_dim 4\nblock_size 2\nseq_lens 2 1 2\nspare_blocks 1\nblock_pad 0\ncache_lead 4\nblock_order 2 0 3 1\n"
    "table_cols 1\ntable_row_pad 1\ntable_lead 0\nunused_entries minus-one\ndst_row_pad 0\ndst_lead 0\n"
    "scale_lead 0\nspare_rows 0\nue8m0 0\nmagnitude_log2 0\nseed 0x9";
// G2: requests of 3 and 2 tokens in blocks of 4: row 3, request 1's first, read as request 0's
// token 3 (slot 3 of its block, which no request uses).
const char kG2Case[] =
    "head_dim 4\nblock_size 4\nseq_lens 3 2\nspare_blocks 0\nblock_pad 0\ncache_lead 0\nblock_order 1 0\n"
    "table_cols 1\ntable_row_pad 0\ntable_lead 0\nunused_entries minus-one\ndst_row_pad 0\ndst_lead 0\n"
    "scale_lead 0\nspare_rows 2\nue8m0 0\nmagnitude_log2 0\nseed 0x3";

// G3: requests of 2 and 3 tokens in blocks of 4 and one spare row: row 5 read as request 1's token
// 3 (slot 3 of its block) and written.
const char kG3Case[] =
    "head_dim 4\nblock_size 4\nseq_lens 2 3\nspare_blocks 0\nblock_pad 0\ncache_lead 0\nblock_order 1 0\n"
    "table_cols 1\ntable_row_pad 0\ntable_lead 0\nunused_entries minus-one\ndst_row_pad 0\ndst_lead 0\n"
    "scale_lead 0\nspare_rows 1\nue8m0 0\nmagnitude_log2 0\nseed 0x5";

TEST(KCacheGather, TheSeededVariantsFailTheirCases) {
  const auto device = make_device(Backend::kHost);
  KCacheGatherFn* g1 = registry().find<KCacheGatherFn>("indexer_k_cache_gather@G1");
  KCacheGatherFn* g2 = registry().find<KCacheGatherFn>("indexer_k_cache_gather@G2");
  KCacheGatherFn* g3 = registry().find<KCacheGatherFn>("indexer_k_cache_gather@G3");
  const KCacheGatherCase a = case_of(kG1Case), b = case_of(kG2Case), c = case_of(kG3Case);
  for (const KCacheGatherCase* x : {&a, &b, &c}) {
    EXPECT_EQ(k_cache_gather_equals_oracle(*device, &indexer_k_cache_gather, *x), std::nullopt);
    EXPECT_EQ(k_cache_gather_inverts_insert(*device, &indexer_k_cache_gather, *x), std::nullopt);
  }
  const Verdict v1 = k_cache_gather_equals_oracle(*device, g1, a);
  ASSERT_TRUE(v1.has_value());
  // Row 2 (request 1's token) read from the lead; under AddressSanitizer the fence sees the read of
  // the table's padding first.
  EXPECT_TRUE(v1->rfind("row 2 (request 1 of 3, token 0: block 0, slot 0): code ", 0) == 0 ||
              (ReadFence::available() && v1->rfind("fence of block_table: ", 0) == 0))
      << *v1;
  const Verdict v2 = k_cache_gather_equals_oracle(*device, g2, b);
  ASSERT_TRUE(v2.has_value());
  EXPECT_EQ(v2->rfind("row 3 (request 1 of 2, token 0: block 0, slot 0): code ", 0), 0u) << *v2;
  EXPECT_TRUE(k_cache_gather_inverts_insert(*device, g2, b).has_value());
  const Verdict v3 = k_cache_gather_equals_oracle(*device, g3, c);
  ASSERT_TRUE(v3.has_value());
  EXPECT_EQ(v3->rfind("guard of dst_k: ", 0), 0u) << *v3;
  EXPECT_NE(v3->find("nearest output view 'dst_k rows' uint8[5, 4] strides (4, 1) at row 5, column 0"), std::string::npos)
      << *v3;
}

// Random cases: each variant is caught (a verdict, or a crash where it followed a garbage table
// entry out of the cache: `mlacheck check` runs every case in a child, and so does this).
TEST(KCacheGather, TheSeededVariantsAreCaughtOnRandomCases) {
  for (const char* variant : {"indexer_k_cache_gather@G1", "indexer_k_cache_gather@G2", "indexer_k_cache_gather@G3"}) {
    KCacheGatherFn* fn = registry().find<KCacheGatherFn>(variant);
    const int status = test_support::in_child([&] {
      for (uint64_t seed = 1; seed <= 300; ++seed) {
        const KCacheGatherCase c = gen::k_cache_gather_case()(rc::Random(seed), static_cast<int>(seed % 100)).value();
        if (k_cache_gather_equals_oracle(*make_device(Backend::kHost), fn, c)) return false;  // caught
      }
      return true;  // survived every case
    });
    EXPECT_NE(status, 0) << variant << " survived 300 random cases";
  }
}

// A reader that moves each scale through a double: a signalling NaN comes back quiet.
void scale_through_double(Device& device, const DeviceTensor& cache, const DeviceTensor& table, const DeviceTensor& cu,
                          const DeviceTensor& dst_k, const DeviceTensor& dst_scale, int64_t block_size) {
  indexer_k_cache_gather(device, cache, table, cu, dst_k, dst_scale, block_size);
  const KCacheGatherParams p = k_cache_gather_params(cache, table, cu, dst_k, dst_scale, block_size);
  for (int32_t t = 0; t < p.cu_seq_lens[p.num_requests]; ++t) {
    float f = 0;
    std::memcpy(&f, &p.dst_scale[t], 4);
    volatile double d = f;
    f = static_cast<float>(d);
    std::memcpy(&p.dst_scale[t], &f, 4);
  }
}

// A reader that also clears the first spare row's first byte.
void writes_a_spare_row(Device& device, const DeviceTensor& cache, const DeviceTensor& table, const DeviceTensor& cu,
                        const DeviceTensor& dst_k, const DeviceTensor& dst_scale, int64_t block_size) {
  indexer_k_cache_gather(device, cache, table, cu, dst_k, dst_scale, block_size);
  const KCacheGatherParams p = k_cache_gather_params(cache, table, cu, dst_k, dst_scale, block_size);
  const int32_t total = p.cu_seq_lens[p.num_requests];
  if (total < p.num_rows) p.dst_k[int64_t(total) * p.dst_row_stride] ^= 0xFF;
}

TEST(KCacheGather, WrongReadersAreReported) {
  const auto device = make_device(Backend::kHost);
  const auto first_failure = [&](KCacheGatherFn* fn) {
    std::string why;
    rc::check([&] {
      const KCacheGatherCase c = *gen::k_cache_gather_case();
      if (why.empty()) {
        if (Verdict v = k_cache_gather_equals_oracle(*device, fn, c)) why = *v;
      }
    });
    return why;
  };
  const std::string nan = first_failure(&scale_through_double);
  EXPECT_NE(nan.find(": scale 0x"), std::string::npos) << nan;
  const std::string spare = first_failure(&writes_a_spare_row);
  // The guard; under AddressSanitizer the fence sees the write first (it is made inside the launch).
  EXPECT_TRUE(spare.find("guard of dst_k") != std::string::npos ||
              (ReadFence::available() && spare.find("fence of dst_k") == 0))
      << spare;
}

// ---- cuda and bad input ----------------------------------------------------------------------------

TEST(KCacheGather, OnCudaWhenAGpuIsPresent) {
  std::string why;
  if (!device_usable(Backend::kCuda, &why)) GTEST_SKIP() << "skipped: no GPU (" << why << ")";
  const auto device = make_device(Backend::kCuda);
  EXPECT_TRUE(rc::check("gather on cuda", [&] {
    if (const Verdict v = k_cache_gather_equals_oracle(*device, &indexer_k_cache_gather, *gen::k_cache_gather_case())) {
      RC_FAIL(*v);
    }
  }));
  EXPECT_TRUE(rc::check("round trip on cuda", [&] {
    if (const Verdict v = k_cache_gather_inverts_insert(*device, &indexer_k_cache_gather, *gen::k_cache_gather_case())) {
      RC_FAIL(*v);
    }
  }));
}

TEST(KCacheGather, BadViewsAreRefusedBeforeAnyLaunch) {
  const auto device = make_device(Backend::kHost);
  std::vector<uint8_t> cache(4096), keys(256);
  std::vector<int32_t> table(8, 0), cu = {0, 2, 4};
  std::vector<float> scales(16);
  const DeviceTensor c{cache.data(), View::contiguous(DType::kU8, {8, 48})};  // 4 x (8 + 4) = 48 bytes a block
  const DeviceTensor t{table.data(), View(DType::kI32, {2, 2}, {4, 1}, 0)};
  const DeviceTensor l{cu.data(), View::contiguous(DType::kI32, {3})};
  const DeviceTensor k{keys.data(), View(DType::kU8, {4, 8}, {10, 1}, 0)};
  const DeviceTensor s{scales.data(), View::contiguous(DType::kF32, {4})};
  EXPECT_NO_THROW(indexer_k_cache_gather(*device, c, t, l, k, s, 4));
  const auto refused = [&](const DeviceTensor& cc, const DeviceTensor& tt, const DeviceTensor& ll, const DeviceTensor& kk,
                           const DeviceTensor& ss, int64_t bs) {
    try {
      indexer_k_cache_gather(*device, cc, tt, ll, kk, ss, bs);
    } catch (const Error& e) {
      const std::string w = e.what();
      EXPECT_EQ(w.find('\n'), std::string::npos) << w;
      return w;
    }
    return std::string();
  };
  EXPECT_NE(refused(c, t, l, {keys.data(), View::contiguous(DType::kBF16, {4, 8})}, s, 4).find("dst_k must be u8"),
            std::string::npos);
  EXPECT_NE(refused(c, t, l, {keys.data(), View(DType::kU8, {4, 8}, {1, 4}, 0)}, s, 4).find("unit column stride"),
            std::string::npos);
  EXPECT_NE(refused(c, t, l, k, {scales.data(), View::contiguous(DType::kF32, {3})}, 4).find("dst_scale"),
            std::string::npos);
  EXPECT_NE(refused(c, t, l, k, {scales.data(), View(DType::kF32, {4}, {2}, 0)}, 4).find("dst_scale"),
            std::string::npos);
  EXPECT_NE(refused(c, t, l, k, {scales.data(), View::contiguous(DType::kF32, {4}, 2)}, 4).find("multiple of 4 bytes"),
            std::string::npos);
  EXPECT_NE(refused(c, {table.data(), View(DType::kI32, {2, 2}, {1, 2}, 0)}, l, k, s, 4).find("block_table"),
            std::string::npos);
  EXPECT_NE(refused(c, {table.data(), View::contiguous(DType::kI64, {2, 2})}, l, k, s, 4).find("block_table"),
            std::string::npos);
  EXPECT_NE(refused(c, t, {cu.data(), View::contiguous(DType::kI32, {2})}, k, s, 4).find("cu_seq_lens"),
            std::string::npos);
  EXPECT_NE(refused({cache.data(), View::contiguous(DType::kU8, {8, 47})}, t, l, k, s, 4).find("cannot hold"),
            std::string::npos);
  EXPECT_NE(refused({cache.data(), View(DType::kU8, {8, 48}, {50, 1}, 0)}, t, l, k, s, 4).find("multiple of 4"),
            std::string::npos);
  EXPECT_NE(refused(c, t, l, k, s, 0).find("block_size"), std::string::npos);
}

}  // namespace
}  // namespace mlacheck::kernels
