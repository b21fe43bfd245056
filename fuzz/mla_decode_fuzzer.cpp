// libFuzzer harness for dense split-KV MLA decode (docs/ops.md 5): input bytes decode to a case of one of the
// mla_decode properties (fuzz/fuzz_input.h), run under guarded buffers (fuzz/harness.h).
#include "fuzz/harness.h"

MLACHECK_FUZZ_HARNESS("mla_decode")
