// Tests of kernels/mqa_logits_glue.h: the properties of properties/mqa_logits_properties.h (paged
// decode and ragged prefill logits against the oracle, fast = general path, clean = unclean, weights
// x 2, paged = prefill over the gathered keys) on randomized cases (host backend with 32- and
// 64-lane warps and shuffled schedules; cuda when a GPU is usable), each shown to catch a wrong
// implementation; case text round trips; production sizes; and bad input refused before any launch.
// Why one file past 500 lines: a test file per public header (docs/design.md, "Style").
#include "kernels/mqa_logits_glue.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/registry.h"
#include "properties/mqa_logits_properties.h"
#include "properties/property_registry.h"
#include "harness/rc_verdict.h"
#include "tests/support/refusal.h"

namespace mlacheck::kernels {
namespace {

CaseText paged_text(const std::string& property, const PagedLogitsCase& c) {
  CaseText t = case_header("paged_mqa_logits." + property, "paged_mqa_logits@ref");
  paged_logits_to_text(c, t);
  return t;
}

CaseText prefill_text(const std::string& property, const PrefillLogitsCase& c) {
  CaseText t = case_header("mqa_logits." + property, "mqa_logits@ref");
  prefill_logits_to_text(c, t);
  return t;
}

// The properties that run each case twice draw shorter rows (long rows and several row groups are
// equals_oracle's).
constexpr gen::PagedCaseShape kTwoRuns{false, true};

const char* path_tag(const PagedLogitsCase& c) { return c.fast_path_shape() ? "block-64 fast path" : "general path"; }

// ---- paged decode logits (docs/ops.md 2.1) ----------------------------------------------------------

RC_GTEST_PROP(PagedMqaLogits, EqualsTheOracleAndWritesOnlyTheLogitsView, ()) {
  const PagedLogitsCase c = *gen::paged_logits_case();
  RC_TAG(path_tag(c), c.lens_2d ? "2-D lengths" : "1-D lengths", c.mode == LogitsMode::kClean ? "clean" : "unclean",
         logits_rows_per_block(c.next_n, c.H, c.D) < c.next_n ? "several row groups" : "one row group",
         key_pattern_name(c.keys));
  const auto device = make_device(Backend::kHost);
  rc_require(paged_logits_equal_oracle(*device, &paged_mqa_logits, c), paged_text("equals_oracle", c));
}

// Pages past byte 2^31 or 2^32 of an 8 GiB cache, of which only they are backed (reserved memory).
RC_GTEST_PROP(PagedMqaLogits, FarPagesPastByte2To31Or2To32EqualTheOracle, ()) {
  gen::PagedCaseShape far;
  far.far_pages = true;
  const PagedLogitsCase c = *gen::paged_logits_case(far);
  int64_t top = -1;  // the highest page read
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t col = 0; col < c.needed(b); ++col) top = std::max<int64_t>(top, c.page(b, col));
  }
  const int64_t end = c.kv_offset + (top + 1) * c.block_stride;
  RC_ASSERT(c.reserved_cache());
  RC_TAG(top < 0                        ? "no page read"
         : end > (int64_t{1} << 32)     ? "past 2^32"
         : end > (int64_t{1} << 31)     ? "past 2^31"
                                        : "below 2^31",
         path_tag(c));
  const auto device = make_device(Backend::kHost);
  rc_require(paged_logits_equal_oracle(*device, &paged_mqa_logits, c), paged_text("far_pages", c));
}

RC_GTEST_PROP(PagedMqaLogits, TheBlock64FastPathEqualsTheGeneralPathBitForBit, ()) {
  const PagedLogitsCase c = *gen::paged_logits_case({true, true});
  RC_ASSERT(c.fast_path_shape());
  const auto device = make_device(Backend::kHost);
  rc_require(paged_logits_fast_path_equals_general_path(*device, &paged_mqa_logits, c),
             paged_text("fast_path_equals_general_path", c));
}

RC_GTEST_PROP(PagedMqaLogits, CleanEqualsUncleanOnEveryRowsColumns, ()) {
  const PagedLogitsCase c = *gen::paged_logits_case(kTwoRuns);
  RC_TAG(path_tag(c));
  const auto device = make_device(Backend::kHost);
  rc_require(paged_logits_clean_equals_unclean(*device, &paged_mqa_logits, c), paged_text("clean_equals_unclean", c));
}

RC_GTEST_PROP(PagedMqaLogits, DoublingTheWeightsDoublesEveryLogitExactly, ()) {
  const PagedLogitsCase c = *gen::paged_logits_case(kTwoRuns);
  const auto device = make_device(Backend::kHost);
  rc_require(paged_logits_weights_scale_exactly(*device, &paged_mqa_logits, c), paged_text("weights_scale_exactly", c));
}

RC_GTEST_PROP(PagedMqaLogits, ARequestAloneGetsItsRowsOfTheBatchBitForBit, ()) {
  const PagedLogitsCase c = *gen::paged_logits_case(kTwoRuns);
  const auto device = make_device(Backend::kHost);
  rc_require(paged_logits_rows_independent_of_batch(*device, &paged_mqa_logits, c),
             paged_text("rows_independent_of_batch", c));
}

RC_GTEST_PROP(PagedMqaLogits, EqualsPrefillLogitsOverTheKeysGatheredContiguously, ()) {
  const PagedLogitsCase c = *gen::paged_logits_case(kTwoRuns);
  RC_TAG(path_tag(c));
  const auto device = make_device(Backend::kHost);
  rc_require(paged_logits_equal_prefill_over_gathered_keys(*device, &paged_mqa_logits, &mqa_logits, c),
             paged_text("equals_prefill_over_gathered_keys", c));
}

