// Tests of kernels/pack_decode_glue.h: pack, unpack and global slots against plain loops and the
// oracle, on the host device (and cuda when usable), with every buffer guarded.
#include "kernels/pack_decode_glue.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <numeric>
#include <vector>

#include "core/error.h"
#include "oracle/topk.h"

namespace mlacheck::kernels {
namespace {

// A batch: decode lengths in [0, next_n] (0: padding request) and their prefix sums.
struct Batch {
  std::vector<int32_t> decode_lens, qsl;
  friend void showValue(const Batch& b, std::ostream& os) {
    os << "decode_lens";
    for (int32_t d : b.decode_lens) os << ' ' << d;
    os << ", next_n' " << b.next_n;
  }
  int32_t next_n = 1;  // next_n' = max decode length (at least 1)
  int64_t tokens() const { return qsl.back(); }
};

rc::Gen<Batch> gen_batch() {
  return rc::gen::exec([] {
    const int32_t next_n = *rc::gen::inRange(1, 5);
    Batch b;
    b.decode_lens = *rc::gen::container<std::vector<int32_t>>(*rc::gen::inRange(1, 7), rc::gen::inRange(0, next_n + 1));
    b.qsl.push_back(0);
    for (int32_t d : b.decode_lens) b.qsl.push_back(b.qsl.back() + d);
    b.next_n = std::max(1, *std::max_element(b.decode_lens.begin(), b.decode_lens.end()));
    return b;
  });
}

// One guarded buffer holding host data at a view; returns the device tensor.
struct Staged {
  std::unique_ptr<GuardedMemory> memory;
  DeviceTensor tensor;
};
template <class T>
Staged stage(Device& device, const std::string& name, const View& v, const std::vector<T>& host_bytes) {
  Staged s{device.allocate(name, static_cast<int64_t>(host_bytes.size() * sizeof(T))), {}};
  s.memory->write(0, host_bytes.data(), static_cast<int64_t>(host_bytes.size() * sizeof(T)));
  s.tensor = {s.memory->data(), v};
  return s;
}
template <class T>
std::vector<T> fetch(const Staged& s) {
  std::vector<T> out(static_cast<size_t>(s.memory->size()) / sizeof(T));
  s.memory->read(0, out.data(), static_cast<int64_t>(out.size() * sizeof(T)));
  return out;
}

// Packs fp32 rows [T, H] (row stride H + 3, offset 2 rows into the buffer) into [B, next_n', H]
// slots (row stride H + 1, inside a buffer with a spare row before and after), unpacks them into
// the first T rows of a shared [T + 3, H] buffer whose other rows must survive, and checks both
// against plain loops.
void check_pack_round_trip(Device& device, const Batch& b, int64_t H) {
  const int64_t B = static_cast<int64_t>(b.decode_lens.size()), T = b.tokens(), n = b.next_n;
  std::vector<float> tokens(static_cast<size_t>((T + 2) * (H + 3)), -7.0f);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) tokens[static_cast<size_t>((t + 2) * (H + 3) + h)] = float(1000 * t + h);
  }
  Staged qsl = stage(device, "query_start_loc", View::contiguous(DType::kI32, {B + 1}), b.qsl);
  Staged src = stage(device, "tokens", View(DType::kF32, {T, H}, {H + 3, 1}, 2 * (H + 3) * 4), tokens);
  Staged packed = stage(device, "packed", View(DType::kF32, {B, n, H}, {n * (H + 1), H + 1, 1}, (H + 1) * 4),
                        std::vector<float>(static_cast<size_t>((B * n + 2) * (H + 1)), 5.0f));
  packed.memory->declare_output("packed", packed.tensor.view);
  for (auto* m : {qsl.memory.get(), src.memory.get(), packed.memory.get()}) m->arm();
  pack_decode(device, qsl.tensor, src.tensor, packed.tensor);
  device.synchronize();
  for (auto* m : {qsl.memory.get(), src.memory.get(), packed.memory.get()}) {
    const GuardReport r = m->check();
    RC_ASSERT(r.ok());
  }
  const std::vector<float> got = fetch<float>(packed);
  for (int64_t r = 0; r < B; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t h = 0; h < H; ++h) {
        const float want = j < b.decode_lens[static_cast<size_t>(r)] ? float(1000 * (b.qsl[static_cast<size_t>(r)] + j) + h) : 0.0f;
        RC_ASSERT(got[static_cast<size_t>((1 + r * n + j) * (H + 1) + h)] == want);
      }
    }
  }

  // Unpack into the decode rows of a shared buffer: rows >= T belong to prefill tokens.
  std::vector<float> shared(static_cast<size_t>((T + 3) * H), 42.0f);
  Staged dst = stage(device, "shared", View::contiguous(DType::kF32, {T, H}), shared);
  dst.memory->declare_output("decode rows", dst.tensor.view);
  packed.memory->clear_outputs();
  for (auto* m : {qsl.memory.get(), packed.memory.get(), dst.memory.get()}) m->arm();
  unpack_decode(device, qsl.tensor, packed.tensor, dst.tensor);
  device.synchronize();
  for (auto* m : {qsl.memory.get(), packed.memory.get(), dst.memory.get()}) RC_ASSERT(m->check().ok());
  const std::vector<float> back = fetch<float>(dst);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) RC_ASSERT(back[static_cast<size_t>(t * H + h)] == float(1000 * t + h));
  }
}

RC_GTEST_PROP(PackDecode, PackThenUnpackRestoresTokenRowsAndTouchesNothingElse, ()) {
  const Batch b = *gen_batch();
  const auto device = make_device(Backend::kHost);
  check_pack_round_trip(*device, b, *rc::gen::inRange(1, 9));
}

