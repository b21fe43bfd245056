// libFuzzer's coverage hooks, weak and empty, for a clang build without a sanitizer runtime (the
// default preset: clang 14, Release). The kernels and the checks are compiled with libFuzzer's
// coverage (cmake/Toolchains.cmake, mlacheck_fuzz_coverage) so that the fuzz harnesses steer by
// them; in a fuzz harness libFuzzer's own definitions of these symbols win over these weak ones,
// and in every other binary (the mlacheck tool, the tests, a plugin, a package consumer) these
// receive the calls and do nothing. Under AddressSanitizer its runtime supplies the same weak
// defaults, and this file is not compiled.
#include <cstdint>

#define MLACHECK_HOOK extern "C" __attribute__((weak, visibility("default")))

MLACHECK_HOOK void __sanitizer_cov_8bit_counters_init(uint8_t*, uint8_t*) {}
MLACHECK_HOOK void __sanitizer_cov_pcs_init(const uintptr_t*, const uintptr_t*) {}
MLACHECK_HOOK void __sanitizer_cov_trace_pc_indir(uintptr_t) {}
MLACHECK_HOOK void __sanitizer_cov_trace_cmp1(uint8_t, uint8_t) {}
MLACHECK_HOOK void __sanitizer_cov_trace_cmp2(uint16_t, uint16_t) {}
MLACHECK_HOOK void __sanitizer_cov_trace_cmp4(uint32_t, uint32_t) {}
MLACHECK_HOOK void __sanitizer_cov_trace_cmp8(uint64_t, uint64_t) {}
MLACHECK_HOOK void __sanitizer_cov_trace_const_cmp1(uint8_t, uint8_t) {}
MLACHECK_HOOK void __sanitizer_cov_trace_const_cmp2(uint16_t, uint16_t) {}
MLACHECK_HOOK void __sanitizer_cov_trace_const_cmp4(uint32_t, uint32_t) {}
MLACHECK_HOOK void __sanitizer_cov_trace_const_cmp8(uint64_t, uint64_t) {}
MLACHECK_HOOK void __sanitizer_cov_trace_switch(uint64_t, uint64_t*) {}
MLACHECK_HOOK void __sanitizer_cov_trace_div4(uint32_t) {}
MLACHECK_HOOK void __sanitizer_cov_trace_div8(uint64_t) {}
MLACHECK_HOOK void __sanitizer_cov_trace_gep(uintptr_t) {}
// The lowest stack address a fuzzed input reached (-fsanitize-coverage=stack-depth).
extern "C" __attribute__((weak, visibility("default"))) thread_local uintptr_t __sancov_lowest_stack = 0;
