// Tests of kernels/mqa_logits_glue.h: paged decode and ragged prefill logits against the oracle on
// randomized cases (host backend with 32- and 64-lane warps and shuffled schedules; cuda when a GPU
// is usable), every buffer guarded and every input poisoned where it must not be read; production
// sizes; and bad input refused before any launch.
#include "kernels/mqa_logits_glue.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/backend/host_executor.h"
#include "core/compare.h"
#include "core/error.h"
#include "core/fp8.h"
#include "core/tolerances.h"
#include "oracle/mqa_logits.h"
#include "oracle/quantize.h"
#include "properties/block_table_gen.h"
#include "properties/staged_buffer.h"
#include "tests/support/refusal.h"

namespace mlacheck::kernels {
namespace {

// ---- guarded buffers with a host copy (properties/staged_buffer.h) ------------------------------

// The logits buffer around its view: a pattern no kernel would write (fp32 -4.6e-15).
constexpr uint8_t kLogitsFill = 0xA7;

// Uploads every buffer, declares out's view as the launch's only output, arms, launches and checks
// every guard. Returns "" or the first stray write; out.host then holds the device's bytes.
std::string run_guarded(Device& device, const std::vector<Buffer*>& inputs, Buffer& out,
                        const std::function<void()>& launch) {
  std::vector<Buffer*> all = inputs;
  all.push_back(&out);
  for (Buffer* b : all) b->upload(device);
  out.memory->declare_output(out.name, out.view);
  for (Buffer* b : all) b->memory->arm();
  launch();
  device.synchronize();
  for (Buffer* b : all) {
    const GuardReport r = b->memory->check();
    if (!r.ok()) return "guard of " + b->name + ": " + r.describe();
  }
  out.download();
  return "";
}

oracle::LogitsMode oracle_mode(LogitsMode m) {
  return m == LogitsMode::kClean ? oracle::LogitsMode::kClean : oracle::LogitsMode::kUnclean;
}

// Compares the kernel's logits with the oracle's where the mode specifies them (every column in
// clean mode, the row's range in unclean mode). Returns "" or the comparison's report.
std::string compare_logits(const HostTensor& got, const oracle::LogitsResult& want, LogitsMode mode, const char* op) {
  const int64_t rows = want.logits.shape[0], cols = want.logits.shape[1];
  std::vector<double> specified(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      specified[static_cast<size_t>(r * cols + c)] =
          want.specified(r, c, oracle_mode(mode)) ? got.load({r, c}) : want.logits.at({r, c});
    }
  }
  const CompareReport rep = compare_close(HostTensor(specified.data(), View::contiguous(DType::kF64, {rows, cols})),
                                          want.logits.tensor(), tolerance_for(op, "logits"));
  return rep.ok ? "" : std::string(op) + " logits: " + rep.describe();
}

// Host-backend schedule of a case: warp size and block/lane order.
void set_schedule(simt::host::Options& o, int warp_size, bool shuffled, uint64_t seed) {
  o.warp_size = warp_size;
  o.schedule = shuffled ? simt::host::Schedule::kShuffled : simt::host::Schedule::kOrdered;
  o.seed = seed;
}

float uniform(std::mt19937_64& rng, float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); }

// Quantizes n random keys of D values in [-1, 1] as production does (fp32 or ue8m0 scales).
oracle::Fp8Rows random_keys(std::mt19937_64& rng, int64_t n, int64_t D, bool ue8m0) {
  std::vector<float> x(static_cast<size_t>(n * D));
  for (float& v : x) v = uniform(rng, -1, 1);
  return oracle::quantize_per_token_fp8(x, n, D, ue8m0 ? oracle::ScaleFormat::kUe8m0 : oracle::ScaleFormat::kFp32);
}

// ---- paged decode logits (SPEC.md 2.1) ----------------------------------------------------------

