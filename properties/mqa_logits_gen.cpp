// Generators of mqa_logits cases (properties/mqa_logits_gen.h).
#include "properties/mqa_logits_gen.h"
