// libFuzzer harness for the case parser: any bytes either parse or are refused with one line, a
// parsed case prints and parses back to itself, and the decode step's reader accepts or refuses it.
//
// Input: the bytes of a case file (corpus/case_text/ holds real cases to mutate).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.h"
#include "harness/case_text.h"
#include "properties/decode_step_gen.h"

namespace {

[[noreturn]] void violation(const std::string& what, std::string_view input) {
  std::fprintf(stderr, "case_text_fuzzer: %s\n--- input ---\n%.*s\n", what.c_str(), static_cast<int>(input.size()),
               input.data());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mlacheck;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  CaseText c;
  try {
    c = CaseText::parse(input);
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.empty() || msg.find('\n') != std::string::npos) violation("refusal is not one line: " + msg, input);
    return 0;
  }
  const std::string text = c.format();
  CaseText back;
  try {
    back = CaseText::parse(text);
  } catch (const Error& e) {
    violation(std::string("a printed case does not parse: ") + e.what(), input);
  }
  if (!(back == c) || back.format() != text) violation("a printed case does not parse back to itself", input);
  // The decode step's reader: accepts, or refuses with one line; never crashes.
  try {
    const auto [e, s] = decode_step_from_text(c);
    CaseText again;
    decode_step_to_text(e, s, again);
    decode_step_from_text(again);
  } catch (const Error& e) {
    if (std::string(e.what()).find('\n') != std::string::npos) violation("refusal is not one line", input);
  }
  return 0;
}
