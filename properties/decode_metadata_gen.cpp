// Generators of decode_metadata cases (properties/decode_metadata_gen.h).
#include "properties/decode_metadata_gen.h"