// A production-sized request pair (DeepSeek-V3.2: H 64, D 128, next_n 2) over ~3000 tokens in
// shuffled pages, the logits rows aligned to 256 as vLLM allocates them.
PagedLogitsCase production_paged_case(int64_t block_size, bool lens_2d, LogitsMode mode) {
  PagedLogitsCase c;
  c.B = 2, c.next_n = 2, c.H = 64, c.D = 128, c.block_size = block_size, c.lens_2d = lens_2d, c.mode = mode;
  c.lens = lens_2d ? std::vector<int32_t>{2999, 3000, 2876, 2877} : std::vector<int32_t>{3000, 2877};
  c.max_context_len = 3000;
  c.W = (3000 + block_size - 1) / block_size + 1;
  c.num_blocks = 2 * c.W + 3;
  std::vector<int32_t> pages(static_cast<size_t>(c.num_blocks));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), std::mt19937_64(7));
  c.table.resize(static_cast<size_t>(2 * c.W));
  for (size_t i = 0; i < c.table.size(); ++i)
    c.table[i] = i % static_cast<size_t>(c.W) + 1 < static_cast<size_t>(c.W) ? pages[i] : -1;
  c.block_stride = (block_size * (c.D + 4) + 15) / 16 * 16;
  c.logits_stride = (c.max_context_len + 255) / 256 * 256;
  c.logits_offset = 256;
  c.pass_host_lens = true;
  c.seed = 42;
  return c;
}

TEST(PagedMqaLogits, ProductionSizeOnTheBlock64FastPathEqualsTheOracle) {
  const auto device = make_device(Backend::kHost);
  const PagedLogitsCase c = production_paged_case(64, false, LogitsMode::kClean);
  ASSERT_TRUE(c.fast_path_shape());
  const PagedLogitsOutcome out = run_paged_logits(*device, &paged_mqa_logits, c);
  EXPECT_EQ(out.failure.value_or(""), "");
  EXPECT_TRUE(std::any_of(out.got.begin(), out.got.end(), [](float x) { return x > 0; }));
}

TEST(PagedMqaLogits, ProductionSizeOnTheGeneralPathEqualsTheOracle) {
  const auto device = make_device(Backend::kHost);
  const PagedLogitsOutcome out = run_paged_logits(*device, &paged_mqa_logits, production_paged_case(61, true, LogitsMode::kUnclean));
  EXPECT_EQ(out.failure.value_or(""), "");
  EXPECT_TRUE(std::any_of(out.got.begin(), out.got.end(), [](float x) { return x > 0; }));
}

// Outside the contract, as the glue header documents: lengths past max_context_len or past the
// table are cut there (so nothing outside the view is written and nothing past the table is read),
// and a page id outside the cache gives NaN for its tokens instead of a read outside the cache.
TEST(PagedMqaLogits, LengthsPastTheViewOrTheTableAreCutAndBadPagesGiveNaN) {
  const auto device = make_device(Backend::kHost);
  PagedLogitsCase c;
  c.B = 2, c.next_n = 2, c.H = 5, c.D = 32, c.block_size = 53, c.lens_2d = true, c.mode = LogitsMode::kClean;
  c.lens = {100, 7, 60, 0};
  c.max_context_len = 100, c.W = 2, c.num_blocks = 5, c.table = {3, 1, 0, 4};
  c.block_stride = 53 * 36, c.logits_stride = 128, c.seed = 3;
  const auto run = [&](const PagedLogitsCase& x, std::function<void(Buffer&, Buffer&)> tamper) {
    PagedRunOptions o;
    o.tamper = std::move(tamper);
    return run_paged_logits(*device, &paged_mqa_logits, x, o);
  };
  // The device reads row 0 as 100000 long: the oracle's answer is row 0 at max_context_len.
  EXPECT_EQ(run(c, [](Buffer& lens, Buffer&) { lens.put<int32_t>({0, 0}, 100000); }).failure.value_or(""), "");

  // The device reads row 2 as 80 long with one column of table (53 tokens): cut at 53.
  PagedLogitsCase narrow = c;
  narrow.lens = {7, 0, 53, 9}, narrow.W = 1, narrow.table = {3, 0};
  EXPECT_EQ(run(narrow, [](Buffer& lens, Buffer&) { lens.put<int32_t>({1, 0}, 80); }).failure.value_or(""), "");

  // Row 2's second block (columns 53..59) is page 5 of a 5-page cache on the device.
  c.mode = LogitsMode::kUnclean;
  const PagedLogitsOutcome bad = run(c, [](Buffer&, Buffer& table) { table.put<int32_t>({1, 1}, 5); });
  ASSERT_TRUE(bad.failure.has_value());
  ASSERT_EQ(bad.failure->rfind("paged_mqa_logits logits", 0), 0u) << *bad.failure;  // the NaNs differ
  for (int64_t t = 0; t < 60; ++t) {
    const float got = bad.got[static_cast<size_t>(2 * 100 + t)];
    if (t >= 53) {
      EXPECT_TRUE(std::isnan(got)) << "column " << t;
    } else {
      EXPECT_NEAR(got, bad.want.logits.at({2, t}), 1e-3) << "column " << t;
    }
  }
}

// ---- ragged prefill logits (docs/ops.md 2.2) --------------------------------------------------------

