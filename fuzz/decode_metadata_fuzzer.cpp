// libFuzzer harness for the indexer's decode metadata builder (docs/ops.md 1): input bytes decode to a case of one of the
// decode_metadata properties (fuzz/fuzz_input.h), run under guarded buffers (fuzz/harness.h).
#include "fuzz/harness.h"

MLACHECK_FUZZ_HARNESS("decode_metadata")
