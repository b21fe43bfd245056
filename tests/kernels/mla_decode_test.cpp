// Tests of kernels/mla_decode_glue.h: dense split-KV MLA decode against the oracle on randomized
// cases (host backend with 32- and 64-lane warps and shuffled schedules; cuda when a GPU is
// usable), every buffer guarded and every unread byte of the cache poisoned; split independence,
// empty rows, per-call scales, bad pages, a production size, bad input refused before any launch,
// and the split heuristic.
#include "kernels/mla_decode_glue.h"

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
#include "core/fp16.h"
#include "core/fp8.h"
#include "core/tolerances.h"
#include "oracle/mla_decode.h"
#include "properties/block_table_gen.h"
#include "properties/staged_buffer.h"
#include "tests/support/refusal.h"

namespace mlacheck::kernels {
namespace {

constexpr int64_t kDim = kMlaHeadDim, kLatent = kMlaValueDim;
const double kDeepSeekScale = 1.0 / std::sqrt(192.0);

struct DecodeCase {
  int64_t B = 1, q_len = 1, H = 1, page = 64;
  std::vector<int32_t> lens;  // seq_lens [B]
  int64_t W = 0, table_row_pad = 0, num_blocks = 0;
  std::vector<int32_t> table;  // [B, W]: pages, then garbage past each request's needed columns
  bool q_fp8 = false, kv_fp8 = false;
  int64_t token_stride = kDim, block_pad = 0;  // elements
  int64_t kv_offset = 0, q_offset = 0, out_offset = 0;  // bytes
  double base_scale = 1.0, q_scale = 1.0, k_scale = 1.0;
  int64_t num_splits = 1, workspace_extra = 0;
  bool pass_host_lens = false;
  uint8_t poison = 0xFF;  // 0xFF: NaN in fp8 and bf16; 0x7F: fp8 NaN, bf16 3.4e38
  int64_t kv_tail = 64;   // bytes of the cache's allocation past its view (poison)
  uint64_t seed = 0;
  int warp_size = 32;
  bool shuffled = false;

  int64_t needed(int64_t b) const { return (lens[static_cast<size_t>(b)] + page - 1) / page; }
  int64_t block_stride() const { return page * token_stride + block_pad; }

