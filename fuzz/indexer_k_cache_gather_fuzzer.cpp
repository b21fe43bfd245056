// libFuzzer harness for the indexer K-cache gather: input bytes decode to a case of one of the
// indexer_k_cache_gather properties (fuzz/fuzz_input.h), run under guarded buffers (fuzz/harness.h).
#include "fuzz/harness.h"

MLACHECK_FUZZ_HARNESS("indexer_k_cache_gather")
