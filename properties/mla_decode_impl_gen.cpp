// Generators of mla_decode_impl call sequences (properties/mla_decode_impl_gen.h).
#include "properties/mla_decode_impl_gen.h"
