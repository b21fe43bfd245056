// Generators of topk cases (properties/topk_gen.h).
#include "properties/topk_gen.h"
