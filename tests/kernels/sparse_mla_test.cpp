// Tests of kernels/sparse_mla_glue.h (docs/ops.md 4) through properties/sparse_mla_properties.h: sparse
// MLA decode against the oracle on randomized cases (host backend with 32- and 64-lane warps and
// shuffled schedules; cuda when a GPU is usable), every buffer guarded and every cache byte no
// counted valid index names poisoned (special values among them); top-k rows permuted; wrong
// implementations caught; the case text; rows with no valid entry; a production-size case; and
// bad input refused before any launch.
#include "kernels/sparse_mla.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tolerances.h"
#include "kernels/registry.h"
#include "kernels/sparse_mla_glue.h"
#include "properties/property_registry.h"
#include "harness/rc_verdict.h"
#include "properties/sparse_mla_properties.h"
#include "tests/support/refusal.h"
#include "tests/support/round_trip.h"

namespace mlacheck::kernels {
namespace {

constexpr int64_t kDim = kSparseMlaHeadDim, kLatent = kSparseMlaLatent, kToken = kSparseMlaTokenBytes;
constexpr const char* kImpl = "sparse_mla_decode@ref";

// The case file a failing property prints.
CaseText case_text(const char* property, const SparseMlaCase& c) {
  CaseText t = case_header(property, kImpl);
  sparse_mla_to_text(c, t);
  return t;
}

RC_GTEST_PROP(SparseMlaDecode, EqualsTheOracleAndWritesOnlyOutAndLse, ()) {
  const SparseMlaCase c = *gen::sparse_mla_case();
  RC_TAG(c.topk > kSparseMlaTileKeys ? "several tiles" : "one tile",
         c.H > kSparseMlaHeadsPerBlock ? "two head groups" : "one head group",
         c.has_length ? "topk_length" : "full rows", c.has_sink ? "sink" : "no sink");
  RC_TAG(c.magnitude_log2 == 0 ? "latent 2^0" : "latent 2^+-40 or 2^+-100",
         c.scale_format == SparseMlaScaleFormat::kFp32 ? "fp32 scales" : "ue8m0 scales", c.zero_rows ? "zero rows" : "");
  const auto device = make_device(Backend::kHost);
  rc_require(sparse_mla_equals_oracle(*device, &sparse_mla_decode, c),
             case_text("sparse_mla_decode.equals_oracle", c));
}

gen::SparseMlaShape far_slots() {
  gen::SparseMlaShape far;
  far.far_slots = true;
  return far;
}

// Slots past byte 2^31 or 2^32 of a cache of up to 8 GiB, of which only the tokens read are backed
// (reserved memory).
RC_GTEST_PROP(SparseMlaDecode, FarSlotsPastByte2To31Or2To32EqualTheOracle, ()) {
  const SparseMlaCase c = *gen::sparse_mla_case(far_slots());
  int64_t end = -1;  // one past the highest byte of a token read
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t s = 0; s < c.S; ++s) {
      for (int64_t i = 0; i < c.topk; ++i) {
        if (!c.counted_valid(b, s, i)) continue;
        const int64_t slot = c.index(b, s, i);
        end = std::max(end, c.kv_offset + slot / c.page * c.block_stride + slot % c.page * c.token_stride + kToken);
      }
    }
  }
  RC_ASSERT(c.reserved_cache());
  RC_TAG(end < 0                     ? "no slot read"
         : end > (int64_t{1} << 32)  ? "past 2^32"
         : end > (int64_t{1} << 31)  ? "past 2^31"
                                     : "below 2^31");
  const auto device = make_device(Backend::kHost);
  rc_require(sparse_mla_equals_oracle(*device, &sparse_mla_decode, c), case_text("sparse_mla_decode.far_slots", c));
}

RC_GTEST_PROP(SparseMlaDecode, ARequestAloneGetsItsRowsOfTheBatchBitForBit, ()) {
  const SparseMlaCase c = *gen::sparse_mla_case();
  const auto device = make_device(Backend::kHost);
  rc_require(sparse_mla_rows_independent_of_batch(*device, &sparse_mla_decode, c),
             case_text("sparse_mla_decode.rows_independent_of_batch", c));
}

RC_GTEST_PROP(SparseMlaDecode, PermutingEachTopkRowChangesNothing, ()) {
  const SparseMlaCase c = *gen::sparse_mla_case();
  const uint64_t perm = *rc::gen::arbitrary<uint64_t>();
  const auto device = make_device(Backend::kHost);
  CaseText t = case_text("sparse_mla_decode.topk_permutation_invariant", c);
  t.set("permutation_seed", perm);
  rc_require(sparse_mla_permutation_invariant(*device, &sparse_mla_decode, c, perm), t);
}

