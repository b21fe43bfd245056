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

namespace detail {
template <class... Parts>
std::string concat(Parts&&... parts) {
  std::ostringstream os;
  (os << ... << std::forward<Parts>(parts));
  return os.str();
}
}  // namespace detail

// Throws mlacheck::Error with the concatenated parts unless cond holds.
#define MLA_REQUIRE(cond, ...)                                        \
  do {                                                                \
    if (!(cond)) throw ::mlacheck::Error(::mlacheck::detail::concat(__VA_ARGS__)); \
  } while (0)

}  // namespace mlacheck