RC_GTEST_PROP(MqaLogits, EqualsTheOracleAndWritesOnlyTheLogitsView, ()) {
  const PrefillLogitsCase c = *gen::prefill_logits_case();
  RC_TAG(c.mode == LogitsMode::kClean ? "clean" : "unclean",
         logits_rows_per_block(c.M, c.H, c.D) < c.M ? "several row groups" : "one row group", key_pattern_name(c.keys));
  const auto device = make_device(Backend::kHost);
  rc_require(prefill_logits_equal_oracle(*device, &mqa_logits, c), prefill_text("equals_oracle", c));
}

RC_GTEST_PROP(MqaLogits, CleanEqualsUncleanOnEveryRowsRange, ()) {
  const PrefillLogitsCase c = *gen::prefill_logits_case();
  const auto device = make_device(Backend::kHost);
  rc_require(prefill_logits_clean_equals_unclean(*device, &mqa_logits, c), prefill_text("clean_equals_unclean", c));
}

RC_GTEST_PROP(MqaLogits, DoublingTheWeightsDoublesEveryLogitExactly, ()) {
  const PrefillLogitsCase c = *gen::prefill_logits_case();
  const auto device = make_device(Backend::kHost);
  rc_require(prefill_logits_weights_scale_exactly(*device, &mqa_logits, c), prefill_text("weights_scale_exactly", c));
}

// A production-sized chunk of prefill (H 64, D 128): 8 query tokens over 2048 keys, causal ends
// and sliding starts, rows padded to 256.
TEST(MqaLogits, ProductionSizeEqualsTheOracle) {
  const auto device = make_device(Backend::kHost);
  PrefillLogitsCase c;
  c.M = 8, c.N = 2048, c.H = 64, c.D = 128, c.k_stride = 128, c.logits_stride = 2048 + 256, c.seed = 11;
  for (int32_t m = 0; m < 8; ++m) {
    c.ks.push_back(m * 122);
    c.ke.push_back(2048 - 8 + m + 1);
  }
  c.mode = LogitsMode::kClean;
  EXPECT_EQ(prefill_logits_equal_oracle(*device, &mqa_logits, c).value_or(""), "");
  c.mode = LogitsMode::kUnclean;
  EXPECT_EQ(prefill_logits_equal_oracle(*device, &mqa_logits, c).value_or(""), "");
}

// ---- the properties catch wrong implementations (host backend: device pointers are host memory) ---

// The byte address of logits[r, c] (c may be one past the row).
float* logits_at(const DeviceTensor& t, int64_t r, int64_t c) {
  return reinterpret_cast<float*>(static_cast<uint8_t*>(t.base) + t.view.byte_offset() +
                                  4 * (r * t.view.stride(0) + c));
}

// One float past the last row's columns: a row one column too wide (vLLM #42072's kind).
void write_past_the_last_row(const DeviceTensor& logits) {
  if (logits.view.size(0) > 0) *logits_at(logits, logits.view.size(0) - 1, logits.view.size(1)) = 0.0f;
}

// Every logit of the view + 1/64: an epsilon slipped into the sum (not linear in the weights).
void shift_every_logit(const DeviceTensor& logits) {
  for (int64_t r = 0; r < logits.view.size(0); ++r) {
    for (int64_t c = 0; c < logits.view.size(1); ++c) *logits_at(logits, r, c) += 1.0f / 64;
  }
}

// A host copy of the bytes [0, end of view) of t, and t re-pointed at it.
DeviceTensor copy_of(const DeviceTensor& t, std::vector<uint8_t>& bytes) {
  const uint8_t* base = static_cast<const uint8_t*>(t.base);
  bytes.assign(base, base + std::max(t.view.byte_span().end, t.view.byte_offset()));
  return {bytes.data(), t.view};
}

// Each length one short (int32 lengths, any view), where the length is > 0.
void shorten_each(DeviceTensor& t) {
  t.view.for_each_byte_offset([&](int64_t at) {
    int32_t* n = reinterpret_cast<int32_t*>(static_cast<uint8_t*>(t.base) + at);
    if (*n > 0) --*n;
  });
}

void paged_writes_past_the_view(Device& d, const PagedMqaLogitsArgs& a) {
  paged_mqa_logits(d, a);
  write_past_the_last_row(a.logits);
}

// Reads every key as if its scale were 1 (a dropped k_scale).
void paged_drops_the_scale(Device& d, const PagedMqaLogitsArgs& a) {
  std::vector<uint8_t> kv;
  PagedMqaLogitsArgs b = a;
  b.kv_blocks = copy_of(a.kv_blocks, kv);
  const int64_t D = a.q.view.size(3), bs = a.block_size;
  const float one = 1.0f;
  for (int64_t p = 0; p < a.kv_blocks.view.size(0); ++p) {
    for (int64_t s = 0; s < bs; ++s) {
      std::memcpy(b.kv_blocks.data<uint8_t>() + p * a.kv_blocks.view.stride(0) + bs * D + 4 * s, &one, 4);
    }
  }
  paged_mqa_logits(d, b);
}

// Unclean mode only: every row one token short (ctx = L - next_n + j, the +1 lost).
void paged_unclean_rows_one_short(Device& d, const PagedMqaLogitsArgs& a) {
  if (a.mode != LogitsMode::kUnclean) return paged_mqa_logits(d, a);
  std::vector<uint8_t> lens;
  PagedMqaLogitsArgs b = a;
  b.context_lens = copy_of(a.context_lens, lens);
  shorten_each(b.context_lens);
  paged_mqa_logits(d, b);
}

void paged_shifts_the_logits(Device& d, const PagedMqaLogitsArgs& a) {
  paged_mqa_logits(d, a);
  shift_every_logit(a.logits);
}

