// Tests of kernels/metadata_builder.h (SPEC.md 1): both layouts against the oracle, fast path against
// general path, stateful steps (no stale rows, stable addresses), exact views, and refused input; on
// the host device always and on cuda when usable, with every buffer guarded.
#include "kernels/metadata_builder.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/backend/host_executor.h"
#include "core/compare.h"
#include "core/error.h"
#include "oracle/decode_metadata.h"

namespace mlacheck::kernels {
namespace {

constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int32_t kSentinel = -7777;  // block-table padding and slack: a stray read copies it

// One step's decode batch on the host, with the layout of its device views: 1-D inputs offset by
// vec_offset elements, the block table offset by table_offset elements with row stride table_stride.
struct Batch {
  std::vector<int32_t> seq_lens, decode_lens, qsl;
  int64_t W = 1, table_stride = 1, table_offset = 0, vec_offset = 0;
  int32_t table_base = 0;       // block-table entry (b, w) is table_base + 1000 b + w
  int64_t padded_rows = -1;     // graph padding (flattened), -1: none
  int64_t B() const { return static_cast<int64_t>(seq_lens.size()); }
  int64_t tokens() const { return qsl.back(); }
  friend void showValue(const Batch& b, std::ostream& os) {
    os << "seq_lens";
    for (int32_t x : b.seq_lens) os << ' ' << x;
    os << "; decode_lens";
    for (int32_t x : b.decode_lens) os << ' ' << x;
    os << "; W " << b.W << " stride " << b.table_stride << " +" << b.table_offset << ", vec +" << b.vec_offset
       << ", padded " << b.padded_rows;
  }
};

// Host copies of the staged inputs: 1-D vectors with their offset and slack, the padded table.
std::vector<int32_t> vec_storage(const Batch& b, const std::vector<int32_t>& v) {
  std::vector<int32_t> out(static_cast<size_t>(b.vec_offset), kSentinel);
  out.insert(out.end(), v.begin(), v.end());
  out.insert(out.end(), 2, kSentinel);
  return out;
}
std::vector<int32_t> table_storage(const Batch& b) {
  std::vector<int32_t> t(static_cast<size_t>(b.table_offset + b.B() * b.table_stride + 3), kSentinel);
  for (int64_t r = 0; r < b.B(); ++r) {
    for (int64_t w = 0; w < b.W; ++w) {
      t[static_cast<size_t>(b.table_offset + r * b.table_stride + w)] = b.table_base + int32_t(1000 * r + w);
    }
  }
  return t;
}
View vec_view(const Batch& b, int64_t n) { return View::contiguous(DType::kI32, {n}, 4 * b.vec_offset); }
View table_view(const Batch& b) {
  return View(DType::kI32, {b.B(), b.W}, {b.table_stride, 1}, 4 * b.table_offset);
}

Batch make_batch(std::vector<int32_t> seq_lens, std::vector<int32_t> decode_lens, int64_t W) {
  Batch b;
  b.seq_lens = std::move(seq_lens);
  b.decode_lens = std::move(decode_lens);
  b.qsl = {0};
  for (int32_t d : b.decode_lens) b.qsl.push_back(b.qsl.back() + d);
  b.W = W;
  b.table_stride = W;
  return b;
}

// Limits small enough for fast cases; the block-table width a multiple of 4 half the time (16-byte
// output rows: the vector copy path).
rc::Gen<MetadataLimits> gen_limits() {
  return rc::gen::exec([] {
    MetadataLimits l;
    l.next_n = *rc::gen::inRange(1, 9);
    l.max_requests = *rc::gen::inRange(1, 17);
    l.block_table_width = *rc::gen::inRange(1, 41);  // past 32 columns a lane copies several
    if (*rc::gen::arbitrary<bool>()) l.block_table_width = (l.block_table_width + 3) / 4 * 4;
    l.max_batched_tokens = l.max_requests * l.next_n + *rc::gen::inRange(0, 4);
    return l;
  });
}

enum class Mix { kAny, kUniform };

// A batch within the limits: uniform, non-uniform without padding, or with padding requests
// (decode_len 0, usually seq_len 0); short sequences (ctx clamps at 0), long ones, and lengths near
// INT32_MAX; source rows padded and offset, sometimes 16-byte aligned; graph padding rows.
rc::Gen<Batch> gen_batch(const MetadataLimits& l, Mix mix) {
  return rc::gen::exec([=] {
    const int64_t B = *rc::gen::inRange<int64_t>(mix == Mix::kUniform ? 1 : 0, l.max_requests + 1);
    const int kind = mix == Mix::kUniform ? 0 : *rc::gen::inRange(0, 3);  // uniform, no padding, any
    const int32_t d0 = *rc::gen::inRange(1, l.next_n + 1);
    std::vector<int32_t> seq_lens, decode_lens;
    for (int64_t i = 0; i < B; ++i) {
      const int32_t d = kind == 0 ? d0 : *rc::gen::inRange(kind == 1 ? 1 : 0, l.next_n + 1);
      int32_t L = *rc::gen::weightedOneOf<int32_t>({{4, rc::gen::inRange(0, 8)}, {4, rc::gen::inRange(0, 400)},
                                                    {1, rc::gen::inRange(kInt32Max - 8, kInt32Max)}});
      if (d == 0 && *rc::gen::arbitrary<bool>()) L = 0;
      seq_lens.push_back(L);
      decode_lens.push_back(d);
    }
    Batch b = make_batch(seq_lens, decode_lens, *rc::gen::inRange<int64_t>(1, l.block_table_width + 1));
    b.table_stride = b.W + *rc::gen::inRange(0, 6);
    b.table_offset = *rc::gen::inRange(0, 6);
    if (*rc::gen::arbitrary<bool>()) {  // 16-byte aligned source rows
      b.table_stride = (b.table_stride + 3) / 4 * 4;
      b.table_offset = b.table_offset / 4 * 4;
    }
    b.vec_offset = *rc::gen::inRange(0, 4);
    b.table_base = *rc::gen::inRange(0, 1000000);
    if (*rc::gen::inRange(0, 3) == 0) b.padded_rows = *rc::gen::inRange<int64_t>(b.tokens(), l.max_batched_tokens + 1);
    return b;
  });
}

// A guarded device buffer holding host data.
struct Staged {
  std::unique_ptr<GuardedMemory> memory;
  DeviceTensor tensor;
};
Staged stage(Device& device, const std::string& name, const View& v, const std::vector<int32_t>& data) {
  Staged s{device.allocate(name, static_cast<int64_t>(data.size() * 4)), {}};
  s.memory->write(0, data.data(), static_cast<int64_t>(data.size() * 4));
  s.tensor = {s.memory->data(), v};
  return s;
}
std::vector<int32_t> read_all(const GuardedMemory& m) {
  std::vector<int32_t> out(static_cast<size_t>(m.size() / 4));
  m.read(0, out.data(), m.size());
  return out;
}

// What one build left in the builder's buffers (all of them, read back whole) and what it returned.
struct Outcome {
  MetadataResult result;
  std::vector<int32_t> seq_lens, decode_lens, block_table, context_lens;
};

void require_ok(const CompareReport& r, const char* what) {
  if (!r.ok) RC_FAIL(std::string(what) + ": " + r.describe());
}

// Checks the whole flat buffers against oracle::flattened_metadata over all allocated rows (so the
// tail must be zero), the block table's columns past W zero, and the views' exact shapes.
void check_flattened(const Batch& b, const MetadataLimits& l, const oracle::DecodeBatchViews& views, const Outcome& o) {
  const oracle::FlattenedMetadata want = oracle::flattened_metadata(views, l.max_batched_tokens);
  const int64_t rows = l.max_batched_tokens, Wmax = l.block_table_width;
  auto host = [](const std::vector<int32_t>& v, const View& view) {
    return HostTensor(const_cast<int32_t*>(v.data()), view);
  };
  require_ok(compare_exact(host(o.seq_lens, View::contiguous(DType::kI32, {rows})),
                           host(want.seq_lens, View::contiguous(DType::kI32, {rows}))), "seq_lens");
  require_ok(compare_exact(host(o.decode_lens, View::contiguous(DType::kI32, {rows})),
                           host(want.decode_lens, View::contiguous(DType::kI32, {rows}))), "decode_lens");
  require_ok(compare_exact(host(o.block_table, View(DType::kI32, {rows, b.W}, {Wmax, 1})),
                           HostTensor(const_cast<int32_t*>(want.block_table.data()),
                                      View::contiguous(DType::kI32, {rows, b.W}))),
             "block_table");
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t w = b.W; w < Wmax; ++w) RC_ASSERT(o.block_table[static_cast<size_t>(r * Wmax + w)] == 0);
  }
  // Invariant: every length in [0, L_b].
  for (int64_t r = 0; r < b.B(); ++r) {
    for (int32_t t = b.qsl[r]; t < b.qsl[r + 1]; ++t) {
      RC_ASSERT(o.seq_lens[t] >= 0 && o.seq_lens[t] <= b.seq_lens[r]);
    }
  }
  const MetadataResult& m = o.result;
  const int64_t want_rows = b.padded_rows < 0 ? b.tokens() : b.padded_rows;
  RC_ASSERT(m.layout == MetadataLayout::kFlattened);
  RC_ASSERT(m.num_decode_tokens == b.tokens());
  RC_ASSERT(m.rows == want_rows);
  RC_ASSERT(m.seq_lens.view == View::contiguous(DType::kI32, {want_rows}));
  RC_ASSERT(m.decode_lens.view == View::contiguous(DType::kI32, {want_rows}));
  RC_ASSERT(m.block_table.view == View(DType::kI32, {want_rows, b.W}, {Wmax, 1}));
  RC_ASSERT((m.context_lens.base == nullptr));
}