// Local indices (with -1, values past the table, and negatives) -> global slots, compared with
// oracle::topk_to_global element by element; the global view is a row-padded slice.
void check_global(Device& device, const Batch& b, int64_t k, int64_t page, int64_t W, bool in_place) {
  const int64_t B = static_cast<int64_t>(b.decode_lens.size()), T = b.tokens();
  std::vector<int32_t> table(static_cast<size_t>(B * (W + 2)), -9);
  for (auto& x : table) x = *rc::gen::inRange(0, 1000);
  std::vector<int32_t> local(static_cast<size_t>(T * k));
  for (auto& x : local) x = *rc::gen::inRange(-3, static_cast<int>(W * page + page + 2));
  Staged qsl = stage(device, "query_start_loc", View::contiguous(DType::kI32, {B + 1}), b.qsl);
  Staged tab = stage(device, "block_table", View::padded_rows(DType::kI32, {B, W}, W + 2), table);
  Staged loc = stage(device, "local", View::contiguous(DType::kI32, {T, k}), local);
  Staged out = stage(device, "global", View::padded_rows(DType::kI32, {T, k}, k + 1, 4),
                     std::vector<int32_t>(static_cast<size_t>(T * (k + 1) + 2), 3));
  const Staged& dst = in_place ? loc : out;
  dst.memory->declare_output("global", dst.tensor.view);
  for (auto* m : {qsl.memory.get(), tab.memory.get(), loc.memory.get(), out.memory.get()}) m->arm();
  // arm() poisons the outputs; in place, the output is also the input, so write it again.
  if (in_place) loc.memory->write(0, local.data(), static_cast<int64_t>(local.size() * 4));
  topk_to_global(device, qsl.tensor, loc.tensor, tab.tensor, page, dst.tensor);
  device.synchronize();
  for (auto* m : {qsl.memory.get(), tab.memory.get(), loc.memory.get(), out.memory.get()}) RC_ASSERT(m->check().ok());
  const std::vector<int32_t> got = fetch<int32_t>(dst);
  const HostTensor host_table(table.data(), tab.tensor.view);
  for (int64_t r = 0; r < B; ++r) {
    for (int32_t t = b.qsl[static_cast<size_t>(r)]; t < b.qsl[static_cast<size_t>(r) + 1]; ++t) {
      for (int64_t i = 0; i < k; ++i) {
        const int32_t want = oracle::topk_to_global(local[static_cast<size_t>(t * k + i)], host_table, r, page);
        const int64_t at = in_place ? t * k + i : 1 + t * (k + 1) + i;
        RC_ASSERT(got[static_cast<size_t>(at)] == want);
      }
    }
  }
}

RC_GTEST_PROP(PackDecode, GlobalSlotsEqualTheOracle, ()) {
  const Batch b = *gen_batch();
  const auto device = make_device(Backend::kHost);
  check_global(*device, b, *rc::gen::inRange(1, 9), *rc::gen::element(1, 2, 3, 64), *rc::gen::inRange(1, 5),
               *rc::gen::arbitrary<bool>());
}

// The token rows out of graph-padded rows: the first n of R >= n source rows (row-padded, offset)
// into a row-padded destination inside a buffer whose other rows must survive.
void check_copy_rows(Device& device, int64_t n, int64_t extra, int64_t H) {
  const int64_t R = n + extra;
  std::vector<int32_t> src_rows(static_cast<size_t>((R + 1) * (H + 2)), -5);
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t h = 0; h < H; ++h) src_rows[static_cast<size_t>((r + 1) * (H + 2) + h)] = int32_t(100 * r + h);
  }
  Staged src = stage(device, "padded rows", View::padded_rows(DType::kI32, {R, H}, H + 2, (H + 2) * 4), src_rows);
  Staged dst = stage(device, "shared", View::padded_rows(DType::kI32, {n, H}, H + 1),
                     std::vector<int32_t>(static_cast<size_t>((n + 3) * (H + 1)), 42));
  dst.memory->declare_output("token rows", dst.tensor.view);
  for (auto* m : {src.memory.get(), dst.memory.get()}) m->arm();
  copy_rows(device, src.tensor, dst.tensor);
  device.synchronize();
  for (auto* m : {src.memory.get(), dst.memory.get()}) RC_ASSERT(m->check().ok());
  const std::vector<int32_t> got = fetch<int32_t>(dst);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t h = 0; h < H; ++h) RC_ASSERT(got[static_cast<size_t>(r * (H + 1) + h)] == int32_t(100 * r + h));
  }
}

RC_GTEST_PROP(PackDecode, CopyRowsCopiesTheFirstRowsAndNothingElse, ()) {
  const auto device = make_device(Backend::kHost);
  check_copy_rows(*device, *rc::gen::inRange(0, 9), *rc::gen::inRange(0, 4), *rc::gen::inRange(1, 9));
}

TEST(PackDecode, OnCudaWhenAGpuIsPresent) {
  std::string why;
  if (!device_usable(Backend::kCuda, &why)) GTEST_SKIP() << "skipped: no GPU (" << why << ")";
  const auto device = make_device(Backend::kCuda);
  EXPECT_TRUE(rc::check("pack round trip on cuda", [&] { check_pack_round_trip(*device, *gen_batch(), *rc::gen::inRange(1, 9)); }));
  EXPECT_TRUE(rc::check("global slots on cuda", [&] {
    check_global(*device, *gen_batch(), *rc::gen::inRange(1, 9), *rc::gen::element(1, 2, 64), 3, *rc::gen::arbitrary<bool>());
  }));
  EXPECT_TRUE(rc::check("copy rows on cuda", [&] {
    check_copy_rows(*device, *rc::gen::inRange(0, 9), *rc::gen::inRange(0, 4), *rc::gen::inRange(1, 9));
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
