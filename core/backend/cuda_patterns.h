// The guard byte patterns as tables for device fills: one byte per position modulo 256. Both
// patterns of GuardedMemory depend only on the offset modulo 256 (require_periodic_patterns checks
// it once), and red zones are multiples of 256, so table[offset & 0xFF] is the byte at any offset
// from data(), negative ones (the leading red zone) included. Shared by the device guards
// (cuda_guard_kernels.cu, cuda_reserved_buffer.cu).
#pragma once

#include <cstdint>

#include "core/error.h"
#include "core/guarded_buffer.h"

namespace mlacheck::cuda {

struct PatternTable {
  uint8_t byte[256];
};

// The red zone pattern (red) or the poison pattern.
inline PatternTable pattern_table(bool red) {
  PatternTable t;
  for (int i = 0; i < 256; ++i) t.byte[i] = red ? GuardedMemory::red_zone_byte(i) : GuardedMemory::poison_byte(i);
  return t;
}

// The device fills read the patterns from a 256-entry table; that is only the host's pattern if it
// repeats every 256 bytes. Fails loudly if someone changes the pattern functions so it does not.
inline void require_periodic_patterns() {
  static const bool ok = [] {
    for (int64_t off = -1024; off < 1024; ++off) {
      const uint8_t k = static_cast<uint8_t>(off & 0xFF);
      if (GuardedMemory::red_zone_byte(off) != GuardedMemory::red_zone_byte(k) ||
          GuardedMemory::poison_byte(off) != GuardedMemory::poison_byte(k)) {
        return false;
      }
    }
    return true;
  }();
  MLA_REQUIRE(ok, "device guards: the red zone or poison pattern no longer repeats every 256 bytes; the device "
                  "fill tables (core/backend/cuda_patterns.h) must change with it");
}

}  // namespace mlacheck::cuda