  friend void showValue(const DecodeCase& c, std::ostream& os) {
    os << "B " << c.B << " q_len " << c.q_len << " H " << c.H << " page " << c.page << " seq_lens [";
    for (int32_t l : c.lens) os << ' ' << l;
    os << " ] W " << c.W << " (+" << c.table_row_pad << ") table [";
    for (int32_t p : c.table) os << ' ' << p;
    os << " ] num_blocks " << c.num_blocks << " q " << (c.q_fp8 ? "fp8" : "bf16") << " kv "
       << (c.kv_fp8 ? "fp8" : "bf16") << " token stride " << c.token_stride << " block pad " << c.block_pad
       << " offsets kv " << c.kv_offset << " q " << c.q_offset << " out " << c.out_offset << " scales " << c.base_scale
       << ' ' << c.q_scale << ' ' << c.k_scale << " splits " << c.num_splits << " workspace +" << c.workspace_extra
       << (c.pass_host_lens ? " host lens" : "") << " poison 0x" << std::hex << int(c.poison) << std::dec << " seed "
       << c.seed << " warp " << c.warp_size << (c.shuffled ? " shuffled" : "");
  }
};

// The case's block table from properties/block_table_gen.h: shuffled, shared and garbage pages.
void fill_block_table(DecodeCase& c) {
  std::vector<int64_t> needed;
  for (int64_t b = 0; b < c.B; ++b) needed.push_back(c.needed(b));
  const PagedBlockTable t = *gen::paged_block_table(needed, c.W);
  c.num_blocks = t.num_blocks;
  c.table = t.table;
}

// Small cases: B 1..4, q_len 1..4 and 8, H 1..8 and 16 (at most 16 (request, token, head quad)
// programs per split, 4 for the longest lengths, so a case stays a few ms on the host backend,
// whose cost is per thread and barrier of each 32-key tile), lengths 0..300 (zeros and
// lengths below q_len included), pages 1..64, shuffled and shared pages, padded tokens and blocks
// (16-byte aligned or not), offset views, bf16 and fp8 q and cache, random scales, 1..8 splits (and
// 64 for small batches, more than the keys), a larger workspace. light: lengths up to 130 only, and
// at most 8 programs (for the properties that run a case twice or only look at a few rows).
rc::Gen<DecodeCase> gen_case(bool light = false) {
  return rc::gen::exec([light] {
    DecodeCase c;
    c.B = *rc::gen::inRange(1, 5);
    c.q_len = *rc::gen::weightedOneOf<int64_t>({{8, rc::gen::inRange<int64_t>(1, 5)}, {1, rc::gen::just<int64_t>(8)}});
    c.H = *rc::gen::weightedOneOf<int64_t>({{6, rc::gen::inRange<int64_t>(1, 9)}, {1, rc::gen::just<int64_t>(16)}});
    const int max_len = *rc::gen::weightedOneOf<int>({{2, rc::gen::just(3)},
                                                      {3, rc::gen::just(40)},
                                                      {2, rc::gen::just(130)},
                                                      {light ? 0 : 1, rc::gen::just(300)}});
    const int64_t most_programs = max_len > 130 || (light && max_len > 40) ? 4 : light ? 8 : 16;
    const auto programs = [&] { return c.B * c.q_len * ((c.H + 3) / 4); };
    while (programs() > most_programs && c.B > 1) --c.B;
    while (programs() > most_programs && c.q_len > 1) c.q_len = c.q_len == 8 ? 4 : c.q_len - 1;
    c.page = *rc::gen::element<int64_t>(1, 2, 3, 16, 61, 64);
    const auto length = rc::gen::weightedOneOf<int32_t>(
        {{1, rc::gen::just(0)}, {1, rc::gen::inRange(1, 9)}, {4, rc::gen::inRange(0, max_len + 1)}});
    c.lens = *rc::gen::container<std::vector<int32_t>>(static_cast<size_t>(c.B), length);
    int64_t needed = 0;
    for (int64_t b = 0; b < c.B; ++b) needed = std::max(needed, c.needed(b));
    c.W = needed + *rc::gen::inRange(0, 3);
    c.table_row_pad = *rc::gen::inRange(0, 3);
    fill_block_table(c);
    c.q_fp8 = *rc::gen::arbitrary<bool>();
    c.kv_fp8 = *rc::gen::arbitrary<bool>();
    const int64_t es = c.kv_fp8 ? 1 : 2;
    const bool aligned = *rc::gen::arbitrary<bool>();  // lets the kernel take its 16-byte key loads
    c.token_stride = kDim + (aligned ? 16 / es * *rc::gen::inRange(0, 3) : *rc::gen::inRange(0, 5));
    c.block_pad = aligned ? 16 / es * *rc::gen::inRange(0, 2) : *rc::gen::inRange(0, 7);
    c.kv_offset = aligned ? 16 * *rc::gen::inRange(0, 3) : es * *rc::gen::inRange(0, 9);
    c.q_offset = (c.q_fp8 ? 1 : 2) * *rc::gen::inRange(0, 9);
    c.out_offset = 4 * *rc::gen::inRange(0, 5);
    c.base_scale = *rc::gen::element(kDeepSeekScale, 1.0 / 24.0, 0.25);
    c.q_scale = *rc::gen::element(0.5, 1.0, 1.7);
    c.k_scale = *rc::gen::element(0.25, 1.0, 1.3);
    c.num_splits = *rc::gen::weightedOneOf<int64_t>(
        {{8, rc::gen::inRange<int64_t>(1, 9)},
         {1, rc::gen::just<int64_t>(c.B * c.q_len * c.H <= 16 ? kMlaMaxSplits : 8)}});
    c.workspace_extra = *rc::gen::element<int64_t>(0, 0, 1, 600);
    c.pass_host_lens = *rc::gen::arbitrary<bool>();
    c.poison = *rc::gen::element<uint8_t>(0xFF, 0x7F);
    c.seed = *rc::gen::arbitrary<uint64_t>();
    c.warp_size = *rc::gen::element(32, 64);
    c.shuffled = *rc::gen::arbitrary<bool>();
    return c;
  });
}

// Random values of magnitude <= 1 as fp8 or bf16 codes, straight from random bits (a case fills up
// to ~10^6 of them; encoding floats would dominate the test's time): fp8 codes 0..0x38 (0 to 1.0)
// with a random sign, bf16 of 16-bit fractions in [-1, 1).
class RandomCodes {
 public:
  explicit RandomCodes(uint64_t seed) : rng_(seed) {}
  void store(std::vector<uint8_t>& buf, int64_t at, DType t) {
    const uint32_t r = next16();
    if (t == DType::kFP8E4M3) {
      buf[static_cast<size_t>(at)] = static_cast<uint8_t>((r >> 1) % 57 | (r & 1) << 7);
    } else {
      const uint16_t h = float_to_bf16(static_cast<float>(r) * 0x1p-15f - 1.0f);
      std::memcpy(buf.data() + at, &h, 2);
    }
  }

 private:
  uint32_t next16() {
    if (left_ == 0) bits_ = rng_(), left_ = 4;
    --left_;
    const uint32_t r = static_cast<uint32_t>(bits_ & 0xFFFF);
    bits_ >>= 16;
    return r;
  }
  std::mt19937_64 rng_;
  uint64_t bits_ = 0;
  int left_ = 0;
};

// A case's buffers: inputs filled (poison wherever the kernel must not read), outputs poisoned by
// their guards when armed.
struct Staged {
  Buffer q, kv, table, lens, workspace, o, lse;
  View workspace_used;  // the part the kernel may write

