// Output poison, input poisoning helpers and the all-zero check.
#include "core/poison.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace mlacheck {
namespace {

// Little-endian byte images of each dtype's output poison, padded to 8 bytes.
void poison_bytes(DType t, uint8_t out[8]) {
  uint64_t v = 0;
  switch (t) {
    case DType::kF64: v = 0x7FF4A5A5A5A5A5A5ull; break;
    case DType::kF32: v = 0x7FA5A5A5u; break;
    case DType::kBF16: v = 0x7FA5u; break;
    case DType::kF16: v = 0x7DA5u; break;
    case DType::kFP8E4M3:
    case DType::kFP8E5M2: v = 0x7Fu; break;
    case DType::kUE8M0: v = 0xFFu; break;
    case DType::kI64:
    case DType::kI32:
    case DType::kU8: v = 0xA5A5A5A5A5A5A5A5ull; break;
  }
  std::memcpy(out, &v, 8);
}

}  // namespace

std::string int32_text(int32_t v) {
  constexpr int32_t kPoison = static_cast<int32_t>(0xA5A5A5A5u);
  return v == kPoison ? std::to_string(v) + " (0xA5A5A5A5, the output's poison: an element never written)"
                      : std::to_string(v);
}

void poison_output(const HostTensor& t) {
  uint8_t p[8];
  poison_bytes(t.view.dtype(), p);
  const int64_t es = static_cast<int64_t>(dtype_size(t.view.dtype()));
  uint8_t* base = t.bytes();
  // Each run of adjacent elements: one element, then doubling copies of what is written.
  t.view.for_each_run([&](int64_t first, int64_t bytes) {
    uint8_t* at = base + first;
    std::memcpy(at, p, static_cast<size_t>(es));
    for (int64_t done = es; done < bytes;) {
      const int64_t chunk = std::min(done, bytes - done);
      std::memcpy(at + done, at, static_cast<size_t>(chunk));
      done += chunk;
    }
  });
}

bool is_output_poison(DType t, const void* p) {
  uint8_t want[8];
  poison_bytes(t, want);
  return std::memcmp(want, p, dtype_size(t)) == 0;
}

std::string unwritten_note(const HostTensor& t) {
  const DType dt = t.view.dtype();
  const uint8_t* base = t.bytes();
  int64_t unwritten = 0, elements = 0;
  t.view.for_each_byte_offset([&](int64_t off) {
    ++elements;
    unwritten += is_output_poison(dt, base + off);
  });
  if (unwritten == 0) return "";
  return " (" + std::to_string(unwritten) + " of " + std::to_string(elements) +
         " elements hold the output poison: never written)";
}

void fill(const HostTensor& t, double value) {
  const DType dt = t.view.dtype();
  uint8_t encoded[8];
  store_element(dt, encoded, value);
  const size_t es = dtype_size(dt);
  uint8_t* base = t.bytes();
  t.view.for_each_byte_offset([&](int64_t off) { std::memcpy(base + off, encoded, es); });
}

void fill_past_lengths(const HostTensor& rows_by_cols, const std::vector<int64_t>& lengths, double value) {
  const View& v = rows_by_cols.view;
  MLA_REQUIRE(v.rank() == 2, "fill_past_lengths: needs a [rows, cols] view, got ", v.to_string());
  MLA_REQUIRE(static_cast<int64_t>(lengths.size()) == v.size(0), "fill_past_lengths: ", lengths.size(),
              " lengths for ", v.size(0), " rows of ", v.to_string());
  for (int64_t r = 0; r < v.size(0); ++r) {
    const int64_t from = lengths[r] < 0 ? 0 : lengths[r];
    if (from >= v.size(1)) continue;
    fill(HostTensor(rows_by_cols.base, v.select(0, r).slice(0, from, v.size(1))), value);
  }
}

bool all_zero(const HostTensor& t) {
  bool zero = true;
  const DType dt = t.view.dtype();
  const uint8_t* base = t.bytes();
  t.view.for_each_byte_offset([&](int64_t off) {
    if (zero && load_element(dt, base + off) != 0.0) zero = false;  // NaN != 0 as well
  });
  return zero;
}

}  // namespace mlacheck
