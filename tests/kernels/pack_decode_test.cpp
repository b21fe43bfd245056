// Tests of kernels/pack_decode_glue.h: pack, unpack, copy_rows and global slots through the shared
// properties of properties/pack_decode_properties.h, on the host device (and cuda when usable), with
// every buffer guarded; the properties reporting wrong implementations; case text; bad views.
#include "kernels/pack_decode_glue.h"

#include <algorithm>
#include <cstring>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "properties/pack_decode_properties.h"
#include "properties/property_registry.h"
#include "harness/rc_verdict.h"

namespace mlacheck::kernels {
namespace {

CaseText pack_text(const std::string& property, const PackDecodeCase& c) {
  CaseText t = case_header(property, property.substr(0, property.find('.')) + "@ref");
  pack_decode_to_text(c, t);
  return t;
}
CaseText global_text(const TopkToGlobalCase& c) {
  CaseText t = case_header("topk_to_global.equals_oracle", "topk_to_global@ref");
  topk_to_global_to_text(c, t);
  return t;
}

RC_GTEST_PROP(PackDecode, PackWritesLeftAlignedSlotsAndNothingElse, ()) {
  const PackDecodeCase c = *gen::pack_decode_case();
  rc_require(pack_decode_slots_left_aligned(*make_device(Backend::kHost), &pack_decode, c),
             pack_text("pack_decode.slots_left_aligned", c));
}

RC_GTEST_PROP(PackDecode, PackThenUnpackRestoresTokenRowsAndTouchesNothingElse, ()) {
  const PackDecodeCase c = *gen::pack_decode_case();
  rc_require(unpack_decode_inverts_pack(*make_device(Backend::kHost), &pack_decode, &unpack_decode, c),
             pack_text("unpack_decode.inverts_pack", c));
}

RC_GTEST_PROP(PackDecode, GlobalSlotsEqualTheOracle, ()) {
  const TopkToGlobalCase c = *gen::topk_to_global_case();
  rc_require(topk_to_global_equals_oracle(*make_device(Backend::kHost), &topk_to_global, c), global_text(c));
}

// copy_rows has no registry op, so its failures print the case but `mlacheck repro` cannot run it.
RC_GTEST_PROP(PackDecode, CopyRowsCopiesTheFirstRowsAndNothingElse, ()) {
  const CopyRowsCase c = *gen::copy_rows_case();
  if (const Verdict v = copy_rows_copies_first_rows(*make_device(Backend::kHost), &copy_rows, c)) RC_FAIL(*v);
}

// ---- the properties catch wrong implementations ------------------------------------------------

// The token rows one row off: slot (b, j) gets token qsl[b] + j + 1 (the last one reads past T).
void pack_tokens_off_by_one(Device& d, const DeviceTensor& qsl, const DeviceTensor& tokens, const DeviceTensor& packed) {
  const View& v = tokens.view;
  pack_decode(d, qsl, {tokens.base, View(v.dtype(), v.shape(), v.strides(), v.byte_offset() + v.stride(0) * v.element_size())},
              packed);
}

// Slot j + 1 unpacked into token j: reads padding slots (and the row past the slots).
void unpack_slots_off_by_one(Device& d, const DeviceTensor& qsl, const DeviceTensor& packed, const DeviceTensor& tokens) {
  const View& v = packed.view;
  unpack_decode(d, qsl, {packed.base, View(v.dtype(), v.shape(), v.strides(), v.byte_offset() + v.stride(1) * v.element_size())},
                tokens);
}

// The table's last column dropped (a width off by one): its indices become -1.
void to_global_one_column_short(Device& d, const DeviceTensor& qsl, const DeviceTensor& local, const DeviceTensor& table,
                                int64_t page, const DeviceTensor& global) {
  const View& v = table.view;
  const DeviceTensor narrow =
      v.size(1) > 1 ? DeviceTensor{table.base, View(v.dtype(), {v.size(0), v.size(1) - 1}, v.strides(), v.byte_offset())}
                    : table;
  topk_to_global(d, qsl, local, narrow, page, global);
}

// The rows one row off: destination row r gets source row r + 1.
void copy_rows_off_by_one(Device& d, const DeviceTensor& src, const DeviceTensor& dst) {
  const View& v = src.view;
  if (v.size(0) <= dst.view.size(0)) return copy_rows(d, src, dst);
  copy_rows(d, {src.base, View(v.dtype(), {v.size(0) - 1, v.size(1)}, v.strides(), v.byte_offset() + v.stride(0) * v.element_size())},
            dst);
}

// Pack, then every padding slot filled with 0xff bytes (NaN in fp8, as an upstream packer's -inf
// pad can be): wrong under the spec, right under a contract's "padding any". Host memory only.
void pack_pads_with_ones(Device& d, const DeviceTensor& qsl, const DeviceTensor& tokens, const DeviceTensor& packed) {
  pack_decode(d, qsl, tokens, packed);
  const View& v = packed.view;
  const int64_t es = v.element_size();
  int64_t row_elements = 1;
  for (int dim = 2; dim < v.rank(); ++dim) row_elements *= v.size(dim);
  const int32_t* q = qsl.data<int32_t>();
  for (int64_t b = 0; b < v.size(0); ++b) {
    for (int64_t j = q[b + 1] - q[b]; j < v.size(1); ++j) {
      std::memset(packed.data<uint8_t>() + (b * v.stride(0) + j * v.stride(1)) * es, 0xff,
                  static_cast<size_t>(row_elements * es));
    }
  }
}

// Pack, then the first element of slot row 0 written again just past the last slot row's data (a
// row length off by one): one element, so it stays inside the allocation's red zone.
void pack_writes_past_the_slots(Device& d, const DeviceTensor& qsl, const DeviceTensor& tokens, const DeviceTensor& packed) {
  pack_decode(d, qsl, tokens, packed);
  const View& v = packed.view;
  const int64_t es = v.element_size(), rows = v.size(0) * v.size(1);
  int64_t row_elements = 1;
  for (int dim = 2; dim < v.rank(); ++dim) row_elements *= v.size(dim);
  if (rows == 0) return;
  const View first(v.dtype(), {1, 1}, {1, 1}, v.byte_offset());
  const View past(v.dtype(), {1, 1}, {1, 1}, v.byte_offset() + ((rows - 1) * v.stride(1) + row_elements) * es);
  copy_rows(d, {packed.base, first}, {packed.base, past});
}

// A contract's "padding any" (an upstream packer whose caller masks the padding slots): the padding
// slots' values are not compared; the tokens' slots and the writes past the slots still are.
TEST(PackDecodeProperties, PaddingAnyLeavesThePaddingSlotsToTheCaller) {
  const auto host = make_device(Backend::kHost);
  EXPECT_FALSE(rc::check("a padding slot not zero, under the spec", [&] {
    const PackDecodeCase c = *gen::pack_decode_case();
    if (const Verdict v = pack_decode_slots_left_aligned(*host, &pack_pads_with_ones, c)) RC_FAIL(*v);
  }));
  EXPECT_TRUE(rc::check("a padding slot not zero, under padding any", [&] {
    const PackDecodeCase c = *gen::pack_decode_case();
    if (const Verdict v = pack_decode_slots_left_aligned(*host, &pack_pads_with_ones, c, true)) RC_FAIL(*v);
  }));
  EXPECT_FALSE(rc::check("token rows off by one, under padding any", [&] {
    const PackDecodeCase c = *gen::pack_decode_case();
    if (const Verdict v = pack_decode_slots_left_aligned(*host, &pack_tokens_off_by_one, c, true)) RC_FAIL(*v);
  }));
  EXPECT_FALSE(rc::check("a write past the slots, under padding any", [&] {
    const PackDecodeCase c = *gen::pack_decode_case();
    if (const Verdict v = pack_decode_slots_left_aligned(*host, &pack_writes_past_the_slots, c, true)) RC_FAIL(*v);
  }));
}

TEST(PackDecodeProperties, ReportEachWrongImplementation) {
  EXPECT_FALSE(rc::check("slots_left_aligned, token rows off by one", [] {
    const PackDecodeCase c = *gen::pack_decode_case();
    if (const Verdict v = pack_decode_slots_left_aligned(*make_device(Backend::kHost), &pack_tokens_off_by_one, c))
      RC_FAIL(*v);
  }));
  EXPECT_FALSE(rc::check("slots_left_aligned, a write past the slots", [] {
    const PackDecodeCase c = *gen::pack_decode_case();
    if (const Verdict v = pack_decode_slots_left_aligned(*make_device(Backend::kHost), &pack_writes_past_the_slots, c))
      RC_FAIL(*v);
  }));
  EXPECT_FALSE(rc::check("inverts_pack, slots off by one", [] {
    const PackDecodeCase c = *gen::pack_decode_case();
    const auto device = make_device(Backend::kHost);
    if (const Verdict v = unpack_decode_inverts_pack(*device, &pack_decode, &unpack_slots_off_by_one, c)) RC_FAIL(*v);
  }));
  EXPECT_FALSE(rc::check("equals_oracle, table one column short", [] {
    const TopkToGlobalCase c = *gen::topk_to_global_case();
    if (const Verdict v = topk_to_global_equals_oracle(*make_device(Backend::kHost), &to_global_one_column_short, c))
      RC_FAIL(*v);
  }));
  EXPECT_FALSE(rc::check("copy_rows, rows off by one", [] {
    const CopyRowsCase c = *gen::copy_rows_case();
    if (const Verdict v = copy_rows_copies_first_rows(*make_device(Backend::kHost), &copy_rows_off_by_one, c)) RC_FAIL(*v);
  }));
}

// "locals in-range" (a contract's `locals one-of in-range`) leaves only indices in [0, L): no -1, no
// other negative, no column past the table, except in a request of length 0, which has none to give.
RC_GTEST_PROP(TopkToGlobalLocals, InRangeHoldsOnlyIndicesInsideTheRequest, ()) {
  TopkToGlobalCase c = *gen::topk_to_global_case();
  c.locals = TopkToGlobalCase::Locals::kInRange;
  const std::vector<int32_t> local = topk_to_global_locals(c);
  size_t at = 0;
  for (size_t b = 0; b < c.decode_lens.size(); ++b) {
    for (int64_t i = 0; i < int64_t{c.decode_lens[b]} * c.k; ++i, ++at) {
      const int32_t L = c.seq_lens[b], x = local[at];
      if (L == 0) {
        RC_ASSERT(x == -1);
      } else {
        RC_ASSERT(x >= 0 && x < L);
      }
    }
  }
  RC_ASSERT(at == local.size());
}

// The mixed rows (the default) hold all four kinds: -1, other negatives, past the table, inside.
TEST(TopkToGlobalLocals, MixedHoldsEveryKindOfIndex) {
  TopkToGlobalCase c;
  c.decode_lens = {4}, c.seq_lens = {10}, c.k = 64, c.page = 4, c.W = 3, c.block_table = {0, 1, 2};
  const std::vector<int32_t> local = topk_to_global_locals(c);
  const auto count = [&](auto pred) { return std::count_if(local.begin(), local.end(), pred); };
  EXPECT_GT(count([](int32_t x) { return x == -1; }), 0);
  EXPECT_GT(count([](int32_t x) { return x < -1; }), 0);
  EXPECT_GT(count([&](int32_t x) { return x >= c.W * c.page; }), 0);
  EXPECT_GT(count([&](int32_t x) { return x >= 0 && x < 10; }), 0);
}

// ---- case text ---------------------------------------------------------------------------------

RC_GTEST_PROP(PackDecodeCaseText, RoundTripsAndRunsThroughTheRegistry, ()) {
  const PackDecodeCase c = *gen::pack_decode_case();
  const std::string property = *rc::gen::element<std::string>("pack_decode.slots_left_aligned", "unpack_decode.inverts_pack");
  const CaseText t = pack_text(property, c);
  const CaseText back = CaseText::parse(t.format());
  RC_ASSERT(back == t);
  RC_ASSERT(pack_text(property, pack_decode_from_text(back)) == t);
  const TopkToGlobalCase g = *gen::topk_to_global_case();
  const CaseText gt = global_text(g);
  const CaseText gback = CaseText::parse(gt.format());
  RC_ASSERT(gback == gt);
  RC_ASSERT(global_text(topk_to_global_from_text(gback)) == gt);
  if (*rc::gen::inRange(0, 8) == 0) {
    for (const CaseText* x : {&back, &gback}) {
      const ReproResult r = run_case_text(*x);
      if (r.verdict) RC_FAIL(*r.verdict);
    }
  }
}

void expect_refused(const std::string& good, const std::vector<std::pair<std::string, std::string>>& edits,
                    void (*read)(const CaseText&)) {
  for (const auto& [from, to] : edits) {
    std::string text = good;
    const size_t at = text.find(from + "\n");
    ASSERT_NE(at, std::string::npos) << from << " in\n" << text;
    text.replace(at, from.size(), to);
    try {
      read(CaseText::parse(text));
      ADD_FAILURE() << to << ": accepted";
    } catch (const Error& err) {
      EXPECT_EQ(std::string(err.what()).find('\n'), std::string::npos) << err.what();
    }
  }
}

TEST(PackDecodeCaseText, MalformedCasesAreRefusedWithOneLine) {
  PackDecodeCase p;
  p.decode_lens = {2, 0, 1}, p.next_n = 2, p.row_shape = {3};
  const std::string good = pack_text("pack_decode.slots_left_aligned", p).format();
  EXPECT_NO_THROW(pack_decode_from_text(CaseText::parse(good)));
  expect_refused(good,
                 {{"decode_lens 2 0 1", "decode_lens 3 0 1"}, {"decode_lens 2 0 1", "decode_lens"},
                  {"row_shape 3", "row_shape 0"}, {"row_shape 3", "row_shape 100 100"},
                  {"dtype fp32", "dtype fp64"}, {"next_n 2", "next_n 0"}, {"token_row_pad 0", "token_row_pad -1"},
                  {"warp 32", "warp 16"}},
                 [](const CaseText& t) { pack_decode_from_text(t); });
  TopkToGlobalCase g;
  g.decode_lens = {1, 2}, g.seq_lens = {5, 2}, g.k = 2, g.page = 4, g.W = 2, g.block_table = {7, 3, 1, -1};
  const std::string ggood = global_text(g).format();
  EXPECT_NO_THROW(topk_to_global_from_text(CaseText::parse(ggood)));
  expect_refused(ggood,
                 {{"seq_lens 5 2", "seq_lens 5"}, {"seq_lens 5 2", "seq_lens 9 2"}, {"block_table 7 3 1 -1", "block_table 7 3 1"},
                  {"block_table 7 3 1 -1", "block_table 7 -3 1 -1"},
                  {"block_table 7 3 1 -1", "block_table 7 3 1000000000 -1"}, {"page 4", "page 0"},
                  {"k 2", "k 0"}, {"in_place 0", "in_place 2"}, {"locals mixed", "locals some"}},
                 [](const CaseText& t) { topk_to_global_from_text(t); });
}

// ---- cuda and bad input ------------------------------------------------------------------------

TEST(PackDecode, OnCudaWhenAGpuIsPresent) {
  std::string why;
  if (!device_usable(Backend::kCuda, &why)) GTEST_SKIP() << "skipped: no GPU (" << why << ")";
  const auto device = make_device(Backend::kCuda);
  EXPECT_TRUE(rc::check("pack on cuda", [&] {
    if (const Verdict v = pack_decode_slots_left_aligned(*device, &pack_decode, *gen::pack_decode_case())) RC_FAIL(*v);
  }));
  EXPECT_TRUE(rc::check("pack round trip on cuda", [&] {
    const Verdict v = unpack_decode_inverts_pack(*device, &pack_decode, &unpack_decode, *gen::pack_decode_case());
    if (v) RC_FAIL(*v);
  }));
  EXPECT_TRUE(rc::check("global slots on cuda", [&] {
    if (const Verdict v = topk_to_global_equals_oracle(*device, &topk_to_global, *gen::topk_to_global_case())) RC_FAIL(*v);
  }));
  EXPECT_TRUE(rc::check("copy rows on cuda", [&] {
    if (const Verdict v = copy_rows_copies_first_rows(*device, &copy_rows, *gen::copy_rows_case())) RC_FAIL(*v);
  }));
}

TEST(PackDecode, BadViewsAreRefusedBeforeAnyLaunch) {
  const auto device = make_device(Backend::kHost);
  std::vector<int32_t> qsl{0, 2, 3};
  std::vector<float> rows(64);
  const DeviceTensor q{qsl.data(), View::contiguous(DType::kI32, {3})};
  const DeviceTensor tokens{rows.data(), View::contiguous(DType::kF32, {3, 4})};
  const DeviceTensor packed{rows.data(), View::contiguous(DType::kF32, {2, 2, 4})};
  EXPECT_NO_THROW(pack_decode(*device, q, tokens, DeviceTensor{rows.data(), View::contiguous(DType::kF32, {2, 2, 4}, 64)}));
  // packed with 3 requests for a 2-request query_start_loc; a wrong row shape; a wrong dtype.
  EXPECT_THROW(pack_decode(*device, q, tokens, {rows.data(), View::contiguous(DType::kF32, {3, 2, 4})}), Error);
  EXPECT_THROW(pack_decode(*device, q, tokens, {rows.data(), View::contiguous(DType::kF32, {2, 2, 5})}), Error);
  EXPECT_THROW(pack_decode(*device, q, tokens, {rows.data(), View::contiguous(DType::kBF16, {2, 2, 4})}), Error);
  // The [:B, :next_n'] slice of a wider buffer cannot be stepped as B * next_n' rows (vLLM #42135).
  EXPECT_THROW(unpack_decode(*device, q, {rows.data(), View(DType::kF32, {2, 2, 4}, {16, 4, 1})}, tokens), Error);
  // Token rows that are not contiguous.
  EXPECT_THROW(pack_decode(*device, q, {rows.data(), View(DType::kF32, {3, 4}, {8, 2})}, packed), Error);
  // A destination overlapping its source.
  EXPECT_THROW(pack_decode(*device, q, tokens, {rows.data(), View::contiguous(DType::kF32, {2, 2, 4}, 16)}), Error);
  EXPECT_THROW(unpack_decode(*device, q, packed, {rows.data(), View::contiguous(DType::kF32, {3, 4}, 32)}), Error);
  // copy_rows: more rows than the source, another row shape, overlap.
  const DeviceTensor dst{rows.data(), View::contiguous(DType::kF32, {2, 4}, 128)};
  EXPECT_NO_THROW(copy_rows(*device, tokens, dst));
  EXPECT_THROW(copy_rows(*device, tokens, {rows.data(), View::contiguous(DType::kF32, {4, 4}, 128)}), Error);
  EXPECT_THROW(copy_rows(*device, tokens, {rows.data(), View::contiguous(DType::kF32, {2, 3}, 128)}), Error);
  EXPECT_THROW(copy_rows(*device, tokens, {rows.data(), View::contiguous(DType::kF32, {2, 4}, 16)}), Error);
  std::vector<int32_t> idx(16);
  const DeviceTensor local{idx.data(), View::contiguous(DType::kI32, {3, 2})};
  const DeviceTensor table{idx.data(), View::contiguous(DType::kI32, {2, 2}, 32)};
  EXPECT_THROW(topk_to_global(*device, q, local, table, 0, local), Error);  // page 0
  EXPECT_THROW(topk_to_global(*device, q, local, {idx.data(), View::contiguous(DType::kI32, {3, 2}, 32)}, 4, local), Error);
  EXPECT_THROW(topk_to_global(*device, q, local, table, 4, {idx.data(), View::contiguous(DType::kI32, {3, 3}, 32)}), Error);
  EXPECT_THROW(topk_to_global(*device, q, local, table, 4, {idx.data(), View::contiguous(DType::kI32, {3, 2}, 4)}), Error);
}

}  // namespace
}  // namespace mlacheck::kernels
