// Staging for properties and tests: one guarded allocation on a device, the host bytes it is filled
// from (what the oracle reads) and a view in it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/guarded_buffer.h"
#include "core/tensor.h"
#include "kernels/device.h"

namespace mlacheck::kernels {

struct Buffer {
  std::string name;
  View view;
  std::vector<uint8_t> host;
  std::unique_ptr<GuardedMemory> memory;

  Buffer() = default;
  // Room for v at its byte offset and `tail` bytes after it, every byte `fill` until written.
  Buffer(std::string n, const View& v, int64_t tail, uint8_t fill) : name(std::move(n)), view(v) {
    host.assign(static_cast<size_t>(std::max(v.byte_span().end, v.byte_offset()) + tail), fill);
  }
  template <class T>
  void put(const std::vector<int64_t>& coords, T value) {
    std::memcpy(host.data() + view.byte_offset_of(coords), &value, sizeof(T));
  }
  HostTensor host_tensor() { return HostTensor(host.data(), view); }
  DeviceTensor device_tensor() const { return {memory->data(), view}; }
  void upload(Device& device) {
    memory = device.allocate(name, static_cast<int64_t>(host.size()));
    memory->write(0, host.data(), static_cast<int64_t>(host.size()));
  }
  // Reads the device's bytes back into host.
  void download() { memory->read(0, host.data(), static_cast<int64_t>(host.size())); }
};

}  // namespace mlacheck::kernels
