// GPU test of simt.h: the backend test kernels, compiled by nvcc from the source the host backend
// runs, against the same plain loops, with every buffer a device guarded buffer; then the host
// backend's results for the same inputs, bit for bit; then graph capture and replay of launches.
// Prints a line per check; exits 0 on pass, 1 on failure, 77 without a GPU.
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/backend/cuda_guarded_buffer.h"
#include "core/backend/cuda_runtime.h"
#include "tests/support/gpu_test.h"
#include "tests/core/backend/simt_test_kernels.h"

namespace stk = mlacheck::simt_test_kernels;

// The host backend's block_sum from the same source (simt_test_kernels_host), for the bit comparison.
namespace mlacheck::simt::host {
class Stream;
}
namespace mlacheck::simt_test_kernels::host {
void block_sum(const float* in, float* out, int rows, int cols, int threads, mlacheck::simt::host::Stream* stream);
}

namespace {

int failures = 0;

void report(const char* name, const std::string& verdict) {
  std::printf("%-58s %s\n", name, verdict.empty() ? "ok" : ("FAILED: " + verdict).c_str());
  if (!verdict.empty()) ++failures;
}

std::unique_ptr<mlacheck::GuardedMemory> device_buffer(const std::string& name, int64_t bytes) {
  return std::make_unique<mlacheck::DeviceGuardedBuffer>(name, bytes);
}

// Graph capture of two block_sum launches, replayed after the inputs change in place.
std::string graph_replay() {
  const int rows = 4, cols = 1000;
  std::vector<float> in(rows * cols, 1.0f), out(rows, 0.0f);
  mlacheck::cuda::DeviceAllocation d_in(in.size() * sizeof(float)), d_out(rows * sizeof(float));
  mlacheck::cuda::copy_to_device(d_in.get(), in.data(), in.size() * sizeof(float));
  mlacheck::cuda::memset_device(d_out.get(), 0, rows * sizeof(float));
  mlacheck::cuda::Stream stream;
  mlacheck::cuda::Graph graph = mlacheck::cuda::Graph::capture(stream, [&](cudaStream_t s) {
    stk::cuda::block_sum(d_in.as<float>(), d_out.as<float>(), 2, cols, 256, s);
    stk::cuda::block_sum(d_in.as<float>() + 2 * cols, d_out.as<float>() + 2, 2, cols, 128, s);
  });
  if (graph.node_count() != 2) return "captured " + std::to_string(graph.node_count()) + " nodes, not 2";
  mlacheck::cuda::copy_to_host(out.data(), d_out.get(), rows * sizeof(float));
  if (out != std::vector<float>(rows, 0.0f)) return "a captured launch ran before replay";
  for (float value : {1.0f, 3.0f}) {
    std::fill(in.begin(), in.end(), value);
    mlacheck::cuda::copy_to_device(d_in.get(), in.data(), in.size() * sizeof(float));
    graph.replay(stream);
    stream.synchronize();
    mlacheck::cuda::copy_to_host(out.data(), d_out.get(), rows * sizeof(float));
    for (float o : out) {
      if (o != value * cols) return "replay gave " + std::to_string(o) + ", want " + std::to_string(value * cols);
    }
  }
  return "";
}

// Random floats summed in a block: the butterfly order is in simt.h, so the host backend and the
// GPU must agree bit for bit, not only within a tolerance.
std::string same_bits_as_host() {
  const int rows = 16, cols = 3000;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> in(rows * cols), host_out(rows), gpu_out(rows);
  for (float& x : in) x = u(rng);
  stk::host::block_sum(in.data(), host_out.data(), rows, cols, 256, nullptr);
  mlacheck::cuda::DeviceAllocation d_in(in.size() * sizeof(float)), d_out(rows * sizeof(float));
  mlacheck::cuda::copy_to_device(d_in.get(), in.data(), in.size() * sizeof(float));
  stk::cuda::block_sum(d_in.as<float>(), d_out.as<float>(), rows, cols, 256, nullptr);
  mlacheck::cuda::copy_to_host(gpu_out.data(), d_out.get(), rows * sizeof(float));
  for (int r = 0; r < rows; ++r) {
    if (std::memcmp(&host_out[r], &gpu_out[r], sizeof(float)) != 0) {
      char line[160];
      std::snprintf(line, sizeof line, "row %d: host %.9g, GPU %.9g", r, host_out[r], gpu_out[r]);
      return line;
    }
  }
  return "";
}

}  // namespace

int main() {
  const mlacheck::cuda::DeviceInfo info = mlacheck::gpu_test::require_gpu();
  std::printf("simt kernels on %s (%d SMs, sm_%d%d), warp size 32\n", info.name.c_str(), info.sm_count,
              info.cc_major, info.cc_minor);
  const stk::SimtKernels k = stk::cuda::kernels();
  try {
    report("block reduction with barriers (5x1000, 256 threads)", stk::check_block_sum(k, device_buffer, 5, 1000, 256, 1));
    report("block reduction (2x5000, 1024 threads)", stk::check_block_sum(k, device_buffer, 2, 5000, 1024, 3));
    report("warp shuffles, scan, ballot, reductions (3x128)", stk::check_warp_ops(k, device_buffer, 3, 128, 4));
    report("atomic histogram (20000 values, 6 blocks)", stk::check_histogram(k, device_buffer, 20000, 6, 128, 6));
    report("atomic histogram (400000 values, 264 blocks)", stk::check_histogram(k, device_buffer, 400000, 264, 256, 7));
    report("dynamic shared memory (4x1000 reversed)", stk::check_reverse_rows(k, device_buffer, 4, 1000, 8));
    report("dynamic shared memory over 48 KiB (2x20000)", stk::check_reverse_rows(k, device_buffer, 2, 20000, 9));
    report("10 barriers, 512 threads, 3 blocks", stk::check_barrier_loop(k, device_buffer, 3, 512, 10));
    report("neighbour exchange with a barrier", stk::check_neighbour_exchange(k, device_buffer, 96));
    report("random-float block sums equal the host backend's bits", same_bits_as_host());
    report("graph capture of 2 launches, replayed on new inputs", graph_replay());
  } catch (const std::exception& e) {
    report("unexpected error", e.what());
  }
  std::printf("%s\n", failures == 0 ? "all simt checks passed on the GPU" : "some simt checks FAILED");
  return failures == 0 ? 0 : 1;
}