// Reads the cache from the 16-byte boundary at or below its start (a fast path assumed everywhere).
void paged_assumes_an_aligned_cache(Device& d, const PagedMqaLogitsArgs& a) {
  PagedMqaLogitsArgs b = a;
  const View& v = a.kv_blocks.view;
  const int64_t misaligned = static_cast<int64_t>(reinterpret_cast<uintptr_t>(a.kv_blocks.data<uint8_t>()) % 16);
  b.kv_blocks.view = View(v.dtype(), v.shape(), v.strides(), v.byte_offset() - misaligned);
  paged_mqa_logits(d, b);
}

// A batch-dependent reduction, as a split count chosen from the batch size would give: a batch of one
// request sums in another order, which moves every logit of it by a last bit.
void paged_depends_on_the_batch(Device& d, const PagedMqaLogitsArgs& a) {
  paged_mqa_logits(d, a);
  if (a.q.view.size(0) != 1) return;
  for (int64_t r = 0; r < a.logits.view.size(0); ++r) {
    for (int64_t c = 0; c < a.logits.view.size(1); ++c) {
      float& x = *logits_at(a.logits, r, c);
      if (std::isfinite(x)) x = std::nextafter(x, INFINITY);
    }
  }
}

void prefill_writes_past_the_view(Device& d, const MqaLogitsArgs& a) {
  mqa_logits(d, a);
  write_past_the_last_row(a.logits);
}

// Reads k_scale as contiguous whatever its stride.
void prefill_ignores_the_scale_stride(Device& d, const MqaLogitsArgs& a) {
  MqaLogitsArgs b = a;
  b.k_scale.view = View::contiguous(DType::kF32, a.k_scale.view.shape(), a.k_scale.view.byte_offset());
  mqa_logits(d, b);
}

// Unclean mode only: every non-empty row ends one key early (ke - 1).
void prefill_unclean_rows_one_short(Device& d, const MqaLogitsArgs& a) {
  if (a.mode != LogitsMode::kUnclean) return mqa_logits(d, a);
  std::vector<uint8_t> ke;
  MqaLogitsArgs b = a;
  b.ke = copy_of(a.ke, ke);
  std::vector<int32_t> host_ke;
  for (int64_t m = 0; m < a.ke.view.size(0); ++m) {
    int32_t& e = *reinterpret_cast<int32_t*>(static_cast<uint8_t*>(b.ke.base) + b.ke.view.byte_offset_of({m}));
    const int32_t s = *reinterpret_cast<const int32_t*>(static_cast<uint8_t*>(a.ks.base) + a.ks.view.byte_offset_of({m}));
    if (e > s) --e;
    host_ke.push_back(e);
  }
  if (a.host_ke != nullptr) b.host_ke = &host_ke;
  mqa_logits(d, b);
}

void prefill_shifts_the_logits(Device& d, const MqaLogitsArgs& a) {
  mqa_logits(d, a);
  shift_every_logit(a.logits);
}

// A block's byte offset computed in 32 bits (the seeded bug W1, here as a test's own wrong build).
void paged_offsets_in_32_bits(Device& d, const PagedMqaLogitsArgs& a) {
  paged_mqa_logits_seeded(d, a, PagedLogitsBug::kW1BlockOffsetIn32Bits);
}

// rc::check of a property on a wrong implementation (holds == false is the test passing); a failure
// prints its case as `mlacheck repro` reads it (the case passes there, on @ref).
bool paged_holds(const char* property, Verdict (*verdict)(Device&, PagedMqaLogitsFn*, const PagedLogitsCase&),
                 PagedMqaLogitsFn* wrong, bool block64 = false, bool far = false) {
  return rc::check(property, [=] {
    const PagedLogitsCase c = *gen::paged_logits_case({block64, false, far});
    const auto device = make_device(Backend::kHost);
    rc_require(verdict(*device, wrong, c), paged_text(property, c));
  });
}

bool prefill_holds(const char* property, Verdict (*verdict)(Device&, MqaLogitsFn*, const PrefillLogitsCase&),
                   MqaLogitsFn* wrong) {
  return rc::check(property, [=] {
    const PrefillLogitsCase c = *gen::prefill_logits_case();
    const auto device = make_device(Backend::kHost);
    rc_require(verdict(*device, wrong, c), prefill_text(property, c));
  });
}

// Each property on a wrong implementation with a bug it must see.
TEST(PagedMqaLogits, ThePropertiesReportWrongImplementations) {
  EXPECT_FALSE(paged_holds("equals_oracle", &paged_logits_equal_oracle, &paged_writes_past_the_view));
  EXPECT_FALSE(paged_holds("equals_oracle", &paged_logits_equal_oracle, &paged_drops_the_scale));
  EXPECT_FALSE(paged_holds("fast_path_equals_general_path", &paged_logits_fast_path_equals_general_path,
                           &paged_assumes_an_aligned_cache, true));
  EXPECT_FALSE(paged_holds("clean_equals_unclean", &paged_logits_clean_equals_unclean, &paged_unclean_rows_one_short));
  EXPECT_FALSE(paged_holds("weights_scale_exactly", &paged_logits_weights_scale_exactly, &paged_shifts_the_logits));
  EXPECT_FALSE(paged_holds("rows_independent_of_batch", &paged_logits_rows_independent_of_batch,
                           &paged_depends_on_the_batch));
  EXPECT_FALSE(paged_holds("far_pages", &paged_logits_equal_oracle, &paged_offsets_in_32_bits, false, true));
  // The same wrong build passes every case under 2 GiB: only far pages tell it from the reference.
  EXPECT_TRUE(paged_holds("equals_oracle", &paged_logits_equal_oracle, &paged_offsets_in_32_bits));
  EXPECT_FALSE(rc::check("equals_prefill_over_gathered_keys", [] {
    const PagedLogitsCase c = *gen::paged_logits_case();
    const auto device = make_device(Backend::kHost);
    rc_require(paged_logits_equal_prefill_over_gathered_keys(*device, &paged_drops_the_scale, &mqa_logits, c),
               paged_text("equals_prefill_over_gathered_keys", c));
  }));
}