struct PagedCase {
  int64_t B = 1, next_n = 1, H = 1, D = 16, block_size = 64;
  bool lens_2d = false;
  int64_t lens_stride = 1;    // 1-D only
  std::vector<int32_t> lens;  // [B] total lengths L_b, or [B * next_n] row lengths
  int64_t max_context_len = 0;
  int64_t W = 0, table_row_pad = 0;
  std::vector<int32_t> table;  // [B, W]: pages, then garbage past each request's needed columns
  int64_t num_blocks = 0, block_stride = 0, kv_offset = 0;
  int64_t logits_stride = 0, logits_offset = 0;  // elements
  LogitsMode mode = LogitsMode::kUnclean;
  bool pass_host_lens = false, ue8m0 = false;
  uint8_t poison = 0x7F;  // 0x7F: fp8 NaN keys; 0x7E: 448 with a huge scale
  uint64_t seed = 0;
  int warp_size = 32;
  bool shuffled = false;

  int64_t rows() const { return B * next_n; }
  int64_t row_len(int64_t b, int64_t j) const {
    return lens_2d ? lens[static_cast<size_t>(b * next_n + j)]
                   : std::max<int64_t>(0, lens[static_cast<size_t>(b)] - next_n + j + 1);
  }
  int64_t longest(int64_t b) const {
    int64_t n = 0;
    for (int64_t j = 0; j < next_n; ++j) n = std::max(n, row_len(b, j));
    return n;
  }
  int64_t needed(int64_t b) const { return (longest(b) + block_size - 1) / block_size; }

  friend void showValue(const PagedCase& c, std::ostream& os) {
    os << "B " << c.B << " next_n " << c.next_n << " H " << c.H << " D " << c.D << " block_size " << c.block_size
       << (c.lens_2d ? " 2-D lens" : " 1-D lens (stride ") << (c.lens_2d ? "" : std::to_string(c.lens_stride) + ")")
       << " [";
    for (int32_t l : c.lens) os << ' ' << l;
    os << " ] max_context_len " << c.max_context_len << " W " << c.W << " table [";
    for (int32_t p : c.table) os << ' ' << p;
    os << " ] num_blocks " << c.num_blocks << " block_stride " << c.block_stride << " kv_offset " << c.kv_offset
       << " logits stride " << c.logits_stride << " offset " << c.logits_offset
       << (c.mode == LogitsMode::kClean ? " clean" : " unclean") << " poison 0x" << std::hex << int(c.poison)
       << std::dec << " seed " << c.seed << " warp " << c.warp_size << (c.shuffled ? " shuffled" : "");
  }
};

// The case's block table from properties/block_table_gen.h: shuffled, shared and garbage pages.
void fill_block_table(PagedCase& c) {
  std::vector<int64_t> needed;
  for (int64_t b = 0; b < c.B; ++b) needed.push_back(c.needed(b));
  const PagedBlockTable t = *gen::paged_block_table(needed, c.W);
  c.num_blocks = t.num_blocks;
  c.table = t.table;
}

