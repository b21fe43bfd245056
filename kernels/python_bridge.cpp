// Python callables as implementations (kernels/python_bridge.h): one plugin function per op that
// turns the op's C arguments into a call of the Python function (the stateful ops: an object made
// once, then its methods), and their registration. The worker process and the memory it is lent
// are kernels/python_worker.h.
//
// (Past 500 lines on purpose: the fourteen ops' argument lists are one translation between
// mlacheck's C interface and the worker's messages, read together.)
#include "kernels/python_bridge.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/backend/isolate.h"
#include "core/contract.h"
#include "core/error.h"
#include "core/shared_arena.h"
#include "kernels/plugin.h"
#include "kernels/registry.h"
#include "mlacheck/plugin.h"
#include "kernels/case_clock.h"
#include "kernels/interpreter_cost.h"
#include "kernels/python_worker.h"
#include "core/json_text.h"


namespace mlacheck::kernels {
namespace {

using python_worker::Reply;
using text::json_quote;

// ---- what was registered ----------------------------------------------------------------------------

struct Spec {
  std::string text;              // as given: "[OP=]MODULE:CALLABLE"
  std::string op;                // as given, or "" (the worker finds it)
  std::string module, callable;
};

struct Registered {
  std::vector<Spec> specs;
  std::map<std::string, std::string> spec_of_op;  // op -> the spec's text
};
Registered& registered() {
  static auto* r = new Registered;  // never destroyed: the registry points at its functions
  return *r;
}


bool is_op(const std::string& op) {
  for (const std::string& o : plugin_ops()) {
    if (o == op) return true;
  }
  return false;
}

// Whether this process's worker runs its callables' Triton kernels in the interpreter (host backend,
// TRITON_INTERPRET=1, Triton imported by the user's module): its "load" reply says.
bool& interpreted() {
  static bool b = false;
  return b;
}

// ---- messages ------------------------------------------------------------------------------------

// A JSON object of named arguments: tensors, numbers, integer lists, nested namespaces.
class Args {
 public:
  explicit Args(int64_t scope) : scope_(scope) {}
  Args& tensor(const char* name, const mlacheck_tensor& t) {
    if (t.data != nullptr) {
      int64_t n = 1;
      for (int i = 0; i < t.rank; ++i) n *= t.shape[i];
      elements_ += n;
    }
    return raw(name, "{\"t\":" + python_worker::describe(t, scope_) + "}");
  }
  Args& integer(const char* name, int64_t v) { return raw(name, std::to_string(v)); }
  Args& real(const char* name, double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return raw(name, buf);
  }
  // An optional array (a host copy "or NULL") is None when absent; a required one is a list, empty
  // when its count is 0 (its pointer may then be NULL).
  Args& ints(const char* name, const int32_t* p, int64_t n, bool optional = true) {
    if (p == nullptr && (optional || n > 0)) return raw(name, "null");
    std::string s = "[";
    for (int64_t i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(p[i]);
    return raw(name, s + "]");
  }
  Args& ns(const char* name, const Args& inner) {
    elements_ += inner.elements_;
    return raw(name, "{\"ns\":" + inner.json() + "}");
  }
  Args& raw(const char* name, const std::string& value) {
    body_ += std::string(body_.empty() ? "" : ",") + "\"" + name + "\":" + value;
    names_.emplace_back(name);
    return *this;
  }
  const std::vector<std::string>& names() const { return names_; }  // in the order they were given
  std::string json() const { return "{" + body_ + "}"; }
  Args nested() const { return Args(scope_); }
  int64_t elements() const { return elements_; }  // of the tensors passed, nested ones too

 private:
  int64_t scope_;
  std::string body_;
  std::vector<std::string> names_;
  int64_t elements_ = 0;
};

// What each stateless op's call, and each stateful op's factory, passes, by name, as JSON
// ({"topk_decode": ["logits", ...], "decode_metadata": ["limits", "buffers"], ...}): each built
// once on zeroed arguments with nothing sent (a dry run), so the worker can refuse a callable whose
// parameters name something no call passes when it loads it, in one line, instead of failing every
// case. Defined after the ops' calls.
std::string op_arg_names_json();
thread_local std::vector<std::string>* dry_run_names = nullptr;

// The "load" message: every registered callable, for backend.
std::string load_message(const std::string& backend, int32_t device_index) {
  std::string specs;
  for (const Spec& s : registered().specs) {
    specs += std::string(specs.empty() ? "" : ",") + "{\"spec\":" + json_quote(s.text) + ",\"op\":" + json_quote(s.op) +
             ",\"module\":" + json_quote(s.module) + ",\"callable\":" + json_quote(s.callable) + "}";
  }
  // The file whose age the case timeout measures, kept fresh while Triton compiles: in the message,
  // since a worker lent by the parent (python_worker.h) was started before this process had one.
  return "{\"cmd\":\"load\",\"backend\":\"" + backend + "\",\"device\":" + std::to_string(device_index) +
         ",\"progress\":" + json_quote(case_clock::state().progress_file) + ",\"op_args\":" +
         op_arg_names_json() + ",\"specs\":[" + specs + "]}";
}

// What a worker was loaded for, as python_worker::lend_to_first_child and adopt_lent compare it.
std::string lend_key(const std::string& backend, int32_t device_index) {
  return backend + " " + std::to_string(device_index);
}

// A worker's start (the interpreter, torch, the user's module) is not the case's time: the case
// that first calls it is kept alive while it loads, up to the start limit, which the probe keeps
// too: 120 s unless the command sets it from its budget (set_python_start_limit).
double& start_limit() {
  static double s = 120;
  return s;
}

// Loads the worker for this process's backend on first use.
void load_worker(const mlacheck_device* device) {
  if (python_worker::started()) return;
  python_worker::set_backend(device->backend);
  MLA_REQUIRE(device->backend != MLACHECK_BACKEND_HIP, "a Python callable cannot run on the hip backend (torch has "
              "no hip device in this build's scope)");
  const std::string backend = device->backend == MLACHECK_BACKEND_CUDA ? "cuda" : "host";
  // The worker the command's probe started, when this is the first child to ask (it loaded the
  // callables for this backend already: this load is quick); else one of this process's own.
  python_worker::adopt_lent(lend_key(backend, device->device_index));
  Reply r;
  keep_alive_during(start_limit(), [&] {
    r = python_worker::request(load_message(backend, device->device_index));
  });
  MLA_REQUIRE(r.status == "ok", "--python: ", r.message);
  const auto it = r.values.find("interpreted");
  interpreted() = it != r.values.end() && !it->second.empty() && it->second[0] == "1";
}

std::string who(const std::string& op) {
  const auto it = registered().spec_of_op.find(op);
  return op + "@py (" + (it == registered().spec_of_op.end() ? "?" : it->second) + ")";
}

// Sends cmd with its members and args; throws for a failed or crashed reply. elements: of the
// tensors a call that runs kernels is handed (a stateless call, a stateful object's step), for the
// interpreter's cost model; -1 for the rest (making an object, releasing one).
Reply exchange(const std::string& op, const mlacheck_device* device, const std::string& cmd,
               const std::string& members, const Args* args, int64_t elements = -1) {
  load_worker(device);
  std::string json = "{\"cmd\":\"" + cmd + "\",\"op\":\"" + op + "\"" + members;
  if (args != nullptr) json += ",\"args\":" + args->json();
  // The blocks to open (the host arena's file, the first time) go with the message actually sent: a
  // call the interpreter's cost model skips sends nothing, and must not take them (the next call
  // would name a block the worker was never lent: KeyError 0, found by fuzzing).
  const auto request = [&] {
    python_worker::settle_before_lending(device->backend, device->stream);
    int fd = -1;
    const std::string message = json + python_worker::take_members(&fd) + "}";
    return python_worker::request(message, fd);
  };
  Reply r;
  if (interpreted() && elements >= 0) {
    interpreted_call(op, elements, [&] { r = request(); });
  } else {
    r = request();
  }
  if (r.status == "crashed") throw ContextLost(who(op) + " crashed the GPU: " + r.message, r.fault);
  MLA_REQUIRE(r.status == "ok", who(op), " ", r.message);
  return r;
}

int64_t int_value(const Reply& r, const std::string& name, const std::string& op) {
  const auto it = r.values.find(name);
  MLA_REQUIRE(it != r.values.end(), who(op), ": the worker gave no '", name, "'");
  if (r.kinds.at(name) == "none") return 0;
  MLA_REQUIRE(r.kinds.at(name) == "int" && it->second.size() == 1, who(op), ": '", name, "' is not an integer");
  return std::stoll(it->second[0]);
}

mlacheck_tensor tensor_value(const Reply& r, const std::string& name, const std::string& op) {
  mlacheck_tensor t{};
  const auto it = r.values.find(name);
  MLA_REQUIRE(it != r.values.end(), who(op), ": the worker gave no '", name, "'");
  if (r.kinds.at(name) == "none") return t;
  const std::vector<std::string>& v = it->second;
  MLA_REQUIRE(v.size() >= 4, who(op), ": '", name, "' is not a tensor");
  const int rank = std::stoi(v[3]);
  MLA_REQUIRE(rank >= 0 && rank <= MLACHECK_MAX_RANK && v.size() == 4 + 2 * static_cast<size_t>(rank), who(op),
              ": '", name, "' has a malformed shape");
  t.data = python_worker::address(std::stoll(v[0]), std::stoll(v[1]));
  t.dtype = std::stoi(v[2]);
  t.rank = rank;
  for (int i = 0; i < rank; ++i) t.shape[i] = std::stoll(v[4 + i]), t.strides[i] = std::stoll(v[4 + rank + i]);
  return t;
}

std::string want(const std::vector<std::pair<const char*, const char*>>& fields) {
  std::string s = ",\"want\":[";
  for (size_t i = 0; i < fields.size(); ++i) {
    s += std::string(i ? "," : "") + "[\"" + fields[i].first + "\",\"" + fields[i].second + "\"]";
  }
  return s + "]";
}

// ---- the stateless ops: one call, the answer written in place ----------------------------------------

// In a dry run (op_arg_names_json): the names fill passes recorded, and true (nothing is sent).
bool dry_run(const std::function<void(Args&)>& fill) {
  if (dry_run_names == nullptr) return false;
  Args a(0);
  fill(a);
  *dry_run_names = a.names();
  return true;
}

int stateless(const char* op, const mlacheck_device* device, const std::function<void(Args&)>& fill) {
  if (dry_run(fill)) return 0;
  load_worker(device);
  const int64_t scope = python_worker::new_scope();
  Args a(scope);
  fill(a);
  try {
    exchange(op, device, "call", ",\"what\":\"" + std::string(op) + "\"", &a, a.elements());
  } catch (...) {
    python_worker::end_scope(scope);
    throw;
  }
  python_worker::end_scope(scope);
  return 0;
}

int py_topk_decode(const mlacheck_device* d, const mlacheck_topk_decode_args* a, char*, size_t) {
  return stateless("topk_decode", d, [&](Args& x) {
    x.tensor("logits", a->logits).integer("next_n", a->next_n).tensor("seq_lens", a->seq_lens).integer("k", a->k);
    x.tensor("out", a->out).tensor("workspace", a->workspace);
  });
}
int py_topk_prefill(const mlacheck_device* d, const mlacheck_topk_prefill_args* a, char*, size_t) {
  return stateless("topk_prefill", d, [&](Args& x) {
    x.tensor("logits", a->logits).tensor("ks", a->ks).tensor("ke", a->ke).integer("k", a->k);
    x.tensor("out", a->out).tensor("workspace", a->workspace);
  });
}
int py_paged_mqa_logits(const mlacheck_device* d, const mlacheck_paged_mqa_logits_args* a, char*, size_t) {
  return stateless("paged_mqa_logits", d, [&](Args& x) {
    x.tensor("q", a->q).tensor("kv_blocks", a->kv_blocks).tensor("weights", a->weights);
    x.tensor("context_lens", a->context_lens).tensor("block_table", a->block_table).tensor("logits", a->logits);
    x.integer("block_size", a->block_size).integer("max_context_len", a->max_context_len).integer("clean", a->clean);
    x.ints("host_context_lens", a->host_context_lens, a->host_context_lens_count);
  });
}
int py_mqa_logits(const mlacheck_device* d, const mlacheck_mqa_logits_args* a, char*, size_t) {
  return stateless("mqa_logits", d, [&](Args& x) {
    x.tensor("q", a->q).tensor("k", a->k).tensor("k_scale", a->k_scale).tensor("weights", a->weights);
    x.tensor("ks", a->ks).tensor("ke", a->ke).tensor("logits", a->logits).integer("clean", a->clean);
    x.ints("host_ks", a->host_ks, a->host_ks != nullptr ? a->host_rows : 0);
    x.ints("host_ke", a->host_ke, a->host_ke != nullptr ? a->host_rows : 0);
  });
}
constexpr char kPackDecode[] = "pack_decode", kUnpackDecode[] = "unpack_decode";
template <const char* kOp>
int py_pack(const mlacheck_device* d, const mlacheck_pack_decode_args* a, char*, size_t) {
  return stateless(kOp, d, [&](Args& x) {
    x.tensor("query_start_loc", a->query_start_loc).tensor("tokens", a->tokens).tensor("packed", a->packed);
  });
}
int py_topk_to_global(const mlacheck_device* d, const mlacheck_topk_to_global_args* a, char*, size_t) {
  return stateless("topk_to_global", d, [&](Args& x) {
    x.tensor("query_start_loc", a->query_start_loc).tensor("local", a->local).tensor("block_table", a->block_table);
    x.tensor("global", a->global).integer("page", a->page);
  });
}
int py_sparse_mla_decode(const mlacheck_device* d, const mlacheck_sparse_mla_decode_args* a, char*, size_t) {
  return stateless("sparse_mla_decode", d, [&](Args& x) {
    x.tensor("q", a->q).tensor("kv_cache", a->kv_cache).tensor("indices", a->indices);
    x.tensor("topk_length", a->topk_length).tensor("attn_sink", a->attn_sink).tensor("out", a->out);
    x.tensor("lse", a->lse).real("softmax_scale", a->softmax_scale);
  });
}
int py_mla_decode(const mlacheck_device* d, const mlacheck_mla_decode_args* a, char*, size_t) {
  return stateless("mla_decode", d, [&](Args& x) {
    x.tensor("q", a->q).tensor("kv_cache", a->kv_cache).tensor("block_table", a->block_table);
    x.tensor("seq_lens", a->seq_lens).tensor("workspace", a->workspace).tensor("o", a->o).tensor("lse", a->lse);
    x.real("base_scale", a->base_scale).real("q_scale", a->q_scale).real("k_scale", a->k_scale);
    x.integer("num_splits", a->num_splits).ints("host_seq_lens", a->host_seq_lens, a->host_seq_lens_count);
  });
}
int py_indexer_k_cache_insert(const mlacheck_device* d, const mlacheck_indexer_k_cache_insert_args* a, char*, size_t) {
  return stateless("indexer_k_cache_insert", d, [&](Args& x) {
    x.tensor("k", a->k).tensor("slot_mapping", a->slot_mapping).tensor("kv_cache", a->kv_cache);
    x.integer("block_size", a->block_size).integer("ue8m0", a->ue8m0);
  });
}
int py_indexer_k_cache_gather(const mlacheck_device* d, const mlacheck_indexer_k_cache_gather_args* a, char*, size_t) {
  return stateless("indexer_k_cache_gather", d, [&](Args& x) {
    x.tensor("kv_cache", a->kv_cache).tensor("block_table", a->block_table).tensor("cu_seq_lens", a->cu_seq_lens);
    x.tensor("dst_k", a->dst_k).tensor("dst_scale", a->dst_scale).integer("block_size", a->block_size);
  });
}

// ---- the stateful ops: an object in the worker, its scope's memory kept open for its life ----------------

struct PyObj {
  std::string op;
  int64_t scope = 0, id = 0;
  mlacheck_device device{};
  int64_t captured_elements = 0;  // of the last capture's tensors: what a replay runs over
};

// Makes the object: fn(**args) in the worker, which must have the methods named.
PyObj* make_object(const char* op, const mlacheck_device* device, const std::vector<const char*>& methods,
                      const std::function<void(Args&)>& fill) {
  if (dry_run(fill)) return nullptr;
  load_worker(device);
  auto obj = std::make_unique<PyObj>();
  obj->op = op, obj->scope = python_worker::new_scope(), obj->device = *device;
  Args a(obj->scope);
  fill(a);
  std::string members = ",\"what\":\"" + std::string(op) + "\",\"methods\":[";
  for (size_t i = 0; i < methods.size(); ++i) members += std::string(i ? "," : "") + "\"" + methods[i] + "\"";
  try {
    obj->id = int_value(exchange(op, device, "make", members + "]", &a), "object", op);
  } catch (...) {
    python_worker::end_scope(obj->scope);
    throw;
  }
  return obj.release();
}

// obj.method(*positional): positional is a JSON list; fields are what the result must give.
Reply call_method(PyObj& obj, const char* method, const std::string& positional,
                  const std::vector<std::pair<const char*, const char*>>& fields, int64_t elements,
                  bool keep = false) {
  const std::string members = ",\"what\":\"" + std::string(method) + "\",\"object\":" + std::to_string(obj.id) +
                              ",\"method\":\"" + method + "\",\"positional\":" + positional + want(fields) +
                              (keep ? ",\"keep\":true" : "");
  return exchange(obj.op, &obj.device, "method", members, nullptr, elements);
}

void forget(PyObj& obj, int64_t id, bool close) {
  exchange(obj.op, &obj.device, "forget",
           ",\"object\":" + std::to_string(id) + (close ? ",\"close\":true" : ""), nullptr);
}

void destroy_object(void* state) {
  std::unique_ptr<PyObj> obj(static_cast<PyObj*>(state));
  python_worker::end_scope(obj->scope);
  try {
    forget(*obj, obj->id, true);
  } catch (const std::exception&) {
    // destroy cannot report; a worker that died is reported by the call that killed it
  }
}

Args metadata_limits(Args a, const mlacheck_decode_metadata_limits& l) {
  a.integer("max_batched_tokens", l.max_batched_tokens).integer("max_requests", l.max_requests);
  a.integer("next_n", l.next_n).integer("block_table_width", l.block_table_width);
  return a;
}
Args metadata_buffers(Args a, const mlacheck_decode_metadata_buffers& b) {
  a.tensor("seq_lens", b.seq_lens).tensor("decode_lens", b.decode_lens).tensor("block_table", b.block_table);
  a.tensor("context_lens", b.context_lens);
  return a;
}
Args metadata_batch(Args a, const mlacheck_decode_metadata_batch& b) {
  a.tensor("seq_lens", b.seq_lens).tensor("decode_lens", b.decode_lens).tensor("query_start_loc", b.query_start_loc);
  a.tensor("block_table", b.block_table).ints("host_decode_lens", b.host_decode_lens, b.batch_size, false);
  a.ints("host_seq_lens", b.host_seq_lens, b.batch_size).integer("batch_size", b.batch_size);
  a.integer("num_decode_tokens", b.num_decode_tokens).integer("num_padded_tokens", b.num_padded_tokens);
  a.integer("layout", b.layout).integer("general_only", b.general_only);
  return a;
}

std::vector<std::pair<const char*, const char*>> metadata_result_fields(bool nested) {
  if (!nested) {
    return {{"layout", "int"},       {"path", "int"},      {"num_decode_tokens", "int"}, {"rows", "int"},
            {"next_n_live", "int"},  {"seq_lens", "tensor"}, {"block_table", "tensor"}, {"decode_lens", "tensor"},
            {"context_lens", "tensor"}};
  }
  return {{"metadata.layout", "int"},         {"metadata.path", "int"},
          {"metadata.num_decode_tokens", "int"}, {"metadata.rows", "int"},
          {"metadata.next_n_live", "int"},    {"metadata.seq_lens", "tensor"},
          {"metadata.block_table", "tensor"}, {"metadata.decode_lens", "tensor"},
          {"metadata.context_lens", "tensor"}};
}
void read_metadata_result(const Reply& r, const std::string& op, const std::string& prefix,
                          mlacheck_decode_metadata_result* out) {
  out->layout = static_cast<int32_t>(int_value(r, prefix + "layout", op));
  out->path = static_cast<int32_t>(int_value(r, prefix + "path", op));
  out->num_decode_tokens = int_value(r, prefix + "num_decode_tokens", op);
  out->rows = int_value(r, prefix + "rows", op);
  out->next_n_live = static_cast<int32_t>(int_value(r, prefix + "next_n_live", op));
  out->seq_lens = tensor_value(r, prefix + "seq_lens", op);
  out->block_table = tensor_value(r, prefix + "block_table", op);
  out->decode_lens = tensor_value(r, prefix + "decode_lens", op);
  out->context_lens = tensor_value(r, prefix + "context_lens", op);
}

// decode_metadata: make(limits, buffers) -> an object with build(batch).
int metadata_build(void* state, const mlacheck_device*, const mlacheck_decode_metadata_batch* batch,
                   mlacheck_decode_metadata_result* result, char*, size_t) {
  PyObj& obj = *static_cast<PyObj*>(state);
  const Args b = metadata_batch(Args(obj.scope), *batch);
  const Reply r = call_method(obj, "build", "[{\"ns\":" + b.json() + "}]", metadata_result_fields(false), b.elements());
  read_metadata_result(r, obj.op, "", result);
  return 0;
}
int py_decode_metadata(const mlacheck_device* d, const mlacheck_decode_metadata_limits* l,
                       const mlacheck_decode_metadata_buffers* b, mlacheck_decode_metadata_builder* builder, char*,
                       size_t) {
  PyObj* obj = make_object("decode_metadata", d, {"build"}, [&](Args& x) {
    x.ns("limits", metadata_limits(x.nested(), *l)).ns("buffers", metadata_buffers(x.nested(), *b));
  });
  *builder = mlacheck_decode_metadata_builder{obj, &metadata_build, &destroy_object};
  return 0;
}

// mla_decode_impl: make(config, workspace) -> an object with forward(call), capture(c), replay(graph),
// and optionally release(graph) and close().
int impl_forward(void* state, const mlacheck_device*, const mlacheck_mla_decode_call* c, int64_t* num_splits, char*,
                 size_t) {
  PyObj& obj = *static_cast<PyObj*>(state);
  Args a(obj.scope);
  a.tensor("q", c->q).tensor("kv_cache", c->kv_cache).tensor("block_table", c->block_table);
  a.tensor("seq_lens", c->seq_lens).tensor("o", c->o).tensor("lse", c->lse);
  a.ints("host_query_lens", c->host_query_lens, c->host_query_lens_count);  // None: the caller vouches
  a.ints("host_seq_lens", c->host_seq_lens, c->host_seq_lens_count);
  a.real("base_scale", c->base_scale).real("q_scale", c->q_scale).real("k_scale", c->k_scale);
  const Reply r = call_method(obj, "forward", "[{\"ns\":" + a.json() + "}]", {{".", "int"}}, a.elements());
  const int64_t n = int_value(r, ".", obj.op);
  if (num_splits != nullptr) *num_splits = n > 0 ? n : 1;
  return 0;
}
int impl_capture(void* state, const mlacheck_device*, const mlacheck_mla_decode_capture* c, void** graph, char*,
                 size_t) {
  PyObj& obj = *static_cast<PyObj*>(state);
  Args a(obj.scope);
  a.integer("padded_batch", c->padded_batch).integer("q_len", c->q_len);
  a.tensor("q", c->q).tensor("kv_cache", c->kv_cache).tensor("block_table", c->block_table);
  a.tensor("seq_lens", c->seq_lens).tensor("o", c->o).tensor("lse", c->lse);
  a.real("base_scale", c->base_scale).real("q_scale", c->q_scale).real("k_scale", c->k_scale);
  obj.captured_elements = a.elements();
  const Reply r = call_method(obj, "capture", "[{\"ns\":" + a.json() + "}]", {}, a.elements(), /*keep=*/true);
  *graph = reinterpret_cast<void*>(static_cast<intptr_t>(int_value(r, "object", obj.op)));
  return 0;
}
int impl_replay(void* state, const mlacheck_device*, void* graph, char*, size_t) {
  PyObj& obj = *static_cast<PyObj*>(state);
  call_method(obj, "replay", "[{\"obj\":" + std::to_string(reinterpret_cast<intptr_t>(graph)) + "}]", {},
              obj.captured_elements);
  return 0;
}
void impl_release(void* state, void* graph) {
  PyObj& obj = *static_cast<PyObj*>(state);
  const int64_t id = reinterpret_cast<intptr_t>(graph);
  try {
    // release(graph) when the object has one, then the worker lets the graph go.
    exchange(obj.op, &obj.device, "release", ",\"object\":" + std::to_string(obj.id) + ",\"graph\":" +
             std::to_string(id), nullptr);
  } catch (const std::exception&) {
  }
}
int py_mla_decode_impl(const mlacheck_device* d, const mlacheck_mla_decode_impl_config* c,
                       const mlacheck_tensor* workspace, const mlacheck_allocator*, mlacheck_mla_decode_impl* impl, char*,
                       size_t) {
  PyObj* obj = make_object("mla_decode_impl", d, {"forward", "capture", "replay"}, [&](Args& x) {
    Args cfg = x.nested();
    cfg.integer("max_batch", c->max_batch).integer("max_q_len", c->max_q_len).integer("heads", c->heads);
    cfg.integer("max_splits", c->max_splits).integer("block_table_width", c->block_table_width);
    cfg.integer("page", c->page).integer("q_dtype", c->q_dtype);
    x.ns("config", cfg).tensor("workspace", *workspace);
  });
  *impl = mlacheck_mla_decode_impl{obj, &impl_forward, &impl_capture, &impl_replay, &impl_release, &destroy_object};
  return 0;
}

// indexer_decode_step: make(limits, buffers) -> an object with run(inputs).
int step_run(void* state, const mlacheck_device*, const mlacheck_indexer_decode_step_inputs* in,
             mlacheck_indexer_decode_step_result* result, char*, size_t) {
  PyObj& obj = *static_cast<PyObj*>(state);
  Args a(obj.scope);
  a.ns("batch", metadata_batch(a.nested(), in->batch));
  a.tensor("index_q", in->index_q).tensor("index_weights", in->index_weights).tensor("kv_blocks", in->kv_blocks);
  a.integer("block_size", in->block_size).integer("max_context_len", in->max_context_len);
  a.tensor("topk_buffer", in->topk_buffer).tensor("topk_global", in->topk_global);
  std::vector<std::pair<const char*, const char*>> fields = metadata_result_fields(true);
  const std::vector<std::pair<const char*, const char*>> more = {
      {"num_decode_tokens", "int"}, {"rows", "int"},        {"next_n", "int"}, {"packed", "int"},
      {"padded_topk", "int"},       {"logits", "tensor"},   {"logits_row_of_token", "ints"},
      {"topk", "tensor"},           {"global", "tensor"}};
  fields.insert(fields.end(), more.begin(), more.end());
  const Reply r = call_method(obj, "run", "[{\"ns\":" + a.json() + "}]", fields, a.elements());
  read_metadata_result(r, obj.op, "metadata.", &result->metadata);
  result->num_decode_tokens = int_value(r, "num_decode_tokens", obj.op);
  result->rows = int_value(r, "rows", obj.op);
  result->next_n = int_value(r, "next_n", obj.op);
  result->packed = static_cast<int32_t>(int_value(r, "packed", obj.op));
  result->padded_topk = static_cast<int32_t>(int_value(r, "padded_topk", obj.op));
  result->logits = tensor_value(r, "logits", obj.op);
  result->topk = tensor_value(r, "topk", obj.op);
  result->global = tensor_value(r, "global", obj.op);
  const std::vector<std::string>& rows = r.values.at("logits_row_of_token");
  if (r.kinds.at("logits_row_of_token") == "ints" && result->logits_row_of_token != nullptr) {
    const int64_t n = std::stoll(rows.at(0));
    MLA_REQUIRE(n <= in->batch.num_decode_tokens, who(obj.op), ": logits_row_of_token has ", n,
                " entries for ", in->batch.num_decode_tokens, " tokens");
    for (int64_t i = 0; i < n; ++i) result->logits_row_of_token[i] = std::stoll(rows.at(1 + i));
  }
  return 0;
}
int py_indexer_decode_step(const mlacheck_device* d, const mlacheck_indexer_decode_step_limits* l,
                           const mlacheck_indexer_decode_step_buffers* b, const mlacheck_allocator*,
                           mlacheck_indexer_decode_step* step, char*, size_t) {
  PyObj* obj = make_object("indexer_decode_step", d, {"run"}, [&](Args& x) {
    Args lim = x.nested();
    lim.ns("metadata", metadata_limits(x.nested(), l->metadata)).integer("heads", l->heads);
    lim.integer("head_dim", l->head_dim).integer("topk", l->topk).integer("max_context_len", l->max_context_len);
    Args buf = x.nested();
    buf.ns("metadata", metadata_buffers(x.nested(), b->metadata)).tensor("packed_q", b->packed_q);
    buf.tensor("packed_weights", b->packed_weights).tensor("logits", b->logits);
    buf.tensor("padded_topk", b->padded_topk).tensor("workspace", b->workspace);
    x.ns("limits", lim).ns("buffers", buf);
  });
  *step = mlacheck_indexer_decode_step{obj, &step_run, &destroy_object};
  return 0;
}

std::string op_arg_names_json() {
  std::string out;
  const auto add = [&out](const char* op, const std::function<void()>& call) {
    std::vector<std::string> names;
    dry_run_names = &names;
    try {
      call();
    } catch (...) {
      dry_run_names = nullptr;
      throw;
    }
    dry_run_names = nullptr;
    out += std::string(out.empty() ? "" : ",") + json_quote(op) + ":[";
    for (size_t i = 0; i < names.size(); ++i) out += (i ? "," : "") + json_quote(names[i]);
    out += "]";
  };
  add("topk_decode", [] { mlacheck_topk_decode_args a{}; py_topk_decode(nullptr, &a, nullptr, 0); });
  add("topk_prefill", [] { mlacheck_topk_prefill_args a{}; py_topk_prefill(nullptr, &a, nullptr, 0); });
  add("paged_mqa_logits", [] { mlacheck_paged_mqa_logits_args a{}; py_paged_mqa_logits(nullptr, &a, nullptr, 0); });
  add("mqa_logits", [] { mlacheck_mqa_logits_args a{}; py_mqa_logits(nullptr, &a, nullptr, 0); });
  add("pack_decode", [] { mlacheck_pack_decode_args a{}; py_pack<kPackDecode>(nullptr, &a, nullptr, 0); });
  add("unpack_decode", [] { mlacheck_pack_decode_args a{}; py_pack<kUnpackDecode>(nullptr, &a, nullptr, 0); });
  add("topk_to_global", [] { mlacheck_topk_to_global_args a{}; py_topk_to_global(nullptr, &a, nullptr, 0); });
  add("sparse_mla_decode", [] { mlacheck_sparse_mla_decode_args a{}; py_sparse_mla_decode(nullptr, &a, nullptr, 0); });
  add("mla_decode", [] { mlacheck_mla_decode_args a{}; py_mla_decode(nullptr, &a, nullptr, 0); });
  add("indexer_k_cache_insert", [] {
    mlacheck_indexer_k_cache_insert_args a{};
    py_indexer_k_cache_insert(nullptr, &a, nullptr, 0);
  });
  add("indexer_k_cache_gather", [] {
    mlacheck_indexer_k_cache_gather_args a{};
    py_indexer_k_cache_gather(nullptr, &a, nullptr, 0);
  });
  // The stateful ops: what their factory is passed (the object's methods are checked when it is made).
  add("decode_metadata", [] {
    mlacheck_decode_metadata_limits l{};
    mlacheck_decode_metadata_buffers b{};
    mlacheck_decode_metadata_builder builder{};
    py_decode_metadata(nullptr, &l, &b, &builder, nullptr, 0);
  });
  add("mla_decode_impl", [] {
    mlacheck_mla_decode_impl_config c{};
    mlacheck_tensor workspace{};
    mlacheck_mla_decode_impl impl{};
    py_mla_decode_impl(nullptr, &c, &workspace, nullptr, &impl, nullptr, 0);
  });
  add("indexer_decode_step", [] {
    mlacheck_indexer_decode_step_limits l{};
    mlacheck_indexer_decode_step_buffers b{};
    mlacheck_indexer_decode_step step{};
    py_indexer_decode_step(nullptr, &l, &b, nullptr, &step, nullptr, 0);
  });
  return "{" + out + "}";
}

// ---- registration -------------------------------------------------------------------------------------

// What the probe found: the op of each spec and the callable's contract.
struct Found {
  std::map<std::string, std::string> op_of_spec, contract_of_op;
  std::map<std::string, std::string> mirrors_of_op;  // the docs/bugs.md row a seeded twin mirrors
};
Found& found() {
  static auto* f = new Found;
  return *f;
}

std::string json_unquote(const std::string& q) {
  std::string s;
  for (size_t i = 1; i + 1 < q.size(); ++i) {
    if (q[i] == '\\' && i + 2 < q.size()) {
      const char c = q[++i];
      s += c == 'n' ? '\n' : c == 't' ? '\t' : c;
    } else {
      s += q[i];
    }
  }
  return s;
}

int register_python(const mlacheck_plugin_api* api) {
  for (const Spec& s : registered().specs) {
    const std::string op = found().op_of_spec.at(s.text);
    const std::string summary = "python " + s.text + ": a Python callable (docs/python.md)";
    const char* name = "py";
    int rc = 1;
    if (op == "topk_decode") rc = MLACHECK_ADD_TOPK_DECODE(api, name, summary.c_str(), py_topk_decode);
    if (op == "topk_prefill") rc = MLACHECK_ADD_TOPK_PREFILL(api, name, summary.c_str(), py_topk_prefill);
    if (op == "paged_mqa_logits") rc = MLACHECK_ADD_PAGED_MQA_LOGITS(api, name, summary.c_str(), py_paged_mqa_logits);
    if (op == "mqa_logits") rc = MLACHECK_ADD_MQA_LOGITS(api, name, summary.c_str(), py_mqa_logits);
    if (op == "pack_decode") rc = MLACHECK_ADD_PACK_DECODE(api, name, summary.c_str(), py_pack<kPackDecode>);
    if (op == "unpack_decode") rc = MLACHECK_ADD_UNPACK_DECODE(api, name, summary.c_str(), py_pack<kUnpackDecode>);
    if (op == "topk_to_global") rc = MLACHECK_ADD_TOPK_TO_GLOBAL(api, name, summary.c_str(), py_topk_to_global);
    if (op == "sparse_mla_decode") {
      rc = MLACHECK_ADD_SPARSE_MLA_DECODE(api, name, summary.c_str(), py_sparse_mla_decode);
    }
    if (op == "mla_decode") rc = MLACHECK_ADD_MLA_DECODE(api, name, summary.c_str(), py_mla_decode);
    if (op == "indexer_k_cache_insert") {
      rc = MLACHECK_ADD_INDEXER_K_CACHE_INSERT(api, name, summary.c_str(), py_indexer_k_cache_insert);
    }
    if (op == "indexer_k_cache_gather") {
      rc = MLACHECK_ADD_INDEXER_K_CACHE_GATHER(api, name, summary.c_str(), py_indexer_k_cache_gather);
    }
    if (op == "decode_metadata") rc = MLACHECK_ADD_DECODE_METADATA(api, name, summary.c_str(), py_decode_metadata);
    if (op == "mla_decode_impl") rc = MLACHECK_ADD_MLA_DECODE_IMPL(api, name, summary.c_str(), py_mla_decode_impl);
    if (op == "indexer_decode_step") {
      rc = MLACHECK_ADD_INDEXER_DECODE_STEP(api, name, summary.c_str(), py_indexer_decode_step);
    }
    if (rc != 0) return rc;
    const std::string contract = found().contract_of_op[op];
    if (!contract.empty() && MLACHECK_CONTRACT(api, op.c_str(), name, contract.c_str()) != 0) return 1;
  }
  return 0;
}

const mlacheck_plugin_info kPythonPlugin = {MLACHECK_PLUGIN_ABI_VERSION, "python", &register_python};

// Starts a worker in a forked child that imports every callable; records each one's op and contract.
double& start_seconds() {
  static double s = 0;
  return s;
}

// The op, contract and mirrored row of each callable, from the probe's reply, as one string.
std::string found_of(const Reply& r) {
  std::string found_ops = "loaded";
  for (const auto& [name, v] : r.values) {
    if (r.kinds.at(name) == "op") found_ops += "\x1fop\x1e" + name + "\x1e" + (v.empty() ? "" : v[0]);
    if (r.kinds.at(name) == "contract") found_ops += "\x1f" "contract\x1e" + name + "\x1e" + (v.empty() ? "" : v[0]);
    if (r.kinds.at(name) == "mirrors") found_ops += "\x1f" "mirrors\x1e" + name + "\x1e" + (v.empty() ? "" : v[0]);
  }
  return found_ops;
}

// The probe in this process, for backend: the worker it starts, its callables loaded, is lent to
// the first child that runs cases on that backend (python_worker.h). "" when anything went other
// than well (the caller then probes in a child, which says what went wrong).
std::string probe_here(const std::string& backend) {
  try {
    const Reply r = python_worker::request_within(load_message(backend, 0), start_limit());
    if (r.status != "ok") return "";
    python_worker::lend_to_first_child(lend_key(backend, 0));
    return found_of(r);
  } catch (const std::exception&) {
    return "";
  }
}

// The probe in a forked child (its worker dies with it), for no backend in particular.
IsolatedOutcome probe_isolated() {
  // The worker starts in a child: this process forks the children that run the cases, and starts
  // nothing it would hand down to them.
  IsolationOptions opts;
  opts.timeout_seconds = start_limit();
  return run_isolated(
      [&]() -> std::string {
        // "probe": imports and names only; neither host (the interpreter) nor cuda (a device)
        const Reply r = python_worker::request(load_message("probe", 0));
        if (r.status != "ok") return "error: " + r.message;
        return found_of(r);
      },
      opts);
}

// Records each callable's op and contract from what the probe found; throws its error, one line.
void record_probe(const std::vector<std::string>& texts, const IsolatedOutcome& probe) {
  const std::string& m = probe.message;
  if (probe.kind != IsolatedOutcome::kViolation || m.rfind("loaded", 0) != 0) {
    registered().specs.clear();
    if (probe.kind == IsolatedOutcome::kViolation) {
      throw Error("--python " + texts.front() + ": " + (m.rfind("error: ", 0) == 0 ? m.substr(7) : m));
    }
    if (probe.kind == IsolatedOutcome::kTimedOut) {
      throw Error("--python " + texts.front() + ": the Python worker did not finish loading the callables (starting "
                  "the interpreter, importing torch and the module) in " + std::to_string(static_cast<int>(start_limit())) +
                  " s: a module that waits or loops at import? (the limit is the larger of 60 s and --budget)");
    }
    // The worker died while it imported (an exit or a crash at import): said as that, not as a call.
    std::string what = m;
    if (const size_t at = what.find(" during the call"); at != std::string::npos) {
      what.replace(at, 16, " while it loaded the callables (importing their modules)");
    }
    throw Error("--python " + texts.front() + ": " + what);
  }
  for (size_t at = m.find('\x1f'); at != std::string::npos;) {
    const size_t end = m.find('\x1f', at + 1);
    const std::string item = m.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
    const size_t a = item.find('\x1e'), b = item.find('\x1e', a + 1);
    const std::string kind = item.substr(0, a), name = item.substr(a + 1, b - a - 1), value = item.substr(b + 1);
    if (kind == "op") found().op_of_spec[name] = value;
    if (kind == "contract") found().contract_of_op[name] = json_unquote(value);
    if (kind == "mirrors") found().mirrors_of_op[name.substr(0, name.find('@'))] = value;  // "OP@mirrors"
    at = end;
  }
}

void probe_workers(const std::vector<std::string>& texts, const std::string& lend_for) {
  const auto started = std::chrono::steady_clock::now();
  // Every worker of this command, the probe's first, is forked by its zygote (python_worker.h). Not
  // when a module file is missing: the worker says so before torch is imported, and so in a moment.
  bool files = true;
  for (const Spec& s : registered().specs) {
    const bool py = s.module.size() > 3 && s.module.compare(s.module.size() - 3, 3, ".py") == 0;
    if (py && access(s.module.c_str(), F_OK) != 0) files = false;
  }
  if (files) python_worker::start_zygote();
  IsolatedOutcome probe;
  if (!lend_for.empty()) {
    probe.kind = IsolatedOutcome::kViolation;
    probe.message = probe_here(lend_for);
    if (probe.message.empty() &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() >= start_limit()) {
      probe.kind = IsolatedOutcome::kTimedOut;  // it ran out of time here: a child would wait as long again
      probe.message = "timed out";
    }
  }
  if (probe.message.empty()) probe = probe_isolated();
  start_seconds() = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  record_probe(texts, probe);
}

}  // namespace

void set_python_start_limit(double seconds) { start_limit() = std::max(60.0, seconds); }

double python_start_seconds() {
  // A worker lent to the first child (python_worker.h) is started already: that child spends nothing.
  return python_worker::lent_available() ? 0 : start_seconds();
}

std::string python_mirrors(const std::string& op) {
  const auto m = found().mirrors_of_op.find(op);
  return m == found().mirrors_of_op.end() ? "" : m->second;
}

std::string python_flags() {
  std::string s;
  for (const Spec& spec : registered().specs) s += " --python " + spec.text;
  return s;
}

namespace {

// Parses each "[OP=]MODULE:CALLABLE" into registered().specs.
void parse_specs(const std::vector<std::string>& texts) {
  MLA_REQUIRE(registered().specs.empty(), "--python: the callables are loaded once per run");
  for (const std::string& text : texts) {
    Spec s;
    s.text = text;
    std::string rest = text;
    const size_t eq = rest.find('=');
    if (eq != std::string::npos && rest.find(':') > eq) s.op = rest.substr(0, eq), rest = rest.substr(eq + 1);
    if (rest == "-") {  // OP=-: the Python process that started this one serves the calls
      MLA_REQUIRE(!s.op.empty(), "--python '", text, "': '-' needs its op (OP=-)");
      s.module = "-";
      registered().specs.push_back(s);
      continue;
    }
    const size_t colon = rest.rfind(':');
    MLA_REQUIRE(colon != std::string::npos && colon > 0 && colon + 1 < rest.size(), "--python '", text,
                "' is not [OP=]MODULE:CALLABLE (a module on sys.path or a .py file, then the function's name)");
    s.module = rest.substr(0, colon), s.callable = rest.substr(colon + 1);
    registered().specs.push_back(s);
  }
}

// Registers the parsed specs under the ops found for them; returns their implementations' names.
// in_this_process: this process runs cases itself (a fuzzing harness), not only its children.
std::vector<std::string> register_found(bool in_this_process) {
  std::vector<std::string> names;
  for (const Spec& s : registered().specs) {
    const std::string op = found().op_of_spec[s.text];
    MLA_REQUIRE(!op.empty(), "--python ", s.text, ": the worker named no op for it");
    MLA_REQUIRE(registered().spec_of_op.count(op) == 0, "--python ", s.text, ": ", op, "@py is ",
                registered().spec_of_op[op], " already (one Python callable per op)");
    registered().spec_of_op[op] = s.text;
    names.push_back(op + "@py");
  }
  if (in_this_process) {
    shared_arena::enable_here();
  } else {
    shared_arena::enable_for_children();
  }
  register_plugin(kPythonPlugin, "python");
  return names;
}

}  // namespace

std::vector<std::string> load_python_isolated(const std::vector<std::string>& texts, const std::string& lend_for) {
  if (texts.empty()) return {};
  parse_specs(texts);
  // OP=- (mlacheck.cases() in python/mlacheck): no worker to start or probe; the caller's socket is
  // $MLACHECK_DRIVER_FD, and every process of this run talks to it in turn.
  if (registered().specs.front().module == "-") {
    for (const Spec& s : registered().specs) {
      MLA_REQUIRE(s.module == "-", "--python ", s.text, ": OP=- serves every callable of a run, or none");
      MLA_REQUIRE(is_op(s.op), "--python ", s.text, ": '", s.op, "' is not an op");
      found().op_of_spec[s.text] = s.op;
      const char* contract = std::getenv("MLACHECK_PYTHON_CONTRACT");
      if (contract != nullptr) found().contract_of_op[s.op] = contract;
    }
    python_worker::serve_through_driver();
    MLA_REQUIRE(python_worker::driver_fd() >= 0, "--python ", texts.front(), ": OP=- is how mlacheck.cases() (python/mlacheck) "
                "runs this command; it passes its socket in MLACHECK_DRIVER_FD, which is not set to an open one");
  } else {
    probe_workers(texts, lend_for);
  }
  return register_found(false);
}

// Each spec as "TEXT\x1eOP\x1eCONTRACT", joined by \x1f (none of them holds either byte: a path or
// a contract's text).
std::string python_loaded_environment() {
  std::string v;
  for (const Spec& s : registered().specs) {
    const std::string op = found().op_of_spec[s.text];
    v += (v.empty() ? "" : "\x1f") + s.text + "\x1e" + op + "\x1e" + found().contract_of_op[op];
  }
  return v;
}

std::vector<std::string> load_python_from_environment() {
  const char* v = std::getenv("MLACHECK_PYTHON_LOADED");
  if (v == nullptr || *v == '\0') return {};
  std::vector<std::string> texts;
  const std::string all = v;
  for (size_t at = 0; at <= all.size();) {
    const size_t end = std::min(all.find('\x1f', at), all.size());
    const std::string item = all.substr(at, end - at);
    const size_t a = item.find('\x1e'), b = a == std::string::npos ? a : item.find('\x1e', a + 1);
    MLA_REQUIRE(b != std::string::npos, "MLACHECK_PYTHON_LOADED is malformed (it is set by mlacheck fuzz --python)");
    const std::string text = item.substr(0, a), op = item.substr(a + 1, b - a - 1);
    MLA_REQUIRE(is_op(op), "MLACHECK_PYTHON_LOADED names '", op, "', not an op");
    texts.push_back(text);
    found().op_of_spec[text] = op;
    if (b + 1 < item.size()) found().contract_of_op[op] = item.substr(b + 1);
    at = end + 1;
  }
  parse_specs(texts);
  return register_found(true);
}

}  // namespace mlacheck::kernels