// lse may move by its fp32 rounding slack (oracle lse_slack) and no more. What a campaign on the
// H200 found: an lse of 3.835 off by 1.4e-5, 1.013x the table's tolerance, from the fp32 rounding
// of the scores (dense MLA decode already allowed it). Moved by half the slack it passes; by the
// slack plus ten times the table's tolerance it fails, and the verdict says the slack was used.
TEST(SparseMlaDecode, LseMayMoveByItsSlackAndNoMore) {
  oracle::SparseMlaResult want{oracle::OracleTensor({1, 1, 1, kLatent}), oracle::OracleTensor({1, 1, 1}, 3.8352415),
                               oracle::OracleTensor({1, 1, 1}, 2e-5), oracle::OracleTensor({1, 1, 1, kLatent})};
  const std::vector<uint16_t> out(kLatent, 0);
  const HostTensor o{const_cast<uint16_t*>(out.data()), View::contiguous(DType::kBF16, {1, 1, 1, kLatent})};
  const Tolerance& tol = tolerance_for("sparse_mla_decode", "lse");
  auto with_lse_moved = [&](double by) {
    float lse = static_cast<float>(3.8352415 + by);
    return compare_sparse_mla(o, HostTensor(&lse, View::contiguous(DType::kF32, {1, 1, 1})), want, 0);
  };
  EXPECT_EQ(with_lse_moved(1e-5).value_or(""), "");
  EXPECT_EQ(with_lse_moved(-1e-5).value_or(""), "");
  const Verdict v = with_lse_moved(2e-5 + 10 * (tol.atol + tol.rtol * 3.9));
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find("lse: "), std::string::npos) << *v;
  EXPECT_NE(v->find("moved toward the oracle by its fp32 rounding slack"), std::string::npos) << *v;
  want.lse_slack = oracle::OracleTensor({1, 1, 1});  // no slack: 1.5x the tolerance is reported
  EXPECT_TRUE(with_lse_moved(1.5 * (tol.atol + tol.rtol * 3.9)).has_value());
}

// ---- the properties catch wrong implementations --------------------------------------------------

// One past the lse view: a write that stays inside a preallocated buffer.
void writes_past_lse(Device& device, const SparseMlaArgs& a) {
  sparse_mla_decode(device, a);
  a.lse.data<float>()[a.lse.view.numel()] = 0.0f;
}

// Off by one in topk_length: the last counted entry of every row is dropped (host memory only).
void drops_the_last_counted_entry(Device& device, const SparseMlaArgs& a) {
  const int64_t B = a.q.view.size(0), topk = a.indices.view.size(2);
  std::vector<int32_t> lengths(static_cast<size_t>(B), static_cast<int32_t>(topk));
  if (a.topk_length.base != nullptr) std::copy_n(a.topk_length.data<int32_t>(), B, lengths.begin());
  for (int32_t& l : lengths) l = std::max(l - 1, 0);
  SparseMlaArgs wrong = a;
  wrong.topk_length = {lengths.data(), View::contiguous(DType::kI32, {B})};
  sparse_mla_decode(device, wrong);
}

// A batch-dependent result, as a split count chosen from the batch size would give: a batch of one
// request gets every finite lse one float step higher.
void depends_on_the_batch(Device& device, const SparseMlaArgs& a) {
  sparse_mla_decode(device, a);
  if (a.q.view.size(0) != 1) return;
  float* lse = a.lse.data<float>();
  for (int64_t i = 0; i < a.lse.view.numel(); ++i) {
    if (std::isfinite(lse[i])) lse[i] = std::nextafter(lse[i], INFINITY);
  }
}

// A batch-dependent result far past rounding: a batch of one request gets every finite lse 1/8 higher.
void depends_on_the_batch_by_more(Device& device, const SparseMlaArgs& a) {
  sparse_mla_decode(device, a);
  if (a.q.view.size(0) != 1) return;
  float* lse = a.lse.data<float>();
  for (int64_t i = 0; i < a.lse.view.numel(); ++i) {
    if (std::isfinite(lse[i])) lse[i] += 0.125f;
  }
}