// Small paged cases: 1-D and 2-D lengths (zeros included), block sizes 1..69, shuffled and shared
// pages, padded block strides (aligned or not for the 16-byte fast path), padded and offset logits
// rows, occasionally more rows than one block holds.
rc::Gen<PagedCase> gen_paged_case() {
  return rc::gen::exec([] {
    PagedCase c;
    c.B = *rc::gen::inRange(1, 5);
    c.next_n = *rc::gen::weightedOneOf<int64_t>(
        {{8, rc::gen::inRange<int64_t>(1, 5)}, {1, rc::gen::inRange<int64_t>(15, 20)}});
    c.H = *rc::gen::inRange(1, 71);
    c.D = *rc::gen::weightedOneOf<int64_t>(
        {{2, rc::gen::element<int64_t>(16, 32, 64)}, {1, rc::gen::inRange<int64_t>(1, 41)}});
    c.block_size = *rc::gen::weightedOneOf<int64_t>(
        {{1, rc::gen::just<int64_t>(64)}, {2, rc::gen::element<int64_t>(1, 2, 3, 53, 61, 64, 69)}});
    c.lens_2d = *rc::gen::arbitrary<bool>();
    c.lens_stride = c.lens_2d ? 1 : *rc::gen::inRange(1, 3);
    const int max_len = *rc::gen::element(0, 5, 70, 200, 400);
    const auto length = rc::gen::weightedOneOf<int32_t>({{1, rc::gen::just(0)}, {4, rc::gen::inRange(0, max_len + 1)}});
    c.lens = *rc::gen::container<std::vector<int32_t>>(static_cast<size_t>(c.lens_2d ? c.rows() : c.B), length);
    int64_t longest = 0;
    for (int64_t b = 0; b < c.B; ++b) longest = std::max(longest, c.longest(b));
    c.max_context_len = longest + *rc::gen::element<int64_t>(0, 1, 13, 64, 70);
    int64_t needed = 0;
    for (int64_t b = 0; b < c.B; ++b) needed = std::max(needed, c.needed(b));
    c.W = needed + *rc::gen::inRange(0, 3);
    c.table_row_pad = *rc::gen::inRange(0, 3);
    fill_block_table(c);
    const bool aligned = *rc::gen::arbitrary<bool>();  // lets block size 64 take the fast path
    c.block_stride = c.block_size * (c.D + 4) + (aligned ? 16 * *rc::gen::inRange(0, 2) : 4 * *rc::gen::inRange(0, 5));
    c.block_stride = aligned ? (c.block_stride + 15) / 16 * 16 : (c.block_stride + 3) / 4 * 4;
    c.kv_offset = aligned ? 16 * *rc::gen::inRange(0, 3) : 4 * *rc::gen::inRange(0, 9);
    c.logits_stride = *rc::gen::arbitrary<bool>() ? (c.max_context_len + 255) / 256 * 256
                                                  : c.max_context_len + *rc::gen::inRange(0, 5);
    c.logits_stride = std::max<int64_t>(c.logits_stride, 1);  // a view's row stride is at least 1
    c.logits_offset = *rc::gen::inRange(0, 9);
    c.mode = *rc::gen::arbitrary<bool>() ? LogitsMode::kClean : LogitsMode::kUnclean;
    c.pass_host_lens = *rc::gen::arbitrary<bool>();
    c.ue8m0 = *rc::gen::arbitrary<bool>();
    c.poison = *rc::gen::element<uint8_t>(0x7F, 0x7E);
    c.seed = *rc::gen::arbitrary<uint64_t>();
    c.warp_size = *rc::gen::element(32, 64);
    c.shuffled = *rc::gen::arbitrary<bool>();
    return c;
  });
}

// What one paged run gave: a guard failure or the comparison with the oracle ("" when both pass),
// the oracle's answer and the kernel's logits ([rows, max_context_len], dense).
struct PagedOutcome {
  std::string failure;
  oracle::LogitsResult want;
  std::vector<float> got;
};

