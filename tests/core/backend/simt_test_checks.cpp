// The backend test kernels' checks: guarded buffers in, kernel, plain loop, comparison.
#include "tests/core/backend/simt_test_checks.h"

#include <algorithm>
#include <random>
#include <sstream>
#include <vector>

#include "core/dtype.h"
#include "core/view.h"

namespace mlacheck::simt_test_kernels {
namespace {

// One guarded buffer per argument, all checked after the launch.
class Launch {
 public:
  explicit Launch(const MakeBuffer& make) : make_(make) {}

  template <class T>
  T* input(const std::string& name, const std::vector<T>& values) {
    GuardedMemory& b = add(name, static_cast<int64_t>(values.size() * sizeof(T)));
    b.write(0, values.data(), static_cast<int64_t>(values.size() * sizeof(T)));
    return reinterpret_cast<T*>(b.data());
  }
  // An output of count T's, sitting inside a larger allocation (padding before and after), so a
  // write past either end is a stray write inside the buffer, not only in its red zone.
  template <class T>
  T* output(const std::string& name, int64_t count) {
    const int64_t pad = 64;
    GuardedMemory& b = add(name, (count + 2 * pad) * static_cast<int64_t>(sizeof(T)));
    // As bytes: the guard works on bytes, and not every T has a dtype (uint64_t ballots).
    b.declare_output(name, View::contiguous(DType::kU8, {count * static_cast<int64_t>(sizeof(T))},
                                            pad * static_cast<int64_t>(sizeof(T))));
    offsets_.back() = pad * static_cast<int64_t>(sizeof(T));
    return reinterpret_cast<T*>(b.data() + offsets_.back());
  }
  void arm() {
    for (auto& b : buffers_) b->arm();
  }
  // Overwrites an output's poison with a starting value (accumulators), after arm().
  template <class T>
  void set(int index, const std::vector<T>& values) {
    buffers_.at(index)->write(offsets_.at(index), values.data(), static_cast<int64_t>(values.size() * sizeof(T)));
  }
  // "" when no buffer saw a stray write.
  std::string guard_failures() const {
    for (const auto& b : buffers_) {
      const GuardReport r = b->check();
      if (!r.ok()) return r.describe();
    }
    return "";
  }
  template <class T>
  std::vector<T> read(int index, int64_t count) const {
    std::vector<T> v(static_cast<std::size_t>(count));
    buffers_.at(index)->read(offsets_.at(index), v.data(), count * static_cast<int64_t>(sizeof(T)));
    return v;
  }

 private:
  GuardedMemory& add(const std::string& name, int64_t bytes) {
    buffers_.push_back(make_(name, bytes));
    offsets_.push_back(0);
    return *buffers_.back();
  }
  const MakeBuffer& make_;
  std::vector<std::unique_ptr<GuardedMemory>> buffers_;
  std::vector<int64_t> offsets_;
};

template <class T>
std::string first_difference(const char* what, const std::vector<T>& got, const std::vector<T>& want) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!(got[i] == want[i])) {
      std::ostringstream os;
      os << what << "[" << i << "] is " << +got[i] << ", the plain loop gives " << +want[i];
      return os.str();
    }
  }
  return "";
}

// Runs the launch and synchronizes; a thrown fault becomes the verdict.
template <class F>
std::string run(const SimtKernels& k, F&& launch) {
  try {
    launch();
    k.synchronize();
  } catch (const std::exception& e) {
    return std::string("launch failed: ") + e.what();
  }
  return "";
}

}  // namespace

