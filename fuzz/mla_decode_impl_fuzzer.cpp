// libFuzzer harness for the MLA impl's call sequences (scales and lengths changing, capture and replay): input bytes decode to a case of one of the
// mla_decode_impl properties (fuzz/fuzz_input.h), run under guarded buffers (fuzz/harness.h).
#include "fuzz/harness.h"

MLACHECK_FUZZ_HARNESS("mla_decode_impl")
