// A watch over memory mlacheck does not own: the storage of a tensor a user's op or Triton kernel
// is called with (mlacheck.guard(), python/mlacheck/guard.py). The views the call was given are
// declared, those it may write and those it may only read; arm() keeps what every other byte
// holds, and check() after the call reports the bytes that changed: a stray write outside every
// view, or a write into a view the call may only read.
//
// Unlike GuardedBuffer (core/guarded_buffer.h) nothing here is allocated, poisoned or padded with
// red zones: the storage belongs to the caller and holds its data, so the watch only looks. What it
// keeps: an exact copy of the bytes from a margin before the lowest view byte to a margin past the
// highest (the whole storage when it is at most `exact_limit` bytes, 16 MiB by default; the margin
// 256 KiB), and a 64-bit checksum of each
// 4 KiB block beyond that. So a small view of a large preallocated buffer is not copied whole: a
// change near the views is reported byte for byte, and one far from them by its block (its old
// bytes are not kept). A CUDA storage is watched by kernels (core/backend/cuda_storage_watch.h) where
// this was built with MLACHECK_GUARD_CUDA, and refused with one line where it was not.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/view.h"

namespace mlacheck {

struct WatchReport {
  bool ok() const { return changed_bytes == 0 && changed_blocks == 0; }
  int64_t changed_bytes = 0;   // bytes of the exact window that changed and may not
  int64_t changed_blocks = 0;  // blocks beyond the window whose checksum changed
  int64_t first = -1;          // storage offset of the lowest such byte (or block's first byte)
  bool first_exact = true;     // false: only its block is known
  bool into_read_only = false; // the first changed byte lies in a view the call may only read
  int view = -1;               // the view it lies in, or the nearest one
  std::vector<int64_t> coords; // its coordinates in that view (View::coords_of_byte)
  uint8_t expected = 0, actual = 0;
  std::string describe;        // one line (empty when ok)
};

class StorageWatch {
 public:
  static constexpr int64_t kBlock = 4096;
  static constexpr int64_t kDefaultExactLimit = int64_t{16} << 20;
  static constexpr int64_t kMargin = int64_t{256} << 10;

  // base: host memory of `bytes` bytes, read by arm() and check(), never written; with device, CUDA
  // device memory, watched by kernels (core/backend/cuda_storage_watch.h) where this was built with
  // MLACHECK_GUARD_CUDA (libmlacheck_guard.so with nvcc), else refused (mlacheck::Error).
  StorageWatch(const uint8_t* base, int64_t bytes, int64_t exact_limit = kDefaultExactLimit, bool device = false);
  ~StorageWatch();
  StorageWatch(const StorageWatch&) = delete;
  StorageWatch& operator=(const StorageWatch&) = delete;

  // A view of the call into this storage (byte_offset from base); label names it in reports
  // ("argument 'out' (torch.float32[4, 8], strides (16, 1), storage offset 0)"). Throws
  // mlacheck::Error for a view that reaches past the storage.
  void add_view(std::string label, const View& v, bool may_write);
  int views() const { return static_cast<int>(views_.size()); }

  void arm();
  WatchReport check() const;
  // The bytes arm() kept exactly, and from which storage offset: the whole storage before the call
  // when it was at most exact_limit bytes (the saved call of a finding replays from them).
  // Copies them into dst (host memory of len bytes) when they are the whole storage (len bytes):
  // returns len, else 0.
  int64_t copy_snapshot(uint8_t* dst, int64_t len) const;

 private:
  struct Watched {
    std::string label;
    View view;
    bool may_write;
  };
  // Sets the bits of v's bytes in bits, whose bit 0 is storage byte origin.
  static void mark(std::vector<uint64_t>& bits, const View& v, int64_t origin);
  static bool bit(const std::vector<uint64_t>& bits, int64_t i) { return (bits[i >> 6] >> (i & 63)) & 1u; }
  // The bit of storage byte off in bits over the exact window (false outside it).
  bool in_window(const std::vector<uint64_t>& bits, int64_t off) const {
    return off >= window_begin_ && off < window_end_ && bit(bits, off - window_begin_);
  }
  uint64_t block_sum(int64_t block) const;
  void locate(WatchReport& r, int64_t offset) const;

  const uint8_t* base_;
  int64_t bytes_, exact_limit_;
  std::vector<Watched> views_;
  std::vector<uint64_t> writable_, read_only_;  // a bit per byte of the exact window, made by arm()
  int64_t window_begin_ = 0, window_end_ = 0;   // the exact window
  std::vector<uint8_t> snapshot_;               // its bytes at arm()
  std::vector<uint64_t> sums_;                  // per block, for the blocks beyond the window
  bool armed_ = false;
  // Device memory (device_): the window's snapshot, its writable bits, the arm's and the check's
  // block sums. Unused where this is built without MLACHECK_GUARD_CUDA (mlacheck_core).
  bool device_ = false;
  [[maybe_unused]] void* d_snapshot_ = nullptr;
  [[maybe_unused]] void* d_writable_ = nullptr;
  [[maybe_unused]] void* d_was_ = nullptr;
  [[maybe_unused]] void* d_sums_ = nullptr;
  [[maybe_unused]] int64_t blocks_ = 0;
  void release_device();
};

}  // namespace mlacheck
