// Properties of the MLA impl (properties/mla_decode_impl_properties.h).
#include "properties/mla_decode_impl_properties.h"

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/backend/host_executor.h"
#include "core/error.h"
#include "kernels/registry.h"
#include "oracle/mla_decode.h"
#include "properties/mla_decode_properties.h"

namespace mlacheck {

using kernels::Device;
using kernels::MlaDecodeImpl;

namespace {

constexpr int64_t kLatent = kernels::kMlaValueDim;

// The call the engine makes for case c staged and uploaded in st: its views, its lengths on the host, its scales.
kernels::MlaDecodeCall call_of(const MlaDecodeBuffers& st, const MlaDecodeCase& c) {
  const kernels::MlaDecodeArgs a = st.args(c);
  kernels::MlaDecodeCall call;
  call.q = a.q, call.kv_cache = a.kv_cache, call.block_table = a.block_table, call.seq_lens = a.seq_lens;
  call.o = a.o, call.lse = a.lse;
  call.host_query_lens.assign(static_cast<size_t>(c.B), static_cast<int32_t>(c.q_len));
  if (c.pass_host_lens) call.host_seq_lens = c.lens;  // otherwise splits from table width x page
  call.base_scale = a.base_scale, call.q_scale = a.q_scale, call.k_scale = a.k_scale;
  return call;
}

std::vector<const void*> addresses_of(MlaDecodeImpl& impl) {
  return {impl.workspace_memory().data(), impl.graph_q_memory().data(), impl.graph_seq_lens_memory().data(),
          impl.graph_block_table_memory().data(), impl.graph_o_memory().data(), impl.graph_lse_memory().data()};
}

// o and lse of the impl's graph buffers for a padded batch, dense.
struct GraphOutputs {
  std::vector<uint16_t> o;
  std::vector<float> lse;
};
GraphOutputs read_graph_outputs(MlaDecodeImpl& impl, const MlaDecodeCase& step) {
  const int64_t rows = step.B * step.q_len * step.H;
  GraphOutputs out{std::vector<uint16_t>(static_cast<size_t>(rows * kLatent)),
                   std::vector<float>(static_cast<size_t>(rows))};
  impl.graph_o_memory().read(0, out.o.data(), static_cast<int64_t>(out.o.size() * 2));
  impl.graph_lse_memory().read(0, out.lse.data(), static_cast<int64_t>(out.lse.size() * 4));
  return out;
}

}  // namespace

// ---- eager ---------------------------------------------------------------------------------------

Verdict mla_decode_impl_eager_call(Device& device, MlaDecodeImpl& impl, const MlaDecodeCase& c) {
  MlaDecodeBuffers st(c);
  const oracle::MlaDecodeResult want = oracle::mla_decode(st.oracle_inputs(c));
  GuardedMemory& workspace = impl.workspace_memory();
  const GuardedMemory* const workspace_object = &workspace;
  const uint8_t* const workspace_data = workspace.data();
  workspace.clear_outputs();
  workspace.declare_output("workspace", View::contiguous(DType::kU8, {workspace.size()}));
  if (Verdict v = st.run_guarded(device, c, [&] {  // the buffers are uploaded now
        workspace.arm();
        impl.forward(call_of(st, c));
      })) {
    return v;
  }
  // Before the old workspace is touched again: an impl that replaced it may have freed it.
  if (&impl.workspace_memory() != workspace_object || impl.workspace_memory().data() != workspace_data) {
    return "the call replaced the impl's workspace (a graph captured before it keeps the old address)";
  }
  if (const GuardReport g = workspace.check(); !g.ok()) return "guard of the impl's workspace: " + g.describe();
  return compare_mla_decode(st.o.host_tensor(), st.lse.host_tensor(), want, c.magnitude_log2);
}

Verdict mla_decode_impl_calls_equal_oracle(Device& device, MlaDecodeImplFactory* factory,
                                           const MlaDecodeImplCallsCase& c) {
  const std::unique_ptr<MlaDecodeImpl> impl = factory(device, c.config);
  const uint8_t* workspace = impl->workspace_memory().data();
  for (size_t i = 0; i < c.calls.size(); ++i) {
    const MlaDecodeCase& call = c.calls[i];
    if (Verdict v = mla_decode_impl_eager_call(device, *impl, call)) {
      return "call " + std::to_string(i) + " (batch " + std::to_string(call.B) + ", q_len " +
             std::to_string(call.q_len) + ", splits " + std::to_string(impl->last_num_splits()) + "): " + *v;
    }
    if (impl->workspace_memory().data() != workspace) return "call " + std::to_string(i) + " moved the workspace";
  }
  return std::nullopt;
}

// ---- graphs --------------------------------------------------------------------------------------

MlaGraphCache allocate_mla_graph_cache(Device& device, const MlaDecodeCase& step) {
  const MlaDecodeBuffers st(step);
  MlaGraphCache cache;
  cache.memory = device.allocate("graph kv_cache", static_cast<int64_t>(st.kv.host.size()));
  cache.tensor = {cache.memory->data(), st.kv.view};
  return cache;
}

namespace {

void write_step(MlaDecodeImpl& impl, MlaGraphCache& cache, const MlaDecodeBuffers& st, const MlaDecodeCase& c) {
  MLA_REQUIRE(static_cast<int64_t>(st.kv.host.size()) == cache.memory->size() && c.q_offset == 0 &&
                  c.W == impl.config().block_table_width,
              "mla_decode_impl: a graph step must have the graph's cache shape, table width and a contiguous q");
  cache.memory->write(0, st.kv.host.data(), cache.memory->size());
  impl.graph_q_memory().write(0, st.q.host.data(), st.q.view.numel() * st.q.view.element_size());
  impl.graph_seq_lens_memory().write(0, c.lens.data(), 4 * c.B);
  impl.graph_block_table_memory().write(0, c.table.data(), 4 * c.B * c.W);
}

// The first write to memory freed while a graph was alive (core/quarantine.h), as a verdict.
Verdict freed_memory_written(Device& device) {
  const std::vector<std::string> writes = device.writes_to_freed_memory();
  if (writes.empty()) return std::nullopt;
  std::string v = "memory freed while a captured graph holds its address was written: " + writes.front();
  if (writes.size() > 1) v += " (and " + std::to_string(writes.size() - 1) + " more freed buffers)";
  return v;
}

}  // namespace

void write_mla_graph_step(MlaDecodeImpl& impl, MlaGraphCache& cache, const MlaDecodeCase& step) {
  write_step(impl, cache, MlaDecodeBuffers(step), step);
}

Verdict mla_decode_impl_replay_step(Device& device, MlaDecodeImpl& impl, kernels::DeviceGraph& graph,
                                    MlaGraphCache& cache, const MlaDecodeCase& c) {
  MlaDecodeBuffers st(c);
  const oracle::MlaDecodeResult want = oracle::mla_decode(st.oracle_inputs(c));
  write_step(impl, cache, st, c);
  const simt::host::ScopedOptions scope(c.host_options());
  graph.replay();
  device.synchronize();
  if (Verdict v = freed_memory_written(device)) return "replay: " + *v;
  GraphOutputs replayed = read_graph_outputs(impl, c);
  const View o_view = View::contiguous(DType::kBF16, {c.B, c.q_len, c.H, kLatent});
  const View lse_view = View::contiguous(DType::kF32, {c.B, c.q_len, c.H});
  if (Verdict v = compare_mla_decode(HostTensor(replayed.o.data(), o_view), HostTensor(replayed.lse.data(), lse_view),
                                     want, c.magnitude_log2)) {
    return "replay: " + *v;
  }
  // Padding rows (and empty requests): o exactly +0 and lse -inf.
  const int64_t per_request = c.q_len * c.H;
  for (int64_t b = 0; b < c.B; ++b) {
    if (c.lens[static_cast<size_t>(b)] != 0) continue;
    for (int64_t r = b * per_request; r < (b + 1) * per_request; ++r) {
      const float l = replayed.lse[static_cast<size_t>(r)];
      if (!(std::isinf(l) && l < 0)) {
        return "replay: empty request " + std::to_string(b) + " has lse " + std::to_string(l);
      }
      for (int64_t d = 0; d < kLatent; ++d) {
        if (replayed.o[static_cast<size_t>(r * kLatent + d)] != 0) {
          return "replay: empty request " + std::to_string(b) + " has o != +0 in row " + std::to_string(r);
        }
      }
    }
  }
  // An eager launch on the same buffers, with the split count the capture chose.
  const kernels::MlaGraphBuffers g = impl.graph_buffers(c.B, c.q_len);
  kernels::MlaDecodeCall call;
  call.q = g.q, call.kv_cache = cache.tensor, call.block_table = g.block_table, call.seq_lens = g.seq_lens;
  call.o = g.o, call.lse = g.lse;
  call.base_scale = c.base_scale, call.q_scale = c.launch_q_scale(), call.k_scale = c.launch_k_scale();
  impl.forward(call);
  device.synchronize();
  const GraphOutputs eager = read_graph_outputs(impl, c);
  if (std::memcmp(eager.o.data(), replayed.o.data(), eager.o.size() * 2) != 0 ||
      std::memcmp(eager.lse.data(), replayed.lse.data(), eager.lse.size() * 4) != 0) {
    return "replay differs from an eager launch on the same buffers (splits " + std::to_string(impl.last_num_splits()) +
           ")";
  }
  return std::nullopt;
}

Verdict mla_decode_impl_replay_equals_eager(Device& device, MlaDecodeImplFactory* factory,
                                            const MlaDecodeImplReplayCase& c) {
  const std::unique_ptr<MlaDecodeImpl> impl = factory(device, c.config);
  const std::vector<const void*> addresses = addresses_of(*impl);
  const MlaDecodeCase first = c.step_case(0);
  MlaGraphCache cache = allocate_mla_graph_cache(device, first);
  write_mla_graph_step(*impl, cache, first);  // short sequences at capture
  const auto graph = impl->capture(c.padded_batch, c.q_len, cache.tensor, first.base_scale, first.launch_q_scale(),
                                   first.launch_k_scale());
  device.synchronize();
  for (size_t i = 0; i < c.steps.size(); ++i) {
    if (Verdict v = mla_decode_impl_replay_step(device, *impl, *graph, cache, c.step_case(i))) {
      return "step " + std::to_string(i) + ": " + *v;
    }
  }
  if (addresses_of(*impl) != addresses) return "a buffer of the impl moved";
  return std::nullopt;
}

Verdict mla_decode_impl_engine_sequence(Device& device, MlaDecodeImplFactory* factory,
                                        const MlaDecodeImplSequenceCase& c) {
  const std::unique_ptr<MlaDecodeImpl> impl = factory(device, c.shape.config);
  const std::vector<const void*> addresses = addresses_of(*impl);
  MlaDecodeImplReplayCase shape = c.shape;
  shape.padded_batch = c.shape.config.max_batch;
  shape.steps = {{std::vector<int32_t>(static_cast<size_t>(shape.padded_batch), 0),
                  std::vector<int32_t>(static_cast<size_t>(shape.padded_batch * shape.config.block_table_width), 0)}};
  MlaGraphCache cache = allocate_mla_graph_cache(device, shape.step_case(0));
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<kernels::DeviceGraph>> graphs;
  for (size_t i = 0; i < c.commands.size(); ++i) {
    const MlaDecodeImplCommand& m = c.commands[i];
    Verdict v;
    if (m.kind == MlaDecodeImplCommand::kEager) {
      v = mla_decode_impl_eager_call(device, *impl, m.eager);
    } else if (m.kind == MlaDecodeImplCommand::kCapture) {
      // A warm-up's metadata in the buffers at capture: short sequences over page 0.
      const std::vector<int32_t> short_lens(static_cast<size_t>(m.padded_batch), 3);
      const std::vector<int32_t> pages(static_cast<size_t>(m.padded_batch * c.shape.config.block_table_width), 0);
      impl->graph_seq_lens_memory().write(0, short_lens.data(), 4 * m.padded_batch);
      impl->graph_block_table_memory().write(0, pages.data(), static_cast<int64_t>(4 * pages.size()));
      graphs[{m.padded_batch, m.q_len}] =
          impl->capture(m.padded_batch, m.q_len, cache.tensor, m.base_scale, m.q_scale, m.k_scale);
    } else {
      const auto it = graphs.find({m.padded_batch, m.q_len});
      MLA_REQUIRE(it != graphs.end(), "mla_decode_impl: command ", i, " replays a graph never captured");
      v = mla_decode_impl_replay_step(device, *impl, *it->second, cache, c.graph(m).step_case(0));
    }
    if (!v) v = freed_memory_written(device);  // an eager call, too, may use an address a graph left freed
    if (v) {
      const char* kind = m.kind == MlaDecodeImplCommand::kEager    ? "eager"
                         : m.kind == MlaDecodeImplCommand::kReplay ? "replay"
                                                                   : "capture";
      return "command " + std::to_string(i) + " (" + kind + "): " + *v;
    }
    if (addresses_of(*impl) != addresses) return "command " + std::to_string(i) + " moved a buffer of the impl";
  }
  return std::nullopt;
}

// ---- non-uniform query lengths -------------------------------------------------------------------

Verdict mla_decode_impl_nonuniform_refused(Device& device, MlaDecodeImplFactory* factory,
                                           const MlaDecodeImplNonUniformCase& c) {
  const std::unique_ptr<MlaDecodeImpl> impl = factory(device, c.config);
  const int64_t B = static_cast<int64_t>(c.query_lens.size()), H = c.config.heads, W = c.config.block_table_width;
  int64_t T = 0;
  for (int32_t n : c.query_lens) T += n;
  const int64_t q_bytes = T * H * kernels::kMlaHeadDim * static_cast<int64_t>(dtype_size(c.config.q_dtype));
  // Every buffer guarded and armed with no output: a refusal writes nothing. block_table and seq_lens
  // have rows for T requests, of which the call's views name the first B (an engine's max rows).
  std::vector<std::unique_ptr<GuardedMemory>> memory;
  auto buffer = [&](const char* name, int64_t bytes) -> GuardedMemory& {
    memory.push_back(device.allocate(name, bytes));
    return *memory.back();
  };
  GuardedMemory& q = buffer("q", q_bytes);
  GuardedMemory& kv = buffer("kv_cache", 2 * c.config.page * kernels::kMlaHeadDim);
  GuardedMemory& table = buffer("block_table", 4 * T * W);
  GuardedMemory& lens = buffer("seq_lens", 4 * T);
  GuardedMemory& o = buffer("o", 2 * T * H * kernels::kMlaValueDim);
  GuardedMemory& lse = buffer("lse", 4 * T * H);
  const std::vector<uint8_t> zeros(static_cast<size_t>(std::max(q_bytes, 2 * c.config.page * kernels::kMlaHeadDim)), 0);
  q.write(0, zeros.data(), q_bytes);
  kv.write(0, zeros.data(), 2 * c.config.page * kernels::kMlaHeadDim);
  const std::vector<int32_t> table_rows(static_cast<size_t>(B * W), 0);
  table.write(0, table_rows.data(), 4 * B * W);
  lens.write(0, c.seq_lens.data(), 4 * B);
  std::vector<GuardedMemory*> guarded;
  for (auto& m : memory) guarded.push_back(m.get());
  arm_all(guarded);

  kernels::MlaDecodeCall call;
  call.q = {q.data(), View::contiguous(c.config.q_dtype, {T, 1, H, kernels::kMlaHeadDim})};
  call.kv_cache = {kv.data(), View::contiguous(DType::kBF16, {1, c.config.page, kernels::kMlaHeadDim})};
  call.block_table = {table.data(), View::contiguous(DType::kI32, {B, W})};
  call.seq_lens = {lens.data(), View::contiguous(DType::kI32, {B})};
  call.host_query_lens = c.query_lens;
  call.host_seq_lens = c.seq_lens;
  call.o = {o.data(), View::contiguous(DType::kBF16, {T, 1, H, kernels::kMlaValueDim})};
  call.lse = {lse.data(), View::contiguous(DType::kF32, {T, 1, H})};
  bool refused = false;
  try {
    impl->forward(call);
    device.synchronize();
  } catch (const Error&) {
    refused = true;
  }
  std::string wrote;
  const std::vector<GuardReport> guards = check_all(guarded);
  for (size_t i = 0; i < guards.size() && wrote.empty(); ++i) {
    if (!guards[i].ok()) wrote = "guard of " + guarded[i]->name() + ": " + guards[i].describe();
  }
  if (!refused) {
    std::string list;
    for (size_t i = 0; i < c.query_lens.size() && i < 8; ++i) list += (i ? " " : "") + std::to_string(c.query_lens[i]);
    return "forward accepted query lengths [" + list + (c.query_lens.size() > 8 ? " ..." : "") + "] of " +
           std::to_string(B) + " requests with q [" + std::to_string(T) + ", 1, " + std::to_string(H) +
           ", 576] (a token per row) instead of refusing them" + (wrote.empty() ? "" : "; " + wrote);
  }
  if (!wrote.empty()) return "refused, but wrote first: " + wrote;
  return std::nullopt;
}

void register_mla_decode_impl_properties(PropertyRegistry& r) {
  const auto find = [](const std::string& impl) { return kernels::registry().find<MlaDecodeImplFactory>(impl); };
  // Each case with the roundings impl declares, for the oracle's slack (as mla_decode's properties).
  const auto declared = [](auto c, const std::string& impl) {
    declare_precision(c, mla_decode_precision(impl));
    return c;
  };
  r.add(make_property<MlaDecodeImplCallsCase>(
      "mla_decode_impl.calls_equal_oracle", "mla_decode_impl",
      "eager calls on one impl each equal the oracle with their own scales; the workspace never moves",
      mla_decode_impl_calls_from_text,
      [find, declared](Device& device, const std::string& impl, const MlaDecodeImplCallsCase& c) {
        return mla_decode_impl_calls_equal_oracle(device, find(impl), declared(c, impl));
      }));
  r.add(make_property<MlaDecodeImplReplayCase>(
      "mla_decode_impl.replay_equals_eager", "mla_decode_impl",
      "a graph replayed after the lengths grow equals the oracle and an eager launch on its buffers",
      mla_decode_impl_replay_from_text,
      [find, declared](Device& device, const std::string& impl, const MlaDecodeImplReplayCase& c) {
        return mla_decode_impl_replay_equals_eager(device, find(impl), declared(c, impl));
      }));
  r.add(make_property<MlaDecodeImplNonUniformCase>(
      "mla_decode_impl.nonuniform_query_lengths_refused", "mla_decode_impl",
      "a call whose requests' query lengths differ is refused before any launch, and nothing is written",
      mla_decode_impl_nonuniform_from_text,
      [find](Device& device, const std::string& impl, const MlaDecodeImplNonUniformCase& c) {
        return mla_decode_impl_nonuniform_refused(device, find(impl), c);
      }));
  r.add(make_property<MlaDecodeImplSequenceCase>(
      "mla_decode_impl.engine_sequence", "mla_decode_impl",
      "eager calls, captures and replays interleaved on one impl each equal the oracle; no buffer moves",
      mla_decode_impl_sequence_from_text,
      [find, declared](Device& device, const std::string& impl, const MlaDecodeImplSequenceCase& c) {
        return mla_decode_impl_engine_sequence(device, find(impl), declared(c, impl));
      }));
}

}  // namespace mlacheck
