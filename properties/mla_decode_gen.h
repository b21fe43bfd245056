// RapidCheck generators for mla_decode (SPEC.md): its cases, their text form (properties/case_text.h).
#pragma once

#include <rapidcheck.h>

#include "properties/case_text.h"

namespace mlacheck {}  // namespace mlacheck
