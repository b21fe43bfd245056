// A C library the PyTorch-side benchmarks load with ctypes (indexer_bench.py, mla_bench.py): it runs
// mlacheck's production kernels, through their checked glue, on device memory the caller owns (torch
// tensors' data pointers), and times them with CUDA events, so both sides of a comparison read the
// same bytes in the same process.
//
// Each timing function makes one warm-up call, then times `iters` calls one by one on the cuda
// device's stream and returns the median milliseconds per call; on error it returns a negative
// number and writes one line into err.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/device.h"
#include "kernels/mla_decode_glue.h"
#include "kernels/mqa_logits_glue.h"
#include "kernels/sparse_mla_glue.h"
#include "kernels/topk_glue.h"

namespace {

using namespace mlacheck;
using namespace mlacheck::kernels;

Device& cuda_device() {
  static std::unique_ptr<Device> device = make_device(Backend::kCuda);
  return *device;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

double median_ms(int iters, const std::function<void()>& launch) {
  Device& device = cuda_device();
  const auto stream = static_cast<cudaStream_t>(device.stream());
  launch();
  device.synchronize();
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<float> ms;
  for (int i = 0; i < std::max(iters, 1); ++i) {
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    launch();
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float t = 0;
    check(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  device.synchronize();
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Runs body; turns any exception into -1 and one line in err.
double guarded(char* err, int err_len, const std::function<double()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    if (err != nullptr && err_len > 0) std::snprintf(err, static_cast<size_t>(err_len), "%s", e.what());
    return -1;
  }
}

DeviceTensor tensor(const void* p, const View& v) { return {const_cast<void*>(p), v}; }

}  // namespace

extern "C" {

// The device's name, or "" without a usable GPU.
const char* mlacheck_bench_device_name() {
  static std::string name;
  std::string why;
  if (!device_usable(Backend::kCuda, &why)) return "";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) name = prop.name;
  return name.c_str();
}

// docs/ops.md 2.1 on q fp8 [B, next_n, H, D], the block-flat cache u8 [num_blocks, block_stride],
// weights fp32 [B * next_n, H], context_lens int32 [B], block_table int32 [B, W] and logits fp32
// [B * next_n, max_context_len] with row stride logits_stride; unclean unless clean != 0.
double mlacheck_bench_paged_logits(const void* q, int64_t B, int64_t next_n, int64_t H, int64_t D, const void* kv,
                                   int64_t num_blocks, int64_t block_stride, int64_t block_size, const void* weights,
                                   const void* context_lens, const void* block_table, int64_t W,
                                   int64_t max_context_len, void* logits, int64_t logits_stride, int clean, int iters,
                                   char* err, int err_len) {
  return guarded(err, err_len, [&] {
    PagedMqaLogitsArgs a;
    a.q = tensor(q, View::contiguous(DType::kFP8E4M3, {B, next_n, H, D}));
    a.kv_blocks = tensor(kv, View(DType::kU8, {num_blocks, block_stride}, {block_stride, 1}));
    a.block_size = block_size;
    a.weights = tensor(weights, View::contiguous(DType::kF32, {B * next_n, H}));
    a.context_lens = tensor(context_lens, View::contiguous(DType::kI32, {B}));
    a.block_table = tensor(block_table, View::contiguous(DType::kI32, {B, W}));
    a.max_context_len = max_context_len;
    a.logits = tensor(logits, View::padded_rows(DType::kF32, {B * next_n, max_context_len}, logits_stride));
    a.mode = clean != 0 ? LogitsMode::kClean : LogitsMode::kUnclean;
    return median_ms(iters, [&] { paged_mqa_logits(cuda_device(), a); });
  });
}

int64_t mlacheck_bench_topk_workspace_bytes(int64_t rows, int64_t k, int64_t cols) {
  return topk_workspace_bytes(rows, k, cols);
}

// docs/ops.md 3, decode: logits fp32 [rows, cols] with row stride `stride`, seq_lens int32 [B] (rows =
// B * next_n), out int32 [rows, k], workspace of workspace_bytes bytes.
double mlacheck_bench_topk_decode(const void* logits, int64_t rows, int64_t cols, int64_t stride, const void* seq_lens,
                                  int64_t B, int64_t next_n, int64_t k, void* out, void* workspace,
                                  int64_t workspace_bytes, int iters, char* err, int err_len) {
  return guarded(err, err_len, [&] {
    const DeviceTensor l = tensor(logits, View::padded_rows(DType::kF32, {rows, cols}, stride));
    const DeviceTensor s = tensor(seq_lens, View::contiguous(DType::kI32, {B}));
    const DeviceTensor o = tensor(out, View::contiguous(DType::kI32, {rows, k}));
    const DeviceTensor w = tensor(workspace, View::contiguous(DType::kU8, {workspace_bytes}));
    return median_ms(iters, [&] { topk_per_row_decode(cuda_device(), l, next_n, s, k, o, w); });
  });
}

// docs/ops.md 4 on q bf16 [b, s_q, h, 576], kv u8 [num_blocks, page, 656] (contiguous), indices int32
// [b, s_q, topk]; out bf16 [b, s_q, h, 512], lse fp32 [b, h, s_q]. No topk_length, no sink.
double mlacheck_bench_sparse_mla(const void* q, int64_t b, int64_t s_q, int64_t h, const void* kv, int64_t num_blocks,
                                 int64_t page, const void* indices, int64_t topk, double softmax_scale, void* out,
                                 void* lse, int iters, char* err, int err_len) {
  return guarded(err, err_len, [&] {
    SparseMlaArgs a;
    a.q = tensor(q, View::contiguous(DType::kBF16, {b, s_q, h, 576}));
    a.kv_cache = tensor(kv, View::contiguous(DType::kU8, {num_blocks, page, 656}));
    a.indices = tensor(indices, View::contiguous(DType::kI32, {b, s_q, topk}));
    a.softmax_scale = softmax_scale;
    a.out = tensor(out, View::contiguous(DType::kBF16, {b, s_q, h, 512}));
    a.lse = tensor(lse, View::contiguous(DType::kF32, {b, h, s_q}));
    return median_ms(iters, [&] { sparse_mla_decode(cuda_device(), a); });
  });
}

// docs/ops.md 5 on q [B, q_len, H, 576] (bf16, or fp8 when q_fp8), kv [num_blocks, page, 576] (bf16, or
// fp8 when kv_fp8, contiguous), block_table int32 [B, W], seq_lens int32 [B]; o bf16, lse fp32; the
// workspace holds num_splits (0: the heuristic for max_seq_len) splits. *splits_used gets the count.
double mlacheck_bench_mla_decode(const void* q, int q_fp8, int64_t B, int64_t q_len, int64_t H, const void* kv,
                                 int kv_fp8, int64_t num_blocks, int64_t page, const void* block_table, int64_t W,
                                 const void* seq_lens, int64_t max_seq_len, double base_scale, double q_scale,
                                 double k_scale, int64_t num_splits, void* workspace, int64_t workspace_bytes, void* o,
                                 void* lse, int64_t* splits_used, int iters, char* err, int err_len) {
  return guarded(err, err_len, [&] {
    MlaDecodeArgs a;
    a.q = tensor(q, View::contiguous(q_fp8 ? DType::kFP8E4M3 : DType::kBF16, {B, q_len, H, 576}));
    a.kv_cache = tensor(kv, View::contiguous(kv_fp8 ? DType::kFP8E4M3 : DType::kBF16, {num_blocks, page, 576}));
    a.block_table = tensor(block_table, View::contiguous(DType::kI32, {B, W}));
    a.seq_lens = tensor(seq_lens, View::contiguous(DType::kI32, {B}));
    a.base_scale = base_scale;
    a.q_scale = q_scale;
    a.k_scale = k_scale;
    a.num_splits = num_splits > 0 ? num_splits
                                  : mla_decode_num_splits(B, q_len, H, max_seq_len, cuda_device().multiprocessors());
    if (splits_used != nullptr) *splits_used = a.num_splits;
    a.workspace = tensor(workspace, View::contiguous(DType::kF32, {workspace_bytes / 4}));
    a.o = tensor(o, View::contiguous(DType::kBF16, {B, q_len, H, 512}));
    a.lse = tensor(lse, View::contiguous(DType::kF32, {B, q_len, H}));
    return median_ms(iters, [&] { mla_decode(cuda_device(), a); });
  });
}

}  // extern "C"
