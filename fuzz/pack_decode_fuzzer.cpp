// libFuzzer harness for packing decode tokens into left-aligned slots: input bytes decode to a case of one of the
// pack_decode properties (fuzz/fuzz_input.h), run under guarded buffers (fuzz/harness.h).
#include "fuzz/harness.h"

MLACHECK_FUZZ_HARNESS("pack_decode")
