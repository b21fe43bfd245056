// libFuzzer harness for top-k per decode row (docs/ops.md 3): input bytes decode to a case of one of the
// topk_decode properties (fuzz/fuzz_input.h), run under guarded buffers (fuzz/harness.h).
#include "fuzz/harness.h"

MLACHECK_FUZZ_HARNESS("topk_decode")
