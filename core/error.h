// The error type for misuse of the toolkit (impossible shapes, views outside buffers, bad input).
//
// Every message says what was given and what was expected, on one line, so the command-line tool
// can print it as is and exit non-zero.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace mlacheck {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// The device faulted so that this process can run no more device work (a CUDA sticky error: an
// illegal address, a trap, a misaligned access). Whoever catches it must not run another case in
// this process: the case that caused it is the finding, and the next case needs a fresh process.
class ContextLost : public Error {
 public:
  ContextLost(const std::string& what, std::string fault) : Error(what), fault_(std::move(fault)) {}
  // The fault's short name, as verdicts print it: "cudaErrorIllegalAddress".
  const std::string& fault() const { return fault_; }

 private:
  std::string fault_;
};

namespace detail {
template <class... Parts>
std::string concat(Parts&&... parts) {
  std::ostringstream os;
  (os << ... << std::forward<Parts>(parts));
  return os.str();
}
// The throw of MLA_REQUIRE, out of line: the message is built in this frame, not the caller's, so
// a hot function that checks something (simt's thread index, a shared-memory declaration) keeps a
// small frame, which AddressSanitizer would otherwise poison and unpoison on every call. The parts
// are taken by value (string literals as pointers, numbers in registers).
template <class... Parts>
[[noreturn]] __attribute__((noinline, cold)) void fail(Parts... parts) {
  throw Error(concat(parts...));
}
}  // namespace detail

// Throws mlacheck::Error with the concatenated parts unless cond holds.
#define MLA_REQUIRE(cond, ...)                                             \
  do {                                                                     \
    if (__builtin_expect(!(cond), 0)) ::mlacheck::detail::fail(__VA_ARGS__); \
  } while (0)

}  // namespace mlacheck