  explicit Staged(const DecodeCase& c)
      : q("q", View::contiguous(c.q_fp8 ? DType::kFP8E4M3 : DType::kBF16, {c.B, c.q_len, c.H, kDim}, c.q_offset), 64,
          c.poison),
        kv("kv_cache",
           View(c.kv_fp8 ? DType::kFP8E4M3 : DType::kBF16, {c.num_blocks, c.page, kDim},
                {c.block_stride(), c.token_stride, 1}, c.kv_offset),
           c.kv_tail, c.poison),
        table("block_table",
              View::padded_rows(DType::kI32, {c.B, c.W}, std::max<int64_t>(c.W + c.table_row_pad, 1), 8), 64,
              c.poison),
        lens("seq_lens", View::contiguous(DType::kI32, {c.B}, 4), 64, c.poison),
        workspace("workspace",
                  View::contiguous(DType::kF32,
                                   {mla_decode_workspace_floats(c.B, c.q_len, c.H, c.num_splits) + c.workspace_extra},
                                   c.out_offset),
                  64, 0xA7),
        o("o", View::contiguous(DType::kBF16, {c.B, c.q_len, c.H, kLatent}, c.out_offset), 64, 0xA7),
        lse("lse", View::contiguous(DType::kF32, {c.B, c.q_len, c.H}, c.out_offset), 64, 0xA7),
        workspace_used(View::contiguous(DType::kF32, {mla_decode_workspace_floats(c.B, c.q_len, c.H, c.num_splits)},
                                        c.out_offset)) {
    RandomCodes codes(c.seed);
    const int64_t qes = q.view.element_size();
    for (int64_t i = 0; i < q.view.numel(); ++i) codes.store(q.host, c.q_offset + i * qes, q.view.dtype());
    for (int64_t b = 0; b < c.B; ++b) {
      lens.put<int32_t>({b}, c.lens[static_cast<size_t>(b)]);
      for (int64_t w = 0; w < c.W; ++w) table.put<int32_t>({b, w}, c.table[static_cast<size_t>(b * c.W + w)]);
    }
    // Keys of the slots some request reads (a shared page holds its longest user's); every other
    // byte of the cache (other slots, token and block padding, spare pages) stays poison.
    std::vector<int64_t> valid(static_cast<size_t>(c.num_blocks), 0);
    for (int64_t b = 0; b < c.B; ++b) {
      for (int64_t col = 0; col < c.needed(b); ++col) {
        const int32_t page = c.table[static_cast<size_t>(b * c.W + col)];
        valid[static_cast<size_t>(page)] =
            std::max(valid[static_cast<size_t>(page)], std::min<int64_t>(c.page, c.lens[static_cast<size_t>(b)] - col * c.page));
      }
    }
    const int64_t kes = kv.view.element_size();
    for (int64_t page = 0; page < c.num_blocks; ++page) {
      for (int64_t s = 0; s < valid[static_cast<size_t>(page)]; ++s) {
        const int64_t row = c.kv_offset + (page * c.block_stride() + s * c.token_stride) * kes;
        for (int64_t d = 0; d < kDim; ++d) codes.store(kv.host, row + d * kes, kv.view.dtype());
      }
    }
  }

  oracle::MlaDecodeInputs oracle_inputs(const DecodeCase& c) {
    return {q.host_tensor(),    kv.host_tensor(), table.host_tensor(), lens.host_tensor(),
            c.base_scale,       c.q_scale,        c.k_scale};
  }

  MlaDecodeArgs args(const DecodeCase& c) const {
    MlaDecodeArgs a;
    a.q = q.device_tensor();
    a.kv_cache = kv.device_tensor();
    a.block_table = table.device_tensor();
    a.seq_lens = lens.device_tensor();
    a.base_scale = c.base_scale;
    a.q_scale = c.q_scale;
    a.k_scale = c.k_scale;
    a.num_splits = c.num_splits;
    a.workspace = workspace.device_tensor();
    a.o = o.device_tensor();
    a.lse = lse.device_tensor();
    a.host_seq_lens = c.pass_host_lens ? &c.lens : nullptr;
    return a;
  }