// `batch_rows rounding` (a split-KV schedule that depends on the batch, as FlashMLA's): one float
// step between a request alone and in its batch passes; a difference past rounding still fails.
TEST(SparseMlaDecode, BatchRowsRoundingAllowsRoundingOnly) {
  EXPECT_TRUE(rc::check("a request alone within rounding of its batch, one float step off", [] {
    const SparseMlaCase c = *gen::sparse_mla_case();
    const auto device = make_device(Backend::kHost);
    rc_require(sparse_mla_rows_independent_of_batch(*device, &depends_on_the_batch, c, true),
               case_text("sparse_mla_decode.rows_independent_of_batch", c));
  }));
  EXPECT_FALSE(rc::check("a request alone within rounding of its batch, 1/8 off", [] {
    const SparseMlaCase c = *gen::sparse_mla_case();
    const auto device = make_device(Backend::kHost);
    rc_require(sparse_mla_rows_independent_of_batch(*device, &depends_on_the_batch_by_more, c, true),
               case_text("sparse_mla_decode.rows_independent_of_batch", c));
  }));
}

// An implementation that returns no lse (SGLang's Triton decode): the kernel's lse goes to scratch
// memory, mlacheck's lse view is never written.
void out_only(Device& device, const SparseMlaArgs& a) {
  std::vector<float> scratch(static_cast<size_t>(a.lse.view.numel()));
  SparseMlaArgs b = a;
  b.lse = {scratch.data(), View::contiguous(DType::kF32, a.lse.view.shape())};
  sparse_mla_decode(device, b);
}

// `lse none`: out alone is compared, and lse must stay unwritten; without the declaration the
// unwritten lse fails, and with it an implementation that writes lse fails.
TEST(SparseMlaDecode, LseNoneChecksOutAndAnUnwrittenLse) {
  const auto device = make_device(Backend::kHost);
  SparseMlaCase c;
  c.B = 2, c.S = 2, c.H = 17, c.topk = 5, c.page = 16, c.num_blocks = 3, c.block_stride = 16 * kToken, c.seed = 9;
  c.indices = {0, 1, 2, -1, 5, 3, 3, 7, 20, -1, 4, 4, 6, 9, 1, -1, -1, -1, -1, -1};  // the last row: no key
  c.trap = 40;  // a slot of the spare page
  c.has_sink = true, c.sink.assign(17, 0.25f);
  // Without the declaration the unwritten lse fails, named as never written.
  const Verdict unwritten = sparse_mla_equals_oracle(*device, &out_only, c);
  ASSERT_TRUE(unwritten.has_value());
  EXPECT_NE(unwritten->find("lse:"), std::string::npos) << *unwritten;
  EXPECT_NE(unwritten->find("hold the output poison: never written"), std::string::npos) << *unwritten;
  // With it, out alone is judged by every property...
  c.lse_none = true;
  EXPECT_EQ(sparse_mla_equals_oracle(*device, &out_only, c).value_or(""), "");
  EXPECT_EQ(sparse_mla_rows_independent_of_batch(*device, &out_only, c).value_or(""), "");
  EXPECT_EQ(sparse_mla_permutation_invariant(*device, &out_only, c, 3).value_or(""), "");
  // ...and an implementation that writes lse fails.
  const Verdict written = sparse_mla_equals_oracle(*device, &sparse_mla_decode, c);
  ASSERT_TRUE(written.has_value());
  EXPECT_NE(written->find("written"), std::string::npos) << *written;
  EXPECT_NE(written->find("`lse none`"), std::string::npos) << *written;
  const Verdict batch = sparse_mla_rows_independent_of_batch(*device, &sparse_mla_decode, c);
  ASSERT_TRUE(batch.has_value());
  EXPECT_NE(batch->find("`lse none`"), std::string::npos) << *batch;
}

// W2: the production kernel with a slot's byte offset computed in int32.
void offsets_in_32_bits(Device& device, const SparseMlaArgs& a) {
  sparse_mla_decode_seeded(device, a, SparseMlaBug::kW2SlotOffsetIn32Bits);
}