// The native buffer: [B, next_n'] C-contiguous equal to oracle::native_metadata, zero after it.
void check_native(const Batch& b, const MetadataLimits& l, const oracle::DecodeBatchViews& views, const Outcome& o,
                  const DeviceTensor& source_table) {
  const oracle::NativeMetadata want = oracle::native_metadata(views);
  const int64_t n = want.next_n_live, live = b.B() * n;
  const MetadataResult& m = o.result;
  RC_ASSERT(m.layout == MetadataLayout::kNative);
  RC_ASSERT(m.path == MetadataPath::kNative);
  RC_ASSERT(m.next_n_live == n);
  RC_ASSERT(m.context_lens.view == View::contiguous(DType::kI32, {b.B(), n}));
  RC_ASSERT(m.context_lens.view.is_contiguous());
  RC_ASSERT((m.block_table.base == source_table.base && m.block_table.view == source_table.view));
  const View live_view = View::contiguous(DType::kI32, {b.B(), n});
  require_ok(compare_exact(HostTensor(const_cast<int32_t*>(o.context_lens.data()), live_view),
                           HostTensor(const_cast<int32_t*>(want.context_lens.data()), live_view)),
             "context_lens");
  for (int64_t i = live; i < l.max_requests * l.next_n; ++i) RC_ASSERT(o.context_lens[static_cast<size_t>(i)] == 0);
}