TEST(MqaLogits, ThePropertiesReportWrongImplementations) {
  EXPECT_FALSE(prefill_holds("equals_oracle", &prefill_logits_equal_oracle, &prefill_writes_past_the_view));
  EXPECT_FALSE(prefill_holds("equals_oracle", &prefill_logits_equal_oracle, &prefill_ignores_the_scale_stride));
  EXPECT_FALSE(prefill_holds("clean_equals_unclean", &prefill_logits_clean_equals_unclean, &prefill_unclean_rows_one_short));
  EXPECT_FALSE(prefill_holds("weights_scale_exactly", &prefill_logits_weights_scale_exactly, &prefill_shifts_the_logits));
}

// ---- case text -------------------------------------------------------------------------------------

const std::vector<std::string> kPagedProperties = {"equals_oracle", "fast_path_equals_general_path",
                                                   "clean_equals_unclean", "weights_scale_exactly",
                                                   "equals_prefill_over_gathered_keys", "far_pages"};
const std::vector<std::string> kPrefillProperties = {"equals_oracle", "clean_equals_unclean", "weights_scale_exactly"};

// A case printed as text (of any shape the generator draws) reads back to the same case, and one in
// eight runs through the registry (what `mlacheck repro` does) and passes on @ref.
RC_GTEST_PROP(MqaLogitsCaseText, PagedRoundTripsAndRunsThroughTheRegistry, ()) {
  const std::string property = *rc::gen::elementOf(kPagedProperties);
  const PagedLogitsCase c =
      *gen::paged_logits_case({*rc::gen::arbitrary<bool>(), *rc::gen::arbitrary<bool>(), property == "far_pages"});
  const CaseText t = paged_text(property, c);
  const CaseText back = CaseText::parse(t.format());
  RC_ASSERT(back == t);
  CaseText again = case_header(back.word("property"), "paged_mqa_logits@ref");
  paged_logits_to_text(property == "far_pages" ? paged_logits_far_from_text(back) : paged_logits_from_text(back), again);
  RC_ASSERT(again == t);
  if (*rc::gen::inRange(0, 8) == 0) rc_require(run_case_text(back).verdict, t);
}

RC_GTEST_PROP(MqaLogitsCaseText, PrefillRoundTripsAndRunsThroughTheRegistry, ()) {
  const PrefillLogitsCase c = *gen::prefill_logits_case();
  const CaseText t = prefill_text(*rc::gen::elementOf(kPrefillProperties), c);
  const CaseText back = CaseText::parse(t.format());
  RC_ASSERT(back == t);
  CaseText again = case_header(back.word("property"), "mqa_logits@ref");
  prefill_logits_to_text(prefill_logits_from_text(back), again);
  RC_ASSERT(again == t);
  if (*rc::gen::inRange(0, 8) == 0) rc_require(run_case_text(back).verdict, t);
}

TEST(MqaLogitsCaseText, EveryPropertyIsRegistered) {
  for (const std::string& p : kPagedProperties) EXPECT_NO_THROW(property_registry().find("paged_mqa_logits." + p));
  for (const std::string& p : kPrefillProperties) EXPECT_NO_THROW(property_registry().find("mqa_logits." + p));
}

// Replaces the line "from" of the text with "to" and expects from_text to refuse it with one line.
template <class FromText>
void expect_refused(const CaseText& good, const std::string& from, const std::string& to, FromText from_text) {
  std::string text = good.format();
  const size_t at = text.find("\n" + from + "\n");
  ASSERT_NE(at, std::string::npos) << from;
  text.replace(at + 1, from.size(), to);
  try {
    from_text(CaseText::parse(text));
    ADD_FAILURE() << to << ": accepted";
  } catch (const Error& err) {
    EXPECT_EQ(std::string(err.what()).find('\n'), std::string::npos) << err.what();
  }
}