std::string check_block_sum(const SimtKernels& k, const MakeBuffer& make, int rows, int cols, int threads,
                            uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> value(-1000, 1000);  // integers: every order of sums is exact
  std::vector<float> in(static_cast<std::size_t>(rows) * cols);
  for (float& x : in) x = static_cast<float>(value(rng));
  Launch l(make);
  const float* d_in = l.input("in", in);
  float* d_out = l.output<float>("out", rows);
  l.arm();
  if (std::string e = run(k, [&] { k.block_sum(d_in, d_out, rows, cols, threads); }); !e.empty()) return e;
  if (std::string e = l.guard_failures(); !e.empty()) return e;
  std::vector<float> want(rows, 0.0f);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) want[r] += in[static_cast<std::size_t>(r) * cols + c];
  }
  return first_difference("block_sum out", l.read<float>(1, rows), want);
}

std::string check_warp_ops(const SimtKernels& k, const MakeBuffer& make, int blocks, int threads, uint64_t seed) {
  const int n = blocks * threads, ws = k.warp_size(), warps = n / ws;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> value(-500, 500);
  std::vector<int> in(n);
  for (int& x : in) x = value(rng);
  Launch l(make);
  const int* d_in = l.input("in", in);
  int* d_out = l.output<int>("out", 5 * static_cast<int64_t>(n));
  int* d_down = l.output<int>("down_sum", warps);
  uint64_t* d_ballot = l.output<uint64_t>("ballot", warps);
  l.arm();
  if (std::string e = run(k, [&] { k.warp_ops(d_in, d_out, d_down, d_ballot, blocks, threads); }); !e.empty()) return e;
  if (std::string e = l.guard_failures(); !e.empty()) return e;

  std::vector<int> out(5 * static_cast<std::size_t>(n)), down(warps);
  std::vector<uint64_t> ballot(warps);
  for (int w = 0; w < warps; ++w) {
    const int base = w * ws;
    int sum = 0, max = in[base];
    for (int lane = 0; lane < ws; ++lane) {
      const int v = in[base + lane];
      sum += v;
      max = std::max(max, v);
      out[base + lane] = sum;
      out[2 * n + base + lane] = lane % 8 + 3 >= 8 ? v : in[base + lane + 3];
      out[3 * n + base + lane] = in[base + lane / 16 * 16 + 2];
      out[4 * n + base + lane] = in[base + (lane ^ 5)];
      if (v & 1) ballot[w] |= uint64_t(1) << lane;
    }
    for (int lane = 0; lane < ws; ++lane) out[n + base + lane] = max;
    down[w] = sum;
  }
  if (std::string e = first_difference("warp_ops out", l.read<int>(1, 5 * static_cast<int64_t>(n)), out); !e.empty()) {
    return e + " (0n: scan, 1n: max, 2n: shfl_down width 8, 3n: shfl width 16, 4n: shfl_xor 5)";
  }
  if (std::string e = first_difference("warp_ops down_sum", l.read<int>(2, warps), down); !e.empty()) return e;
  return first_difference("warp_ops ballot", l.read<uint64_t>(3, warps), ballot);
}

std::string check_histogram(const SimtKernels& k, const MakeBuffer& make, int n, int blocks, int threads,
                            uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> in(n);
  // Skewed: a few bins get most of the values, so shared atomics collide.
  for (uint8_t& x : in) x = static_cast<uint8_t>(rng() % 4 == 0 ? rng() % 256 : rng() % 8);
  Launch l(make);
  const uint8_t* d_in = l.input("in", in);
  unsigned* d_bins = l.output<unsigned>("bins", 256);
  float* d_total = l.output<float>("total", 1);
  int* d_max = l.output<int>("max_value", 1);
  int* d_claimed = l.output<int>("claimed", 1);
  l.arm();
  l.set(1, std::vector<unsigned>(256, 0));
  l.set(2, std::vector<float>{0.0f});
  l.set(3, std::vector<int>{-1});
  l.set(4, std::vector<int>{-1});
  if (std::string e = run(k, [&] { k.histogram(d_in, n, d_bins, d_total, d_max, d_claimed, blocks, threads); });
      !e.empty()) {
    return e;
  }
  if (std::string e = l.guard_failures(); !e.empty()) return e;
  std::vector<unsigned> bins(256, 0);
  float total = 0;
  int max = -1;
  for (uint8_t x : in) ++bins[x], total += x, max = std::max<int>(max, x);
  // Float atomics add in any order; the total is exact (order-free) only below 2^24.
  if (total >= 16777216.0f) return "check_histogram: n = " + std::to_string(n) + " is too large for an exact float total";
  if (std::string e = first_difference("histogram bins", l.read<unsigned>(1, 256), bins); !e.empty()) return e;
  if (std::string e = first_difference("histogram total", l.read<float>(2, 1), {total}); !e.empty()) return e;
  if (std::string e = first_difference("histogram max", l.read<int>(3, 1), {max}); !e.empty()) return e;
  const int claimed = l.read<int>(4, 1)[0];
  if (claimed < 0 || claimed >= blocks) return "histogram claimed " + std::to_string(claimed) + ", not a block id";
  return "";
}

