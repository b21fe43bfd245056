// GPU test of the testbed's repeated launches (harness/testbed.h, ScopedRepeats) on cuda, where they
// are queued back to back after one arm with one check after the last (core/guarded_buffer.h,
// queue_repeats): a later launch that writes other bits, leaves an element unwritten, or writes a
// stray byte is still the verdict, naming the launch where one can be named; and with a hook after
// the arm the launches run one at a time, each checked alone. Plain main, one line per check; exits
// 0 on pass, 1 on a failure, 77 ("skipped: no GPU") without a usable GPU.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "harness/testbed.h"
#include "kernels/device.h"
#include "tests/support/gpu_test.h"

namespace {

using namespace mlacheck;

gpu_test::Tally tally;

void report(bool ok, const std::string& what) { tally.report(ok, what); }

bool starts_with(const std::string& s, const std::string& head) { return s.rfind(head, 0) == 0; }
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// out[i] = in[i] for i < n, but: element `odd` as odd_value (skipped when odd_value is 0), and one
// byte at out's byte `stray` (>= 0: past out's 4 elements, in the trailing red zone) set to 0x5A.
__global__ void copy_kernel(const float* in, float* out, int n, int odd, float odd_value, int64_t stray) {
  const int i = threadIdx.x;
  if (i < n) {
    if (i != odd) {
      out[i] = in[i];
    } else if (odd_value != 0.0f) {
      out[i] = odd_value;
    }
  }
  if (i == 0 && stray >= 0) reinterpret_cast<uint8_t*>(out)[stray] = 0x5A;
}

// counts[i] += 1 for i < 4: counters a launch adds to.
__global__ void count_kernel(int* counts) {
  if (threadIdx.x < 4) atomicAdd(counts + threadIdx.x, 1);
}

// Counters at elements 0, 1, 3 and 4 of p (two rows of 2 in rows of 3); with stray, a byte of
// element 2, the first row's padding.
__global__ void padded_count_kernel(int* p, bool stray) {
  const int at[4] = {0, 1, 3, 4};
  if (threadIdx.x < 4) atomicAdd(p + at[threadIdx.x], 1);
  if (threadIdx.x == 0 && stray) reinterpret_cast<uint8_t*>(p)[8] = 0x5A;
}

struct Run {
  kernels::Device& device;
  Buffer in{"in", View::contiguous(DType::kF32, {4}), 0, 0};
  Buffer out{"out", View::contiguous(DType::kF32, {4}), 0, 0};
  int launches_seen = 0;
  explicit Run(kernels::Device& d) : device(d) {
    for (int i = 0; i < 4; ++i) in.put<float>({i}, 1.0f + i);
  }
  // ScopedRepeats(launches) over one testbed launch; at launch `at` (1-based) element 1 takes
  // odd_value (0: left unwritten) when odd, or a stray byte lands past out when stray.
  Verdict go(int launches, int at, bool odd, float odd_value, bool stray, bool hook = false) {
    CaseSchedule schedule;
    Testbed bed(device, schedule);
    bed.input(in).output(out);
    if (hook) bed.after_arm([] {});
    launches_seen = 0;
    const ScopedRepeats repeats(launches);
    return bed.launch([&] {
      const bool here = ++launches_seen == at;
      copy_kernel<<<1, 32, 0, static_cast<cudaStream_t>(device.stream())>>>(
          reinterpret_cast<const float*>(in.memory->data()), reinterpret_cast<float*>(out.memory->data()), 4,
          here && odd ? 1 : -1, odd_value, here && stray ? 16 + 3 : -1);
      cuda::check_launch("copy_kernel");
    });
  }
};

}  // namespace

