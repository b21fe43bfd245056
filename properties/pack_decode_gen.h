// RapidCheck generators for the packing steps of docs/ops.md 6 (pack_decode, unpack_decode, copy_rows)
// and docs/ops.md 3's conversion to global slots (topk_to_global): batches with non-uniform decode
// lengths and padding requests, rows of several dtypes and shapes, every view offset and row-padded
// inside a wider buffer, block tables with shuffled and shared pages of sizes 1 to 69; and their
// text form (harness/case_text.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <ostream>
#include <vector>

#include <rapidcheck.h>

#include "core/dtype.h"
#include "harness/case_schema.h"
#include "harness/case_text.h"
#include "harness/schedule.h"

namespace mlacheck {

// Token rows [T, row_shape...] packed into [B, next_n, row_shape...] slots and back.
struct PackDecodeCase : CaseSchedule {
  std::vector<int32_t> decode_lens;  // [B], each in [0, next_n]; 0: a padding request
  int64_t next_n = 1;                // slots per request: max(1, max decode_lens), or more (graph padding)
  std::vector<int64_t> row_shape = {1};  // a row's trailing dimensions (one or two), contiguous
  DType dtype = DType::kF32;
  // Views inside wider buffers: lead rows before row 0, padding elements after each row.
  int64_t token_lead_rows = 0, token_row_pad = 0;  // the token rows pack reads
  int64_t packed_lead_rows = 0, packed_row_pad = 0, packed_tail_rows = 0;  // the slots
  int64_t dst_lead_rows = 0, dst_row_pad = 0, dst_tail_rows = 0;  // unpack's token rows: the tail rows belong to prefill
  int64_t qsl_lead = 0;  // query_start_loc starts this many int32 into its buffer

  int64_t B() const { return static_cast<int64_t>(decode_lens.size()); }
  int64_t T() const;
  int64_t row_elements() const;
  std::vector<int32_t> query_start_loc() const;  // [B + 1] prefix sums
  int64_t longest() const;                       // max(1, the longest decode length)
  friend void showValue(const PackDecodeCase& c, std::ostream& os) { show_case(c, os); }
};

// The generator's own draws of the fields whose distribution matters (pack_decode_gen.cpp).
std::vector<int32_t> draw_pack_decode_lens();
std::vector<int64_t> draw_row_shape();
// The dtypes a packed row may have, by name.
const std::vector<std::pair<const char*, DType>>& row_dtype_names();

// The schema of a packing case (harness/case_schema.h): keys, ranges and draws, in reading order.
// Every range follows from the fields before it (next_n from the longest decode length), so fuzz
// bytes decode to a case; the row's element count (at most 4096) is the one rule.
template <class V>
void fields(V& v, PackDecodeCase& c) {
  // A batch has at least one request; 0 is a padding request.
  v.list("decode_lens", c.decode_lens, Length{1, 256}, 0, 16, draw_pack_decode_lens);
  // next_n' itself, or one more (graph padding), mostly the former.
  v.integer("next_n", c.next_n, c.longest(), 16,
            [&c] { return c.longest() + *rc::gen::weightedElement<int64_t>({{6, 0}, {1, 1}}); });
  v.list("row_shape", c.row_shape, Length{1, 2}, 1, 4096, draw_row_shape);
  v.rule(c.row_elements() <= 4096, "row_shape has " + std::to_string(c.row_elements()) + " elements, more than 4096");
  v.named("dtype", c.dtype, row_dtype_names());
  v.integer("token_lead_rows", c.token_lead_rows, 0, 64, UpTo{2});
  v.integer("token_row_pad", c.token_row_pad, 0, 64, UpTo{3});
  v.integer("packed_lead_rows", c.packed_lead_rows, 0, 64, UpTo{2});
  v.integer("packed_row_pad", c.packed_row_pad, 0, 64, UpTo{3});
  v.integer("packed_tail_rows", c.packed_tail_rows, 0, 64, UpTo{2});
  v.integer("dst_lead_rows", c.dst_lead_rows, 0, 64, UpTo{2});
  v.integer("dst_row_pad", c.dst_row_pad, 0, 64, UpTo{3});
  v.integer("dst_tail_rows", c.dst_tail_rows, 0, 64, UpTo{3});
  v.integer("qsl_lead", c.qsl_lead, 0, 64, UpTo{2});
  v.schedule(c);
}

// Request-local top-k indices [T, k] -> global slots through a block table [B, W].
struct TopkToGlobalCase : CaseSchedule {
  std::vector<int32_t> decode_lens;  // [B] tokens per request
  std::vector<int32_t> seq_lens;     // [B] each request's context length: its tokens' indices lie in [0, L)
  int64_t k = 1, page = 64, W = 1;
  std::vector<int32_t> block_table;  // [B, W] row-major; columns past ceil(L / page) hold garbage
  int64_t table_lead = 0, table_row_pad = 0;
  int64_t local_row_pad = 0, global_lead_rows = 0, global_row_pad = 0, qsl_lead = 0;
  bool in_place = false;  // global is local itself
  // Which local indices the rows hold: mixed (-1, other negatives, indices whose column is past the
  // table, and indices in [0, L)) or in-range (only indices in [0, L): what a caller that converts
  // only the valid prefix of each row hands over; a request of length 0 still has only -1).
  enum class Locals { kMixed, kInRange } locals = Locals::kMixed;