// Builds the case's buffers (poison everywhere the kernel must not read), runs the glue on the
// device and compares with the oracle. tamper, when given, changes the lengths or the table the
// device sees after the oracle has run (for behaviour outside the contract).
PagedOutcome run_paged(Device& device, const PagedCase& c,
                       const std::function<void(Buffer& lens, Buffer& table)>& tamper = {}) {
  std::mt19937_64 rng(c.seed);
  const int64_t rows = c.rows(), H = c.H, D = c.D, bs = c.block_size;
  Buffer q("q", View::contiguous(DType::kFP8E4M3, {c.B, c.next_n, H, D}, int64_t(rng() % 64)), 64, c.poison);
  q.view.for_each_byte_offset(
      [&](int64_t at) { q.host[static_cast<size_t>(at)] = float_to_fp8_e4m3(uniform(rng, -2, 2)); });
  Buffer w("weights", View::contiguous(DType::kF32, {rows, H}, 4 * int64_t(rng() % 16)), 64, c.poison);
  w.view.for_each_index([&](const std::vector<int64_t>& at) { w.put(at, uniform(rng, -1, 1)); });
  Buffer lens(
      "context_lens",
      c.lens_2d ? View::contiguous(DType::kI32, {c.B, c.next_n}, 4) : View(DType::kI32, {c.B}, {c.lens_stride}, 4), 64,
      c.poison);
  for (int64_t i = 0; i < static_cast<int64_t>(c.lens.size()); ++i) {
    lens.put(c.lens_2d ? std::vector<int64_t>{i / c.next_n, i % c.next_n} : std::vector<int64_t>{i},
             c.lens[static_cast<size_t>(i)]);
  }
  Buffer table("block_table",
               View::padded_rows(DType::kI32, {c.B, c.W}, std::max<int64_t>(c.W + c.table_row_pad, 1), 8), 64,
               c.poison);
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t col = 0; col < c.W; ++col) table.put({b, col}, c.table[static_cast<size_t>(b * c.W + col)]);
  }
  // The cache: every byte poison, then the keys of the tokens some request reads (a shared page
  // holds the tokens of its longest user); the rest of each block, spare pages and the block
  // padding stay poison.
  Buffer kv("kv_blocks", View(DType::kU8, {c.num_blocks, c.block_stride}, {c.block_stride, 1}, c.kv_offset), 64,
            c.poison);
  std::vector<int64_t> valid(static_cast<size_t>(c.num_blocks), 0);
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t col = 0; col < c.needed(b); ++col) {
      const int32_t page = c.table[static_cast<size_t>(b * c.W + col)];
      valid[static_cast<size_t>(page)] =
          std::max(valid[static_cast<size_t>(page)], std::min(bs, c.longest(b) - col * bs));
    }
  }
  const oracle::PagedIndexerCache cache{kv.host_tensor(), bs, D};
  for (int64_t page = 0; page < c.num_blocks; ++page) {
    const oracle::Fp8Rows keys = random_keys(rng, valid[static_cast<size_t>(page)], D, c.ue8m0);
    for (int64_t s = 0; s < keys.rows; ++s) {
      oracle::store_indexer_token(cache, page, s, keys.codes.data() + s * D, keys.scales[static_cast<size_t>(s)]);
    }
  }
  Buffer logits("logits",
                View::padded_rows(DType::kF32, {rows, c.max_context_len}, c.logits_stride, 4 * c.logits_offset), 64,
                kLogitsFill);

  PagedOutcome out;
  out.want = oracle::paged_mqa_logits(
      {q.host_tensor(), cache, w.host_tensor(), lens.host_tensor(), table.host_tensor(), c.max_context_len});
  if (tamper) tamper(lens, table);

  simt::host::Options options;
  set_schedule(options, c.warp_size, c.shuffled, c.seed);
  simt::host::ScopedOptions scope(options);
  out.failure = run_guarded(device, {&q, &w, &lens, &table, &kv}, logits, [&] {
    PagedMqaLogitsArgs a;
    a.q = q.device_tensor();
    a.kv_blocks = kv.device_tensor();
    a.block_size = bs;
    a.weights = w.device_tensor();
    a.context_lens = lens.device_tensor();
    a.block_table = table.device_tensor();
    a.max_context_len = c.max_context_len;
    a.logits = logits.device_tensor();
    a.mode = c.mode;
    a.host_context_lens = c.pass_host_lens && !tamper ? &c.lens : nullptr;
    paged_mqa_logits(device, a);
  });
  if (!out.failure.empty()) return out;
  out.got.resize(static_cast<size_t>(rows * c.max_context_len));
  logits.view.for_each_index([&](const std::vector<int64_t>& at) {
    out.got[static_cast<size_t>(at[0] * c.max_context_len + at[1])] = static_cast<float>(logits.host_tensor().load(at));
  });
  out.failure = compare_logits(logits.host_tensor(), out.want, c.mode, "paged_mqa_logits");
  return out;
}

std::string check_paged(Device& device, const PagedCase& c) { return run_paged(device, c).failure; }

RC_GTEST_PROP(PagedMqaLogits, EqualsTheOracleAndWritesOnlyTheLogitsView, ()) {
  const PagedCase c = *gen_paged_case();
  RC_TAG(c.block_size == kLogitsTileTokens && c.D % 16 == 0 && c.block_stride % 16 == 0 && c.kv_offset % 16 == 0
             ? "block-64 fast path"
             : "general path",
         c.lens_2d ? "2-D lengths" : "1-D lengths", c.mode == LogitsMode::kClean ? "clean" : "unclean",
         logits_rows_per_block(c.next_n, c.H, c.D) < c.next_n ? "several row groups" : "one row group");
  const auto device = make_device(Backend::kHost);
  const std::string failure = check_paged(*device, c);
  if (!failure.empty()) RC_FAIL(failure);
}