TEST(SparseMlaDecode, ThePropertiesReportWrongImplementations) {
  EXPECT_FALSE(rc::check("far slots, on offsets computed in 32 bits", [] {
    const SparseMlaCase c = *gen::sparse_mla_case(far_slots());
    const auto device = make_device(Backend::kHost);
    rc_require(sparse_mla_equals_oracle(*device, &offsets_in_32_bits, c), case_text("sparse_mla_decode.far_slots", c));
  }));
  // The same wrong build passes every case of a cache under 256 MiB: only far slots tell it apart.
  EXPECT_TRUE(rc::check("equals the oracle, on offsets computed in 32 bits", [] {
    const SparseMlaCase c = *gen::sparse_mla_case();
    const auto device = make_device(Backend::kHost);
    rc_require(sparse_mla_equals_oracle(*device, &offsets_in_32_bits, c), case_text("sparse_mla_decode.equals_oracle", c));
  }));
  EXPECT_FALSE(rc::check("a request alone as in its batch, on a wrong implementation", [] {
    const SparseMlaCase c = *gen::sparse_mla_case();
    const auto device = make_device(Backend::kHost);
    rc_require(sparse_mla_rows_independent_of_batch(*device, &depends_on_the_batch, c),
               case_text("sparse_mla_decode.rows_independent_of_batch", c));
  }));
  for (SparseMlaFn* wrong : {&writes_past_lse, &drops_the_last_counted_entry}) {
    EXPECT_FALSE(rc::check("sparse MLA decode equals the oracle, on a wrong implementation", [wrong] {
      const SparseMlaCase c = *gen::sparse_mla_case();
      const auto device = make_device(Backend::kHost);
      rc_require(sparse_mla_equals_oracle(*device, wrong, c), case_text("sparse_mla_decode.equals_oracle", c));
    }));
  }
  // Which entry the off-by-one drops depends on the order: permuting the rows shows it, no oracle needed.
  EXPECT_FALSE(rc::check("permuting top-k rows, on a wrong implementation", [] {
    const SparseMlaCase c = *gen::sparse_mla_case();
    const uint64_t perm = *rc::gen::arbitrary<uint64_t>();
    const auto device = make_device(Backend::kHost);
    CaseText t = case_text("sparse_mla_decode.topk_permutation_invariant", c);
    t.set("permutation_seed", perm);
    rc_require(sparse_mla_permutation_invariant(*device, &drops_the_last_counted_entry, c, perm), t);
  }));
}

// ---- the case text ----------------------------------------------------------------------------------

// 300 drawn cases (sizes 0 to 99): written, read back and written again, the same text, every key read.
TEST(SparseMlaDecode, CaseTextRoundTrips) {
  test_support::expect_case_text_round_trips<SparseMlaCase>(gen::sparse_mla_case(), &sparse_mla_from_text, 300);
}

// Far cases the same way, through their own reader. The other properties' reader refuses one (its
// num_blocks is past a dense cache's), and so does its own with the pages moved under 2^31.
TEST(SparseMlaDecode, FarCaseTextRoundTrips) {
  test_support::expect_case_text_round_trips<SparseMlaCase>(gen::sparse_mla_case(far_slots()), &sparse_mla_far_from_text,
                                                            100);
  const SparseMlaCase far = gen::sparse_mla_case(far_slots())(rc::Random(7), 10).value();
  ASSERT_GT(far.block_base, 0);
  CaseText t;
  sparse_mla_to_text(far, t);
  EXPECT_NE(test_support::refusal<SparseMlaCase>(&sparse_mla_from_text, CaseText::parse(t.format())), "");
  CaseText near = CaseText::parse(t.format());
  near.set("block_base", 1);
  EXPECT_NE(test_support::refusal<SparseMlaCase>(&sparse_mla_far_from_text, near).find("block_base"), std::string::npos);
}

