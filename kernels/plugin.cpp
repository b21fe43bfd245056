// Plugin loading and the calls into plugins (kernels/plugin.h).
#include "kernels/plugin.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>

#include "core/backend/isolate.h"
#include "core/contract.h"
#include "core/error.h"
#include "kernels/indexer_decode_step.h"
#include "kernels/k_cache_gather_glue.h"
#include "kernels/k_cache_insert_glue.h"
#include "kernels/metadata_builder.h"
#include "kernels/mla_decode_glue.h"
#include "kernels/mla_decode_impl.h"
#include "kernels/mqa_logits_glue.h"
#include "kernels/pack_decode_glue.h"
#include "kernels/plugin_calls.h"
#include "kernels/registry.h"
#include "kernels/sparse_mla_glue.h"
#include "kernels/topk_glue.h"
#include "mlacheck/plugin.h"

namespace mlacheck::kernels {
namespace {

// ---- what a call hands the plugin -------------------------------------------------------------

using plugin_calls::c_device;
using plugin_calls::c_tensor;
using plugin_calls::PluginImpl;

// The implementations of one op, by slot: slot I is called through the function slot<I>.
using Slots = std::array<const PluginImpl*, kMaxPluginImplementationsPerOp>;
std::map<std::string, Slots>& slots() {
  static auto* s = new std::map<std::string, Slots>;  // never destroyed: like the registry, lives to exit
  return *s;
}

// Calls slot's implementation of op through the op's own function type (it was registered as that
// type, erased to mlacheck_impl_fn; calling it as the erased type would be undefined).
template <class TypedFn, class Args>
void call(const std::string& op, size_t slot, Device& device, const Args& args) {
  const PluginImpl& impl = *slots().at(op)[slot];
  const mlacheck_device d = c_device(device);
  char error[1024] = "";
  const int rc = reinterpret_cast<TypedFn>(impl.fn)(&d, &args, error, sizeof error);
  error[sizeof error - 1] = '\0';
  if (rc != 0) plugin_calls::refused(impl, "the call", rc, error);
}

// ---- one entry point per op and slot, with the op's C++ type ---------------------------------

template <size_t I>
TopkPath topk_decode_slot(Device& device, const DeviceTensor& logits, int64_t next_n, const DeviceTensor& seq_lens,
                          int64_t k, const DeviceTensor& out, const DeviceTensor& workspace, const DeviceTensor&) {
  const mlacheck_topk_decode_args a{c_tensor(logits), next_n, c_tensor(seq_lens), k, c_tensor(out), c_tensor(workspace)};
  call<mlacheck_topk_decode_fn>("topk_decode", I, device, a);
  return TopkPath::kUnstated;  // the plugin's paths are its own
}
template <size_t I>
TopkPath topk_prefill_slot(Device& device, const DeviceTensor& logits, const DeviceTensor& ks, const DeviceTensor& ke,
                           int64_t k, const DeviceTensor& out, const DeviceTensor& workspace, const DeviceTensor&) {
  const mlacheck_topk_prefill_args a{c_tensor(logits), c_tensor(ks), c_tensor(ke), k, c_tensor(out), c_tensor(workspace)};
  call<mlacheck_topk_prefill_fn>("topk_prefill", I, device, a);
  return TopkPath::kUnstated;  // the plugin's paths are its own
}
template <size_t I>
void paged_mqa_logits_slot(Device& device, const PagedMqaLogitsArgs& p) {
  mlacheck_paged_mqa_logits_args a{};
  a.q = c_tensor(p.q), a.kv_blocks = c_tensor(p.kv_blocks), a.weights = c_tensor(p.weights);
  a.context_lens = c_tensor(p.context_lens), a.block_table = c_tensor(p.block_table), a.logits = c_tensor(p.logits);
  a.block_size = p.block_size, a.max_context_len = p.max_context_len, a.clean = p.mode == LogitsMode::kClean;
  if (p.host_context_lens != nullptr) {
    a.host_context_lens = p.host_context_lens->data();
    a.host_context_lens_count = static_cast<int64_t>(p.host_context_lens->size());
  }
  call<mlacheck_paged_mqa_logits_fn>("paged_mqa_logits", I, device, a);
}
template <size_t I>
void mqa_logits_slot(Device& device, const MqaLogitsArgs& p) {
  mlacheck_mqa_logits_args a{};
  a.q = c_tensor(p.q), a.k = c_tensor(p.k), a.k_scale = c_tensor(p.k_scale), a.weights = c_tensor(p.weights);
  a.ks = c_tensor(p.ks), a.ke = c_tensor(p.ke), a.logits = c_tensor(p.logits), a.clean = p.mode == LogitsMode::kClean;
  if (p.host_ks != nullptr && p.host_ke != nullptr) {
    a.host_ks = p.host_ks->data(), a.host_ke = p.host_ke->data();
    a.host_rows = static_cast<int64_t>(p.host_ks->size());
  }
  call<mlacheck_mqa_logits_fn>("mqa_logits", I, device, a);
}
template <size_t I>
void pack_decode_slot(Device& device, const DeviceTensor& qsl, const DeviceTensor& tokens, const DeviceTensor& packed) {
  const mlacheck_pack_decode_args a{c_tensor(qsl), c_tensor(tokens), c_tensor(packed)};
  call<mlacheck_pack_decode_fn>("pack_decode", I, device, a);
}
template <size_t I>
void unpack_decode_slot(Device& device, const DeviceTensor& qsl, const DeviceTensor& packed, const DeviceTensor& tokens) {
  const mlacheck_pack_decode_args a{c_tensor(qsl), c_tensor(tokens), c_tensor(packed)};
  call<mlacheck_pack_decode_fn>("unpack_decode", I, device, a);
}
template <size_t I>
void topk_to_global_slot(Device& device, const DeviceTensor& qsl, const DeviceTensor& local, const DeviceTensor& table,
                         int64_t page, const DeviceTensor& global) {
  const mlacheck_topk_to_global_args a{c_tensor(qsl), c_tensor(local), c_tensor(table), c_tensor(global), page};
  call<mlacheck_topk_to_global_fn>("topk_to_global", I, device, a);
}
template <size_t I>
void indexer_k_cache_insert_slot(Device& device, const DeviceTensor& k, const DeviceTensor& slot_mapping,
                                 const DeviceTensor& kv_cache, int64_t block_size, bool ue8m0) {
  const mlacheck_indexer_k_cache_insert_args a{c_tensor(k), c_tensor(slot_mapping), c_tensor(kv_cache), block_size,
                                               ue8m0 ? 1 : 0};
  call<mlacheck_indexer_k_cache_insert_fn>("indexer_k_cache_insert", I, device, a);
}
template <size_t I>
void indexer_k_cache_gather_slot(Device& device, const DeviceTensor& kv_cache, const DeviceTensor& block_table,
                                 const DeviceTensor& cu_seq_lens, const DeviceTensor& dst_k, const DeviceTensor& dst_scale,
                                 int64_t block_size) {
  const mlacheck_indexer_k_cache_gather_args a{c_tensor(kv_cache), c_tensor(block_table), c_tensor(cu_seq_lens),
                                               c_tensor(dst_k), c_tensor(dst_scale), block_size};
  call<mlacheck_indexer_k_cache_gather_fn>("indexer_k_cache_gather", I, device, a);
}
template <size_t I>
void sparse_mla_decode_slot(Device& device, const SparseMlaArgs& p) {
  const mlacheck_sparse_mla_decode_args a{c_tensor(p.q),         c_tensor(p.kv_cache),  c_tensor(p.indices),
                                          c_tensor(p.topk_length), c_tensor(p.attn_sink), c_tensor(p.out),
                                          c_tensor(p.lse),       p.softmax_scale};
  call<mlacheck_sparse_mla_decode_fn>("sparse_mla_decode", I, device, a);
}
template <size_t I>
void mla_decode_slot(Device& device, const MlaDecodeArgs& p) {
  mlacheck_mla_decode_args a{};
  a.q = c_tensor(p.q), a.kv_cache = c_tensor(p.kv_cache), a.block_table = c_tensor(p.block_table);
  a.seq_lens = c_tensor(p.seq_lens), a.workspace = c_tensor(p.workspace), a.o = c_tensor(p.o), a.lse = c_tensor(p.lse);
  a.base_scale = p.base_scale, a.q_scale = p.q_scale, a.k_scale = p.k_scale, a.num_splits = p.num_splits;
  if (p.host_seq_lens != nullptr) {
    a.host_seq_lens = p.host_seq_lens->data();
    a.host_seq_lens_count = static_cast<int64_t>(p.host_seq_lens->size());
  }
  call<mlacheck_mla_decode_fn>("mla_decode", I, device, a);
}

// ---- stateful ops: the registry's factories over the adapters of kernels/plugin_stateful.cpp ---------

template <size_t I>
std::unique_ptr<MetadataBuilder> decode_metadata_slot(Device& device, const MetadataLimits& limits) {
  return plugin_calls::make_metadata_builder(device, limits, *slots().at("decode_metadata")[I]);
}
template <size_t I>
std::unique_ptr<MlaDecodeImpl> mla_decode_impl_slot(Device& device, const MlaDecodeImplConfig& config) {
  return plugin_calls::make_mla_decode_impl(device, config, *slots().at("mla_decode_impl")[I]);
}
template <size_t I>
std::unique_ptr<IndexerDecodeStep> indexer_decode_step_slot(Device& device, const IndexerDecodeStepLimits& limits) {
  return plugin_calls::make_indexer_decode_step(device, limits, *slots().at("indexer_decode_step")[I]);
}
using MetadataFactory = std::unique_ptr<MetadataBuilder>(Device&, const MetadataLimits&);
using MlaImplFactory = std::unique_ptr<MlaDecodeImpl>(Device&, const MlaDecodeImplConfig&);
using StepFactory = std::unique_ptr<IndexerDecodeStep>(Device&, const IndexerDecodeStepLimits&);

// Registers slot I of an op with the registry under the op's entry-point type.
using Adder = void (*)(size_t slot, const ImplementationInfo& info);
#define MLA_SLOT_TABLE(op_id, FnType)                                                          \
  template <size_t... I>                                                                       \
  constexpr std::array<FnType*, sizeof...(I)> op_id##_table(std::index_sequence<I...>) {       \
    return {&op_id##_slot<I>...};                                                              \
  }                                                                                            \
  void add_##op_id(size_t slot, const ImplementationInfo& info) {                              \
    static constexpr auto fns = op_id##_table(std::make_index_sequence<kMaxPluginImplementationsPerOp>()); \
    registry().add(info, fns[slot]);                                                           \
  }
MLA_SLOT_TABLE(topk_decode, decltype(topk_per_row_decode))
MLA_SLOT_TABLE(topk_prefill, decltype(topk_per_row_prefill))
MLA_SLOT_TABLE(paged_mqa_logits, decltype(paged_mqa_logits))
MLA_SLOT_TABLE(mqa_logits, decltype(mqa_logits))
MLA_SLOT_TABLE(pack_decode, decltype(pack_decode))
MLA_SLOT_TABLE(unpack_decode, decltype(unpack_decode))
MLA_SLOT_TABLE(topk_to_global, decltype(topk_to_global))
MLA_SLOT_TABLE(sparse_mla_decode, decltype(sparse_mla_decode))
MLA_SLOT_TABLE(mla_decode, decltype(mla_decode))
MLA_SLOT_TABLE(indexer_k_cache_insert, decltype(indexer_k_cache_insert))
MLA_SLOT_TABLE(indexer_k_cache_gather, decltype(indexer_k_cache_gather))
MLA_SLOT_TABLE(decode_metadata, MetadataFactory)
MLA_SLOT_TABLE(mla_decode_impl, MlaImplFactory)
MLA_SLOT_TABLE(indexer_decode_step, StepFactory)
#undef MLA_SLOT_TABLE

const std::map<std::string, Adder>& adders() {
  static const std::map<std::string, Adder> m = {
      {"topk_decode", &add_topk_decode},       {"topk_prefill", &add_topk_prefill},
      {"paged_mqa_logits", &add_paged_mqa_logits}, {"mqa_logits", &add_mqa_logits},
      {"pack_decode", &add_pack_decode},       {"unpack_decode", &add_unpack_decode},
      {"topk_to_global", &add_topk_to_global}, {"sparse_mla_decode", &add_sparse_mla_decode},
      {"mla_decode", &add_mla_decode},         {"decode_metadata", &add_decode_metadata},
      {"mla_decode_impl", &add_mla_decode_impl}, {"indexer_decode_step", &add_indexer_decode_step},
      {"indexer_k_cache_insert", &add_indexer_k_cache_insert}, {"indexer_k_cache_gather", &add_indexer_k_cache_gather},
  };
  return m;
}

// ---- registration -----------------------------------------------------------------------------

struct Registration {
  std::string path, plugin;
  LoadedPlugin* loaded = nullptr;
  std::string first_error;  // why an add failed, kept even when the plugin ignores the return
  uint32_t abi_version = MLACHECK_PLUGIN_ABI_VERSION;  // the one the plugin declares
};

std::string op_list() {
  std::string s;
  for (const auto& [op, adder] : adders()) s += (s.empty() ? "" : ", ") + op;
  return s;
}

int refuse(Registration& r, char* error, size_t error_size, const std::string& why) {
  if (r.first_error.empty()) r.first_error = why;
  if (error != nullptr && error_size > 0) std::snprintf(error, error_size, "%s", why.c_str());
  return 1;
}

int add_impl(void* context, const char* op, const char* name, const char* summary, mlacheck_impl_fn fn, char* error,
             size_t error_size) {
  Registration& r = *static_cast<Registration*>(context);
  const std::string o = op ? op : "", n = name ? name : "";
  const auto adder = adders().find(o);
  if (adder == adders().end()) {
    return refuse(r, error, error_size, "add: unknown op '" + o + "' (plugins implement " + op_list() + ")");
  }
  const bool good_name = !n.empty() && n.size() <= 64 && std::all_of(n.begin(), n.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
  if (!good_name) return refuse(r, error, error_size, "add: name '" + n + "' of " + o + " is not 1 to 64 letters, digits and _");
  if (fn == nullptr) return refuse(r, error, error_size, "add: " + o + "@" + n + " has no function");
  if ((o == "decode_metadata" || o == "mla_decode_impl" || o == "indexer_decode_step") && r.abi_version < 3) {
    return refuse(r, error, error_size,
                  "add: " + o + "@" + n + ": the plugin declares plugin ABI version " + std::to_string(r.abi_version) +
                      ", and the stateful " + o + " came with version 3: rebuild it against this "
                      "mlacheck's include/mlacheck/plugin.h");
  }
  if (o == "indexer_k_cache_insert" && r.abi_version < 4) {
    return refuse(r, error, error_size,
                  "add: " + o + "@" + n + ": the plugin declares plugin ABI version " + std::to_string(r.abi_version) +
                      ", and " + o + " came with version 4: rebuild it against this mlacheck's "
                      "include/mlacheck/plugin.h");
  }
  if (o == "indexer_k_cache_gather" && r.abi_version < 5) {
    return refuse(r, error, error_size,
                  "add: " + o + "@" + n + ": the plugin declares plugin ABI version " + std::to_string(r.abi_version) +
                      ", and " + o + " came with version 5: rebuild it against this mlacheck's "
                      "include/mlacheck/plugin.h");
  }
  const std::string qualified = o + "@" + n;
  if (registry().contains(qualified)) return refuse(r, error, error_size, "add: " + qualified + " is taken");
  Slots& s = slots()[o];
  size_t slot = 0;
  while (slot < s.size() && s[slot] != nullptr) ++slot;
  if (slot == s.size()) {
    return refuse(r, error, error_size,
                  "add: " + qualified + ": plugins already registered " +
                      std::to_string(kMaxPluginImplementationsPerOp) + " implementations of " + o);
  }
  // Never freed: the registry and the slot tables point at it for the life of the process.
  const PluginImpl* impl = new PluginImpl{qualified, r.plugin, fn};
  s[slot] = impl;
  adder->second(slot, {o, n, "plugin " + r.plugin + ": " + (summary && *summary ? summary : "(no summary)")});
  r.loaded->implementations.push_back(qualified);
  return 0;
}

int add_contract(void* context, const char* op, const char* name, const char* text, char* error, size_t error_size) {
  Registration& r = *static_cast<Registration*>(context);
  const std::string o = op ? op : "", n = name ? name : "", qualified = o + "@" + n;
  if (r.abi_version < 2) {
    return refuse(r, error, error_size,
                  "contract: the plugin declares plugin ABI version " + std::to_string(r.abi_version) +
                      ", and contracts came with version 2: rebuild it against this mlacheck's include/mlacheck/plugin.h");
  }
  const auto& impls = r.loaded->implementations;
  if (std::find(impls.begin(), impls.end(), qualified) == impls.end()) {
    return refuse(r, error, error_size, "contract: " + qualified + " is not an implementation this plugin added before");
  }
  if (text == nullptr) return refuse(r, error, error_size, "contract: " + qualified + " has no text");
  try {
    registry().set_contract(qualified, parse_contract(o, text));
  } catch (const Error& e) {
    return refuse(r, error, error_size, qualified + ": " + e.what());
  }
  return 0;
}

}  // namespace

namespace {

// A path that names something other than a file (a FIFO, a folder, a device) is refused before
// dlopen, which would block on a FIFO until the probe's timeout (found by tools/cli_fuzzer's author).
void require_file_if_there(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;  // missing: dlopen's message says so
  const char* kind = S_ISDIR(st.st_mode) ? "a folder" : S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket"
                     : (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) ? "a device" : "not a regular file";
  throw Error("plugin " + path + ": is " + std::string(kind) + ", not a shared library file");
}

}  // namespace

LoadedPlugin load_plugin(const std::string& path) {
  require_file_if_there(path);
  const std::string what = "plugin " + path;
  // RTLD_NOW: a plugin missing a symbol fails here, with the loader's message, not mid-check.
  void* handle = ::dlopen(path.find('/') == std::string::npos ? ("./" + path).c_str() : path.c_str(), RTLD_NOW | RTLD_LOCAL);
  MLA_REQUIRE(handle != nullptr, what, ": cannot be loaded: ", ::dlerror());
  const auto* info = static_cast<const mlacheck_plugin_info*>(::dlsym(handle, MLACHECK_PLUGIN_SYMBOL));
  MLA_REQUIRE(info != nullptr, what, ": defines no '", MLACHECK_PLUGIN_SYMBOL,
              "' symbol (a plugin defines it with MLACHECK_DEFINE_PLUGIN from include/mlacheck/plugin.h)");
  MLA_REQUIRE(info->abi_version >= 1 && info->abi_version <= MLACHECK_PLUGIN_ABI_VERSION, what,
              " was built against plugin ABI version ", info->abi_version, ", and this mlacheck speaks versions 1 to ",
              MLACHECK_PLUGIN_ABI_VERSION, ": rebuild it against this mlacheck's include/mlacheck/plugin.h");
  return register_plugin(*info, path);  // the handle stays open: the registry calls into the library
}

LoadedPlugin register_plugin(const mlacheck_plugin_info& info, const std::string& path) {
  const std::string what = "plugin " + path;
  MLA_REQUIRE(info.register_impls != nullptr, what, ": its mlacheck_plugin has no registration function");
  LoadedPlugin loaded;
  loaded.path = path;
  loaded.name = info.name != nullptr ? info.name : path;
  loaded.abi_version = info.abi_version;
  Registration r{path, loaded.name, &loaded, "", info.abi_version};
  const mlacheck_plugin_api api{MLACHECK_PLUGIN_ABI_VERSION, &r, &add_impl, &add_contract};
  const int rc = info.register_impls(&api);
  MLA_REQUIRE(r.first_error.empty(), what, " (", loaded.name, "): ", r.first_error);
  MLA_REQUIRE(rc == 0, what, " (", loaded.name, "): its registration function refused to load (returned ", rc, ")");
  MLA_REQUIRE(!loaded.implementations.empty(), what, " (", loaded.name, ") registered no implementation");
  return loaded;
}

LoadedPlugin load_plugin_isolated(const std::string& path) {
  require_file_if_there(path);
  IsolationOptions opts;
  opts.timeout_seconds = 60;
  const IsolatedOutcome probe = run_isolated(
      [&]() -> std::string {
        load_plugin(path);
        return "";
      },
      opts);
  if (probe.kind == IsolatedOutcome::kViolation) {
    // An Error from load_plugin: its line, without the child's "error: " prefix.
    throw Error(probe.message.rfind("error: ", 0) == 0 ? probe.message.substr(7) : probe.message);
  }
  MLA_REQUIRE(probe.passed(), "plugin ", path, ": loading it ", isolated_outcome_name(probe.kind), " (",
              probe.message, "); it was not loaded");
  return load_plugin(path);
}

std::vector<std::string> plugin_ops() {
  std::vector<std::string> out;
  for (const auto& [op, adder] : adders()) out.push_back(op);
  return out;
}

std::vector<std::string> plugin_paths_from_environment() {
  std::vector<std::string> out;
  const char* env = std::getenv("MLACHECK_PLUGIN");
  if (env == nullptr) return out;
  std::string cur;
  for (const char* p = env;; ++p) {
    if (*p == ':' || *p == '\0') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (*p == '\0') break;
    } else {
      cur += *p;
    }
  }
  return out;
}

}  // namespace mlacheck::kernels
