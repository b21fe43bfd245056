// Shared by the kernel tests' case-text checks: drawn cases written as case text, read back and
// written again give the same text, every key read.
#pragma once

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cstdint>
#include <functional>

#include "harness/case_schema.h"
#include "harness/case_text.h"

namespace mlacheck::test_support {

// Cases of gen for seeds 1..n (sizes seed % 100), each written (write_case), parsed, read back by
// read, and written again: the same text each time, and no key left unread.
template <class Case>
void expect_case_text_round_trips(const rc::Gen<Case>& gen, const std::function<Case(const CaseText&)>& read, int n) {
  for (uint64_t seed = 1; seed <= static_cast<uint64_t>(n); ++seed) {
    const Case c = gen(rc::Random(seed), static_cast<int>(seed % 100)).value();
    CaseText t;
    write_case(c, t);
    const CaseText parsed = CaseText::parse(t.format());
    CaseText again;
    write_case(read(parsed), again);
    parsed.expect_all_read();
    ASSERT_EQ(again.format(), t.format()) << "seed " << seed;
  }
}

// What a property's reader does with a case that holds a key it does not read, or a value out of
// its range: the one-line Error, or "" when it accepts the case.
template <class Case>
std::string refusal(const std::function<Case(const CaseText&)>& read, const CaseText& t) {
  try {
    (void)read(t);
    t.expect_all_read();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace mlacheck::test_support