TEST(SparseMlaDecode, MalformedCaseTextIsRefused) {
  SparseMlaCase c;
  c.B = 2, c.S = 1, c.H = 3, c.topk = 4, c.page = 2, c.num_blocks = 3, c.block_stride = 2 * kToken, c.seed = 1;
  c.has_length = true, c.lengths = {4, 1}, c.has_sink = true, c.sink = {0.5f, HUGE_VALF, -1.0f};
  c.indices = {0, 1, -1, 5, 2, 2, 7, 9};
  CaseText good;
  sparse_mla_to_text(c, good);
  EXPECT_NO_THROW((void)sparse_mla_from_text(CaseText::parse(good.format())));
  const std::vector<std::pair<const char*, std::function<void(CaseText&)>>> breaks = {
      {"batch", [](CaseText& t) { t.set("batch", 0); }},
      {"indices", [](CaseText& t) { t.set_list("indices", std::vector<int>{0, 1, 2}); }},
      {"topk_length", [](CaseText& t) { t.set_list("topk_length", std::vector<int>{4, 5}); }},
      {"topk_length", [](CaseText& t) { t.set_list("topk_length", std::vector<int>{4}); }},
      {"attn_sink", [](CaseText& t) { t.set_words("attn_sink", {"0.5", "nan", "1"}); }},
      {"attn_sink", [](CaseText& t) { t.set_words("attn_sink", {"0.5", "x", "1"}); }},
      {"token_stride", [](CaseText& t) { t.set("token_stride", 664); }},
      {"block_stride", [](CaseText& t) { t.set("block_stride", kToken); }},
      {"kv_offset", [](CaseText& t) { t.set("kv_offset", 8); }},
      {"softmax_scale", [](CaseText& t) { t.set_words("softmax_scale", {"inf"}); }},
      {"softmax_scale", [](CaseText& t) { t.set_words("softmax_scale", {"-0.26"}); }},
      {"scale_format", [](CaseText& t) { t.set("scale_format", "e8m0"); }},
      {"magnitude_log2", [](CaseText& t) { t.set("magnitude_log2", 200); }},
      {"warp", [](CaseText& t) { t.set("warp", 48); }},
      {"poison", [](CaseText& t) { t.set("poison", 256); }},
      {"seed", [](CaseText& t) { t.set("seed", -1); }},
  };
  for (const auto& [key, change] : breaks) {
    CaseText t = CaseText::parse(good.format());
    change(t);
    try {
      sparse_mla_from_text(CaseText::parse(t.format()));
      ADD_FAILURE() << key << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
  CaseText misspelt = case_header("sparse_mla_decode.equals_oracle", kImpl);
  sparse_mla_to_text(c, misspelt);
  misspelt.set("sead", 3);
  EXPECT_THROW(run_case_text(CaseText::parse(misspelt.format())), Error);
}

// Generated cases, printed as case files and run the way `mlacheck repro` runs them, pass on @ref
// (a few: the properties above run many).
TEST(SparseMlaDecode, GeneratedCaseFilesPassThroughRunCaseText) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const SparseMlaCase c = gen::sparse_mla_case()(rc::Random(seed), 50).value();
    CaseText t = case_text("sparse_mla_decode.equals_oracle", c);
    EXPECT_EQ(run_case_text(CaseText::parse(t.format())).verdict.value_or(""), "") << t.format();
    t = case_text("sparse_mla_decode.topk_permutation_invariant", c);
    t.set("permutation_seed", seed);
    EXPECT_EQ(run_case_text(CaseText::parse(t.format())).verdict.value_or(""), "") << t.format();
  }
}

// ---- hand-worked cases ---------------------------------------------------------------------------------

// Rows with no valid entry (all invalid indices, topk_length 0, entries valid only past the length)
// among rows with valid ones: out exactly +0, lse +inf, and the other rows as the oracle says.
TEST(SparseMlaDecode, RowsWithoutValidEntriesGiveZeroAndInfinity) {
  const auto device = make_device(Backend::kHost);
  SparseMlaCase c;
  c.B = 3, c.S = 2, c.H = 20, c.topk = 40, c.page = 16, c.num_blocks = 4, c.block_stride = 16 * kToken;
  c.has_length = true, c.lengths = {40, 0, 7}, c.has_sink = true, c.seed = 5;
  c.sink.assign(20, 0.5f);
  c.trap = 3 * 16;
  for (int64_t b = 0; b < 3; ++b) {
    for (int64_t s = 0; s < 2; ++s) {
      for (int64_t i = 0; i < 40; ++i) c.indices.push_back(static_cast<int32_t>((b * 2 + s + 5 * i) % 48));
    }
  }
  // Row (0, 1): only invalid entries; row (2, 0): valid slots only past topk_length 7.
  for (int64_t i = 0; i < 40; ++i)
    c.indices[static_cast<size_t>(40 + i)] = i % 2 == 0 ? -1 : 64 + static_cast<int32_t>(i);
  for (int64_t i = 0; i < 7; ++i) c.indices[static_cast<size_t>(4 * 40 + i)] = -5;
  const std::vector<std::pair<int64_t, int64_t>> empty = {{0, 1}, {1, 0}, {1, 1}, {2, 0}};
  const SparseMlaOutcome o = run_sparse_mla(*device, &sparse_mla_decode, c, true);
  EXPECT_EQ(o.failure.value_or(""), "");
  ASSERT_FALSE(o.out.empty());
  for (const auto& [b, s] : empty) {
    for (int64_t h = 0; h < c.H; ++h) {
      for (int64_t d = 0; d < kLatent; ++d) {
        ASSERT_EQ(o.out[static_cast<size_t>(((b * c.S + s) * c.H + h) * kLatent + d)], 0)
            << "row (" << b << ", " << s << ") head " << h << " column " << d;
      }
      EXPECT_EQ(o.lse[static_cast<size_t>((b * c.H + h) * c.S + s)], HUGE_VALF) << "row (" << b << ", " << s << ")";
    }
  }
  for (int64_t h = 0; h < c.H; ++h) EXPECT_TRUE(std::isfinite(o.lse[static_cast<size_t>(h * c.S)]));  // row (0, 0)
}

