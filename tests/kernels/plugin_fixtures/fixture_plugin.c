/* Plugins that misbehave, one per FIXTURE_* define (tests/kernels/CMakeLists.txt builds each): what
 * mlacheck must turn into a clear error or a verdict, never a crash of its own. */
#include <stdlib.h>
#include <string.h>

#include "mlacheck/plugin.h"

/* Each fixture registers its own name, so that tests can load several into one process. */
#if defined(FIXTURE_IMPL_ERROR)
#define FIXTURE_NAME "fixture_error"
#elif defined(FIXTURE_IMPL_CRASH)
#define FIXTURE_NAME "fixture_crash"
#elif defined(FIXTURE_IMPL_HANG)
#define FIXTURE_NAME "fixture_hang"
#elif defined(FIXTURE_CONTRACT)
#define FIXTURE_NAME "fixture_contract"
#elif defined(FIXTURE_BAD_CONTRACT)
#define FIXTURE_NAME "fixture_bad_contract"
#elif defined(FIXTURE_BAD_LAYOUT)
#define FIXTURE_NAME "fixture_bad_layout"
#elif defined(FIXTURE_V1_CONTRACT)
#define FIXTURE_NAME "fixture_v1"
#elif defined(FIXTURE_V2_METADATA)
#define FIXTURE_NAME "fixture_v2"
#elif defined(FIXTURE_V3_K_CACHE)
#define FIXTURE_NAME "fixture_v3"
#elif defined(FIXTURE_V4_K_CACHE_GATHER)
#define FIXTURE_NAME "fixture_v4"
#elif defined(FIXTURE_STATEFUL)
#define FIXTURE_NAME "fixture_stateful"
#else
#define FIXTURE_NAME "fixture"
#endif

#if defined(FIXTURE_V2_METADATA)
/* Never called: the registration is refused. */
static int make_builder(const mlacheck_device* device, const mlacheck_decode_metadata_limits* limits,
                        const mlacheck_decode_metadata_buffers* buffers, mlacheck_decode_metadata_builder* out,
                        char* error, size_t error_size) {
  (void)device, (void)limits, (void)buffers, (void)out;
  return mlacheck_error(error, error_size, "fixture: never makes a builder");
}
#endif

#if defined(FIXTURE_V3_K_CACHE)
/* Never called: the registration is refused. */
static int insert_keys(const mlacheck_device* device, const mlacheck_indexer_k_cache_insert_args* a, char* error,
                       size_t error_size) {
  (void)device, (void)a;
  return mlacheck_error(error, error_size, "fixture: never inserts");
}
#endif

#if defined(FIXTURE_V4_K_CACHE_GATHER)
/* Never called: the registration is refused. */
static int gather_keys(const mlacheck_device* device, const mlacheck_indexer_k_cache_gather_args* a, char* error,
                       size_t error_size) {
  (void)device, (void)a;
  return mlacheck_error(error, error_size, "fixture: never gathers");
}
#endif

#if defined(FIXTURE_STATEFUL)
/* An MLA impl whose forward writes one byte past the scratch it asked mlacheck for, and one that asks
 * for a negative size (make fails with the allocator's reason). */
typedef struct {
  unsigned char* scratch;
} stray_state;
static int stray_forward(void* state, const mlacheck_device* device, const mlacheck_mla_decode_call* call,
                         int64_t* num_splits, char* error, size_t error_size) {
  (void)device, (void)call, (void)error, (void)error_size;
  ((stray_state*)state)->scratch[64] = 7; /* one past the 64 bytes it asked for */
  *num_splits = 1;
  return 0;
}
static int stray_capture(void* state, const mlacheck_device* device, const mlacheck_mla_decode_capture* capture,
                         void** graph, char* error, size_t error_size) {
  (void)state, (void)device, (void)capture, (void)graph;
  return mlacheck_error(error, error_size, "fixture: never captures");
}
static int stray_replay(void* state, const mlacheck_device* device, void* graph, char* error, size_t error_size) {
  (void)state, (void)device, (void)graph;
  return mlacheck_error(error, error_size, "fixture: never replays");
}
static void stray_destroy(void* state) { free(state); }
static int make_stray(const mlacheck_device* device, const mlacheck_mla_decode_impl_config* config,
                      const mlacheck_tensor* workspace, const mlacheck_allocator* allocator,
                      mlacheck_mla_decode_impl* out, char* error, size_t error_size) {
  (void)device, (void)config, (void)workspace;
  stray_state* s = (stray_state*)calloc(1, sizeof(stray_state));
  void* scratch = NULL;
  if (s == NULL) return mlacheck_error(error, error_size, "fixture: out of memory");
  if (allocator->allocate(allocator->context, "scratch", 64, &scratch, error, error_size) != 0) {
    free(s);
    return 1;
  }
  s->scratch = (unsigned char*)scratch;
  out->state = s, out->forward = stray_forward, out->capture = stray_capture, out->replay = stray_replay;
  out->release = NULL, out->destroy = stray_destroy;
  return 0;
}
static int make_negative(const mlacheck_device* device, const mlacheck_mla_decode_impl_config* config,
                         const mlacheck_tensor* workspace, const mlacheck_allocator* allocator,
                         mlacheck_mla_decode_impl* out, char* error, size_t error_size) {
  void* scratch = NULL;
  (void)device, (void)config, (void)workspace, (void)out;
  return allocator->allocate(allocator->context, "minus one", -1, &scratch, error, error_size);
}
#endif

