// The fuzz input byte codec (properties/case_bytes.h).
#include "properties/case_bytes.h"

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

int64_t ByteReader::in_range(int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;  // 0: the whole 64-bit range
  const uint64_t raw = compact();
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + (span == 0 ? raw : raw % span));
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

void ByteWriter::in_range(int64_t v, int64_t lo) { compact(static_cast<uint64_t>(v) - static_cast<uint64_t>(lo)); }

}  // namespace mlacheck