  // Uploads everything, declares the outputs, arms, runs launch and checks every guard. Returns ""
  // or the first stray write; o, lse and workspace then hold the device's bytes.
  std::string run_guarded(Device& device, const std::function<void()>& launch) {
    Buffer* all[] = {&q, &kv, &table, &lens, &workspace, &o, &lse};
    for (Buffer* b : all) b->upload(device);
    workspace.memory->declare_output("workspace", workspace_used);
    o.memory->declare_output("o", o.view);
    lse.memory->declare_output("lse", lse.view);
    for (Buffer* b : all) b->memory->arm();
    launch();
    device.synchronize();
    for (Buffer* b : all) {
      const GuardReport r = b->memory->check();
      if (!r.ok()) return "guard of " + b->name + ": " + r.describe();
    }
    for (Buffer* b : {&workspace, &o, &lse}) b->download();
    return "";
  }
};

// What one run gave: a guard failure or an oracle mismatch ("" when both pass), the oracle's answer
// and the kernel's o and lse as read back.
struct Outcome {
  std::string failure;
  oracle::MlaDecodeResult want;
  std::vector<uint16_t> o;  // bf16 bits, [B, q_len, H, 512]
  std::vector<float> lse;   // [B, q_len, H]
};

std::string compare_outputs(const HostTensor& o, const HostTensor& lse, const oracle::MlaDecodeResult& want) {
  const CompareReport ro = compare_close(o, want.o.tensor(), tolerance_for("mla_decode", "o"));
  if (!ro.ok) return "mla_decode o: " + ro.describe();
  const CompareReport rl = compare_close(lse, want.lse.tensor(), tolerance_for("mla_decode", "lse"));
  if (!rl.ok) return "mla_decode lse: " + rl.describe();
  return "";
}

// Builds the case, runs the oracle and the glue on the device (with the case's host schedule) and
// compares. tamper, when given, changes the inputs the device sees after the oracle has run.
Outcome run_case(Device& device, const DecodeCase& c, const std::function<void(Staged&)>& tamper = {}) {
  Staged st(c);
  Outcome out;
  out.want = oracle::mla_decode(st.oracle_inputs(c));
  if (tamper) tamper(st);
  simt::host::Options options;
  options.warp_size = c.warp_size;
  options.schedule = c.shuffled ? simt::host::Schedule::kShuffled : simt::host::Schedule::kOrdered;
  options.seed = c.seed;
  simt::host::ScopedOptions scope(options);
  out.failure = st.run_guarded(device, [&] { mla_decode(device, st.args(c)); });
  if (!out.failure.empty()) return out;
  out.o.resize(static_cast<size_t>(st.o.view.numel()));
  std::memcpy(out.o.data(), st.o.host.data() + c.out_offset, out.o.size() * 2);
  out.lse.resize(static_cast<size_t>(st.lse.view.numel()));
  std::memcpy(out.lse.data(), st.lse.host.data() + c.out_offset, out.lse.size() * 4);
  out.failure = compare_outputs(st.o.host_tensor(), st.lse.host_tensor(), out.want);
  return out;
}

std::string check_case(Device& device, const DecodeCase& c) { return run_case(device, c).failure; }

RC_GTEST_PROP(MlaDecode, EqualsTheOracleAndWritesOnlyItsOutputs, ()) {
  const DecodeCase c = *gen_case();
  RC_TAG(c.kv_fp8 ? "fp8 cache" : "bf16 cache", c.q_fp8 ? "fp8 q" : "bf16 q",
         c.token_stride * (c.kv_fp8 ? 1 : 2) % 16 == 0 && c.block_stride() * (c.kv_fp8 ? 1 : 2) % 16 == 0 &&
                 c.kv_offset % 16 == 0
             ? "16-byte key loads"
             : "element key loads");
  const auto device = make_device(Backend::kHost);
  const std::string failure = check_case(*device, c);
  if (!failure.empty()) RC_FAIL(failure);
}

// Two bf16 outputs of one exact value, each rounded once, may straddle a rounding boundary: then
// they are one bf16 ulp apart, which can exceed the oracle tolerance's rtol (2^-8 of values in
// [0.5, 1) is less than their ulp). So split against split allows the table's atol (outputs whose
// inputs cancel) plus one ulp of the larger, and special values must match exactly.
std::string within_one_bf16_ulp(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want) {
  const double atol = tolerance_for("mla_decode", "o").atol;
  for (size_t i = 0; i < got.size(); ++i) {
    const double a = bf16_to_float(got[i]), b = bf16_to_float(want[i]);
    const bool same_special = (std::isnan(a) && std::isnan(b)) || a == b;  // equal, zeros and infinities included
    if (same_special || (std::isfinite(a) && std::isfinite(b) &&
                         std::abs(a - b) <= atol + std::ldexp(1.0, std::ilogb(std::max(std::abs(a), std::abs(b))) - 7))) {
      continue;
    }
    return "element " + std::to_string(i) + " (row " + std::to_string(i / kLatent) + ", column " +
           std::to_string(i % kLatent) + "): " + std::to_string(a) + " against " + std::to_string(b) +
           " with one split, more than one bf16 ulp apart";
  }
  return "";
}

// The answer must not depend on the split count beyond rounding: S splits against one split (each
// also against the oracle).
std::string check_split_independence(Device& device, DecodeCase c) {
  const int64_t splits = c.num_splits;
  c.num_splits = 1;
  const Outcome one = run_case(device, c);
  if (!one.failure.empty()) return "1 split: " + one.failure;
  c.num_splits = splits;
  const Outcome many = run_case(device, c);
  if (!many.failure.empty()) return std::to_string(splits) + " splits: " + many.failure;
  const int64_t rows = c.B * c.q_len * c.H;
  std::vector<float> l1 = one.lse, ls = many.lse;
  const std::string ro = within_one_bf16_ulp(many.o, one.o);
  if (!ro.empty()) return std::to_string(splits) + " splits against 1, o: " + ro;
  const CompareReport rl = compare_close(HostTensor(ls.data(), View::contiguous(DType::kF32, {rows})),
                                         HostTensor(l1.data(), View::contiguous(DType::kF32, {rows})),
                                         tolerance_for("mla_decode", "lse"));
  if (!rl.ok) return std::to_string(splits) + " splits against 1, lse: " + rl.describe();
  return "";
}

RC_GTEST_PROP(MlaDecode, ResultDoesNotDependOnTheSplitCount, ()) {
  DecodeCase c = *gen_case(true);
  c.num_splits = *rc::gen::element<int64_t>(2, 3, 5, 8, 64);
  const auto device = make_device(Backend::kHost);
  const std::string failure = check_split_independence(*device, c);
  if (!failure.empty()) RC_FAIL(failure);
}

// Rows with no key (seq_len 0, or a token before the first key) give o = +0 exactly and lse = -inf,
// and the other rows of the batch still equal the oracle.
RC_GTEST_PROP(MlaDecode, EmptyRowsGiveZeroAndMinusInfinityAndDisturbNothing, ()) {
  DecodeCase c = *gen_case(true);
  if (c.B == 1) {  // one request empty, another not
    c.B = 2;
    c.lens.push_back(*rc::gen::inRange(1, 41));
  }
  c.lens[static_cast<size_t>(*rc::gen::inRange<int64_t>(0, c.B))] = *rc::gen::inRange<int32_t>(0, static_cast<int32_t>(c.q_len));
  for (int64_t b = 0; b < c.B; ++b) c.W = std::max(c.W, c.needed(b));
  fill_block_table(c);
  const auto device = make_device(Backend::kHost);
  const Outcome out = run_case(*device, c);
  if (!out.failure.empty()) RC_FAIL(out.failure);
  int64_t empty = 0;
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t t = 0; t < c.q_len; ++t) {
      if (c.lens[static_cast<size_t>(b)] - c.q_len + t + 1 > 0) continue;
      for (int64_t h = 0; h < c.H; ++h) {
        const int64_t row = (b * c.q_len + t) * c.H + h;
        ++empty;
        RC_ASSERT(out.lse[static_cast<size_t>(row)] == -std::numeric_limits<float>::infinity());
        for (int64_t d = 0; d < kLatent; ++d) RC_ASSERT(out.o[static_cast<size_t>(row * kLatent + d)] == 0);
      }
    }
  }
  RC_ASSERT(empty > 0);
}

