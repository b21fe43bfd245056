// The byte codec of fuzz inputs: how a case's values are read from (and written to) the raw bytes
// libFuzzer mutates. A CaseText decoding bytes (harness/case_text.h) draws each value it is asked
// for through this codec, so any bytes decode; encoding writes what decodes back to the same values.
//
// Unsigned integers are compact so that small values, the common case, cost one byte:
//   first byte 0x00..0xDF   the value itself (0..223)
//              0xE0..0xEF   224 + (low 4 bits << 8 | next byte)              (224..4319)
//              0xF0..0xF7   4320 + (low 3 bits << 16 | next 2 bytes, big end) (4320..528607)
//              0xF8..0xFF   the next 8 bytes, little end                     (any 64-bit value)
// A value in a range [lo, hi] is lo + compact() modulo the range's size; for a range across 0 the
// order is 0, 1, -1, 2, -2, ... (the side left over continuing), so small bytes give small values.
// Reals: first byte 0x00..0xF7 is (byte - 124) / 4 (-31 to 30.75 in quarters); 0xF8..0xFF is followed
// by a double's 8 bytes, little end (any double, NaN payloads and -0 included).
// Past the end of the input every byte reads as 0, so every input, even an empty one, decodes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mlacheck {

class ByteReader {
 public:
  explicit ByteReader(std::string_view bytes) : bytes_(bytes) {}
  uint64_t compact();
  double real();
  // A value in [lo, hi] (lo <= hi), in the order above.
  int64_t in_range(int64_t lo, int64_t hi);
  size_t consumed() const { return pos_ < bytes_.size() ? pos_ : bytes_.size(); }
  bool exhausted() const { return pos_ >= bytes_.size(); }

 private:
  uint8_t next();
  std::string_view bytes_;
  size_t pos_ = 0;
};

// The position of v in the order of [lo, hi] values, and its inverse.
uint64_t range_index(int64_t v, int64_t lo, int64_t hi);
int64_t range_value(uint64_t index, int64_t lo, int64_t hi);

class ByteWriter {
 public:
  void compact(uint64_t v);
  void real(double v);
  // The bytes in_range(lo, hi) reads back as v (lo <= v <= hi).
  void in_range(int64_t v, int64_t lo, int64_t hi);
  const std::string& bytes() const { return out_; }

 private:
  std::string out_;
};

}  // namespace mlacheck
