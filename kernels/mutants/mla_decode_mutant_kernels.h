// Launchers of the dense MLA decode kernels with one wrong decision each
// (kernels/mutants/mla_decode_mutant_kernels.cu), per backend like kernels/mla_decode.h.
#pragma once

#include "kernels/mla_decode.h"

namespace mlacheck::kernels {

#define MLA_MLA_DECODE_MUTANT_LAUNCHERS \
  void launch_mla_decode_merge_t5(const MlaDecodeParams& p, void* stream);
namespace host { MLA_MLA_DECODE_MUTANT_LAUNCHERS }
namespace cuda { MLA_MLA_DECODE_MUTANT_LAUNCHERS }
namespace hip { MLA_MLA_DECODE_MUTANT_LAUNCHERS }
#undef MLA_MLA_DECODE_MUTANT_LAUNCHERS

}  // namespace mlacheck::kernels
