// Prints tools/flags_typed.h, made from the flag table (flags::typed_header): run after a change to
// tools/flags.def as `BUILD/tools/flags_typed_gen > tools/flags_typed.h`.
#include <iostream>

#include "tools/flags.h"

int main() {
  std::cout << mlacheck::flags::typed_header();
  return 0;
}
