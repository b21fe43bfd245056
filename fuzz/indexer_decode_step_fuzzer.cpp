// libFuzzer harness for the whole indexer decode step (docs/ops.md 6): input bytes decode to a case of one of the
// indexer_decode_step properties (fuzz/fuzz_input.h), run under guarded buffers (fuzz/harness.h).
#include "fuzz/harness.h"

MLACHECK_FUZZ_HARNESS("indexer_decode_step")
