// One formatted line into a plugin call's error buffer, for the example stateful plugins'
// refusals: `return fail(error, error_size, "batch %lld past %lld", ...)` writes it and returns 1.
#pragma once

#include <cstdarg>
#include <cstddef>
#include <cstdio>

namespace example_plugins {

__attribute__((format(printf, 3, 4))) inline int fail(char* error, size_t size, const char* format, ...) {
  if (error != nullptr && size > 0) {
    va_list args;
    va_start(args, format);
    std::vsnprintf(error, size, format, args);
    va_end(args);
  }
  return 1;
}

}  // namespace example_plugins