// A production-sized request pair (DeepSeek-V3.2: H 64, D 128, next_n 2) over ~3000 tokens in
// shuffled pages, the logits rows aligned to 256 as vLLM allocates them.
PagedCase production_paged_case(int64_t block_size, bool lens_2d, LogitsMode mode) {
  PagedCase c;
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
  const PagedOutcome out = run_paged(*device, production_paged_case(64, false, LogitsMode::kClean));
  EXPECT_EQ(out.failure, "");
  EXPECT_TRUE(std::any_of(out.got.begin(), out.got.end(), [](float x) { return x > 0; }));
}

TEST(PagedMqaLogits, ProductionSizeOnTheGeneralPathEqualsTheOracle) {
  const auto device = make_device(Backend::kHost);
  const PagedOutcome out = run_paged(*device, production_paged_case(61, true, LogitsMode::kUnclean));
  EXPECT_EQ(out.failure, "");
  EXPECT_TRUE(std::any_of(out.got.begin(), out.got.end(), [](float x) { return x > 0; }));
}

// Outside the contract, as the glue header documents: lengths past max_context_len or past the
// table are cut there (so nothing outside the view is written and nothing past the table is read),
// and a page id outside the cache gives NaN for its tokens instead of a read outside the cache.
TEST(PagedMqaLogits, LengthsPastTheViewOrTheTableAreCutAndBadPagesGiveNaN) {
  const auto device = make_device(Backend::kHost);
  PagedCase c;
  c.B = 2, c.next_n = 2, c.H = 5, c.D = 32, c.block_size = 53, c.lens_2d = true, c.mode = LogitsMode::kClean;
  c.lens = {100, 7, 60, 0};
  c.max_context_len = 100, c.W = 2, c.num_blocks = 5, c.table = {3, 1, 0, 4};
  c.block_stride = 53 * 36, c.logits_stride = 128, c.seed = 3;
  // The device reads row 0 as 100000 long: the oracle's answer is row 0 at max_context_len.
  EXPECT_EQ(run_paged(*device, c, [](Buffer& lens, Buffer&) { lens.put<int32_t>({0, 0}, 100000); }).failure, "");

  // The device reads row 2 as 80 long with one column of table (53 tokens): cut at 53.
  PagedCase narrow = c;
  narrow.lens = {7, 0, 53, 9}, narrow.W = 1, narrow.table = {3, 0};
  EXPECT_EQ(run_paged(*device, narrow, [](Buffer& lens, Buffer&) { lens.put<int32_t>({1, 0}, 80); }).failure, "");

  // Row 2's second block (columns 53..59) is page 5 of a 5-page cache on the device.
  c.mode = LogitsMode::kUnclean;
  const PagedOutcome bad = run_paged(*device, c, [](Buffer&, Buffer& table) { table.put<int32_t>({1, 1}, 5); });
  ASSERT_EQ(bad.failure.rfind("paged_mqa_logits logits", 0), 0u) << bad.failure;  // the NaNs differ
  for (int64_t t = 0; t < 60; ++t) {
    const float got = bad.got[static_cast<size_t>(2 * 100 + t)];
    if (t >= 53) {
      EXPECT_TRUE(std::isnan(got)) << "column " << t;
    } else {
      EXPECT_NEAR(got, bad.want.logits.at({2, t}), 1e-3) << "column " << t;
    }
  }
}

// ---- ragged prefill logits (SPEC.md 2.2) --------------------------------------------------------

struct PrefillCase {
  int64_t M = 1, N = 0, H = 1, D = 16;
  std::vector<int32_t> ks, ke;
  int64_t k_stride = 16, k_offset = 0, scale_stride = 1, range_stride = 1;
  int64_t logits_stride = 0, logits_offset = 0;
  LogitsMode mode = LogitsMode::kUnclean;
  bool pass_host_ranges = false, ue8m0 = false;
  uint8_t poison = 0x7F;
  uint64_t seed = 0;
  int warp_size = 32;
  bool shuffled = false;

  friend void showValue(const PrefillCase& c, std::ostream& os) {
    os << "M " << c.M << " N " << c.N << " H " << c.H << " D " << c.D << " ranges";
    for (size_t m = 0; m < c.ks.size(); ++m) os << " [" << c.ks[m] << ", " << c.ke[m] << ")";
    os << " k stride " << c.k_stride << " offset " << c.k_offset << " scale stride " << c.scale_stride
       << " range stride " << c.range_stride << " logits stride " << c.logits_stride << " offset " << c.logits_offset
       << (c.mode == LogitsMode::kClean ? " clean" : " unclean") << " poison 0x" << std::hex << int(c.poison)
       << std::dec << " seed " << c.seed << " warp " << c.warp_size << (c.shuffled ? " shuffled" : "");
  }
};