  int64_t B() const { return static_cast<int64_t>(decode_lens.size()); }
  int64_t T() const;
  std::vector<int32_t> query_start_loc() const;
  // The most elements a local or global row may take (k and its padding): T x row <= 2^24.
  int64_t row_room() const;
  // block_table's lowest value per entry: 0 for a column request b reads (its ceil(L / page)
  // pages), int32's least for the others (garbage nothing reads).
  std::vector<int64_t> table_lows() const;
  // "" when every page a request reads keeps its slots inside int32, else which does not.
  std::string table_pages_problem() const;
  friend void showValue(const TopkToGlobalCase& c, std::ostream& os) { show_case(c, os); }
};

// The generator's own draws (pack_decode_gen.cpp).
std::vector<int32_t> draw_global_decode_lens();
std::vector<int32_t> draw_global_seq_lens(const TopkToGlobalCase& c);
std::vector<int32_t> draw_global_block_table(const TopkToGlobalCase& c);

// The schema of a global-slots case (harness/case_schema.h). Each range follows from the fields
// before it: the table's width from the batch (B x W values on a case-file line), each request's
// length from the width and the page (its pages lie within the table), the table's read columns
// from the lengths; a read page whose slots pass int32 is the one rule.
template <class V>
void fields(V& v, TopkToGlobalCase& c) {
  v.list("decode_lens", c.decode_lens, Length{1, 256}, 0, 16, draw_global_decode_lens);
  v.integer("k", c.k, 1, std::min<int64_t>(4096, c.row_room()),
            [] { return *rc::gen::weightedOneOf<int64_t>({{6, rc::gen::inRange<int64_t>(1, 10)}, {1, rc::gen::just<int64_t>(64)}}); });
  v.integer("local_row_pad", c.local_row_pad, 0, std::min<int64_t>(64, c.row_room() - c.k), UpTo{2});
  v.integer("global_row_pad", c.global_row_pad, 0, std::min<int64_t>(64, c.row_room() - c.k - c.local_row_pad), UpTo{2});
  v.integer("page", c.page, 1, 1024, Favor{1, 2, 3, 53, 61, 64, 69});
  v.integer("table_width", c.W, 1, std::min<int64_t>(4096, 65536 / c.B()), UpTo{6});
  v.list("seq_lens", c.seq_lens, c.B(), 0, std::min<int64_t>(int64_t{1} << 20, c.W * c.page),
         [&c] { return draw_global_seq_lens(c); });
  v.list_from("block_table", c.block_table, c.table_lows(), std::numeric_limits<int32_t>::max(),
              [&c] { return draw_global_block_table(c); });
  v.rule(c.table_pages_problem().empty(), c.table_pages_problem());
  v.integer("table_lead", c.table_lead, 0, 64, UpTo{2});
  v.integer("table_row_pad", c.table_row_pad, 0, 64, UpTo{2});
  v.integer("global_lead_rows", c.global_lead_rows, 0, 64, UpTo{2});
  v.integer("qsl_lead", c.qsl_lead, 0, 64, UpTo{2});
  v.flag("in_place", c.in_place);
  v.choice("locals", c.locals, {"mixed", "in-range"}, [] {
    return *rc::gen::weightedElement<TopkToGlobalCase::Locals>(
        {{3, TopkToGlobalCase::Locals::kMixed}, {1, TopkToGlobalCase::Locals::kInRange}});
  });
  v.schedule(c);
}

// The first n of n + extra source rows [.., H] (row-padded, offset) into a row-padded destination
// whose tail rows must survive. copy_rows has no registry op yet, so no text form.
struct CopyRowsCase {
  int64_t n = 0, extra = 0, H = 1;
  DType dtype = DType::kI32;
  int64_t src_lead_rows = 0, src_row_pad = 0, dst_row_pad = 0, dst_tail_rows = 0;
  uint64_t seed = 0;
  friend void showValue(const CopyRowsCase& c, std::ostream& os);
};

// The cases as case-text keys, appended to out (after its property / impl / backend).
void pack_decode_to_text(const PackDecodeCase& c, CaseText& out);
void topk_to_global_to_text(const TopkToGlobalCase& c, CaseText& out);
// The inverses. Every value is range-checked (B <= 256, next_n <= 16, row elements <= 4096, pads
// and leads <= 64, pages 1..1024, k <= 4096) and checked against the others (decode lengths within
// next_n, one seq_len per request, a request's pages within the table and in range so no slot
// overflows int32, the table holding B x W entries); a bad one throws mlacheck::Error naming the key.
// Each value's range depends only on values read before it (seq_lens after the table's width and
// page, so a request's pages lie within the table), so fuzz input bytes decode to a case
// (harness/case_text.h); what no range says (a 2-D row_shape's product, a read page past int32
// slots) stays a check.
PackDecodeCase pack_decode_from_text(const CaseText& t);
TopkToGlobalCase topk_to_global_from_text(const CaseText& t);

// Every local index of a case, [T, k] row-major, drawn from its seed: mostly in [0, L) of the
// token's request (the page boundaries and L - 1 among them), some -1 and other negatives, some
// past the table's W * page columns (they become -1). None points into a garbage table column.
std::vector<int32_t> topk_to_global_locals(const TopkToGlobalCase& c);

namespace gen {

// Up to 8 requests, next_n 1..4 (sometimes up to 8, sometimes a spare slot column), uniform or
// non-uniform lengths with padding requests, f32 / bf16 / fp8 / i32 rows of one or two dimensions.
rc::Gen<PackDecodeCase> pack_decode_case();
// Up to 8 requests, k 1..9 (sometimes 64), pages 1, 2, 3, 53, 61, 64, 69, tables from
// gen::paged_block_table (shuffled, shared pages, garbage past what a request needs).
rc::Gen<TopkToGlobalCase> topk_to_global_case();
rc::Gen<CopyRowsCase> copy_rows_case();

}  // namespace gen
}  // namespace mlacheck
