// mlacheck's public API, part 4 of 4: properties and verdicts. Every op's properties as verdict
// functions of (device, implementation, case) (std::nullopt when the property holds, else one line
// saying what failed and where), the testbed a launch runs in, rc_require (a failing verdict inside
// a RapidCheck property prints its case as a file `mlacheck repro` runs), and the registry of
// every built-in property with the case runner behind `mlacheck repro`. One include per file family
// of the op table (core/ops.def); the catalogue test checks that every family is here. Includes
// cases.h, oracle.h and memory.h. See include/mlacheck/memory.h for what is public.
#pragma once

#include "mlacheck/cases.h"
#include "mlacheck/memory.h"
#include "mlacheck/oracle.h"

#include "harness/property.h"
#include "harness/rc_verdict.h"
#include "harness/testbed.h"
#include "harness/verdict.h"
#include "properties/decode_metadata_properties.h"
#include "properties/decode_step_properties.h"
#include "properties/k_cache_gather_properties.h"
#include "properties/k_cache_insert_properties.h"
#include "properties/mla_decode_impl_properties.h"
#include "properties/mla_decode_properties.h"
#include "properties/mqa_logits_properties.h"
#include "properties/pack_decode_properties.h"
#include "properties/property_registry.h"
#include "properties/sparse_mla_properties.h"
#include "properties/topk_properties.h"