// Two properties run a variant of the case besides it: fast_path_equals_general_path the cache 4
// bytes further, clean_equals_unclean both modes. Under a contract that excludes the variant
// (DeepGEMM's adapter: kv_offset = 0, mode one-of unclean) the variant is no case of the
// implementation, so the property does not take the case (outside the contract, never a failure);
// the other properties run it as ever. (Before, the general path ran DeepGEMM on a cache its TMA
// descriptor refuses and reported CUDA_ERROR_INVALID_VALUE: docs/findings.md 14.)
TEST(MqaLogitsCaseText, AVariantOutsideTheContractIsNotTakenByItsProperty) {
  PagedLogitsCase c;
  c.B = 2, c.next_n = 2, c.H = 4, c.D = 16, c.block_size = 4, c.lens = {6, 3}, c.max_context_len = 8;
  c.W = 2, c.num_blocks = 3, c.table = {2, 0, 1, -1}, c.block_stride = 80, c.logits_stride = 8;
  CaseText t = paged_text("fast_path_equals_general_path", c);
  const PagedLogitsCase free = paged_logits_from_text(t);
  EXPECT_TRUE(free.misaligned_cache_admitted && free.both_modes_admitted);
  t.within(std::make_shared<const Contract>(parse_contract("paged_mqa_logits", "kv_offset = 0; mode one-of unclean")));
  const PagedLogitsCase held = paged_logits_from_text(t);
  EXPECT_FALSE(held.misaligned_cache_admitted);
  EXPECT_FALSE(held.both_modes_admitted);
  const auto device = make_device(Backend::kHost);
  EXPECT_THROW(paged_logits_fast_path_equals_general_path(*device, &paged_mqa_logits, held), OutsideContract);
  EXPECT_THROW(paged_logits_clean_equals_unclean(*device, &paged_mqa_logits, held), OutsideContract);
  EXPECT_FALSE(paged_logits_equal_oracle(*device, &paged_mqa_logits, held).has_value());
  EXPECT_FALSE(paged_logits_fast_path_equals_general_path(*device, &paged_mqa_logits, free).has_value());
  // A contract that lets the offset move: the variant is a case of it.
  t.within(std::make_shared<const Contract>(parse_contract("paged_mqa_logits", "kv_offset <= 64")));
  EXPECT_TRUE(paged_logits_from_text(t).misaligned_cache_admitted);
  EXPECT_TRUE(t.admits("kv_offset", 64));
  EXPECT_FALSE(t.admits("kv_offset", 68));
  t.within(std::make_shared<const Contract>(parse_contract("paged_mqa_logits", "q_offset one-of 0 16")));
  EXPECT_TRUE(t.admits("q_offset", 16));
  EXPECT_FALSE(t.admits("q_offset", 8));
}

// A hand-edited case with a value out of range or inconsistent is refused with one line.
TEST(MqaLogitsCaseText, MalformedCasesAreRefusedWithOneLine) {
  PagedLogitsCase c;
  c.B = 2, c.next_n = 2, c.H = 4, c.D = 16, c.block_size = 4, c.lens = {6, 3}, c.max_context_len = 8;
  c.W = 2, c.num_blocks = 3, c.table = {2, 0, 1, -1}, c.block_stride = 80, c.logits_stride = 8;
  const CaseText good = paged_text("equals_oracle", c);
  EXPECT_NO_THROW(paged_logits_from_text(good));
  const auto paged = [](const CaseText& t) { paged_logits_from_text(t); };
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"context_lens 6 3", "context_lens 6"},            // one length per request
           {"context_lens 6 3", "context_lens 6 -3"},         // negative
           {"context_lens 6 3", "context_lens 9 3"},          // past max_context_len (and the table)
           {"block_table 2 0 1 -1", "block_table 2 3 1 -1"},  // a needed page outside the cache
           {"block_table 2 0 1 -1", "block_table 2 0 1"},     // wrong count
           {"table_width 2", "table_width 1"},                // narrower than request 0's pages
           {"block_stride 80", "block_stride 78"},            // under block_size x (D + 4)
           {"block_stride 80", "block_stride 82"},            // not a multiple of 4
           {"heads 4", "heads 129"},                          // out of range
           {"head_dim 16", "head_dim 576"},                   // 64 padded heads x 576 exceed a block's shared memory
           {"lens_stride 1", "lens_stride 0"},
       }) {
    expect_refused(good, from, to, paged);
  }
  expect_refused(good, "lens_layout 1d", "lens_layout 3d", paged);
  expect_refused(good, "mode unclean", "mode dirty", paged);
  expect_refused(good, "keys random", "keys nan", paged);
  expect_refused(good, "key_exponent 0", "key_exponent 200", paged);
  expect_refused(good, "warp 32", "warp 48", paged);
  expect_refused(good, "poison 127", "poison 0", paged);

  PrefillLogitsCase p;
  p.M = 2, p.N = 10, p.H = 2, p.D = 8, p.ks = {0, 4}, p.ke = {3, 10}, p.k_stride = 8, p.logits_stride = 10;
  const CaseText pgood = prefill_text("equals_oracle", p);
  EXPECT_NO_THROW(prefill_logits_from_text(pgood));
  const auto prefill = [](const CaseText& t) { prefill_logits_from_text(t); };
  expect_refused(pgood, "ks 0 4", "ks 0 5 1", prefill);  // wrong count
  expect_refused(pgood, "ks 0 4", "ks 4 4", prefill);    // row 0: ks 4 > ke 3
  expect_refused(pgood, "ke 3 10", "ke 3 11", prefill);  // past N
  expect_refused(pgood, "k_stride 8", "k_stride 7", prefill);
  expect_refused(pgood, "logits_stride 10", "logits_stride 9", prefill);
  expect_refused(pgood, "scales fp32", "scales bf16", prefill);
}

// ---- cuda: the same checks on device buffers -------------------------------------------------

