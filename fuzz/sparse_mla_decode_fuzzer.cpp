// libFuzzer harness for sparse MLA decode (docs/ops.md 4): input bytes decode to a case of one of the
// sparse_mla_decode properties (fuzz/fuzz_input.h), run under guarded buffers (fuzz/harness.h).
#include "fuzz/harness.h"

MLACHECK_FUZZ_HARNESS("sparse_mla_decode")
