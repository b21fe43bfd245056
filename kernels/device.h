// Where a kernel runs: one backend's guarded memory, stream and synchronisation behind one
// interface, so the host glue, the properties and the fuzzers are written once for every backend.
//
// Kernel launchers (kernels/<op>.h) are declared in the namespaces host, cuda and hip (one source,
// compiled per backend) and take their stream as `void*`; MLA_DISPATCH picks the launcher of the
// device's backend and passes it the device's stream.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/guarded_buffer.h"
#include "core/tensor.h"

namespace mlacheck::kernels {

// A view of memory on a device (host memory on the host backend). base is what GuardedMemory::data()
// returns; the view's byte offset is relative to it. Never dereferenced on the host unless the
// device is the host.
struct DeviceTensor {
  void* base = nullptr;
  View view;
  template <class T>
  T* data() const {
    return reinterpret_cast<T*>(static_cast<uint8_t*>(base) + view.byte_offset());
  }
};

// A captured sequence of launches on a device's stream, replayed against the same arguments
// (pointers included), as a CUDA graph is: between replays change what the buffers hold, not which
// buffers. On the host backend the recorded launches run with the host options current at replay.
class DeviceGraph {
 public:
  virtual ~DeviceGraph();
  // Enqueues every captured launch on the device's stream (the host backend runs them at once).
  virtual void replay() = 0;
  virtual size_t launch_count() const = 0;
  // Keeps memory freed on the graph's device quarantined for as long as this graph lives
  // (Device::hold_freed_memory): what a device's capture() does with its graphs.
  void hold_freed_memory(std::shared_ptr<void> token) { freed_memory_hold_ = std::move(token); }

 private:
  std::shared_ptr<void> freed_memory_hold_;  // released after the derived graph is gone
};

class Device {
 public:
  virtual ~Device();
  virtual Backend backend() const = 0;
  // A guarded allocation in this device's memory.
  virtual std::unique_ptr<GuardedMemory> allocate(const std::string& name, int64_t bytes) = 0;
  // A guarded input allocation of `bytes` of which only the ranges `backed` (data offsets) are
  // backed; every other byte is reserved address space that faults when touched, and so is the
  // address space for 8 GiB on either side (core/reserved_buffer.h). Offsets past 2^32 without
  // gigabytes of data (host: core/reserved_buffer.h; cuda: core/backend/cuda_reserved_buffer.h). On
  // a device that cannot reserve memory (hip) it throws OutsideContract (core/contract.h): the case
  // is reported as not run, never as a failure.
  // writable: the launch may write output views declared inside the backed ranges.
  virtual std::unique_ptr<GuardedMemory> reserve(const std::string& name, int64_t bytes,
                                                 const std::vector<ByteSpan>& backed, bool writable = false);
  // The stream launches go to: a simt::host::Stream* (null: run at once) or a cudaStream_t.
  virtual void* stream() const = 0;
  // Waits for every launch; throws mlacheck::Error on a launch or device fault (a host KernelFault
  // propagates from the launch itself).
  virtual void synchronize() = 0;
  // Streaming multiprocessors, for work-splitting heuristics: the GPU's count on cuda, a nominal 16
  // on the host (so heuristics behave there as on a small GPU).
  virtual int64_t multiprocessors() const = 0;
  // Records the launches body makes on this device's stream instead of running them. On cuda a
  // synchronizing call inside body (an allocation, a copy, a synchronize) fails the capture with a
  // one-line mlacheck::Error and leaves the stream usable; on the host nothing runs until replay.
  virtual std::unique_ptr<DeviceGraph> capture(const std::function<void()>& body) = 0;

  // Memory freed while a graph captured on this device is alive (core/quarantine.h). With guards
  // on, an allocation from allocate() that its owner frees while any hold_freed_memory() token
  // lives keeps its address, is poisoned (NaN floats) and never reused; every graph capture() makes
  // keeps a token. hold_freed_memory() is for graphs made otherwise (a plugin's): nullptr where
  // nothing is quarantined (guards off, a device without a quarantine).
  virtual std::shared_ptr<void> hold_freed_memory() { return nullptr; }
  // One line per quarantined allocation written since it was freed (a replay or a launch still using
  // its address), oldest first; empty when none was. A property asks after each replay.
  virtual std::vector<std::string> writes_to_freed_memory() { return {}; }
};

// The device of backend b. Throws mlacheck::Error with one line when it cannot run here ("cuda:
// not usable: no GPU (cudaErrorNoDevice)", "hip: compile-checked only"). Its allocations are
// guarded, unless MLACHECK_GUARDS=0 was set when it was made: then each is a plain allocation of
// exactly the bytes asked for (no red zones, no output poison, a check that sees nothing), the
// production memory layout for a plain run, a timing or a run under compute-sanitizer.
std::unique_ptr<Device> make_device(Backend b);
// Whether MLACHECK_GUARDS leaves guards on (anything but "0").
bool guards_enabled();

// Whether make_device(b) would succeed, and if not why (one line).
bool device_usable(Backend b, std::string* why = nullptr);

// Whether an NVIDIA MPS daemon (Multi-Process Service) is running for this user: its control pipe
// is in $CUDA_MPS_PIPE_DIRECTORY, else in /tmp/nvidia-mps. Without one, processes that share a GPU
// (libFuzzer's fork-mode jobs, `bench fuzz --jobs`) are time-sliced by the driver, their kernels
// never overlapping: on an H100, 8 such processes checked a third of what one did (docs/fuzzing.md).
bool mps_daemon_running();

}  // namespace mlacheck::kernels

// Calls kernels::<backend>::fn(args..., stream) for the device's backend.
#if defined(MLACHECK_HAVE_CUDA)
#define MLA_DISPATCH(device, fn, ...)                                                  \
  ((device).backend() == ::mlacheck::Backend::kCuda                                   \
       ? ::mlacheck::kernels::cuda::fn(__VA_ARGS__, (device).stream())                \
       : ::mlacheck::kernels::host::fn(__VA_ARGS__, (device).stream()))
#else
#define MLA_DISPATCH(device, fn, ...) ::mlacheck::kernels::host::fn(__VA_ARGS__, (device).stream())
#endif
