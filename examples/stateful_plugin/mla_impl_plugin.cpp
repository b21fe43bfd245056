// An example stateful plugin: the dense MLA decode impl an engine holds (docs/ops.md 5), written as a
// kernel engineer would against include/mlacheck/plugin.h alone, registered as
// mla_decode_impl@example. It refuses non-uniform query lengths, takes its scales from every eager
// call, and captures graphs whose scales live in a buffer of its own (asked of mlacheck's allocator,
// one slot per live graph) and whose lengths are read from the graph buffers at every replay.
// Built with MLA_PLUGIN_BUG=1 it is its twin, mla_decode_impl@example_buggy, which bounds a graph's
// keys by the longest sequence in the buffers at capture (as if the warm-up's lengths were the
// graph's): a replay after the lengths grow attends to too few keys, and mlacheck must catch it.
//
//   mlacheck check --plugin ./libmlacheck_mla_impl_plugin.so
//   mlacheck check --plugin ./libmlacheck_mla_impl_plugin_buggy.so   # FAIL: replay, with the case
#include <algorithm>
#include <cstdio>
#include <new>
#include <vector>

#include "mla_rows.h"
#include "mlacheck/plugin.h"
#include "plugin_error.h"

namespace example_mla {
namespace {

#if MLA_PLUGIN_BUG
constexpr const char* kName = "example_buggy";
constexpr const char* kSummary = "example impl's twin: a graph's key bound fixed from the lengths at capture";
#else
constexpr const char* kName = "example";
constexpr const char* kSummary = "example impl: a warp per row, scales per call, graph scales in its own buffer";
#endif
constexpr int kMaxGraphs = 64;  // live graphs, each with a slot of two scales

struct Graph {
  MlaJob job;
  int slot;
  void* exec;  // cuda: the instantiated graph; host: NULL (a replay runs the job again)
};

struct Impl {
  mlacheck_mla_decode_impl_config config;
  bool cuda;
  float* scale_slots;  // [kMaxGraphs][2], from mlacheck's allocator
  bool slot_used[kMaxGraphs];
};

using example_plugins::fail;

// The job of one decode over these tensors, or a refusal.
int make_job(const Impl& s, const mlacheck_tensor& q, const mlacheck_tensor& kv, const mlacheck_tensor& table,
             const mlacheck_tensor& seq_lens, const mlacheck_tensor& o, const mlacheck_tensor& lse, MlaJob& j,
             char* error, size_t error_size) {
  const mlacheck_mla_decode_impl_config& c = s.config;
  if (q.rank != 4 || q.shape[2] != c.heads || q.shape[3] != kDim) {
    return fail(error, error_size, "q must be [B, q_len, %lld, 576], got rank %d", (long long)c.heads, q.rank);
  }
  if (q.dtype != MLACHECK_BF16 && q.dtype != MLACHECK_FP8_E4M3) return fail(error, error_size, "q must be bf16 or fp8 e4m3");
  const int64_t B = q.shape[0], q_len = q.shape[1];
  if (B > c.max_batch) return fail(error, error_size, "batch %lld past max_batch %lld", (long long)B, (long long)c.max_batch);
  if (q_len < 1 || q_len > c.max_q_len) return fail(error, error_size, "q_len %lld outside [1, %lld]", (long long)q_len, (long long)c.max_q_len);
  if (kv.rank != 3 || kv.shape[2] != kDim || (kv.dtype != MLACHECK_BF16 && kv.dtype != MLACHECK_FP8_E4M3)) {
    return fail(error, error_size, "kv_cache must be bf16 or fp8 [blocks, page, 576], got rank %d dtype %d", kv.rank, kv.dtype);
  }
  if (table.rank != 2 || table.shape[0] != B || (table.shape[1] > 1 && table.strides[1] != 1)) {
    return fail(error, error_size, "block_table must be int32 [%lld, W] with unit column stride", (long long)B);
  }
  if (seq_lens.rank != 1 || seq_lens.shape[0] != B) return fail(error, error_size, "seq_lens must be int32 [%lld]", (long long)B);
  if (o.rank != 4 || o.shape[0] != B || o.shape[1] != q_len || o.shape[2] != c.heads || o.shape[3] != kLatent) {
    return fail(error, error_size, "o must be bf16 [%lld, %lld, %lld, 512]", (long long)B, (long long)q_len, (long long)c.heads);
  }
  if (lse.rank != 3 || lse.shape[0] != B || lse.shape[1] != q_len || lse.shape[2] != c.heads) {
    return fail(error, error_size, "lse must be fp32 [%lld, %lld, %lld]", (long long)B, (long long)q_len, (long long)c.heads);
  }
  j = MlaJob{};
  j.q = static_cast<const uint8_t*>(q.data), j.q_fp8 = q.dtype == MLACHECK_FP8_E4M3;
  j.kv = static_cast<const uint8_t*>(kv.data), j.kv_fp8 = kv.dtype == MLACHECK_FP8_E4M3;
  for (int d = 0; d < 4; ++d) j.q_stride[d] = q.strides[d], j.o_stride[d] = o.strides[d];
  for (int d = 0; d < 3; ++d) j.kv_stride[d] = kv.strides[d], j.lse_stride[d] = lse.strides[d];
  j.block_table = static_cast<const int32_t*>(table.data), j.table_stride = table.strides[0];
  j.seq_lens = static_cast<const int32_t*>(seq_lens.data);
  j.B = B, j.q_len = q_len, j.H = c.heads, j.page = kv.shape[1];
  j.max_len = table.shape[1] * kv.shape[1];
  j.o = static_cast<uint16_t*>(o.data), j.lse = static_cast<float*>(lse.data);
  return 0;
}

int run_job(const Impl& s, const MlaJob& j, const mlacheck_device* device, char* error, size_t error_size) {
  if (!s.cuda) {
    for (int64_t r = 0; r < j.B * j.q_len * j.H; ++r) mla_row(j, r);
    return 0;
  }
  if (const int rc = launch_rows(j, device->stream)) return fail(error, error_size, "CUDA error %d launching the rows kernel", rc);
  return 0;
}

int forward(void* state, const mlacheck_device* device, const mlacheck_mla_decode_call* call, int64_t* num_splits,
            char* error, size_t error_size) {
  const Impl& s = *static_cast<Impl*>(state);
  MlaJob j;
  if (make_job(s, call->q, call->kv_cache, call->block_table, call->seq_lens, call->o, call->lse, j, error, error_size)) return 1;
  // Every request must bring q_len query tokens: a non-uniform batch is refused, never reshaped.
  if (call->host_query_lens != nullptr) {
    if (call->host_query_lens_count != j.B) {
      return fail(error, error_size, "%lld query lengths for a q of %lld requests", (long long)call->host_query_lens_count, (long long)j.B);
    }
    for (int64_t b = 0; b < j.B; ++b) {
      if (call->host_query_lens[b] != j.q_len) {
        return fail(error, error_size, "non-uniform batch: request %lld has %d query tokens, q has q_len %lld (split or pad the batch)",
                    (long long)b, call->host_query_lens[b], (long long)j.q_len);
      }
    }
  }
  j.softmax_scale = static_cast<float>(call->base_scale * call->q_scale * call->k_scale);
  j.out_scale = static_cast<float>(call->k_scale);
  *num_splits = 1;
  return run_job(s, j, device, error, error_size);
}

int capture(void* state, const mlacheck_device* device, const mlacheck_mla_decode_capture* c, void** out, char* error,
            size_t error_size) {
  Impl& s = *static_cast<Impl*>(state);
  MlaJob j;
  if (make_job(s, c->q, c->kv_cache, c->block_table, c->seq_lens, c->o, c->lse, j, error, error_size)) return 1;
  int slot = 0;
  while (slot < kMaxGraphs && s.slot_used[slot]) ++slot;
  if (slot == kMaxGraphs) return fail(error, error_size, "more than %d live graphs", kMaxGraphs);
  const float scales[2] = {static_cast<float>(c->base_scale * c->q_scale * c->k_scale), static_cast<float>(c->k_scale)};
  float* dst = s.scale_slots + 2 * slot;
  if (s.cuda) {
    if (const int rc = copy_to_device(dst, scales, sizeof scales)) return fail(error, error_size, "CUDA error %d writing the scales of graph slot %d", rc, slot);
  } else {
    dst[0] = scales[0], dst[1] = scales[1];
  }
  j.scales = dst;
#if MLA_PLUGIN_BUG
  // The bug: the key bound taken from the lengths the buffers hold at capture.
  std::vector<int32_t> lens(static_cast<size_t>(j.B));
  if (s.cuda) {
    if (const int rc = copy_to_host(lens.data(), j.seq_lens, 4 * j.B)) return fail(error, error_size, "CUDA error %d reading the lengths", rc);
  } else {
    std::copy(j.seq_lens, j.seq_lens + j.B, lens.begin());
  }
  j.max_len = 0;
  for (int32_t l : lens) j.max_len = std::max<int64_t>(j.max_len, l);
#endif
  Graph* g = new (std::nothrow) Graph{j, slot, nullptr};
  if (g == nullptr) return mlacheck_error(error, error_size, "out of memory");
  if (s.cuda) {
    if (const int rc = capture_rows(j, device->stream, &g->exec)) {
      delete g;
      return fail(error, error_size, "CUDA error %d capturing the rows kernel", rc);
    }
  }
  s.slot_used[slot] = true;
  *out = g;
  return 0;
}

int replay(void* state, const mlacheck_device* device, void* graph, char* error, size_t error_size) {
  const Impl& s = *static_cast<Impl*>(state);
  const Graph& g = *static_cast<Graph*>(graph);
  if (!s.cuda) return run_job(s, g.job, device, error, error_size);
  if (const int rc = replay_graph(g.exec, device->stream)) return fail(error, error_size, "CUDA error %d launching the graph", rc);
  return 0;
}

void release(void* state, void* graph) {
  Impl& s = *static_cast<Impl*>(state);
  Graph* g = static_cast<Graph*>(graph);
  if (g == nullptr) return;
  if (g->exec != nullptr) destroy_graph(g->exec);
  s.slot_used[g->slot] = false;
  delete g;
}

void destroy(void* state) { delete static_cast<Impl*>(state); }

int make(const mlacheck_device* device, const mlacheck_mla_decode_impl_config* config, const mlacheck_tensor* workspace,
         const mlacheck_allocator* allocator, mlacheck_mla_decode_impl* out, char* error, size_t error_size) {
  (void)workspace;  // one pass per row: no split scratch
#if !MLA_PLUGIN_CUDA
  if (device->backend != MLACHECK_BACKEND_HOST) return mlacheck_error(error, error_size, "built without CUDA: host only");
#endif
  if (device->backend != MLACHECK_BACKEND_HOST && device->backend != MLACHECK_BACKEND_CUDA) {
    return mlacheck_error(error, error_size, "host and cuda only");
  }
  Impl* s = new (std::nothrow) Impl{*config, device->backend == MLACHECK_BACKEND_CUDA, nullptr, {}};
  if (s == nullptr) return mlacheck_error(error, error_size, "out of memory");
  void* slots = nullptr;
  if (allocator->allocate(allocator->context, "graph scales", 2 * kMaxGraphs * sizeof(float), &slots, error, error_size) != 0) {
    delete s;
    return 1;
  }
  s->scale_slots = static_cast<float*>(slots);
  *out = mlacheck_mla_decode_impl{s, &forward, &capture, &replay, &release, &destroy};
  return 0;
}

#if !MLA_PLUGIN_CUDA
}  // namespace
int launch_rows(const MlaJob&, void*) { return 1; }
int capture_rows(const MlaJob&, void*, void**) { return 1; }
int replay_graph(void*, void*) { return 1; }
void destroy_graph(void*) {}
int copy_to_device(void*, const void*, int64_t) { return 1; }
int copy_to_host(void*, const void*, int64_t) { return 1; }
namespace {
#endif

int register_impls(const mlacheck_plugin_api* api) {
  return MLACHECK_ADD_MLA_DECODE_IMPL(api, kName, kSummary, make);
}

}  // namespace
}  // namespace example_mla

MLACHECK_DEFINE_PLUGIN("example_mla_impl", example_mla::register_impls)
