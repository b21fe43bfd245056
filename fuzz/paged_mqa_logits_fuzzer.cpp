// libFuzzer harness for paged fp8 indexer logits (docs/ops.md 2.1): input bytes decode to a case of one of the
// paged_mqa_logits properties (fuzz/fuzz_input.h), run under guarded buffers (fuzz/harness.h).
#include "fuzz/harness.h"

MLACHECK_FUZZ_HARNESS("paged_mqa_logits")
