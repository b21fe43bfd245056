// RapidCheck generators for the MLA impl's call sequences (mla_decode_impl): its cases, their text form.
#pragma once

#include <rapidcheck.h>

#include "properties/case_text.h"

namespace mlacheck {}  // namespace mlacheck
