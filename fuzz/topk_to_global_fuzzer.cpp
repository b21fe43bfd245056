// libFuzzer harness for request-local top-k indices to global KV slots: input bytes decode to a case of one of the
// topk_to_global properties (fuzz/fuzz_input.h), run under guarded buffers (fuzz/harness.h).
#include "fuzz/harness.h"

MLACHECK_FUZZ_HARNESS("topk_to_global")
