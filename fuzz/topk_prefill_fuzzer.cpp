// libFuzzer harness for top-k per prefill row (docs/ops.md 3): input bytes decode to a case of one of the
// topk_prefill properties (fuzz/fuzz_input.h), run under guarded buffers (fuzz/harness.h).
#include "fuzz/harness.h"

MLACHECK_FUZZ_HARNESS("topk_prefill")