// One guarded step: stages the batch's inputs (guarded, nothing may change them), declares as the
// builder's outputs exactly the live region plus the tail it owns for this layout, builds, checks
// every guard and the outputs against the oracle, and returns the buffers.
Outcome run_step(Device& device, MetadataBuilder& builder, const Batch& b, MetadataLayout layout,
                 MetadataPathChoice path = MetadataPathChoice::kAuto) {
  const MetadataLimits& l = builder.limits();
  std::vector<int32_t> seq = vec_storage(b, b.seq_lens), dec = vec_storage(b, b.decode_lens), qsl = vec_storage(b, b.qsl);
  std::vector<int32_t> table = table_storage(b);
  Staged s_seq = stage(device, "seq_lens", vec_view(b, b.B()), seq);
  Staged s_dec = stage(device, "decode_lens", vec_view(b, b.B()), dec);
  Staged s_qsl = stage(device, "query_start_loc", vec_view(b, b.B() + 1), qsl);
  Staged s_table = stage(device, "block_table", table_view(b), table);

  GuardedMemory* flat[] = {&builder.seq_lens_memory(), &builder.decode_lens_memory(), &builder.block_table_memory()};
  GuardedMemory& native = builder.context_lens_memory();
  for (GuardedMemory* m : flat) m->clear_outputs();
  native.clear_outputs();
  if (layout == MetadataLayout::kFlattened) {
    const int64_t rows = std::max(b.tokens(), builder.flat_dirty_rows());
    if (rows > 0) {
      flat[0]->declare_output("seq_lens rows", View::contiguous(DType::kI32, {rows}));
      flat[1]->declare_output("decode_lens rows", View::contiguous(DType::kI32, {rows}));
      flat[2]->declare_output("block_table rows", View::contiguous(DType::kI32, {rows, l.block_table_width}));
    }
  } else {
    const int64_t next_n_live = b.B() == 0 ? 0 : *std::max_element(b.decode_lens.begin(), b.decode_lens.end());
    const int64_t elements = std::max(b.B() * next_n_live, builder.native_dirty_elements());
    if (elements > 0) native.declare_output("context_lens", View::contiguous(DType::kI32, {elements}));
  }
  GuardedMemory* all[] = {s_seq.memory.get(), s_dec.memory.get(), s_qsl.memory.get(), s_table.memory.get(),
                          flat[0], flat[1], flat[2], &native};
  for (GuardedMemory* m : all) m->arm();

  MetadataBatch batch;
  batch.seq_lens = s_seq.tensor;
  batch.decode_lens = s_dec.tensor;
  batch.query_start_loc = s_qsl.tensor;
  batch.block_table = s_table.tensor;
  batch.host_decode_lens = b.decode_lens;
  batch.host_seq_lens = b.seq_lens;
  batch.num_decode_tokens = b.tokens();
  batch.num_padded_tokens = layout == MetadataLayout::kFlattened ? b.padded_rows : -1;
  batch.layout = layout;
  batch.path = path;
  const void* bases[] = {flat[0]->data(), flat[1]->data(), flat[2]->data(), native.data()};
  Outcome o;
  o.result = builder.build(batch);
  device.synchronize();
  // Address stability, checked before any buffer is touched (a replaced one may be freed already).
  const GuardedMemory* now[] = {&builder.seq_lens_memory(), &builder.decode_lens_memory(), &builder.block_table_memory(),
                                &builder.context_lens_memory()};
  for (int i = 0; i < 4; ++i) {
    if (now[i] != all[4 + i] || const_cast<GuardedMemory*>(now[i])->data() != bases[i]) {
      RC_FAIL("the builder replaced a persistent buffer during a step: addresses must never change");
    }
  }
  for (GuardedMemory* m : all) {
    const GuardReport r = m->check();
    if (!r.ok()) RC_FAIL(r.describe());
  }
  o.seq_lens = read_all(*flat[0]);
  o.decode_lens = read_all(*flat[1]);
  o.block_table = read_all(*flat[2]);
  o.context_lens = read_all(native);

  // The views point into the builder's buffers and fit inside them.
  const DeviceTensor* views[] = {&o.result.seq_lens, &o.result.decode_lens, &o.result.block_table, &o.result.context_lens};
  GuardedMemory* owners[] = {flat[0], flat[1], flat[2], &native};
  for (int i = 0; i < 4; ++i) {
    if (views[i]->base == nullptr || (layout == MetadataLayout::kNative && i == 2)) continue;
    RC_ASSERT((views[i]->base == owners[i]->data()));
    RC_ASSERT(views[i]->view.byte_span().end <= owners[i]->size());
  }

  const oracle::DecodeBatchViews oracle_views{HostTensor(seq.data(), vec_view(b, b.B())),
                                              HostTensor(dec.data(), vec_view(b, b.B())),
                                              HostTensor(table.data(), table_view(b)), l.next_n};
  if (layout == MetadataLayout::kFlattened) {
    check_flattened(b, l, oracle_views, o);
    const bool uniform = path == MetadataPathChoice::kAuto && oracle::is_uniform(oracle_views) && b.B() > 0;
    RC_ASSERT(o.result.path == (uniform ? MetadataPath::kUniform : MetadataPath::kGeneral));
  } else {
    check_native(b, l, oracle_views, o, s_table.tensor);
  }
  return o;
}