// q_scale and k_scale are the call's: the same buffers with other scales give the oracle's answer
// for those scales (and a different one).
TEST(MlaDecode, ScalesAreTakenFromEachCall) {
  const auto device = make_device(Backend::kHost);
  DecodeCase c;
  c.B = 2, c.q_len = 2, c.H = 5, c.page = 16, c.lens = {40, 77}, c.W = 5, c.num_blocks = 10;
  c.table = {3, 7, 1, -1, -1, 0, 9, 2, 5, 8};
  c.q_fp8 = true, c.kv_fp8 = true, c.base_scale = kDeepSeekScale, c.num_splits = 3, c.seed = 5;
  Staged st(c);
  std::vector<std::vector<uint16_t>> results;
  for (const auto& [qs, ks] : {std::pair{1.0, 1.0}, {2.0, 1.0}, {1.0, 0.5}, {0.75, 1.5}}) {
    c.q_scale = qs, c.k_scale = ks;
    const oracle::MlaDecodeResult want = oracle::mla_decode(st.oracle_inputs(c));
    ASSERT_EQ(st.run_guarded(*device, [&] { mla_decode(*device, st.args(c)); }), "");
    EXPECT_EQ(compare_outputs(st.o.host_tensor(), st.lse.host_tensor(), want), "") << "q_scale " << qs << " k_scale " << ks;
    results.emplace_back(st.o.host.begin(), st.o.host.end());
  }
  for (size_t i = 1; i < results.size(); ++i) EXPECT_NE(results[i], results[0]) << "scales " << i << " ignored";
}

