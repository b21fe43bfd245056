// Generators of pack_decode cases (properties/pack_decode_gen.h).
#include "properties/pack_decode_gen.h"
