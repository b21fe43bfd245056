// Properties of packing and global slots (properties/pack_decode_properties.h).
#include "properties/pack_decode_properties.h"

#include <cstring>
#include <random>
#include <string>

#include "core/error.h"
#include "kernels/registry.h"
#include "oracle/topk.h"
#include "harness/testbed.h"

namespace mlacheck {

using namespace kernels;

namespace {

constexpr uint8_t kIndexPoison = 0x7F;    // int32 0x7F7F7F7F around query_start_loc and the table
constexpr uint8_t kSlotPoison = 0xEE;     // unpack's padding slots: a read shows in a token row
constexpr uint8_t kSharedPattern = 0x2A;  // the shared destination's rows that are not the view's

// A view of rows [rows, shape...] with the trailing dimensions contiguous, each row `pad` elements
// longer than its data, starting lead_rows rows into its buffer.
View row_view(DType dtype, int64_t rows, const std::vector<int64_t>& shape, int64_t pad, int64_t lead_rows) {
  int64_t elements = 1;
  std::vector<int64_t> sizes{rows}, strides{0};
  for (auto d = shape.rbegin(); d != shape.rend(); ++d) {
    strides.insert(strides.begin() + 1, elements);
    elements *= *d;
  }
  sizes.insert(sizes.end(), shape.begin(), shape.end());
  strides[0] = elements + pad;
  return View(dtype, sizes, strides, lead_rows * strides[0] * static_cast<int64_t>(dtype_size(dtype)));
}

// The byte offset of row `at` (leading coordinates) of v, trailing coordinates 0.
int64_t row_offset(const View& v, std::vector<int64_t> at) {
  at.resize(static_cast<size_t>(v.rank()), 0);
  return v.byte_offset_of(at);
}

Buffer qsl_buffer(const std::vector<int32_t>& qsl, int64_t lead) {
  Buffer b("query_start_loc", View::contiguous(DType::kI32, {static_cast<int64_t>(qsl.size())}, lead * 4), 8,
           kIndexPoison);
  for (size_t i = 0; i < qsl.size(); ++i) b.put<int32_t>({static_cast<int64_t>(i)}, qsl[i]);
  return b;
}

void fill_random(std::vector<uint8_t>& bytes, std::mt19937_64& rng) {
  for (uint8_t& x : bytes) x = static_cast<uint8_t>(rng());
}

std::string slot_name(int64_t b, int64_t j) { return "slot (" + std::to_string(b) + ", " + std::to_string(j) + ")"; }

// The staged packing case: query_start_loc, the token rows (random bytes everywhere) and the slots.
struct PackBuffers {
  Buffer qsl, tokens, packed;
  int64_t row_bytes = 0;
};

PackBuffers make_pack_buffers(const PackDecodeCase& c) {
  std::mt19937_64 rng(c.seed);
  const int64_t S = c.row_elements() + c.packed_row_pad, esize = static_cast<int64_t>(dtype_size(c.dtype));
  // Slots [B, next_n, shape...]: slot rows S elements apart, B rows next_n slots apart.
  std::vector<int64_t> sizes{c.B(), c.next_n}, strides{c.next_n * S, S};
  const View slot_row = row_view(c.dtype, 1, c.row_shape, 0, 0);
  for (int d = 1; d < slot_row.rank(); ++d) {
    sizes.push_back(slot_row.size(d));
    strides.push_back(slot_row.stride(d));
  }
  const View packed(c.dtype, sizes, strides, c.packed_lead_rows * S * esize);
  PackBuffers s{qsl_buffer(c.query_start_loc(), c.qsl_lead),
                Buffer("tokens", row_view(c.dtype, c.T(), c.row_shape, c.token_row_pad, c.token_lead_rows), 16, 0),
                Buffer("packed", packed, (c.packed_tail_rows * S + 1) * esize, 0xA5), c.row_elements() * esize};
  fill_random(s.tokens.host, rng);
  return s;
}

// Packs in the testbed (harness/testbed.h); s.packed.host then holds the device's bytes.
Verdict run_pack(Device& device, PackDecodeFn* pack, const PackDecodeCase& c, PackBuffers& s) {
  Testbed bed(device, c);
  bed.input(s.qsl).input(s.tokens).output(s.packed);
  if (Verdict v = bed.launch([&] { pack(device, s.qsl.device_tensor(), s.tokens.device_tensor(), s.packed.device_tensor()); })) {
    return "pack: " + *v;
  }
  return std::nullopt;
}

}  // namespace

Verdict pack_decode_slots_left_aligned(Device& device, PackDecodeFn* pack, const PackDecodeCase& c, bool padding_any) {
  PackBuffers s = make_pack_buffers(c);
  const std::vector<uint8_t> tokens = s.tokens.host;
  if (Verdict v = run_pack(device, pack, c, s)) return v;
  const std::vector<int32_t> qsl = c.query_start_loc();
  const std::vector<uint8_t> zeros(static_cast<size_t>(s.row_bytes), 0);
  for (int64_t b = 0; b < c.B(); ++b) {
    for (int64_t j = 0; j < c.next_n; ++j) {
      const uint8_t* got = s.packed.host.data() + row_offset(s.packed.view, {b, j});
      const bool token = j < c.decode_lens[static_cast<size_t>(b)];
      if (!token && padding_any) continue;  // the contract's "padding any": the caller masks them
      const uint8_t* want = token ? tokens.data() + row_offset(s.tokens.view, {qsl[static_cast<size_t>(b)] + j}) : zeros.data();
      if (std::memcmp(got, want, static_cast<size_t>(s.row_bytes)) != 0) {
        return slot_name(b, j) + (token ? " does not hold token " + std::to_string(qsl[static_cast<size_t>(b)] + j)
                                        : " is a padding slot but not zero");
      }
    }
  }
  return std::nullopt;
}

Verdict unpack_decode_inverts_pack(Device& device, PackDecodeFn* pack, UnpackDecodeFn* unpack, const PackDecodeCase& c) {
  PackBuffers s = make_pack_buffers(c);
  const std::vector<uint8_t> tokens = s.tokens.host;
  if (Verdict v = run_pack(device, pack, c, s)) return v;
  // The packed slots as pack left them, the padding slots poisoned: unpack reads no padding slot.
  const std::vector<uint8_t> poison(static_cast<size_t>(s.row_bytes), kSlotPoison);
  for (int64_t b = 0; b < c.B(); ++b) {
    for (int64_t j = c.decode_lens[static_cast<size_t>(b)]; j < c.next_n; ++j) {
      std::memcpy(s.packed.host.data() + row_offset(s.packed.view, {b, j}), poison.data(), static_cast<size_t>(s.row_bytes));
    }
  }
  // The first T rows of a shared buffer whose other rows belong to prefill tokens.
  const View dst_view = row_view(c.dtype, c.T(), c.row_shape, c.dst_row_pad, c.dst_lead_rows);
  const int64_t esize = static_cast<int64_t>(dtype_size(c.dtype));
  Buffer dst("shared", dst_view, (c.dst_tail_rows * dst_view.stride(0) + 1) * esize, kSharedPattern);
  Testbed bed(device, c);
  bed.input(s.qsl).input(s.tokens).input(s.packed).output(dst, "decode rows", dst_view);
  if (Verdict v = bed.launch([&] { unpack(device, s.qsl.device_tensor(), s.packed.device_tensor(), dst.device_tensor()); })) {
    return "unpack: " + *v;
  }
  for (int64_t t = 0; t < c.T(); ++t) {
    const uint8_t* got = dst.host.data() + row_offset(dst_view, {t});
    if (std::memcmp(got, tokens.data() + row_offset(s.tokens.view, {t}), static_cast<size_t>(s.row_bytes)) != 0) {
      const bool poisoned = std::memcmp(got, poison.data(), static_cast<size_t>(s.row_bytes)) == 0;
      return "token row " + std::to_string(t) + " after pack and unpack is not the token's" +
             (poisoned ? " (it holds a padding slot's poison)" : "");
    }
  }
  return std::nullopt;
}

Verdict topk_to_global_equals_oracle(Device& device, TopkToGlobalFn* to_global, const TopkToGlobalCase& c) {
  const int64_t B = c.B(), T = c.T(), k = c.k, W = c.W;
  const std::vector<int32_t> qsl = c.query_start_loc(), locals = topk_to_global_locals(c);
  Buffer q = qsl_buffer(qsl, c.qsl_lead);
  Buffer table("block_table", View::padded_rows(DType::kI32, {B, W}, W + c.table_row_pad, c.table_lead * 4), 8,
               kIndexPoison);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t w = 0; w < W; ++w) table.put<int32_t>({b, w}, c.block_table[static_cast<size_t>(b * W + w)]);
  }
  Buffer local("local", View::padded_rows(DType::kI32, {T, k}, k + c.local_row_pad), 8, kIndexPoison);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < k; ++i) local.put<int32_t>({t, i}, locals[static_cast<size_t>(t * k + i)]);
  }
  const int64_t gs = k + c.global_row_pad;
  Buffer global("global", View::padded_rows(DType::kI32, {T, k}, gs, c.global_lead_rows * gs * 4), (gs + 2) * 4, 3);
  Buffer& dst = c.in_place ? local : global;
  const std::vector<uint8_t> local_bytes = local.host;
  Testbed bed(device, c);
  bed.input(q).input(table).input(c.in_place ? global : local).output(dst, "global", dst.view);
  // Arming poisons the outputs; in place the output is also the input, so write it again.
  if (c.in_place) bed.rewrite_after_arm(local, local_bytes);
  if (Verdict v = bed.launch([&] {
        to_global(device, q.device_tensor(), local.device_tensor(), table.device_tensor(), c.page, dst.device_tensor());
      })) {
    return v;
  }
  const HostTensor host_table = table.host_tensor();
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = qsl[static_cast<size_t>(b)]; t < qsl[static_cast<size_t>(b) + 1]; ++t) {
      for (int64_t i = 0; i < k; ++i) {
        const int32_t l = locals[static_cast<size_t>(t * k + i)];
        const int32_t want = oracle::topk_to_global(l, host_table, b, c.page);
        int32_t got = 0;
        std::memcpy(&got, dst.host.data() + dst.view.byte_offset_of({t, i}), 4);
        if (got != want) {
          return "token " + std::to_string(t) + " (request " + std::to_string(b) + ") entry " + std::to_string(i) +
                 ": local " + std::to_string(l) + " -> " + std::to_string(got) + ", the oracle says " +
                 std::to_string(want);
        }
      }
    }
  }
  return std::nullopt;
}

