// Tests of kernels/k_cache_insert_glue.h: the insert through the shared properties of
// properties/k_cache_insert_properties.h on the host device (and cuda when usable), every buffer
// guarded; the properties reporting wrong writers (the token-interleaved layout of seeded variant
// L1, a scale off by one ulp, a write into a padding token's slot); far slots past byte 2^31 of a
// reserved cache, and the 32-bit block offset of W4 faulting there; the case schema's round trip;
// bad views refused before any launch.
#include "kernels/k_cache_insert_glue.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/read_fence.h"
#include "harness/rc_verdict.h"
#include "kernels/registry.h"
#include "properties/k_cache_insert_properties.h"
#include "properties/property_registry.h"
#include "tests/support/in_child.h"
#include "tests/support/round_trip.h"

namespace mlacheck::kernels {
namespace {

CaseText insert_text(const std::string& property, const KCacheInsertCase& c) {
  CaseText t = case_header(property, "indexer_k_cache_insert@ref");
  write_case(c, t);
  return t;
}

RC_GTEST_PROP(KCacheInsert, EverySlotHoldsTheOraclesBytesAndNothingElseChanges, ()) {
  const KCacheInsertCase c = *gen::k_cache_insert_case();
  rc_require(k_cache_insert_equals_oracle(*make_device(Backend::kHost), &indexer_k_cache_insert, c),
             insert_text("indexer_k_cache_insert.equals_oracle", c));
}

RC_GTEST_PROP(KCacheInsert, TheReaderGetsTheKeysBack, ()) {
  const KCacheInsertCase c = *gen::k_cache_insert_case();
  rc_require(k_cache_insert_reader_gets_the_keys(*make_device(Backend::kHost), &indexer_k_cache_insert, c),
             insert_text("indexer_k_cache_insert.reader_gets_the_keys", c));
}

gen::KCacheInsertShape far_slots() {
  gen::KCacheInsertShape far;
  far.far_slots = true;
  return far;
}

// Slots past byte 2^31 or 2^32 of a cache of up to 8 GiB, of which only the case's blocks are
// backed (writable reserved memory).
RC_GTEST_PROP(KCacheInsert, FarSlotsPastByte2To31Or2To32HoldTheOraclesBytes, ()) {
  const KCacheInsertCase c = *gen::k_cache_insert_case(far_slots());
  int64_t end = -1;  // one past the highest block written
  for (const int32_t slot : c.slot_mapping()) {
    if (slot >= 0) end = std::max<int64_t>(end, 4 * c.cache_lead + (slot / c.block_size + 1) * c.block_stride());
  }
  RC_TAG(end < 0 ? "no slot written" : end > (int64_t{1} << 32) ? "past 2^32" : end > (int64_t{1} << 31) ? "past 2^31" : "below 2^31");
  rc_require(k_cache_insert_equals_oracle(*make_device(Backend::kHost), &indexer_k_cache_insert, c),
             insert_text("indexer_k_cache_insert.far_slots", c));
}

// W4 writes a far key 4 GiB before its block, or into an unbacked block: the write faults (in a
// child here; `mlacheck check` and `mutants` run every case in one). The same build passes every
// case of a dense cache.
TEST(KCacheInsert, AFarSlotWrittenAtA32BitOffsetFaults) {
  KCacheInsertFn* w4 = registry().find<KCacheInsertFn>("indexer_k_cache_insert@W4");
  int faulted = 0, tried = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    KCacheInsertCase c = gen::k_cache_insert_case(far_slots())(rc::Random(seed), 20).value();
    std::fill(c.padding.begin(), c.padding.end(), 0);  // every token written
    int64_t first = INT64_MAX;  // the lowest block a token is written to
    for (const int32_t slot : c.slot_mapping()) first = std::min<int64_t>(first, slot / c.block_size);
    if (4 * c.cache_lead + first * c.block_stride() < (int64_t{1} << 31)) continue;  // no write past 2^31
    ++tried;
    const int status = test_support::in_child([&] {
      return !k_cache_insert_equals_oracle(*make_device(Backend::kHost), w4, c).has_value();
    });
    EXPECT_NE(status, 0) << "seed " << seed << ": W4 passed a case writing past byte 2^31";
    // A signal; under AddressSanitizer (the read fence's build) its report and exit status 1.
    faulted += status != 0 && (status != 1 || ReadFence::available());
  }
  EXPECT_GT(tried, 0);
  EXPECT_GT(faulted, 0) << "no case's write faulted";
  EXPECT_TRUE(rc::check("W4 on a dense cache", [&] {
    const KCacheInsertCase c = *gen::k_cache_insert_case();
    rc_require(k_cache_insert_equals_oracle(*make_device(Backend::kHost), w4, c),
               insert_text("indexer_k_cache_insert.equals_oracle", c));
  }));
}

RC_GTEST_PROP(KCacheInsert, TheCaseFileReadsBackAsTheSameCase, ()) {
  const KCacheInsertCase c = *gen::k_cache_insert_case();
  CaseText t;
  write_case(c, t);
  const KCacheInsertCase back = read_case<KCacheInsertCase>(CaseText::parse(t.format()));
  CaseText again;
  write_case(back, again);
  RC_ASSERT(again.format() == t.format());
  // A far case through its own reader; its block_base is no key of the other properties.
  const KCacheInsertCase far = *gen::k_cache_insert_case(far_slots());
  RC_ASSERT(far.block_base > 0);
  CaseText ft;
  write_case(far, ft);
  CaseText fagain;
  write_case(k_cache_insert_far_from_text(CaseText::parse(ft.format())), fagain);
  RC_ASSERT(fagain.format() == ft.format());
  RC_ASSERT(test_support::refusal<KCacheInsertCase>(&k_cache_insert_from_text, CaseText::parse(ft.format()))
                .find("block_base") != std::string::npos);
}

// ---- the properties catch wrong writers ----------------------------------------------------------

// A writer whose scale is one ulp above the spec's (the codes still the right ones for it).
void scale_one_ulp_up(Device& device, const DeviceTensor& k, const DeviceTensor& slots, const DeviceTensor& cache,
                      int64_t block_size, bool ue8m0) {
  indexer_k_cache_insert(device, k, slots, cache, block_size, ue8m0);
  const KCacheInsertParams p = k_cache_insert_params(k, slots, cache, block_size, ue8m0);
  for (int32_t i = 0; i < p.num_tokens; ++i) {
    const int32_t s = p.slot_mapping[i];
    if (s < 0) continue;
    uint8_t* scale = p.cache + int64_t(s / p.block_size) * p.block_stride + int64_t(p.block_size) * p.head_dim + 4 * (s % p.block_size);
    uint32_t bits = 0;
    std::memcpy(&bits, scale, 4);
    ++bits;
    std::memcpy(scale, &bits, 4);
  }
}

// A writer that also writes something for each padding token: byte 0 of the cache flipped.
void writes_padding_tokens(Device& device, const DeviceTensor& k, const DeviceTensor& slots, const DeviceTensor& cache,
                           int64_t block_size, bool ue8m0) {
  indexer_k_cache_insert(device, k, slots, cache, block_size, ue8m0);
  const KCacheInsertParams p = k_cache_insert_params(k, slots, cache, block_size, ue8m0);
  for (int32_t i = 0; i < p.num_tokens; ++i) {
    if (p.slot_mapping[i] < 0) p.cache[0] ^= 0x01;
  }
}

TEST(KCacheInsert, WrongWritersAreReported) {
  const auto device = make_device(Backend::kHost);
  KCacheInsertFn* l1 = registry().find<KCacheInsertFn>("indexer_k_cache_insert@L1");
  const auto first_failure = [&](auto check) {
    std::string why;
    rc::check([&] {
      const KCacheInsertCase c = *gen::k_cache_insert_case();
      if (Verdict v = check(c); v && why.empty()) why = *v;
    });
    return why;
  };
  const std::string interleaved = first_failure([&](const KCacheInsertCase& c) {
    return k_cache_insert_equals_oracle(*device, l1, c);
  });
  EXPECT_NE(interleaved, "") << "the token-interleaved writer (L1) must fail";
  const std::string read_back = first_failure([&](const KCacheInsertCase& c) {
    return k_cache_insert_reader_gets_the_keys(*device, l1, c);
  });
  EXPECT_NE(read_back, "") << "the reader must not get L1's keys back";
  const std::string ulp = first_failure([&](const KCacheInsertCase& c) {
    return k_cache_insert_equals_oracle(*device, &scale_one_ulp_up, c);
  });
  EXPECT_NE(ulp.find(": scale "), std::string::npos) << ulp;
  // The two scales print apart (their bits), where six digits would print them alike.
  const size_t got_bits = ulp.find("(0x"), want_bits = ulp.find("(0x", got_bits + 1);
  ASSERT_NE(want_bits, std::string::npos) << ulp;
  EXPECT_NE(ulp.substr(got_bits, 12), ulp.substr(want_bits, 12)) << ulp;
  const std::string padding = first_failure([&](const KCacheInsertCase& c) {
    return k_cache_insert_equals_oracle(*device, &writes_padding_tokens, c);
  });
  // Byte 0 is a guard failure, or a wrong code when some token's slot is slot 0; under
  // AddressSanitizer the flip's read of byte 0 is the read fence's, even when an even number of
  // padding tokens flips it back (no byte changed, which the guards cannot see).
  EXPECT_TRUE(padding.find("guard of kv_cache") != std::string::npos || padding.find(": code 0 is ") != std::string::npos ||
              (ReadFence::available() && padding.find("fence of kv_cache: ") == 0))
      << padding;
}

// ---- cuda and bad input ----------------------------------------------------------------------------

TEST(KCacheInsert, OnCudaWhenAGpuIsPresent) {
  std::string why;
  if (!device_usable(Backend::kCuda, &why)) GTEST_SKIP() << "skipped: no GPU (" << why << ")";
  const auto device = make_device(Backend::kCuda);
  EXPECT_TRUE(rc::check("insert on cuda", [&] {
    if (const Verdict v = k_cache_insert_equals_oracle(*device, &indexer_k_cache_insert, *gen::k_cache_insert_case())) {
      RC_FAIL(*v);
    }
  }));
  EXPECT_TRUE(rc::check("read back on cuda", [&] {
    const Verdict v = k_cache_insert_reader_gets_the_keys(*device, &indexer_k_cache_insert, *gen::k_cache_insert_case());
    if (v) RC_FAIL(*v);
  }));
}

TEST(KCacheInsert, BadViewsAreRefusedBeforeAnyLaunch) {
  const auto device = make_device(Backend::kHost);
  std::vector<uint16_t> keys(64);
  std::vector<int32_t> slots(4, 0);
  std::vector<uint8_t> cache(4096);
  const DeviceTensor k{keys.data(), View::contiguous(DType::kBF16, {4, 8})};
  const DeviceTensor s{slots.data(), View::contiguous(DType::kI32, {4})};
  const DeviceTensor c{cache.data(), View::contiguous(DType::kU8, {8, 48})};  // 4 x (8 + 4) = 48 bytes a block
  EXPECT_NO_THROW(indexer_k_cache_insert(*device, k, s, c, 4, false));
  const auto refused = [&](const DeviceTensor& kk, const DeviceTensor& ss, const DeviceTensor& cc, int64_t bs) {
    try {
      indexer_k_cache_insert(*device, kk, ss, cc, bs, false);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refused({keys.data(), View::contiguous(DType::kF32, {4, 8})}, s, c, 4).find("bf16"), std::string::npos);
  EXPECT_NE(refused({keys.data(), View(DType::kBF16, {4, 8}, {1, 4}, 0)}, s, c, 4).find("unit column stride"),
            std::string::npos);
  EXPECT_NE(refused(k, {slots.data(), View::contiguous(DType::kI32, {3})}, c, 4).find("slot_mapping"), std::string::npos);
  EXPECT_NE(refused(k, s, {cache.data(), View::contiguous(DType::kU8, {8, 47})}, 4).find("cannot hold"), std::string::npos);
  EXPECT_NE(refused(k, s, c, 0).find("block_size"), std::string::npos);
  EXPECT_NE(refused(k, s, {cache.data(), View(DType::kU8, {8, 48}, {50, 1}, 0)}, 4).find("multiple of 4"),
            std::string::npos);
}

}  // namespace
}  // namespace mlacheck::kernels