rc::Gen<PrefillCase> gen_prefill_case() {
  return rc::gen::exec([] {
    PrefillCase c;
    c.M = *rc::gen::weightedOneOf<int64_t>(
        {{8, rc::gen::inRange<int64_t>(1, 7)}, {1, rc::gen::inRange<int64_t>(15, 36)}});
    c.N = *rc::gen::element<int64_t>(0, 1, 5, 64, 70, 130, 200);
    c.H = *rc::gen::inRange(1, 41);
    c.D = *rc::gen::weightedOneOf<int64_t>(
        {{1, rc::gen::element<int64_t>(16, 32, 64)}, {1, rc::gen::inRange<int64_t>(1, 41)}});
    for (int64_t m = 0; m < c.M; ++m) {
      int32_t a = *rc::gen::inRange<int32_t>(0, static_cast<int32_t>(c.N) + 1),
              b = *rc::gen::inRange<int32_t>(0, static_cast<int32_t>(c.N) + 1);
      if (a > b) std::swap(a, b);
      if (*rc::gen::inRange(0, 6) == 0) b = a;  // an empty row
      c.ks.push_back(a);
      c.ke.push_back(b);
    }
    c.k_stride = c.D + *rc::gen::inRange(0, 20);
    c.k_offset = *rc::gen::inRange(0, 40);
    c.scale_stride = *rc::gen::inRange(1, 3);
    c.range_stride = *rc::gen::inRange(1, 3);
    c.logits_stride = std::max<int64_t>(c.N + *rc::gen::element<int64_t>(0, 1, 3, 64), 1);
    c.logits_offset = *rc::gen::inRange(0, 9);
    c.mode = *rc::gen::arbitrary<bool>() ? LogitsMode::kClean : LogitsMode::kUnclean;
    c.pass_host_ranges = *rc::gen::arbitrary<bool>();
    c.ue8m0 = *rc::gen::arbitrary<bool>();
    c.poison = *rc::gen::element<uint8_t>(0x7F, 0x7E);
    c.seed = *rc::gen::arbitrary<uint64_t>();
    c.warp_size = *rc::gen::element(32, 64);
    c.shuffled = *rc::gen::arbitrary<bool>();
    return c;
  });
}

// Keys outside every row's range (and the row and scale padding) are poison.
std::string check_prefill(Device& device, const PrefillCase& c) {
  std::mt19937_64 rng(c.seed);
  const int64_t M = c.M, N = c.N, H = c.H, D = c.D;
  Buffer q("q", View::contiguous(DType::kFP8E4M3, {M, H, D}, int64_t(rng() % 64)), 64, c.poison);
  q.view.for_each_byte_offset(
      [&](int64_t at) { q.host[static_cast<size_t>(at)] = float_to_fp8_e4m3(uniform(rng, -2, 2)); });
  Buffer w("weights", View::contiguous(DType::kF32, {M, H}, 4 * int64_t(rng() % 16)), 64, c.poison);
  w.view.for_each_index([&](const std::vector<int64_t>& at) { w.put(at, uniform(rng, -1, 1)); });
  Buffer k("k", View(DType::kFP8E4M3, {N, D}, {c.k_stride, 1}, c.k_offset), 64, c.poison);
  Buffer scale("k_scale", View(DType::kF32, {N}, {c.scale_stride}, 12), 64, c.poison);
  const oracle::Fp8Rows keys = random_keys(rng, N, D, c.ue8m0);
  for (int64_t n = 0; n < N; ++n) {
    bool read = false;
    for (int64_t m = 0; m < M; ++m) read |= c.ks[static_cast<size_t>(m)] <= n && n < c.ke[static_cast<size_t>(m)];
    if (!read) continue;
    for (int64_t d = 0; d < D; ++d) k.put({n, d}, keys.codes[static_cast<size_t>(n * D + d)]);
    scale.put({n}, keys.scales[static_cast<size_t>(n)]);
  }
  Buffer ks("ks", View(DType::kI32, {M}, {c.range_stride}, 0), 64, c.poison);
  Buffer ke("ke", View(DType::kI32, {M}, {c.range_stride}, 4), 64, c.poison);
  for (int64_t m = 0; m < M; ++m) {
    ks.put({m}, c.ks[static_cast<size_t>(m)]);
    ke.put({m}, c.ke[static_cast<size_t>(m)]);
  }
  Buffer logits("logits", View::padded_rows(DType::kF32, {M, N}, c.logits_stride, 4 * c.logits_offset), 64,
                kLogitsFill);

  const oracle::LogitsResult want = oracle::mqa_logits(
      {q.host_tensor(), k.host_tensor(), scale.host_tensor(), w.host_tensor(), ks.host_tensor(), ke.host_tensor()});

  simt::host::Options options;
  set_schedule(options, c.warp_size, c.shuffled, c.seed);
  simt::host::ScopedOptions scope(options);
  const std::string guard = run_guarded(device, {&q, &w, &k, &scale, &ks, &ke}, logits, [&] {
    MqaLogitsArgs a;
    a.q = q.device_tensor();
    a.k = k.device_tensor();
    a.k_scale = scale.device_tensor();
    a.weights = w.device_tensor();
    a.ks = ks.device_tensor();
    a.ke = ke.device_tensor();
    a.logits = logits.device_tensor();
    a.mode = c.mode;
    a.host_ks = c.pass_host_ranges ? &c.ks : nullptr;
    a.host_ke = c.pass_host_ranges ? &c.ke : nullptr;
    mqa_logits(device, a);
  });
  if (!guard.empty()) return guard;
  return compare_logits(logits.host_tensor(), want, c.mode, "mqa_logits");
}