int main() {
  const cuda::DeviceInfo info = gpu_test::require_gpu();
  std::printf("testbed repeated launches (harness/testbed.h) on %s\n", info.name.c_str());
  try {
    std::unique_ptr<kernels::Device> device = kernels::make_device(Backend::kCuda);
    Run run(*device);
    Verdict v = run.go(20, 0, false, 0, false);
    report(!v && run.launches_seen == 20, "20 launches writing the same bits: no verdict, and the kernel ran 20 times" +
                                              (v ? ": " + *v : std::string()));
    v = run.go(20, 7, true, 5.0f, false);
    report(v && starts_with(*v, "nondeterministic: launch 7 of 20") &&
               contains(*v, "wrote output 'out' element [1] as 0x40a00000, launch 1 as 0x40000000"),
           "launch 7 of 20 writes another value: its verdict, naming launch 7: " + v.value_or("none"));
    v = run.go(6, 4, true, 0.0f, false);
    report(v && starts_with(*v, "nondeterministic: launch 4 of 6") && contains(*v, "element [1] as 0x"),
           "launch 4 of 6 leaves an element unwritten: it reads back poison, not launch 3's value: " + v.value_or("none"));
    v = run.go(20, 5, false, 0, true);
    report(v && starts_with(*v, "launches 2 to 20 of 20 (queued back to back, checked once after the last): guard of "
                                "out:") && contains(*v, "1 stray byte"),
           "launch 5 of 20 writes a byte past the output: the one check after the last reports it: " + v.value_or("none"));
    v = run.go(20, 5, false, 0, true, true);
    report(v && starts_with(*v, "launch 5 of 20: guard of out:"),
           "with a hook after the arm the launches run one at a time: the stray names launch 5: " + v.value_or("none"));
    v = run.go(20, 9, true, 5.0f, false, true);
    report(v && starts_with(*v, "nondeterministic: launch 9 of 20"),
           "and one at a time, launch 9's other value is launch 9's verdict: " + v.value_or("none"));
    {
      // Counters (rewrite_after_arm): every one of 20 queued launches starts from zero, not from the
      // poison the arm and each re-poison write, nor from the last launch's count.
      CaseSchedule schedule;
      Buffer counts{"counts", View::contiguous(DType::kI32, {4}), 0, 0};
      Testbed bed(*device, schedule);
      bed.input(run.in).output(counts).rewrite_after_arm(counts, std::vector<uint8_t>(16, 0));
      int launched = 0;
      const ScopedRepeats repeats(20);
      v = bed.launch([&] {
        ++launched;
        count_kernel<<<1, 32, 0, static_cast<cudaStream_t>(device->stream())>>>(reinterpret_cast<int*>(counts.memory->data()));
        cuda::check_launch("count_kernel");
      });
      int32_t last[4];
      std::memcpy(last, counts.host.data(), 16);
      report(!v && launched == 20 && last[0] == 1 && last[3] == 1,
             "counters rewritten to zero after each arm and re-poison: 20 launches each count 1 (the last read back: " +
                 std::to_string(last[0]) + ")" + (v ? ": " + *v : std::string()));
    }
    {
      // Bytes written back that cover the row padding too (as an in-place output's staged bytes
      // do): the launches run one at a time, so launch 5's stray byte in the padding is its own
      // verdict; queued, the write-back before launch 6 would have erased it before the one check.
      CaseSchedule schedule;
      Buffer padded{"padded", View(DType::kI32, {2, 2}, {3, 1}, 0), 0, 0};
      Testbed bed(*device, schedule);
      bed.input(run.in).output(padded).rewrite_after_arm(padded, std::vector<uint8_t>(static_cast<size_t>(padded.size()), 0));
      int launched = 0;
      const ScopedRepeats repeats(20);
      v = bed.launch([&] {
        padded_count_kernel<<<1, 32, 0, static_cast<cudaStream_t>(device->stream())>>>(
            reinterpret_cast<int*>(padded.memory->data()), ++launched == 5);
        cuda::check_launch("padded_count_kernel");
      });
      report(v && starts_with(*v, "launch 5 of 20: guard of padded:"),
             "bytes written back over row padding keep the launches one at a time: launch 5's stray there is "
             "named: " + v.value_or("none"));
    }
  } catch (const std::exception& e) {
    report(false, std::string("unexpected exception: ") + e.what());
  }
  return tally.finish("testbed repeated launches");
}