// DeepSeek-V3.2 decode: 2 query tokens, 128 heads, top-k 2048 over pages of 64 in a shuffled cache;
// the second row has topk_length 1500 and -1 padding, both an attention sink.
SparseMlaCase production_case() {
  SparseMlaCase c;
  c.B = 2, c.S = 1, c.H = 128, c.topk = 2048, c.page = 64, c.num_blocks = 70, c.block_stride = 64 * kToken;
  c.has_length = true, c.has_sink = true, c.seed = 17;
  c.softmax_scale = 1.0 / std::sqrt(192.0);
  fill_sparse_mla_entries(c, 66, 0, false);
  c.lengths = {2048, 1500};
  for (int64_t i = 0; i < 2048; ++i) {
    if (i % 97 == 3) c.indices[static_cast<size_t>(i)] = -1;                     // a few gaps in row 0
    if (i >= 1500 && i % 2 == 0) c.indices[static_cast<size_t>(2048 + i)] = -1;  // padding of row 1
  }
  return c;
}

TEST(SparseMlaDecode, ProductionSizeEqualsTheOracle) {
  const auto device = make_device(Backend::kHost);
  EXPECT_EQ(sparse_mla_equals_oracle(*device, &sparse_mla_decode, production_case()).value_or(""), "");
}

// ---- cuda: the same checks on device buffers -----------------------------------------------------

TEST(SparseMlaDecodeOnCuda, PropertiesAndProductionSizeWhenAGpuIsPresent) {
  std::string why;
  if (!device_usable(Backend::kCuda, &why)) GTEST_SKIP() << "skipped: no GPU (" << why << ")";
  const auto device = make_device(Backend::kCuda);
  EXPECT_TRUE(rc::check("sparse MLA decode on cuda equals the oracle", [&] {
    const SparseMlaCase c = *gen::sparse_mla_case();
    CaseText t = case_header("sparse_mla_decode.equals_oracle", kImpl, "cuda");
    sparse_mla_to_text(c, t);
    rc_require(sparse_mla_equals_oracle(*device, &sparse_mla_decode, c), t);
  }));
  EXPECT_TRUE(rc::check("sparse MLA decode on cuda: permuting top-k rows changes nothing", [&] {
    const SparseMlaCase c = *gen::sparse_mla_case();
    const uint64_t perm = *rc::gen::arbitrary<uint64_t>();
    CaseText t = case_header("sparse_mla_decode.topk_permutation_invariant", kImpl, "cuda");
    sparse_mla_to_text(c, t);
    t.set("permutation_seed", perm);
    rc_require(sparse_mla_permutation_invariant(*device, &sparse_mla_decode, c, perm), t);
  }));
  EXPECT_EQ(sparse_mla_equals_oracle(*device, &sparse_mla_decode, production_case()).value_or(""), "");
}

// ---- bad input: refused with one line before any launch -----------------------------------------

// 16 bytes, so the cache vector starts 16-byte aligned as the kernel's loads need.
struct alignas(16) Chunk {
  uint8_t bytes[16];
};

// Small valid inputs in host memory: b 2, s_q 1, h 2, topk 4, 2 blocks of 2 tokens. out and lse
// hold sentinels, so any launch would show.
struct Inputs {
  static constexpr int64_t B = 2, S = 1, H = 2, topk = 4, page = 2, blocks = 2;
  std::vector<uint16_t> q = std::vector<uint16_t>(B * S * H * kDim, 0x3F80);
  std::vector<Chunk> kv = std::vector<Chunk>(blocks * page * kToken / 16, Chunk{{0x38}});
  std::vector<int32_t> indices = {0, 1, 2, -1, 3, 3, 9, 0}, lengths = {4, 2};
  std::vector<float> sink = std::vector<float>(H, 0.0f), lse = std::vector<float>(B * H * S, 7.0f);
  std::vector<uint16_t> out = std::vector<uint16_t>(B * S * H * kLatent, 0x4321);
  SparseMlaArgs args() {
    SparseMlaArgs a;
    a.q = {q.data(), View::contiguous(DType::kBF16, {B, S, H, kDim})};
    a.kv_cache = {kv.data(), View::contiguous(DType::kU8, {blocks, page, kToken})};
    a.indices = {indices.data(), View::contiguous(DType::kI32, {B, S, topk})};
    a.topk_length = {lengths.data(), View::contiguous(DType::kI32, {B})};
    a.attn_sink = {sink.data(), View::contiguous(DType::kF32, {H})};
    a.softmax_scale = 0.0722;
    a.out = {out.data(), View::contiguous(DType::kBF16, {B, S, H, kLatent})};
    a.lse = {lse.data(), View::contiguous(DType::kF32, {B, H, S})};
    return a;
  }
  bool untouched() const {
    return std::all_of(out.begin(), out.end(), [](uint16_t x) { return x == 0x4321; }) &&
           std::all_of(lse.begin(), lse.end(), [](float x) { return x == 7.0f; });
  }
};