Verdict copy_rows_copies_first_rows(Device& device, CopyRowsFn* copy, const CopyRowsCase& c) {
  std::mt19937_64 rng(c.seed);
  const int64_t esize = static_cast<int64_t>(dtype_size(c.dtype));
  Buffer src("padded rows", row_view(c.dtype, c.n + c.extra, {c.H}, c.src_row_pad, c.src_lead_rows), 8, 0);
  fill_random(src.host, rng);
  const View dst_view = row_view(c.dtype, c.n, {c.H}, c.dst_row_pad, 0);
  Buffer dst("shared", dst_view, (c.dst_tail_rows * dst_view.stride(0) + 1) * esize, kSharedPattern);
  Testbed bed(device, CaseSchedule{});  // the copy has no schedule of its own: ordered, warp 32
  bed.input(src).output(dst, "token rows", dst_view);
  if (Verdict v = bed.launch([&] { copy(device, src.device_tensor(), dst.device_tensor()); })) return v;
  for (int64_t r = 0; r < c.n; ++r) {
    if (std::memcmp(dst.host.data() + row_offset(dst_view, {r}), src.host.data() + row_offset(src.view, {r}),
                    static_cast<size_t>(c.H * esize)) != 0) {
      return "row " + std::to_string(r) + " is not source row " + std::to_string(r);
    }
  }
  return std::nullopt;
}

