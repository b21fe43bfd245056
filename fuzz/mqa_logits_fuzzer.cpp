// libFuzzer harness for ragged prefill fp8 indexer logits (docs/ops.md 2.2): input bytes decode to a case of one of the
// mqa_logits properties (fuzz/fuzz_input.h), run under guarded buffers (fuzz/harness.h).
#include "fuzz/harness.h"

MLACHECK_FUZZ_HARNESS("mqa_logits")
