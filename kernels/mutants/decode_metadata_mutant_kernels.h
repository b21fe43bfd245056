// Launchers of the decode-metadata expansion kernels with one wrong decision each
// (kernels/mutants/decode_metadata_mutant_kernels.cu), per backend like kernels/decode_metadata.h.
#pragma once

#include "kernels/decode_metadata.h"

namespace mlacheck::kernels {

#define MLA_DECODE_METADATA_MUTANT_LAUNCHERS                                          \
  void expand_metadata_uniform_u3(const ExpandMetadataParams& p, void* stream);      \
  void expand_metadata_general_u3(const ExpandMetadataParams& p, void* stream);      \
  void expand_metadata_uniform_u6(const ExpandMetadataParams& p, void* stream);
namespace host { MLA_DECODE_METADATA_MUTANT_LAUNCHERS }
namespace cuda { MLA_DECODE_METADATA_MUTANT_LAUNCHERS }
namespace hip { MLA_DECODE_METADATA_MUTANT_LAUNCHERS }
#undef MLA_DECODE_METADATA_MUTANT_LAUNCHERS

}  // namespace mlacheck::kernels
