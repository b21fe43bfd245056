// Shared by the kernel tests' bad-input checks: a change to valid inputs must be refused with a
// one-line mlacheck::Error before any launch.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace mlacheck::test_support {

// Inputs (a fixture of valid host buffers) gives args() and untouched() (every output still holds
// its sentinel). change(inputs, args) breaks one thing; launch(args) must then throw a one-line
// Error (naming culprit when given) and leave the outputs untouched.
template <class Inputs, class Launch, class Change>
void expect_refused_before_launch(const Launch& launch, const Change& change, const char* what,
                                  const char* culprit = nullptr) {
  Inputs in;
  auto args = in.args();
  change(in, args);
  try {
    launch(args);
    ADD_FAILURE() << what << ": accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << what << ": " << message;
    if (culprit != nullptr) {
      EXPECT_NE(message.find(culprit), std::string::npos) << what << ": " << message << " does not name " << culprit;
    }
  }
  EXPECT_TRUE(in.untouched()) << what << ": launched";
}

}  // namespace mlacheck::test_support
