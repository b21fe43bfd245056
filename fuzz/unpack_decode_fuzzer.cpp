// libFuzzer harness for unpacking slots back to token rows: input bytes decode to a case of one of the
// unpack_decode properties (fuzz/fuzz_input.h), run under guarded buffers (fuzz/harness.h).
#include "fuzz/harness.h"

MLACHECK_FUZZ_HARNESS("unpack_decode")