// The host device with 32- or 64-lane warps (CUDA's or gfx9's) and a shuffled schedule.
simt::host::Options host_options() {
  simt::host::Options o;
  o.warp_size = *rc::gen::element(32, 64);
  o.schedule = simt::host::Schedule::kShuffled;
  o.seed = *rc::gen::arbitrary<uint64_t>();
  return o;
}

void flattened_equals_oracle(Device& device) {
  const MetadataLimits l = *gen_limits();
  MetadataBuilder builder(device, l);
  const Batch b = *gen_batch(l, Mix::kAny);
  const Outcome o = run_step(device, builder, b, MetadataLayout::kFlattened);
  RC_CLASSIFY(o.result.path == MetadataPath::kUniform, "uniform path");
  RC_CLASSIFY(b.W >= 4 && b.table_stride % 4 == 0 && b.table_offset % 4 == 0 && l.block_table_width % 4 == 0,
              "16-byte rows");
}

void native_equals_oracle(Device& device) {
  const MetadataLimits l = *gen_limits();
  MetadataBuilder builder(device, l);
  run_step(device, builder, *gen_batch(l, Mix::kAny), MetadataLayout::kNative);
}

void fast_path_equals_general_path(Device& device) {
  const MetadataLimits l = *gen_limits();
  const Batch b = *gen_batch(l, Mix::kUniform);
  MetadataBuilder fast(device, l), general(device, l);
  const Outcome f = run_step(device, fast, b, MetadataLayout::kFlattened, MetadataPathChoice::kAuto);
  const Outcome g = run_step(device, general, b, MetadataLayout::kFlattened, MetadataPathChoice::kGeneral);
  RC_ASSERT(f.result.path == MetadataPath::kUniform);
  RC_ASSERT(g.result.path == MetadataPath::kGeneral);
  RC_ASSERT(f.seq_lens == g.seq_lens);
  RC_ASSERT(f.decode_lens == g.decode_lens);
  RC_ASSERT(f.block_table == g.block_table);
}

