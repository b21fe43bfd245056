// Generators of sparse_mla cases (properties/sparse_mla_gen.h).
#include "properties/sparse_mla_gen.h"