TEST(MqaLogitsOnCuda, PropertiesAndProductionSizesWhenAGpuIsPresent) {
  std::string why;
  if (!device_usable(Backend::kCuda, &why)) GTEST_SKIP() << "skipped: no GPU (" << why << ")";
  const auto device = make_device(Backend::kCuda);
  EXPECT_TRUE(rc::check("paged logits on cuda equal the oracle", [&] {
    const PagedLogitsCase c = *gen::paged_logits_case();
    rc_require(paged_logits_equal_oracle(*device, &paged_mqa_logits, c), paged_text("equals_oracle", c));
  }));
  EXPECT_TRUE(rc::check("paged logits on cuda: fast path = general path", [&] {
    const PagedLogitsCase c = *gen::paged_logits_case({true, true});
    rc_require(paged_logits_fast_path_equals_general_path(*device, &paged_mqa_logits, c),
               paged_text("fast_path_equals_general_path", c));
  }));
  EXPECT_TRUE(rc::check("prefill logits on cuda equal the oracle", [&] {
    const PrefillLogitsCase c = *gen::prefill_logits_case();
    rc_require(prefill_logits_equal_oracle(*device, &mqa_logits, c), prefill_text("equals_oracle", c));
  }));
  for (const PagedLogitsCase& c : {production_paged_case(64, false, LogitsMode::kClean),
                                   production_paged_case(64, true, LogitsMode::kUnclean),
                                   production_paged_case(61, true, LogitsMode::kClean)}) {
    EXPECT_EQ(paged_logits_equal_oracle(*device, &paged_mqa_logits, c).value_or(""), "");
  }
}

// ---- bad input: refused with one line before any launch ---------------------------------------

// Small valid inputs in host memory; the logits hold a sentinel, so any launch would show.
struct PagedInputs {
  static constexpr int64_t B = 2, next_n = 2, H = 4, D = 16, bs = 64, blocks = 3, stride = 64 * 20, ctx = 80;
  std::vector<uint8_t> q = std::vector<uint8_t>(B * next_n * H * D, 0x38),
                       kv = std::vector<uint8_t>(blocks * stride, 0x38);
  std::vector<float> weights = std::vector<float>(B * next_n * H, 1.0f),
                     logits = std::vector<float>(B * next_n * 96, 7.0f);
  std::vector<int32_t> lens = {80, 3, 5, 6}, table = {0, 1, 2, 0};
  PagedMqaLogitsArgs args() {
    PagedMqaLogitsArgs a;
    a.q = {q.data(), View::contiguous(DType::kFP8E4M3, {B, next_n, H, D})};
    a.kv_blocks = {kv.data(), View::contiguous(DType::kU8, {blocks, stride})};
    a.block_size = bs;
    a.weights = {weights.data(), View::contiguous(DType::kF32, {B * next_n, H})};
    a.context_lens = {lens.data(), View::contiguous(DType::kI32, {B})};
    a.block_table = {table.data(), View::contiguous(DType::kI32, {B, 2})};
    a.max_context_len = ctx;
    a.logits = {logits.data(), View::padded_rows(DType::kF32, {B * next_n, ctx}, 96)};
    a.mode = LogitsMode::kClean;
    return a;
  }
  bool untouched() const {
    return std::all_of(logits.begin(), logits.end(), [](float x) { return x == 7.0f; });
  }
};

// Expects change(args) to be refused with a one-line Error and no launch.
void expect_paged_refused(const std::function<void(PagedInputs&, PagedMqaLogitsArgs&)>& change, const char* what) {
  const auto device = make_device(Backend::kHost);
  test_support::expect_refused_before_launch<PagedInputs>(
      [&](const PagedMqaLogitsArgs& a) { paged_mqa_logits(*device, a); }, change, what);
}

TEST(PagedMqaLogits, BadInputIsRefusedBeforeAnyLaunch) {
  {
    const auto device = make_device(Backend::kHost);
    PagedInputs in;
    EXPECT_NO_THROW(paged_mqa_logits(*device, in.args()));  // the baseline is valid
    EXPECT_FALSE(in.untouched());
  }
  using In = PagedInputs;
  using A = PagedMqaLogitsArgs;
  expect_paged_refused([](In&, A& a) { a.q.view = View::contiguous(DType::kBF16, {2, 2, 4, 16}); }, "bf16 q");
  expect_paged_refused(
      [](In&, A& a) {
        a.q.view = View(DType::kFP8E4M3, {2, 2, 4, 8}, {128, 64, 16, 2});
      },
      "strided q");
  expect_paged_refused(
      [](In&, A& a) {
        a.kv_blocks.view = View::contiguous(DType::kU8, {3, 64 * 20 - 4});
      },
      "short blocks");
  expect_paged_refused([](In&, A& a) { a.kv_blocks.view = View(DType::kU8, {2, 1280}, {1282, 1}); }, "stride % 4");
  expect_paged_refused([](In&, A& a) { a.kv_blocks.view = View(DType::kU8, {3, 640}, {1280, 2}); }, "column stride");
  expect_paged_refused([](In&, A& a) { a.block_size = 0; }, "block size 0");
  expect_paged_refused([](In&, A& a) { a.weights.view = View::contiguous(DType::kF32, {4, 5}); }, "weights shape");
  expect_paged_refused([](In&, A& a) { a.context_lens.view = View::contiguous(DType::kI32, {3}); },
                       "lens for 3 requests");
  expect_paged_refused([](In&, A& a) { a.context_lens.view = View::contiguous(DType::kF32, {2}); }, "fp32 lens");
  // vLLM #42135: [:B, :next_n'] of a wider (max_num_seqs, next_n) buffer is not C-contiguous.
  expect_paged_refused([](In&, A& a) { a.context_lens.view = View(DType::kI32, {2, 2}, {3, 1}); }, "sliced 2-D lens");
  expect_paged_refused(
      [](In&, A& a) {
        a.block_table.view = View(DType::kI32, {2, 2}, {4, 2});
      },
      "table column stride");
  expect_paged_refused([](In&, A& a) { a.block_table.view = View::contiguous(DType::kI32, {1, 4}); }, "table rows");
  expect_paged_refused([](In&, A& a) { a.max_context_len = -1; }, "negative max_context_len");
  // vLLM #42072's kind: an output view with fewer (or more) rows than the kernel writes.
  expect_paged_refused([](In&, A& a) { a.logits.view = View::padded_rows(DType::kF32, {3, 80}, 96); }, "logits rows");
  expect_paged_refused(
      [](In&, A& a) {
        a.logits.view = View::padded_rows(DType::kF32, {4, 81}, 96);
      },
      "logits columns");
  expect_paged_refused([](In&, A& a) { a.logits.view = View(DType::kF32, {4, 80}, {60, 1}); }, "overlapping rows");
  expect_paged_refused(
      [](In&, A& a) {
        a.logits.view = View(DType::kF32, {4, 40}, {192, 2});
        a.max_context_len = 40;
      },
      "logits column stride");
  expect_paged_refused(
      [](In& in, A& a) {
        a.logits = {in.q.data(), View::contiguous(DType::kF32, {4, 80})};
        a.q.base = in.q.data();
      },
      "logits over q");
  expect_paged_refused(
      [](In& in, A& a) {
        in.lens = {81, 2};
        a.host_context_lens = &in.lens;
      },
      "length > max_context_len");
  expect_paged_refused(
      [](In& in, A& a) {
        a.block_table.view = View(DType::kI32, {2, 1}, {2, 1});
        a.host_context_lens = &in.lens;
      },
      "table narrower than a row");
  expect_paged_refused(
      [](In& in, A& a) {
        in.lens = {5};
        a.host_context_lens = &in.lens;
      },
      "host lens count");
  expect_paged_refused(
      [](In&, A& a) {
        a.q.view = View::contiguous(DType::kFP8E4M3, {1, 1, 256, 128});
      },
      "H x D too large");
}

