// The fuzz input byte codec (harness/case_bytes.h).
#include "harness/case_bytes.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

namespace mlacheck {

namespace {
constexpr uint64_t kTwoByteBase = 0xE0;                 // 224
constexpr uint64_t kThreeByteBase = kTwoByteBase + 4096;  // 4320
constexpr uint64_t kFourByteEnd = kThreeByteBase + (uint64_t{1} << 19);
constexpr uint8_t kRawReal = 0xF8;
constexpr int kRealBias = 124;  // byte 124 is 0.0
}  // namespace

uint8_t ByteReader::next() {
  const uint8_t b = pos_ < bytes_.size() ? static_cast<uint8_t>(bytes_[pos_]) : 0;
  ++pos_;
  return b;
}

uint64_t ByteReader::compact() {
  const uint8_t b = next();
  if (b < 0xE0) return b;
  if (b < 0xF0) return kTwoByteBase + ((uint64_t{b} & 0x0F) << 8 | next());
  if (b < 0xF8) {
    const uint64_t hi = next(), lo = next();
    return kThreeByteBase + ((uint64_t{b} & 0x07) << 16 | hi << 8 | lo);
  }
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{next()} << (8 * i);
  return v;
}

double ByteReader::real() {
  const uint8_t b = next();
  if (b < kRawReal) return (static_cast<int>(b) - kRealBias) / 4.0;
  uint64_t bits = 0;
  for (int i = 0; i < 8; ++i) bits |= uint64_t{next()} << (8 * i);
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

uint64_t range_index(int64_t v, int64_t lo, int64_t hi) {
  if (lo >= 0 || hi <= 0 || lo == INT64_MIN) return static_cast<uint64_t>(v) - static_cast<uint64_t>(lo);
  // 0, 1, -1, 2, -2, ... while both sides last (m each), then the longer side's rest in order.
  const uint64_t m = std::min<uint64_t>(static_cast<uint64_t>(hi), static_cast<uint64_t>(-lo));
  const uint64_t a = v < 0 ? static_cast<uint64_t>(-v) : static_cast<uint64_t>(v);
  if (a == 0) return 0;
  if (a <= m) return v > 0 ? 2 * a - 1 : 2 * a;
  return a + m;
}

int64_t range_value(uint64_t i, int64_t lo, int64_t hi) {
  if (lo >= 0 || hi <= 0 || lo == INT64_MIN) return static_cast<int64_t>(static_cast<uint64_t>(lo) + i);
  const uint64_t m = std::min<uint64_t>(static_cast<uint64_t>(hi), static_cast<uint64_t>(-lo));
  if (i == 0) return 0;
  if (i <= 2 * m) {
    const auto k = static_cast<int64_t>((i + 1) / 2);
    return i % 2 == 1 ? k : -k;
  }
  const auto rest = static_cast<int64_t>(i - m);
  return static_cast<uint64_t>(hi) > m ? rest : -rest;
}

int64_t ByteReader::in_range(int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;  // 0: the whole 64-bit range
  const uint64_t raw = compact();
  return range_value(span == 0 ? raw : raw % span, lo, hi);
}

void ByteWriter::compact(uint64_t v) {
  if (v < kTwoByteBase) {
    out_ += static_cast<char>(v);
  } else if (v < kThreeByteBase) {
    const uint64_t r = v - kTwoByteBase;
    out_ += static_cast<char>(0xE0 | (r >> 8));
    out_ += static_cast<char>(r & 0xFF);
  } else if (v < kFourByteEnd) {
    const uint64_t r = v - kThreeByteBase;
    out_ += static_cast<char>(0xF0 | (r >> 16));
    out_ += static_cast<char>((r >> 8) & 0xFF);
    out_ += static_cast<char>(r & 0xFF);
  } else {
    out_ += static_cast<char>(0xF8);
    for (int i = 0; i < 8; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xFF);
  }
}

void ByteWriter::real(double v) {
  const double q = v * 4.0;
  if (std::isfinite(q) && q == std::floor(q) && q >= -kRealBias && q < kRawReal - kRealBias && !(v == 0 && std::signbit(v))) {
    out_ += static_cast<char>(static_cast<int>(q) + kRealBias);
    return;
  }
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  out_ += static_cast<char>(kRawReal);
  for (int i = 0; i < 8; ++i) out_ += static_cast<char>((bits >> (8 * i)) & 0xFF);
}

void ByteWriter::in_range(int64_t v, int64_t lo, int64_t hi) { compact(range_index(v, lo, hi)); }

}  // namespace mlacheck
