// mlacheck's public API, part 2 of 4: the oracle. The reference of every op in double from exactly
// decoded inputs (docs/ops.md, a section per op), the fp8 quantizers that make inputs as production
// does, and the comparison with the tolerance table (docs/ops.md 7). See include/mlacheck/memory.h
// for what is public.
#pragma once

#include "core/compare.h"
#include "core/tolerances.h"
#include "core/topk_check.h"
#include "oracle/decode_metadata.h"
#include "oracle/decode_step.h"
#include "oracle/k_cache_gather.h"
#include "oracle/k_cache_insert.h"
#include "oracle/mla_decode.h"
#include "oracle/mqa_logits.h"
#include "oracle/oracle_tensor.h"
#include "oracle/quantize.h"
#include "oracle/sparse_mla.h"
#include "oracle/topk.h"
