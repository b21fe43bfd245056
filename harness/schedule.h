// The fields every case shares, declared once: the seed its data and the host backend's thread
// order are drawn from, the warp size (32 on CUDA, 64 on gfx9) and whether the host backend runs a
// block's threads in a shuffled order. Each op's case struct derives from CaseSchedule, so its
// generator, its case-text reader and writer and the testbed all take these fields from here.
#pragma once

#include <cstdint>
#include <string>

#include "core/backend/host_executor.h"
#include "harness/case_text.h"

namespace mlacheck {

struct CaseSchedule {
  uint64_t seed = 0;      // the case's data, and the host backend's shuffled order
  int warp_size = 32;     // host backend only: 32 or 64
  bool shuffled = false;  // host backend: a block's threads run in an order drawn from seed

  // The host backend's options for a launch of this case (simt::host::ScopedOptions takes them).
  simt::host::Options host_options() const;
};

// The shared fields as case keys: `<prefix>warp` (32 or 64), `<prefix>shuffled` (a flag) and,
// unless the op keeps its seed elsewhere, `<prefix>seed`. Reading them through a drawing CaseText
// is how fuzz bytes decode them; the order is the bytes' order.
enum class SeedKey { kWritten, kElsewhere };
void write_schedule(const CaseSchedule& s, CaseText& out, const std::string& prefix = "",
                    SeedKey seed = SeedKey::kWritten);
void read_schedule(CaseSchedule& s, const CaseText& t, const std::string& prefix = "",
                   SeedKey seed = SeedKey::kWritten);

}  // namespace mlacheck