void layouts_agree_per_token(Device& device) {
  const MetadataLimits l = *gen_limits();
  const Batch b = *gen_batch(l, Mix::kAny);
  MetadataBuilder builder(device, l);
  const Outcome flat = run_step(device, builder, b, MetadataLayout::kFlattened);
  const Outcome native = run_step(device, builder, b, MetadataLayout::kNative);
  const int64_t n = native.result.next_n_live, Wmax = l.block_table_width;
  const std::vector<int32_t> table = table_storage(b);
  for (int64_t r = 0; r < b.B(); ++r) {
    for (int32_t t = 0; t < b.decode_lens[r]; ++t) {
      const int64_t row = b.qsl[r] + t;
      RC_ASSERT(flat.seq_lens[row] == native.context_lens[r * n + t]);
      for (int64_t w = 0; w < b.W; ++w) {
        RC_ASSERT(flat.block_table[row * Wmax + w] == table[b.table_offset + r * b.table_stride + w]);
      }
    }
  }
}

// A builder reused over steps whose token counts shrink, in random layouts: every step's buffers
// equal the oracle's (zero tails: nothing stale) and the views keep their addresses.
void shrinking_steps_leave_nothing_stale(Device& device) {
  const MetadataLimits l = *gen_limits();
  std::vector<Batch> steps = *rc::gen::container<std::vector<Batch>>(*rc::gen::inRange(2, 6), gen_batch(l, Mix::kAny));
  std::stable_sort(steps.begin(), steps.end(), [](const Batch& a, const Batch& b) { return a.tokens() > b.tokens(); });
  MetadataBuilder builder(device, l);
  const void* flat_base[3] = {builder.seq_lens_memory().data(), builder.decode_lens_memory().data(),
                              builder.block_table_memory().data()};
  const void* native_base = builder.context_lens_memory().data();
  for (const Batch& b : steps) {
    const MetadataLayout layout = *rc::gen::element(MetadataLayout::kFlattened, MetadataLayout::kNative);
    const Outcome o = run_step(device, builder, b, layout);
    if (layout == MetadataLayout::kFlattened) {
      RC_ASSERT((o.result.seq_lens.data<int32_t>() == flat_base[0]));
      RC_ASSERT((o.result.decode_lens.data<int32_t>() == flat_base[1]));
      RC_ASSERT((o.result.block_table.data<int32_t>() == flat_base[2]));
    } else {
      RC_ASSERT((o.result.context_lens.data<int32_t>() == native_base));
    }
    RC_ASSERT((builder.seq_lens_memory().data() == flat_base[0]));
    RC_ASSERT((builder.context_lens_memory().data() == native_base));
  }
}

// Runs checks written for properties once in a plain test: an RC_ASSERT failure or an error
// becomes a test failure.
template <class F>
void once(const char* what, F&& f) {
  try {
    f();
  } catch (const rc::detail::CaseResult& r) {
    ADD_FAILURE() << what << ": " << r.description;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << e.what();
  }
}

MetadataLimits limits(int64_t tokens, int64_t requests, int32_t next_n, int64_t width) {
  MetadataLimits l;
  l.max_batched_tokens = tokens;
  l.max_requests = requests;
  l.next_n = next_n;
  l.block_table_width = width;
  return l;
}