std::string check_reverse_rows(const SimtKernels& k, const MakeBuffer& make, int rows, int cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> in(static_cast<std::size_t>(rows) * cols);
  for (float& x : in) x = static_cast<float>(rng() % 100000) + 0.5f;
  Launch l(make);
  const float* d_in = l.input("in", in);
  float* d_out = l.output<float>("out", static_cast<int64_t>(in.size()));
  l.arm();
  const std::size_t bytes = static_cast<std::size_t>(cols) * sizeof(float);
  if (std::string e = run(k, [&] { k.reverse_rows(d_in, d_out, rows, cols, bytes); }); !e.empty()) return e;
  if (std::string e = l.guard_failures(); !e.empty()) return e;
  std::vector<float> want(in.size());
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) want[r * cols + c] = in[r * cols + (cols - 1 - c)];
  }
  return first_difference("reverse_rows out", l.read<float>(1, static_cast<int64_t>(in.size())), want);
}

std::vector<float> expected_barrier_loop(int blocks, int threads, int barriers) {
  std::vector<float> out(static_cast<std::size_t>(blocks) * threads);
  std::vector<float> acc(threads), slot(threads);
  for (int b = 0; b < blocks; ++b) {
    for (int t = 0; t < threads; ++t) acc[t] = static_cast<float>(t + b);
    for (int round = 0; round < barriers; round += 2) {
      slot = acc;
      for (int t = 0; t < threads; ++t) acc[t] = acc[t] * 0.5f + slot[(t + 1) % threads];
    }
    std::copy(acc.begin(), acc.end(), out.begin() + static_cast<std::ptrdiff_t>(b) * threads);
  }
  return out;
}

std::string check_barrier_loop(const SimtKernels& k, const MakeBuffer& make, int blocks, int threads, int barriers) {
  Launch l(make);
  float* d_out = l.output<float>("out", static_cast<int64_t>(blocks) * threads);
  l.arm();
  if (std::string e = run(k, [&] { k.barrier_loop(d_out, blocks, threads, barriers); }); !e.empty()) return e;
  if (std::string e = l.guard_failures(); !e.empty()) return e;
  return first_difference("barrier_loop out", l.read<float>(0, static_cast<int64_t>(blocks) * threads),
                          expected_barrier_loop(blocks, threads, barriers));
}

std::vector<int> expected_neighbour_exchange(int n) {
  std::vector<int> out(n);
  for (int t = 0; t < n; ++t) out[t] = ((t + 1) % n) * 7 + 1;
  return out;
}

std::string check_neighbour_exchange(const SimtKernels& k, const MakeBuffer& make, int n) {
  Launch l(make);
  int* d_out = l.output<int>("out", n);
  l.arm();
  if (std::string e = run(k, [&] { k.neighbour_exchange(d_out, n, true); }); !e.empty()) return e;
  if (std::string e = l.guard_failures(); !e.empty()) return e;
  return first_difference("neighbour_exchange out", l.read<int>(0, n), expected_neighbour_exchange(n));
}

}  // namespace mlacheck::simt_test_kernels