TEST(MqaLogits, BadInputIsRefusedBeforeAnyLaunch) {
  const auto device = make_device(Backend::kHost);
  std::vector<uint8_t> q(3 * 2 * 8, 0x38), k(10 * 8, 0x38);
  std::vector<float> scale(10, 1.0f), weights(6, 1.0f), logits(3 * 12, 7.0f);
  std::vector<int32_t> ks = {0, 2, 4}, ke = {3, 10, 4};
  const auto args = [&] {
    MqaLogitsArgs a;
    a.q = {q.data(), View::contiguous(DType::kFP8E4M3, {3, 2, 8})};
    a.k = {k.data(), View::contiguous(DType::kFP8E4M3, {10, 8})};
    a.k_scale = {scale.data(), View::contiguous(DType::kF32, {10})};
    a.weights = {weights.data(), View::contiguous(DType::kF32, {3, 2})};
    a.ks = {ks.data(), View::contiguous(DType::kI32, {3})};
    a.ke = {ke.data(), View::contiguous(DType::kI32, {3})};
    a.logits = {logits.data(), View::padded_rows(DType::kF32, {3, 10}, 12)};
    return a;
  };
  const auto untouched = [&] { return std::all_of(logits.begin(), logits.end(), [](float x) { return x == 7.0f; }); };
  const auto refused = [&](const std::function<void(MqaLogitsArgs&)>& change, const char* what) {
    std::fill(logits.begin(), logits.end(), 7.0f);
    MqaLogitsArgs a = args();
    change(a);
    EXPECT_THROW(mqa_logits(*device, a), Error) << what;
    EXPECT_TRUE(untouched()) << what << ": launched";
  };
  std::vector<int32_t> bad_ks = {0, 2, 5};   // row 2: ks 5 > ke 4
  std::vector<int32_t> bad_ke = {3, 11, 4};  // row 1: ke 11 > N = 10
  refused([](MqaLogitsArgs& a) { a.q.view = View::contiguous(DType::kF32, {3, 2, 2}); }, "fp32 q");
  refused([](MqaLogitsArgs& a) { a.k.view = View::contiguous(DType::kFP8E4M3, {10, 7}); }, "k head dim");
  refused([](MqaLogitsArgs& a) { a.k.view = View(DType::kFP8E4M3, {10, 4}, {8, 2}); }, "k column stride");
  refused([](MqaLogitsArgs& a) { a.k_scale.view = View::contiguous(DType::kF32, {9}); }, "k_scale size");
  refused([](MqaLogitsArgs& a) { a.weights.view = View::contiguous(DType::kF32, {2, 3}); }, "weights shape");
  refused([](MqaLogitsArgs& a) { a.ks.view = View::contiguous(DType::kI64, {3}); }, "int64 ks");
  refused([](MqaLogitsArgs& a) { a.ke.view = View::contiguous(DType::kI32, {2}); }, "ke size");
  refused([](MqaLogitsArgs& a) { a.logits.view = View::padded_rows(DType::kF32, {3, 9}, 12); }, "logits columns");
  refused([](MqaLogitsArgs& a) { a.logits.view = View::padded_rows(DType::kF32, {2, 10}, 12); }, "logits rows");
  refused(
      [&](MqaLogitsArgs& a) {
        a.host_ks = &ks;
        a.host_ke = &bad_ke;
      },
      "ke past N");
  refused(
      [&](MqaLogitsArgs& a) {
        a.host_ks = &bad_ks;
        a.host_ke = &ke;
      },
      "ks > ke");
  refused([&](MqaLogitsArgs& a) { a.host_ks = &ks; }, "only one host copy");
  MqaLogitsArgs ok = args();
  ok.host_ks = &ks, ok.host_ke = &ke;
  EXPECT_NO_THROW(mqa_logits(*device, ok));
  EXPECT_FALSE(untouched());
}

}  // namespace
}  // namespace mlacheck::kernels