// Production sizes: 256 requests, next_n 4, 2560 block-table columns (163,840 tokens in pages of 64),
// uniform (fast path, aligned rows) and non-uniform with padding, then a smaller step.
void production_steps(Device& device) {
  MetadataBuilder builder(device, limits(1024, 256, 4, 2560));
  std::vector<int32_t> seq(256), uniform(256, 2), mixed(256);
  for (int i = 0; i < 256; ++i) {
    seq[i] = i % 17 == 0 ? 0 : 1 + (i * 7919) % 163840;
    mixed[i] = seq[i] == 0 ? 0 : 1 + i % 4;
  }
  once("production sizes", [&] {
    Batch u = make_batch(seq, uniform, 2560);
    u.table_stride = 2564;
    EXPECT_EQ(run_step(device, builder, u, MetadataLayout::kFlattened).result.path, MetadataPath::kUniform);
    Batch m = make_batch(seq, mixed, 2560);
    m.table_stride = 2561;
    m.table_offset = 3;
    EXPECT_EQ(run_step(device, builder, m, MetadataLayout::kFlattened).result.path, MetadataPath::kGeneral);
    run_step(device, builder, m, MetadataLayout::kNative);
    run_step(device, builder, make_batch({100, 200}, {4, 4}, 2000), MetadataLayout::kFlattened);
  });
}

RC_GTEST_PROP(DecodeMetadata, FlattenedEqualsOracle, ()) {
  const simt::host::ScopedOptions scope(host_options());
  flattened_equals_oracle(*make_device(Backend::kHost));
}

RC_GTEST_PROP(DecodeMetadata, NativeEqualsOracleAndIsContiguous, ()) {
  const simt::host::ScopedOptions scope(host_options());
  native_equals_oracle(*make_device(Backend::kHost));
}

RC_GTEST_PROP(DecodeMetadata, UniformFastPathIsBitIdenticalToGeneralPath, ()) {
  const simt::host::ScopedOptions scope(host_options());
  fast_path_equals_general_path(*make_device(Backend::kHost));
}

RC_GTEST_PROP(DecodeMetadata, FlattenedAndNativeGiveTheSamePerTokenContextAndBlockRow, ()) {
  layouts_agree_per_token(*make_device(Backend::kHost));
}

RC_GTEST_PROP(DecodeMetadata, ShrinkingStepsLeaveNoStaleRowsAndKeepAddresses, ()) {
  const simt::host::ScopedOptions scope(host_options());
  shrinking_steps_leave_nothing_stale(*make_device(Backend::kHost));
}

TEST(DecodeMetadata, OnCudaWhenAGpuIsPresent) {
  std::string why;
  if (!device_usable(Backend::kCuda, &why)) GTEST_SKIP() << "skipped: no GPU (" << why << ")";
  const auto device = make_device(Backend::kCuda);
  EXPECT_TRUE(rc::check("flattened == oracle on cuda", [&] { flattened_equals_oracle(*device); }));
  EXPECT_TRUE(rc::check("native == oracle on cuda", [&] { native_equals_oracle(*device); }));
  EXPECT_TRUE(rc::check("fast path == general path on cuda", [&] { fast_path_equals_general_path(*device); }));
  EXPECT_TRUE(rc::check("layouts agree on cuda", [&] { layouts_agree_per_token(*device); }));
  EXPECT_TRUE(rc::check("shrinking steps on cuda", [&] { shrinking_steps_leave_nothing_stale(*device); }));
  production_steps(*device);
}

// ---- plain cases -------------------------------------------------------------------------------

TEST(DecodeMetadata, HandWorkedBatch) {
  // seq_lens [10, 7, 12, 0], decode_lens [3, 1, 4, 0]: ctx = max(0, L - d + t + 1).
  const auto device = make_device(Backend::kHost);
  MetadataBuilder builder(*device, limits(12, 4, 4, 3));
  const Batch b = make_batch({10, 7, 12, 0}, {3, 1, 4, 0}, 3);
  once("hand-worked", [&] {
    const Outcome flat = run_step(*device, builder, b, MetadataLayout::kFlattened);
    EXPECT_EQ(flat.result.path, MetadataPath::kGeneral);
    EXPECT_EQ(std::vector<int32_t>(flat.seq_lens.begin(), flat.seq_lens.begin() + 8),
              (std::vector<int32_t>{8, 9, 10, 7, 9, 10, 11, 12}));
    EXPECT_EQ(std::vector<int32_t>(flat.decode_lens.begin(), flat.decode_lens.begin() + 9),
              (std::vector<int32_t>{1, 1, 1, 1, 1, 1, 1, 1, 0}));
    const std::vector<int32_t> rows{0, 0, 0, 1, 2, 2, 2, 2};  // each token's request
    for (size_t r = 0; r < rows.size(); ++r) EXPECT_EQ(flat.block_table[r * 3 + 2], 1000 * rows[r] + 2) << r;
    const Outcome native = run_step(*device, builder, b, MetadataLayout::kNative);
    EXPECT_EQ(std::vector<int32_t>(native.context_lens.begin(), native.context_lens.begin() + 16),
              (std::vector<int32_t>{8, 9, 10, 0, 7, 0, 0, 0, 9, 10, 11, 12, 0, 0, 0, 0}));
  });
}