/* An implementation of top-k decode that writes each row as if its length were 0. */
static int fill_minus_one(const mlacheck_device* device, const mlacheck_topk_decode_args* a, char* error,
                          size_t error_size) {
  if (device->backend != MLACHECK_BACKEND_HOST) return mlacheck_error(error, error_size, "fixture: host only");
#if defined(FIXTURE_IMPL_ERROR)
  (void)a;
  return mlacheck_error(error, error_size, "fixture: this implementation refuses every call");
#elif defined(FIXTURE_IMPL_CRASH)
  (void)a;
  volatile int* wild = (volatile int*)16;
  *wild = 1; /* a crash, as a wild pointer in a kernel would */
  return 0;
#elif defined(FIXTURE_IMPL_HANG)
  (void)a;
  for (volatile int spin = 1; spin;) {
  } /* never returns, as a kernel spinning on a flag no block sets */
  return 0;
#else
  for (int64_t r = 0; r < a->out.shape[0]; ++r) {
    int32_t* row = (int32_t*)a->out.data + r * a->out.strides[0];
    for (int64_t i = 0; i < a->k; ++i) row[i] = -1;
  }
  return 0;
#endif
}

static int register_impls(const mlacheck_plugin_api* api) {
#if defined(FIXTURE_REGISTER_CRASH)
  (void)api;
  abort();
#elif defined(FIXTURE_UNKNOWN_OP)
  return api->add(api->context, "no_such_op", "fixture", "an op mlacheck does not have", (mlacheck_impl_fn)fill_minus_one,
                  NULL, 0);
#elif defined(FIXTURE_REFUSES)
  (void)api;
  return 3;
#elif defined(FIXTURE_STATEFUL)
  if (MLACHECK_ADD_MLA_DECODE_IMPL(api, "fixture_stray", "writes past its own allocation", make_stray) != 0) return 1;
  return MLACHECK_ADD_MLA_DECODE_IMPL(api, "fixture_negative", "asks for -1 bytes", make_negative);
#elif defined(FIXTURE_V4_K_CACHE_GATHER)
  return MLACHECK_ADD_INDEXER_K_CACHE_GATHER(api, FIXTURE_NAME, "the K-cache gather from a version 4 plugin",
                                             gather_keys);
#elif defined(FIXTURE_V3_K_CACHE)
  return MLACHECK_ADD_INDEXER_K_CACHE_INSERT(api, FIXTURE_NAME, "the K-cache insert from a version 3 plugin",
                                             insert_keys);
#elif defined(FIXTURE_V2_METADATA)
  return MLACHECK_ADD_DECODE_METADATA(api, FIXTURE_NAME, "a stateful builder from a version 2 plugin", make_builder);
#elif defined(FIXTURE_BAD_CONTRACT) || defined(FIXTURE_BAD_LAYOUT) || defined(FIXTURE_V1_CONTRACT) || \
    defined(FIXTURE_CONTRACT)
  if (MLACHECK_ADD_TOPK_DECODE(api, FIXTURE_NAME, "a fixture with a contract", fill_minus_one) != 0) return 1;
#if defined(FIXTURE_BAD_CONTRACT)
  return MLACHECK_CONTRACT(api, "topk_decode", FIXTURE_NAME, "k in [10, 5]");
#elif defined(FIXTURE_BAD_LAYOUT)
  return MLACHECK_CONTRACT(api, "topk_decode", FIXTURE_NAME, "k <= 64\nout diagonal");
#else
  /* Rows of length 0 only: every row is all -1, which fill_minus_one writes. */
  return MLACHECK_CONTRACT(api, "topk_decode", FIXTURE_NAME, "seq_lens <= 0; seq_lens rank 2; out padded-rows");
#endif
#else
  return MLACHECK_ADD_TOPK_DECODE(api, FIXTURE_NAME, "a fixture of tests/kernels/plugin_test.cpp", fill_minus_one);
#endif
}

#if defined(FIXTURE_NO_SYMBOL)
int not_a_plugin(void) { return register_impls(NULL); }
#elif defined(FIXTURE_V2_METADATA)
/* Declaring version 2, as a plugin built before stateful ops: adding a builder is refused. */
MLACHECK_PLUGIN_EXTERN_C MLACHECK_PLUGIN_EXPORT const mlacheck_plugin_info mlacheck_plugin = {2, "fixture v2",
                                                                                    register_impls};
#elif defined(FIXTURE_V3_K_CACHE)
/* Declaring version 3, as a plugin built before the K-cache insert: adding one is refused. */
MLACHECK_PLUGIN_EXTERN_C MLACHECK_PLUGIN_EXPORT const mlacheck_plugin_info mlacheck_plugin = {3, "fixture v3",
                                                                                    register_impls};
#elif defined(FIXTURE_V4_K_CACHE_GATHER)
/* Declaring version 4, as a plugin built before the K-cache gather: adding one is refused. */
MLACHECK_PLUGIN_EXTERN_C MLACHECK_PLUGIN_EXPORT const mlacheck_plugin_info mlacheck_plugin = {4, "fixture v4",
                                                                                    register_impls};
#elif defined(FIXTURE_V1_CONTRACT)
/* Built against version 2 but declaring version 1, as a plugin of version 1 would: contract() is
 * refused with a line saying so. */
MLACHECK_PLUGIN_EXTERN_C MLACHECK_PLUGIN_EXPORT const mlacheck_plugin_info mlacheck_plugin = {1, "fixture v1",
                                                                                    register_impls};
#elif defined(FIXTURE_WRONG_VERSION)
MLACHECK_PLUGIN_EXTERN_C MLACHECK_PLUGIN_EXPORT const mlacheck_plugin_info mlacheck_plugin = {MLACHECK_PLUGIN_ABI_VERSION + 98,
                                                                                    "wrong version", register_impls};
#else
MLACHECK_DEFINE_PLUGIN("fixture", register_impls)
#endif
