// mlacheck's public API, part 3 of 4: cases. Every op's case struct, its RapidCheck generator
// (gen::<op>_case() and friends) and its case-file reader and writer (<op>_from_text,
// <op>_to_text), the case text format, and the fields every case shares (CaseSchedule). One
// include per file family of the op table (core/ops.def); the catalogue test checks that every
// family is here. See include/mlacheck/memory.h for what is public.
#pragma once

#include "harness/case_schema.h"
#include "harness/case_text.h"
#include "harness/schedule.h"
#include "properties/decode_metadata_gen.h"
#include "properties/decode_step_gen.h"
#include "properties/k_cache_gather_gen.h"
#include "properties/k_cache_insert_gen.h"
#include "properties/mla_decode_gen.h"
#include "properties/mla_decode_impl_gen.h"
#include "properties/mqa_logits_gen.h"
#include "properties/pack_decode_gen.h"
#include "properties/sparse_mla_gen.h"
#include "properties/topk_gen.h"