TEST(DecodeMetadata, FastPathOnlyForEqualNonZeroDecodeLengths) {
  const auto device = make_device(Backend::kHost);
  MetadataBuilder builder(*device, limits(16, 4, 4, 2));
  once("path choice", [&] {
    EXPECT_EQ(run_step(*device, builder, make_batch({5, 6}, {2, 2}, 2), MetadataLayout::kFlattened).result.path,
              MetadataPath::kUniform);
    // Non-uniform with max > 1 (vLLM #39458 took the fast kernel here), and uniform plus padding.
    EXPECT_EQ(run_step(*device, builder, make_batch({5, 6}, {1, 2}, 2), MetadataLayout::kFlattened).result.path,
              MetadataPath::kGeneral);
    EXPECT_EQ(run_step(*device, builder, make_batch({5, 6, 0}, {2, 2, 0}, 2), MetadataLayout::kFlattened).result.path,
              MetadataPath::kGeneral);
  });
}

TEST(DecodeMetadata, GraphPaddingRowsAreZeroAfterALargerStep) {
  const auto device = make_device(Backend::kHost);
  MetadataBuilder builder(*device, limits(16, 4, 4, 2));
  once("graph padding", [&] {
    run_step(*device, builder, make_batch({9, 9, 9, 9}, {4, 4, 4, 4}, 2), MetadataLayout::kFlattened);
    Batch small = make_batch({3, 0}, {2, 0}, 2);
    small.padded_rows = 8;  // the consumer reads 8 rows; rows 2..7 held the last step's tokens
    const Outcome o = run_step(*device, builder, small, MetadataLayout::kFlattened);
    EXPECT_EQ(o.result.rows, 8);
    for (int r = 2; r < 16; ++r) EXPECT_EQ(o.seq_lens[r], 0) << r;
    EXPECT_EQ(builder.flat_dirty_rows(), 2);
  });
}

TEST(DecodeMetadata, ConstructionZeroesEveryBuffer) {
  const auto device = make_device(Backend::kHost);
  MetadataBuilder builder(*device, limits(7, 3, 2, 5));
  for (GuardedMemory* m : {&builder.seq_lens_memory(), &builder.decode_lens_memory(), &builder.block_table_memory(),
                           &builder.context_lens_memory()}) {
    for (int32_t x : read_all(*m)) ASSERT_EQ(x, 0) << m->name();
  }
  EXPECT_EQ(builder.flat_dirty_rows(), 0);
  EXPECT_EQ(builder.native_dirty_elements(), 0);
}

// ---- refused input -----------------------------------------------------------------------------

// A valid host batch whose fields an error test breaks one at a time.
struct HostBatch {
  std::vector<int32_t> seq{10, 7}, dec{3, 1}, qsl{0, 3, 4}, table{1, 2, 3, 4, 5, 6, 7, 8};
  MetadataBatch batch() {
    MetadataBatch b;
    b.seq_lens = {seq.data(), View::contiguous(DType::kI32, {2})};
    b.decode_lens = {dec.data(), View::contiguous(DType::kI32, {2})};
    b.query_start_loc = {qsl.data(), View::contiguous(DType::kI32, {3})};
    b.block_table = {table.data(), View::contiguous(DType::kI32, {2, 4})};
    b.host_decode_lens = dec;
    b.host_seq_lens = seq;
    return b;
  }
};

TEST(DecodeMetadata, ProductionSizes) { production_steps(*make_device(Backend::kHost)); }