// Expects change(args) to be refused with a one-line Error that names `culprit`, and no launch.
void expect_refused(const std::function<void(Inputs&, SparseMlaArgs&)>& change, const char* what, const char* culprit) {
  const auto device = make_device(Backend::kHost);
  test_support::expect_refused_before_launch<Inputs>(
      [&](const SparseMlaArgs& a) { sparse_mla_decode(*device, a); }, change, what, culprit);
}

TEST(SparseMlaDecode, BadInputIsRefusedBeforeAnyLaunch) {
  {
    const auto device = make_device(Backend::kHost);
    Inputs in;
    EXPECT_NO_THROW(sparse_mla_decode(*device, in.args()));  // the baseline is valid
    EXPECT_FALSE(in.untouched());
  }
  using In = Inputs;
  using A = SparseMlaArgs;
  constexpr int64_t B = In::B, S = In::S, H = In::H;
  // q
  expect_refused([](In&, A& a) { a.q.view = View::contiguous(DType::kF32, {B, S, H, kDim}); }, "fp32 q", "q must be");
  expect_refused(
      [](In&, A& a) {
        a.q.view = View::contiguous(DType::kBF16, {B, S, H * 9, 64});
      },
      "q head dim 64", "q must be");
  expect_refused(
      [](In&, A& a) {
        a.q.view = View::contiguous(DType::kBF16, {B * S, H, kDim});
      },
      "rank-3 q", "q must be");
  expect_refused(
      [](In&, A& a) {
        a.q.view = View(DType::kBF16, {B, S, 1, kDim}, {H * kDim, H * kDim, kDim, 1});
      },
      "strided q", "q must be");
  // out and lse
  expect_refused(
      [](In&, A& a) {
        a.out.view = View::contiguous(DType::kF32, {B, S, H, kLatent});
      },
      "fp32 out", "out must be");
  expect_refused(
      [](In&, A& a) {
        a.out.view = View::contiguous(DType::kBF16, {B, S, 1, kLatent});
      },
      "out heads", "out must be");
  expect_refused(
      [](In&, A& a) {
        a.out.view = View::contiguous(DType::kBF16, {B, S, H, kDim});
      },
      "out of 576", "out must be");
  expect_refused(
      [](In&, A& a) {
        a.out.view = View(DType::kBF16, {B, S, H, 256}, {S * H * 512, H * 512, 512, 2});
      },
      "strided out", "out must be");
  expect_refused(
      [](In&, A& a) {
        a.lse.view = View::contiguous(DType::kF32, {B, S, H});
      },
      "lse [b, s_q, h]", "lse must be");
  expect_refused([](In&, A& a) { a.lse.view = View::contiguous(DType::kF32, {B, H}); }, "rank-2 lse", "lse must be");
  expect_refused([](In&, A& a) { a.lse.view = View::contiguous(DType::kF64, {B, H, S}); }, "fp64 lse", "lse must be");
  expect_refused(
      [](In&, A& a) {
        a.lse.view = View(DType::kF32, {B, H, S}, {1, B, B * H});
      },
      "transposed lse", "lse must be");
  // indices and topk_length
  expect_refused(
      [](In&, A& a) {
        a.indices.view = View::contiguous(DType::kI64, {B, S, 4});
      },
      "int64 indices", "indices must be");
  expect_refused(
      [](In&, A& a) {
        a.indices.view = View::contiguous(DType::kI32, {B, 2, 2});
      },
      "indices s_q", "indices must be");
  expect_refused(
      [](In&, A& a) {
        a.indices.view = View::contiguous(DType::kI32, {B * S, 4});
      },
      "rank-2 indices", "indices must be");
  expect_refused(
      [](In&, A& a) {
        a.indices.view = View(DType::kI32, {B, S, 2}, {4, 4, 2});
      },
      "strided indices", "indices must be");
  expect_refused([](In&, A& a) { a.topk_length.view = View::contiguous(DType::kI32, {B + 1}); }, "topk_length of 3",
                 "topk_length must be");
  expect_refused([](In&, A& a) { a.topk_length.view = View::contiguous(DType::kI32, {1}); }, "topk_length of 1",
                 "topk_length must be");
  expect_refused([](In&, A& a) { a.topk_length.view = View::contiguous(DType::kI64, {B}); }, "int64 topk_length",
                 "topk_length must be");
  // kv_cache
  expect_refused(
      [](In&, A& a) {
        a.kv_cache.view = View(DType::kU8, {1, 2, kToken}, {2 * 664, 664, 1});
      },
      "token stride 664", "token stride >= 656");
  expect_refused(
      [](In&, A& a) {
        a.kv_cache.view = View(DType::kU8, {2, 1, kToken}, {672, 640, 1});
      },
      "token stride 640", "token stride >= 656");
  expect_refused(
      [](In&, A& a) {
        a.kv_cache.view = View(DType::kU8, {2, 1, kToken}, {664, 656, 1});
      },
      "block stride 664", "token stride >= 656");
  expect_refused(
      [](In&, A& a) {
        a.kv_cache.view = View(DType::kU8, {2, 2, kToken}, {1312 - 16, 656, 1});
      },
      "overlapping blocks", "block stride >= page");
  expect_refused(
      [](In&, A& a) {
        a.kv_cache.view = View::contiguous(DType::kU8, {2, 2, 640});
      },
      "640-byte tokens", "kv_cache must be");
  expect_refused(
      [](In&, A& a) {
        a.kv_cache.view = View(DType::kU8, {1, 1, kToken}, {2 * 1312, 1312, 2});
      },
      "byte stride 2", "kv_cache must be");
  expect_refused(
      [](In&, A& a) {
        a.kv_cache.view = View::contiguous(DType::kU8, {2, 2, kToken}, 8);
      },
      "misaligned cache", "16-byte aligned");
  expect_refused(
      [](In&, A& a) {
        a.kv_cache.view = View::contiguous(DType::kFP8E4M3, {2, 2, kToken});
      },
      "fp8 cache", "kv_cache must be");
  expect_refused(
      [](In&, A& a) {
        a.kv_cache.view = View::contiguous(DType::kU8, {2, 0, kToken});
      },
      "page 0", "page of at least one token");
  // attn_sink, softmax_scale
  expect_refused([](In&, A& a) { a.attn_sink.view = View::contiguous(DType::kF32, {H + 1}); }, "sink of 3",
                 "attn_sink must be");
  expect_refused([](In&, A& a) { a.attn_sink.view = View::contiguous(DType::kF64, {H}); }, "fp64 sink",
                 "attn_sink must be");
  expect_refused([](In&, A& a) { a.softmax_scale = std::nan(""); }, "NaN scale", "softmax_scale");
  expect_refused([](In&, A& a) { a.softmax_scale = 1e300; }, "scale past fp32", "softmax_scale");
  // overlaps
  expect_refused(
      [](In& in, A& a) {
        a.out = {in.q.data(), View::contiguous(DType::kBF16, {B, S, H, kLatent})};
      },
      "out over q", "overlaps q");
  expect_refused(
      [](In& in, A& a) {
        a.lse = {in.indices.data(), View::contiguous(DType::kF32, {B, H, S})};
      },
      "lse over indices", "overlaps indices");
  expect_refused(
      [](In& in, A& a) {
        a.lse = {in.out.data(), View::contiguous(DType::kF32, {B, H, S}, 64)};
      },
      "lse inside out", "overlaps lse");
  // grid limits
  expect_refused(
      [](In&, A& a) {
        a.q.view = View::contiguous(DType::kBF16, {70000, 1, 1, kDim});
      },
      "b past the grid", "65535");
}

}  // namespace
// H2: an empty row walks 2^27 tiles of nothing; it ends (13 s on an H100, about a minute under the
// sanitizer build on the host), so a wall clock calls it slow. By work it is a hang in any build:
// its block passes 2^20 thread steps where the reference's largest block on the case takes 512.
TEST(SparseMlaDecodeWrong, AnEmptyRowWalkedForTwoToThe27TilesIsAHangByWork) {
  std::ifstream in(std::string(MLACHECK_SOURCE_DIR) + "/corpus/regressions/H1-sparse-mla-empty-row-ends.case");
  const CaseText c = CaseText::parse(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
  for (const char* impl : {"sparse_mla_decode@H2", "sparse_mla_decode@H1"}) {
    const Verdict v = run_case_text(c, "host", impl).verdict;
    ASSERT_TRUE(v) << impl;
    EXPECT_EQ(v->rfind("hang: kernel 'sparse_mla_decode_kernel<SparseMlaBug::kH", 0), 0u) << *v;
    EXPECT_NE(v->find("block (0,0,0) took over 1048576 thread steps, more than 16 times the largest block of "
                      "sparse_mla_decode@ref on this case (512 steps)"),
              std::string::npos)
        << *v;
  }
  EXPECT_EQ(run_case_text(c, "host", "sparse_mla_decode@ref").verdict, std::nullopt);
}

}  // namespace mlacheck::kernels
