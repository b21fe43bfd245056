// The C ABI of StorageWatch (core/storage_watch.h), for the Python guard (python/mlacheck/guard.py),
// which loads libmlacheck_guard.so with ctypes. Every call returns 0 on success and -1 on an error,
// whose one line is written into err (err_len bytes, NUL-terminated); no C++ exception crosses it.
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/storage_watch.h"

namespace {

void put(char* dst, int64_t len, const std::string& s) {
  if (dst == nullptr || len <= 0) return;
  const size_t n = std::min<size_t>(s.size(), static_cast<size_t>(len - 1));
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

template <class F>
int guarded(char* err, int64_t err_len, F&& f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    put(err, err_len, e.what());
  } catch (...) {
    put(err, err_len, "unknown error");
  }
  return -1;
}

// A DType of the element size: the watch needs sizes and strides only (labels carry the names).
mlacheck::DType of_size(int64_t element_bytes) {
  switch (element_bytes) {
    case 1: return mlacheck::DType::kU8;
    case 2: return mlacheck::DType::kF16;
    case 4: return mlacheck::DType::kI32;
    case 8: return mlacheck::DType::kI64;
  }
  throw mlacheck::Error("storage watch: elements of " + std::to_string(element_bytes) +
                        " bytes (1, 2, 4 or 8 are watched)");
}

}  // namespace

#define MLACHECK_ABI __attribute__((visibility("default")))

extern "C" {

// A watch over [base, base + bytes) of host memory (device: CUDA device memory); *out receives it.
MLACHECK_ABI int mlacheck_watch_new(uintptr_t base, int64_t bytes, int64_t exact_limit, int device, void** out,
                                    char* err, int64_t err_len) {
  return guarded(err, err_len, [&] {
    *out = new mlacheck::StorageWatch(reinterpret_cast<const uint8_t*>(base), bytes,
                                      exact_limit > 0 ? exact_limit : mlacheck::StorageWatch::kDefaultExactLimit,
                                      device != 0);
  });
}

// 1 when this library watches CUDA storages (built with nvcc), else 0.
MLACHECK_ABI int mlacheck_watch_has_cuda() {
#ifdef MLACHECK_GUARD_CUDA
  return 1;
#else
  return 0;
#endif
}

MLACHECK_ABI void mlacheck_watch_free(void* w) { delete static_cast<mlacheck::StorageWatch*>(w); }

// A view: rank dimensions of shape and strides (in elements), its first element at byte_offset.
MLACHECK_ABI int mlacheck_watch_add_view(void* w, const char* label, int64_t element_bytes, int64_t rank, const int64_t* shape,
                            const int64_t* strides, int64_t byte_offset, int may_write, char* err, int64_t err_len) {
  return guarded(err, err_len, [&] {
    std::vector<int64_t> sh(shape, shape + rank), st(strides, strides + rank);
    static_cast<mlacheck::StorageWatch*>(w)->add_view(label, mlacheck::View(of_size(element_bytes), sh, st, byte_offset),
                                                      may_write != 0);
  });
}

MLACHECK_ABI int mlacheck_watch_arm(void* w, char* err, int64_t err_len) {
  return guarded(err, err_len, [&] { static_cast<mlacheck::StorageWatch*>(w)->arm(); });
}

// After the call: *changed the bytes that changed and may not (plus changed blocks), *view the view
// index the first lies in or is nearest (-1 none), *input 1 when it lies in a read-only view,
// coords (up to 8) its coordinates in that view, report the one line.
MLACHECK_ABI int mlacheck_watch_check(void* w, int64_t* changed, int64_t* first, int64_t* view, int* input, int64_t* coords,
                         char* report, int64_t report_len, char* err, int64_t err_len) {
  return guarded(err, err_len, [&] {
    const mlacheck::WatchReport r = static_cast<mlacheck::StorageWatch*>(w)->check();
    *changed = r.changed_bytes + r.changed_blocks;
    *first = r.first;
    *view = r.view;
    *input = r.into_read_only ? 1 : 0;
    for (size_t i = 0; i < r.coords.size() && i < 8; ++i) coords[i] = r.coords[i];
    put(report, report_len, r.describe);
  });
}

// Copies the bytes arm() kept into dst (dst_len bytes) when they are the whole storage: *got is
// their count then, else 0 (only a window near the views was kept).
MLACHECK_ABI int mlacheck_watch_snapshot(void* w, uintptr_t dst, int64_t dst_len, int64_t* got, char* err, int64_t err_len) {
  return guarded(err, err_len, [&] {
    *got = static_cast<mlacheck::StorageWatch*>(w)->copy_snapshot(reinterpret_cast<uint8_t*>(dst), dst_len);
  });
}

}  // extern "C"