TEST(DecodeMetadata, BadInputIsRefusedWithOneLineBeforeAnyLaunch) {
  const auto device = make_device(Backend::kHost);
  MetadataBuilder builder(*device, limits(6, 2, 4, 4));
  HostBatch h;
  ASSERT_NO_THROW(builder.build(h.batch()));
  GuardedMemory* buffers[] = {&builder.seq_lens_memory(), &builder.decode_lens_memory(), &builder.block_table_memory(),
                              &builder.context_lens_memory()};
  const auto refused = [&](MetadataBatch b, const char* what) {
    for (GuardedMemory* m : buffers) {
      m->clear_outputs();
      m->arm();
    }
    const int64_t dirty = builder.flat_dirty_rows();
    try {
      builder.build(b);
      ADD_FAILURE() << what << ": accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << what << ": " << e.what();
    }
    for (GuardedMemory* m : buffers) EXPECT_TRUE(m->check().ok()) << what << ": " << m->check().describe();
    EXPECT_EQ(builder.flat_dirty_rows(), dirty) << what;
  };
  std::vector<int32_t> wide(16, 1);
  using Break = std::function<void(MetadataBatch&)>;
  const std::vector<std::pair<const char*, Break>> cases = {
      {"B > max_requests",
       [&](MetadataBatch& b) {
         b.seq_lens.view = b.decode_lens.view = View::contiguous(DType::kI32, {3});
         b.query_start_loc.view = View::contiguous(DType::kI32, {4});
         b.block_table = {wide.data(), View::contiguous(DType::kI32, {3, 4})};
         b.host_decode_lens = b.host_seq_lens = {1, 1, 1};
       }},
      {"tokens > max_batched_tokens", [](MetadataBatch& b) { b.host_decode_lens = {4, 4}; }},
      {"padded tokens > max_batched_tokens", [](MetadataBatch& b) { b.num_padded_tokens = 7; }},
      {"padded tokens < num_decode_tokens", [](MetadataBatch& b) { b.num_padded_tokens = 3; }},
      {"padded tokens in the native layout",
       [](MetadataBatch& b) { b.layout = MetadataLayout::kNative, b.num_padded_tokens = 6; }},
      {"W > configured width",
       [&](MetadataBatch& b) { b.block_table = {wide.data(), View::contiguous(DType::kI32, {2, 5})}; }},
      {"decode_len > next_n", [](MetadataBatch& b) { b.host_decode_lens = {5, 0}; }},
      {"negative decode_len", [](MetadataBatch& b) { b.host_decode_lens = {-1, 5}; }},
      {"non-unit column stride", [](MetadataBatch& b) { b.block_table.view = View(DType::kI32, {2, 2}, {4, 2}); }},
      {"negative seq_len", [](MetadataBatch& b) { b.host_seq_lens = {10, -1}; }},
      {"num_decode_tokens != sum of decode_lens", [](MetadataBatch& b) { b.num_decode_tokens = 5; }},
      {"host decode_lens of the wrong length", [](MetadataBatch& b) { b.host_decode_lens = {3}; }},
      {"host seq_lens of the wrong length", [](MetadataBatch& b) { b.host_seq_lens = {3, 4, 5}; }},
      {"decode_lens view of the wrong length",
       [](MetadataBatch& b) { b.decode_lens.view = View::contiguous(DType::kI32, {1}); }},
      {"query_start_loc of the wrong length",
       [](MetadataBatch& b) { b.query_start_loc.view = View::contiguous(DType::kI32, {2}); }},
      {"flattened without query_start_loc", [](MetadataBatch& b) { b.query_start_loc = {}; }},
      {"block_table rows != B", [](MetadataBatch& b) { b.block_table.view = View::contiguous(DType::kI32, {1, 4}); }},
      {"fp32 seq_lens", [](MetadataBatch& b) { b.seq_lens.view = View::contiguous(DType::kF32, {2}); }},
      {"strided seq_lens", [](MetadataBatch& b) { b.seq_lens.view = View(DType::kI32, {2}, {2}); }},
      {"int64 block_table", [](MetadataBatch& b) { b.block_table.view = View::contiguous(DType::kI64, {2, 2}); }},
  };
  for (const auto& [what, breaks] : cases) {
    MetadataBatch b = h.batch();
    breaks(b);
    refused(b, what);
  }
  // A refused step leaves the builder usable.
  EXPECT_EQ(builder.build(h.batch()).num_decode_tokens, 4);
  EXPECT_THROW(MetadataBuilder(*device, limits(0, 2, 4, 4)), Error);
  EXPECT_THROW(MetadataBuilder(*device, limits(4, 2, 0, 4)), Error);
  EXPECT_THROW(MetadataBuilder(*device, limits(4, 2, 4, 0)), Error);
}

}  // namespace
}  // namespace mlacheck::kernels
