// Checked entry points for packing, unpacking and global slots (kernels/pack_decode_glue.h).
#include "kernels/pack_decode_glue.h"

#include <limits>
#include <vector>

#include "core/error.h"
#include "kernels/pack_decode.h"

namespace mlacheck::kernels {
namespace {

// The bytes of one row of v: its dimensions from `first` on, which must be contiguous.
int64_t row_bytes(const View& v, int first, const char* what) {
  int64_t elements = 1;
  for (int d = v.rank() - 1; d >= first; --d) {
    MLA_REQUIRE(v.size(d) <= 1 || v.stride(d) == elements, what, " ", v.to_string(),
                ": each row must be contiguous (the kernel copies rows as bytes)");
    elements *= v.size(d);
  }
  return elements * v.element_size();
}

// Refuses a destination whose bytes overlap the source's (same allocation, intersecting spans).
void require_disjoint(const DeviceTensor& src, const DeviceTensor& dst, const char* op) {
  const ByteSpan a = src.view.byte_span(), b = dst.view.byte_span();
  MLA_REQUIRE(src.base != dst.base || a.end <= b.begin || b.end <= a.begin || a.begin == a.end || b.begin == b.end,
              op, ": destination ", dst.view.to_string(), " overlaps source ", src.view.to_string());
}

int32_t require_query_start_loc(const DeviceTensor& qsl, const char* op) {
  const View& v = qsl.view;
  MLA_REQUIRE(v.dtype() == DType::kI32 && v.rank() == 1 && v.size(0) >= 1 && v.is_contiguous(), op,
              ": query_start_loc must be contiguous int32 [B + 1], got ", v.to_string());
  return static_cast<int32_t>(v.size(0) - 1);
}

// The launch of pack (rows from tokens to packed slots) or unpack (back), checked.
PackRowsParams pack_params(const DeviceTensor& qsl, const DeviceTensor& tokens, const DeviceTensor& packed,
                           const char* op, bool pack) {
  const int32_t B = require_query_start_loc(qsl, op);
  const View &t = tokens.view, &p = packed.view;
  MLA_REQUIRE(p.rank() >= 2 && p.size(0) == B && t.rank() == p.rank() - 1 && t.dtype() == p.dtype(), op,
              ": packed must be [B = ", B, ", next_n', ...] over tokens [T, ...] of one dtype, got packed ",
              p.to_string(), " and tokens ", t.to_string());
  for (int d = 1; d < t.rank(); ++d) {
    MLA_REQUIRE(t.size(d) == p.size(d + 1), op, ": packed ", p.to_string(), " and tokens ", t.to_string(),
                " differ in their row shape");
  }
  // Slot r = b * next_n' + j: the kernel steps rows by one stride, so [B, next_n'] must collapse.
  const int64_t next_n = p.size(1);
  MLA_REQUIRE(B <= 1 || next_n == 0 || p.stride(0) == next_n * p.stride(1), op, ": packed ", p.to_string(),
              " does not space its B x next_n' slots evenly (stride 0 must be next_n' times stride 1)");
  PackRowsParams params;
  params.query_start_loc = qsl.data<int32_t>();
  params.num_requests = B;
  params.next_n = static_cast<int32_t>(next_n);
  params.row_bytes = row_bytes(t, 1, "tokens");
  MLA_REQUIRE(params.row_bytes == row_bytes(p, 2, "packed"), op, ": row sizes differ");
  // A token row steps by stride 0, a packed slot by stride 1.
  const DeviceTensor &src = pack ? tokens : packed, &dst = pack ? packed : tokens;
  require_disjoint(src, dst, op);
  const auto row_stride = [&](const DeviceTensor& x) {
    return x.view.stride(&x == &tokens ? 0 : 1) * x.view.element_size();
  };
  params.src = src.data<uint8_t>();
  params.src_row_stride = row_stride(src);
  params.dst = dst.data<uint8_t>();
  params.dst_row_stride = row_stride(dst);
  return params;
}

}  // namespace

void pack_decode(Device& device, const DeviceTensor& qsl, const DeviceTensor& tokens, const DeviceTensor& packed) {
  const PackRowsParams p = pack_params(qsl, tokens, packed, "pack_decode", true);
  MLA_DISPATCH(device, pack_rows, p);
}

void unpack_decode(Device& device, const DeviceTensor& qsl, const DeviceTensor& packed, const DeviceTensor& tokens) {
  const PackRowsParams p = pack_params(qsl, tokens, packed, "unpack_decode", false);
  MLA_DISPATCH(device, unpack_rows, p);
}

void copy_rows(Device& device, const DeviceTensor& src, const DeviceTensor& dst) {
  const View &s = src.view, &d = dst.view;
  MLA_REQUIRE(s.rank() >= 1 && d.rank() == s.rank() && d.dtype() == s.dtype() && s.size(0) >= d.size(0),
              "copy_rows: dst must be [n, ...] over src [>= n, ...] of one dtype, got src ", s.to_string(), " and dst ",
              d.to_string());
  for (int i = 1; i < s.rank(); ++i) {
    MLA_REQUIRE(s.size(i) == d.size(i), "copy_rows: src ", s.to_string(), " and dst ", d.to_string(),
                " differ in their row shape");
  }
  require_disjoint(src, dst, "copy_rows");
  CopyRowsParams p;
  p.rows = d.size(0);
  p.row_bytes = row_bytes(d, 1, "dst");
  MLA_REQUIRE(p.row_bytes == row_bytes(s, 1, "src"), "copy_rows: row sizes differ");
  p.src = src.data<uint8_t>();
  p.src_row_stride = s.stride(0) * s.element_size();
  p.dst = dst.data<uint8_t>();
  p.dst_row_stride = d.stride(0) * d.element_size();
  MLA_DISPATCH(device, copy_rows, p);
}

void topk_to_global(Device& device, const DeviceTensor& qsl, const DeviceTensor& local, const DeviceTensor& block_table,
                    int64_t page, const DeviceTensor& global) {
  topk_to_global_seeded(device, qsl, local, block_table, page, global, TopkToGlobalBug::kNone);
}

void topk_to_global_seeded(Device& device, const DeviceTensor& qsl, const DeviceTensor& local,
                           const DeviceTensor& block_table, int64_t page, const DeviceTensor& global,
                           TopkToGlobalBug bug) {
  const int32_t B = require_query_start_loc(qsl, "topk_to_global");
  const View &l = local.view, &g = global.view, &t = block_table.view;
  MLA_REQUIRE(l.dtype() == DType::kI32 && l.rank() == 2 && (l.size(1) <= 1 || l.stride(1) == 1),
              "topk_to_global: local indices must be int32 [T, k] with unit column stride, got ", l.to_string());
  MLA_REQUIRE(g.dtype() == DType::kI32 && g.shape() == l.shape() && (g.size(1) <= 1 || g.stride(1) == 1),
              "topk_to_global: global indices must be int32 ", shape_string(l.shape()),
              " with unit column stride like local, got ", g.to_string());
  MLA_REQUIRE(t.dtype() == DType::kI32 && t.rank() == 2 && t.size(0) == B && (t.size(1) <= 1 || t.stride(1) == 1),
              "topk_to_global: block_table must be int32 [B = ", B, ", W] with unit column stride, got ", t.to_string());
  MLA_REQUIRE(page >= 1 && page <= std::numeric_limits<int32_t>::max(), "topk_to_global: page size ", page);
  MLA_REQUIRE(B >= 1 || l.size(0) == 0, "topk_to_global: ", l.size(0), " tokens but no requests");
  const bool aliased = local.base == global.base && l.byte_offset() == g.byte_offset();
  MLA_REQUIRE(aliased || local.base != global.base || g.byte_span().end <= l.byte_span().begin ||
                  l.byte_span().end <= g.byte_span().begin,
              "topk_to_global: global ", g.to_string(), " partly overlaps local ", l.to_string());
  MLA_REQUIRE(!aliased || g.strides() == l.strides(), "topk_to_global: in place needs the same strides");
  TopkToGlobalParams p;
  p.query_start_loc = qsl.data<int32_t>();
  p.num_requests = B;
  p.num_tokens = static_cast<int32_t>(l.size(0));
  p.k = static_cast<int32_t>(l.size(1));
  p.local = local.data<int32_t>();
  p.local_row_stride = l.stride(0);
  p.global = global.data<int32_t>();
  p.global_row_stride = g.stride(0);
  p.block_table = block_table.data<int32_t>();
  p.block_table_row_stride = t.stride(0);
  p.block_table_width = static_cast<int32_t>(t.size(1));
  p.page = static_cast<int32_t>(page);
  MLA_DISPATCH(device, topk_to_global_seeded, p, bug);
}

}  // namespace mlacheck::kernels
