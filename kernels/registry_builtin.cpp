// The built-in implementations: every production entry point, registered as <op>@ref.
#include "kernels/pack_decode_glue.h"
#include "kernels/registry.h"

namespace mlacheck::kernels {

Registry& registry() {
  static Registry r = [] {
    Registry reg;
    reg.add({"pack_decode", "ref", "token rows -> left-aligned [B, next_n'] slots, padding slots zeroed"}, &pack_decode);
    reg.add({"unpack_decode", "ref", "[B, next_n'] slots -> the T token rows, padding slots never read"}, &unpack_decode);
    reg.add({"topk_to_global", "ref", "request-local top-k indices -> global KV slots through the block table"},
            &topk_to_global);
    return reg;
  }();
  return r;
}

}  // namespace mlacheck::kernels