// Outside the contract, as the glue header documents: a page id outside the cache gives NaN keys
// (never a read), so exactly the rows that see it are NaN; lengths past the table are cut there.
TEST(MlaDecode, BadPagesGiveNaNAndLengthsPastTheTableAreCut) {
  const auto device = make_device(Backend::kHost);
  DecodeCase c;
  c.B = 2, c.q_len = 3, c.H = 3, c.page = 16, c.lens = {40, 20}, c.W = 3, c.num_blocks = 5;
  c.table = {4, 0, 2, 1, 3, -1};
  c.kv_fp8 = true, c.base_scale = kDeepSeekScale, c.num_splits = 2, c.seed = 9;
  // The allocation holds a whole block of finite keys (fp8 0x38 = 1.0) past the cache's 5 pages, so
  // a kernel that read page 5 would compute with finite keys instead of giving NaN.
  c.poison = 0x38, c.kv_tail = 16 * kDim;
  // Request 0's third page (keys 32..39) is page 5 of a 5-page cache on the device: its tokens 0..2
  // see 38, 39 and 40 keys, so all of them are NaN; request 1 is untouched.
  Outcome bad = run_case(*device, c, [](Staged& st) { st.table.put<int32_t>({0, 2}, 5); });
  ASSERT_EQ(bad.failure.rfind("mla_decode o", 0), 0u) << bad.failure;
  for (int64_t row = 0; row < 2 * 3 * 3; ++row) {
    const bool nan_row = row < 3 * 3;
    EXPECT_EQ(std::isnan(bad.lse[static_cast<size_t>(row)]), nan_row) << "row " << row;
    if (!nan_row) {
      EXPECT_NEAR(bad.lse[static_cast<size_t>(row)], bad.want.lse.values[static_cast<size_t>(row)], 1e-5);
    }
  }
  // Request 1 read as 1000 keys long on the device is cut at the table's 3 pages = 48 keys, which
  // the oracle computes from a table that names them (one query token, so every row sees 48).
  DecodeCase cut = c;
  cut.q_len = 1, cut.lens = {40, 48}, cut.table = {4, 0, 2, 1, 3, 5}, cut.num_blocks = 6;
  EXPECT_EQ(run_case(*device, cut, [](Staged& st) { st.lens.put<int32_t>({1}, 1000); }).failure, "");
}

// DeepSeek-V3.2 decode at production width: H 128, q_len 2, ~1.5k keys in 64-token fp8 pages
// (2k would take ~3 s on the host), with the split count the heuristic picks for an H200 and with
// one split.
DecodeCase production_case(int64_t splits) {
  DecodeCase c;
  c.B = 2, c.q_len = 2, c.H = 128, c.page = 64, c.lens = {1536, 1471};
  c.W = 25, c.num_blocks = 54;
  std::vector<int32_t> pages(54);
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), std::mt19937_64(7));
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t w = 0; w < 25; ++w) c.table.push_back(w < c.needed(b) ? pages[static_cast<size_t>(b * 25 + w)] : -1);
  }
  c.q_fp8 = false, c.kv_fp8 = true, c.base_scale = kDeepSeekScale, c.q_scale = 1.0, c.k_scale = 0.8;
  c.num_splits = splits, c.pass_host_lens = true, c.seed = 42;
  return c;
}

TEST(MlaDecode, ProductionSizeEqualsTheOracle) {
  const auto device = make_device(Backend::kHost);
  const int64_t splits = mla_decode_num_splits(2, 2, 128, 1536, 132);
  EXPECT_GT(splits, 1);
  const Outcome out = run_case(*device, production_case(splits));
  EXPECT_EQ(out.failure, "");
  EXPECT_TRUE(std::any_of(out.o.begin(), out.o.end(), [](uint16_t x) { return (x & 0x7FFF) != 0; }));
}

TEST(MlaDecode, SplitHeuristicFillsTheMachineWithinItsBounds) {
  const int64_t sms = 132;
  for (int64_t B : {1, 2, 8, 32, 64, 128, 1024}) {
    for (int64_t H : {16, 64, 128}) {
      for (int64_t q_len : {1, 2, 8}) {
        for (int64_t len : {0, 100, 256, 2048, 8192, 65536, 163840}) {
          const int64_t s = mla_decode_num_splits(B, q_len, H, len, sms);
          EXPECT_GE(s, 1);
          EXPECT_LE(s, kMlaMaxSplits);
          if (s > 1) {
            EXPECT_GE(len / s, 256) << "B " << B << " H " << H << " len " << len;  // no split under 256 keys
          }
          // Monotone: longer sequences never get fewer splits, larger batches never more.
          EXPECT_LE(s, mla_decode_num_splits(B, q_len, H, len * 2, sms));
          EXPECT_GE(s, mla_decode_num_splits(B * 2, q_len, H, len, sms));
          EXPECT_GE(s, mla_decode_num_splits(B, q_len, H, len, sms / 2));
        }
      }
    }
  }
  EXPECT_EQ(mla_decode_num_splits(128, 1, 128, 65536, sms), 1);  // 1024 programs fill 132 SMs
  EXPECT_GE(mla_decode_num_splits(1, 1, 128, 65536, sms), 32);   // one request: many splits
  EXPECT_EQ(mla_decode_num_splits(1, 1, 16, 300, sms), 1);       // too short to split
  EXPECT_EQ(mla_decode_num_splits(1, 1, 16, 1 << 30, sms), kMlaMaxSplits);
  EXPECT_EQ(mla_decode_num_splits(0, 0, 0, 0, 0), 1);
}

