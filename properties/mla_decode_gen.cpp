// Generators of mla_decode cases (properties/mla_decode_gen.h).
#include "properties/mla_decode_gen.h"