RC_GTEST_PROP(MqaLogits, EqualsTheOracleAndWritesOnlyTheLogitsView, ()) {
  const PrefillCase c = *gen_prefill_case();
  RC_TAG(c.mode == LogitsMode::kClean ? "clean" : "unclean",
         logits_rows_per_block(c.M, c.H, c.D) < c.M ? "several row groups" : "one row group");
  const auto device = make_device(Backend::kHost);
  const std::string failure = check_prefill(*device, c);
  if (!failure.empty()) RC_FAIL(failure);
}

// A production-sized chunk of prefill (H 64, D 128): 8 query tokens over 2048 keys, causal ends
// and sliding starts, rows padded to 256.
TEST(MqaLogits, ProductionSizeEqualsTheOracle) {
  const auto device = make_device(Backend::kHost);
  PrefillCase c;
  c.M = 8, c.N = 2048, c.H = 64, c.D = 128, c.k_stride = 128, c.logits_stride = 2048 + 256, c.seed = 11;
  for (int32_t m = 0; m < 8; ++m) {
    c.ks.push_back(m * 122);
    c.ke.push_back(2048 - 8 + m + 1);
  }
  c.mode = LogitsMode::kClean;
  EXPECT_EQ(check_prefill(*device, c), "");
  c.mode = LogitsMode::kUnclean;
  EXPECT_EQ(check_prefill(*device, c), "");
}

// ---- cuda: the same checks on device buffers -------------------------------------------------

TEST(MqaLogitsOnCuda, PropertiesAndProductionSizesWhenAGpuIsPresent) {
  std::string why;
  if (!device_usable(Backend::kCuda, &why)) GTEST_SKIP() << "skipped: no GPU (" << why << ")";
  const auto device = make_device(Backend::kCuda);
  EXPECT_TRUE(rc::check("paged logits on cuda equal the oracle", [&] {
    const std::string failure = check_paged(*device, *gen_paged_case());
    if (!failure.empty()) RC_FAIL(failure);
  }));
  EXPECT_TRUE(rc::check("prefill logits on cuda equal the oracle", [&] {
    const std::string failure = check_prefill(*device, *gen_prefill_case());
    if (!failure.empty()) RC_FAIL(failure);
  }));
  EXPECT_EQ(check_paged(*device, production_paged_case(64, false, LogitsMode::kClean)), "");
  EXPECT_EQ(check_paged(*device, production_paged_case(64, true, LogitsMode::kUnclean)), "");
  EXPECT_EQ(check_paged(*device, production_paged_case(61, true, LogitsMode::kClean)), "");
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