// ---- cuda: the same checks on device buffers -------------------------------------------------

TEST(MlaDecodeOnCuda, PropertiesAndProductionSizeWhenAGpuIsPresent) {
  std::string why;
  if (!device_usable(Backend::kCuda, &why)) GTEST_SKIP() << "skipped: no GPU (" << why << ")";
  const auto device = make_device(Backend::kCuda);
  EXPECT_TRUE(rc::check("mla decode on cuda equals the oracle", [&] {
    const std::string failure = check_case(*device, *gen_case());
    if (!failure.empty()) RC_FAIL(failure);
  }));
  EXPECT_TRUE(rc::check("mla decode on cuda does not depend on the split count", [&] {
    DecodeCase c = *gen_case(true);
    c.num_splits = *rc::gen::element<int64_t>(2, 3, 5, 8, 64);
    const std::string failure = check_split_independence(*device, c);
    if (!failure.empty()) RC_FAIL(failure);
  }));
  EXPECT_EQ(check_case(*device, production_case(mla_decode_num_splits(2, 2, 128, 1536, 132))), "");
  EXPECT_EQ(check_case(*device, production_case(1)), "");
}

// ---- bad input: refused with one line before any launch ---------------------------------------

// Small valid inputs in host memory; the outputs hold sentinels, so any launch would show.
struct Inputs {
  static constexpr int64_t B = 2, q_len = 2, H = 3, page = 4, blocks = 4, W = 2, splits = 2;
  std::vector<uint16_t> q = std::vector<uint16_t>(B * q_len * H * kDim, 0x3F80);
  std::vector<uint16_t> kv = std::vector<uint16_t>(blocks * page * kDim, 0x3F80);
  std::vector<int32_t> table = {0, 1, 2, 3}, lens = {5, 8};
  std::vector<float> workspace = std::vector<float>(mla_decode_workspace_floats(B, q_len, H, splits), 7.0f);
  std::vector<uint16_t> o = std::vector<uint16_t>(B * q_len * H * kLatent, 0x4000);
  std::vector<float> lse = std::vector<float>(B * q_len * H + 1, 7.0f);  // + 1: room for a misaligned view
  MlaDecodeArgs args() {
    MlaDecodeArgs a;
    a.q = {q.data(), View::contiguous(DType::kBF16, {B, q_len, H, kDim})};
    a.kv_cache = {kv.data(), View::contiguous(DType::kBF16, {blocks, page, kDim})};
    a.block_table = {table.data(), View::contiguous(DType::kI32, {B, W})};
    a.seq_lens = {lens.data(), View::contiguous(DType::kI32, {B})};
    a.num_splits = splits;
    a.workspace = {workspace.data(), View::contiguous(DType::kF32, {static_cast<int64_t>(workspace.size())})};
    a.o = {o.data(), View::contiguous(DType::kBF16, {B, q_len, H, kLatent})};
    a.lse = {lse.data(), View::contiguous(DType::kF32, {B, q_len, H})};
    return a;
  }
  bool untouched() const {
    return std::all_of(workspace.begin(), workspace.end(), [](float x) { return x == 7.0f; }) &&
           std::all_of(o.begin(), o.end(), [](uint16_t x) { return x == 0x4000; }) &&
           std::all_of(lse.begin(), lse.end(), [](float x) { return x == 7.0f; });
  }
};

void expect_refused(const std::function<void(Inputs&, MlaDecodeArgs&)>& change, const char* what) {
  const auto device = make_device(Backend::kHost);
  test_support::expect_refused_before_launch<Inputs>([&](const MlaDecodeArgs& a) { mla_decode(*device, a); }, change,
                                                     what);
}

