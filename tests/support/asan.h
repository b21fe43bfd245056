// MLA_TEST_ASAN is defined in a build under AddressSanitizer (g++'s or clang's way of saying so),
// for tests whose expectations differ there (a sanitizer may keep its own fault handler).
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define MLA_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MLA_TEST_ASAN 1
#endif
#endif
