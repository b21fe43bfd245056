// The all-targets harness: one binary that is any op's harness, chosen by MLACHECK_TARGET or by the
// name it runs under (link or copy it as <target>_fuzzer). For GPU machines, where one binary with
// the CUDA kernels is carried instead of twelve.
#include "fuzz/harness.h"

MLACHECK_FUZZ_HARNESS(nullptr)