TEST(MlaDecode, BadInputIsRefusedBeforeAnyLaunch) {
  {
    const auto device = make_device(Backend::kHost);
    Inputs in;
    MlaDecodeArgs a = in.args();
    a.host_seq_lens = &in.lens;
    EXPECT_NO_THROW(mla_decode(*device, a));  // the baseline is valid
    EXPECT_FALSE(in.untouched());
  }
  using In = Inputs;
  using A = MlaDecodeArgs;
  const auto bf16 = [](std::vector<int64_t> shape) { return View::contiguous(DType::kBF16, std::move(shape)); };
  expect_refused([&](In&, A& a) { a.q.view = bf16({2, 0, 3, kDim}); }, "q_len 0");
  expect_refused([&](In& in, A& a) {
    in.q.resize(2 * 9 * 3 * kDim);
    a.q = {in.q.data(), bf16({2, 9, 3, kDim})};
  }, "q_len 9");
  expect_refused([](In&, A& a) { a.q.view = View::contiguous(DType::kF32, {2, 2, 3, 288}); }, "fp32 q");
  expect_refused([&](In&, A& a) { a.q.view = bf16({2, 2, 3, 512}); }, "q head dim 512");
  expect_refused([](In&, A& a) { a.q.view = View(DType::kBF16, {2, 2, 3, kDim}, {2 * 3 * kDim, 3 * kDim, kDim, 1}, 0).transpose(0, 1); },
                 "non-contiguous q");
  expect_refused([](In&, A& a) { a.kv_cache.view = View::contiguous(DType::kF32, {4, 2, kDim}); }, "fp32 kv");
  expect_refused([&](In&, A& a) { a.kv_cache.view = bf16({4, 4, 512}); }, "kv head dim 512");
  expect_refused([&](In&, A& a) { a.kv_cache.view = View(DType::kBF16, {4, 4, 288}, {4 * kDim, kDim, 2}); },
                 "kv column stride");
  expect_refused([&](In&, A& a) { a.kv_cache.view = View(DType::kBF16, {2, 4, kDim}, {4 * kDim, 500, 1}); },
                 "overlapping tokens");
  expect_refused([](In&, A& a) { a.block_table.view = View::contiguous(DType::kI64, {2, 1}); }, "int64 table");
  expect_refused([](In&, A& a) { a.block_table.view = View::contiguous(DType::kI32, {1, 4}); }, "table rows");
  expect_refused([](In&, A& a) { a.block_table.view = View(DType::kI32, {2, 2}, {1, 2}); }, "table column stride");
  expect_refused([](In&, A& a) { a.seq_lens.view = View(DType::kI32, {2}, {2}); }, "non-contiguous seq_lens");
  expect_refused([](In&, A& a) { a.seq_lens.view = View::contiguous(DType::kI32, {3}); }, "seq_lens size");
  expect_refused([](In&, A& a) { a.num_splits = 0; }, "0 splits");
  expect_refused([](In&, A& a) { a.num_splits = kMlaMaxSplits + 1; }, "too many splits");
  expect_refused([](In&, A& a) { a.k_scale = 0; }, "k_scale 0");
  expect_refused([](In&, A& a) { a.q_scale = std::nan(""); }, "NaN q_scale");
  expect_refused([](In&, A& a) { a.base_scale = 1e300; }, "softmax scale past fp32");
  expect_refused(
      [](In& in, A& a) {
        a.workspace.view = View::contiguous(DType::kF32, {static_cast<int64_t>(in.workspace.size()) - 1});
      },
      "workspace too small");
  expect_refused([](In&, A& a) { a.num_splits = 3; }, "workspace too small for the splits");
  expect_refused([](In& in, A& a) {
    a.workspace.view = View::contiguous(DType::kBF16, {static_cast<int64_t>(in.workspace.size())});
  }, "bf16 workspace");
  expect_refused([&](In&, A& a) { a.o.view = bf16({2, 2, 3, 576}); }, "o head dim 576");
  expect_refused([&](In&, A& a) { a.o.view = bf16({2, 1, 3, kLatent}); }, "o q_len");
  expect_refused([](In&, A& a) { a.o.view = View::contiguous(DType::kF32, {2, 2, 3, 256}); }, "fp32 o");
  expect_refused([](In&, A& a) { a.lse.view = View::contiguous(DType::kF32, {2, 3, 2}); }, "lse transposed shape");
  expect_refused([](In&, A& a) { a.lse.view = View::contiguous(DType::kF32, {2, 2, 3, 1}); }, "lse rank");
  expect_refused([](In&, A& a) { a.lse.view = View(DType::kF32, {2, 2, 3}, {6, 1, 2}); }, "non-contiguous lse");
  expect_refused(
      [](In& in, A& a) {
        a.o = {in.q.data(), View::contiguous(DType::kBF16, {2, 2, 3, kLatent})};
      },
      "o over q");
  expect_refused([](In& in, A& a) { a.lse = {in.o.data(), View::contiguous(DType::kF32, {2, 2, 3})}; }, "lse over o");
  expect_refused([](In& in, A& a) { a.workspace.base = in.o.data(); }, "workspace over o");
  expect_refused([](In& in, A& a) {
    a.lse = {in.lse.data(), View::contiguous(DType::kF32, {2, 2, 3}, 2)};
  }, "misaligned lse");
  expect_refused(
      [](In& in, A& a) {
        in.lens = {5, 9};  // 9 keys need 3 pages of 4
        a.host_seq_lens = &in.lens;
      },
      "table narrower than ceil(seq_len / page)");
  expect_refused(
      [](In& in, A& a) {
        in.lens = {-1, 3};
        a.host_seq_lens = &in.lens;
      },
      "negative seq_len");
  expect_refused(
      [](In& in, A& a) {
        in.lens = {5};
        a.host_seq_lens = &in.lens;
      },
      "host seq_lens count");
}

}  // namespace
}  // namespace mlacheck::kernels