void register_pack_decode_properties(PropertyRegistry& r) {
  r.add(make_property<PackDecodeCase>(
      "pack_decode.slots_left_aligned", "pack_decode",
      "slot (b, j) holds token qsl[b] + j for j < d_b and zeros after (any value with the contract's "
      "'padding any'); only the [B, next_n] slots are written",
      pack_decode_from_text, [](Device& device, const std::string& impl, const PackDecodeCase& c) {
        const std::shared_ptr<const Contract> contract = registry().contract(impl);
        const bool padding_any = contract && contract->declared.count("padding") && contract->declared.at("padding") == "any";
        return pack_decode_slots_left_aligned(device, registry().find<PackDecodeFn>(impl), c, padding_any);
      }));
  r.add(make_property<PackDecodeCase>(
      "unpack_decode.inverts_pack", "unpack_decode",
      "unpack(pack@ref(x)) == x on the T token rows; no padding slot read; rows past T untouched",
      pack_decode_from_text, [](Device& device, const std::string& impl, const PackDecodeCase& c) {
        return unpack_decode_inverts_pack(device, registry().find<PackDecodeFn>("pack_decode@ref"),
                                          registry().find<UnpackDecodeFn>(impl), c);
      }));
  r.add(make_property<TopkToGlobalCase>(
      "topk_to_global.equals_oracle", "topk_to_global",
      "every global slot is the oracle's block_table[req, i / page] * page + i % page (or -1); only [T, k] written",
      topk_to_global_from_text, [](Device& device, const std::string& impl, const TopkToGlobalCase& c) {
        return topk_to_global_equals_oracle(device, registry().find<TopkToGlobalFn>(impl), c);
      }));
}

}  // namespace mlacheck
