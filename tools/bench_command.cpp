// `mlacheck bench guards` (tools/bench_command.h).
#include "tools/bench_command.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <random>

#include "core/backend/backend.h"
#include "core/error.h"
#include "kernels/device.h"
#include "kernels/mla_decode_glue.h"
#include "kernels/mqa_logits_glue.h"
#include "kernels/sparse_mla.h"
#include "kernels/sparse_mla_glue.h"
#include "kernels/topk_glue.h"
#include "tools/bench_fuzz.h"
#include "tools/flags_typed.h"
#ifdef MLACHECK_HAVE_CUDA
#include "core/backend/cuda_guarded_buffer.h"
#endif

namespace mlacheck {

namespace {

using Clock = std::chrono::steady_clock;
using kernels::Device;
using kernels::DeviceTensor;

// One buffer of a launch: guarded memory holding a view (inputs filled once), an output or not.
struct Staged {
  std::unique_ptr<GuardedMemory> memory;
  View view;
  DeviceTensor tensor() const { return {memory->data(), view}; }
};

// A launch and the buffers it reads and writes (room for 16 reserved up front: the staging code
// keeps references to the buffers it has added).
struct Workload {
  Workload() { buffers.reserve(16); }
  std::string kernel, shape;
  std::vector<Staged> buffers;
  std::function<void(Device&)> launch;
};

class Builder {
 public:
  Builder(Device& device, uint64_t seed) : device_(device), rng_(seed) {}
  // A buffer for view v (plus 256 bytes after it) filled by fill(bytes), declared an output or not.
  const Staged& add(Workload& w, const std::string& name, const View& v, bool output,
                    const std::function<void(std::vector<uint8_t>&)>& fill) {
    const int64_t bytes = std::max(v.byte_span().end, v.byte_offset()) + 256;
    std::vector<uint8_t> host(static_cast<size_t>(bytes), 0);
    fill(host);
    Staged s{device_.allocate(name, bytes), v};
    s.memory->write(0, host.data(), bytes);
    if (output) s.memory->declare_output(name, v);
    MLA_REQUIRE(w.buffers.size() < w.buffers.capacity(), "bench: more buffers than a workload reserves");
    w.buffers.push_back(std::move(s));
    return w.buffers.back();
  }
  // Byte fillers: fp8 e4m3 codes of values in [-1, 1], bf16 values in [-1, 1], fp32 in [-1, 1].
  std::function<void(std::vector<uint8_t>&)> fp8() {
    return [this](std::vector<uint8_t>& b) {
      for (uint8_t& x : b) x = static_cast<uint8_t>((rng_() % 57) | (rng_() & 1) << 7);
    };
  }
  std::function<void(std::vector<uint8_t>&)> bf16() {
    return [this](std::vector<uint8_t>& b) {
      for (size_t i = 0; i + 1 < b.size(); i += 2) {
        const uint16_t h = static_cast<uint16_t>(0x3800 + rng_() % 0x800) | static_cast<uint16_t>((rng_() & 1) << 15);
        std::memcpy(b.data() + i, &h, 2);
      }
    };
  }
  std::function<void(std::vector<uint8_t>&)> f32() {
    return [this](std::vector<uint8_t>& b) {
      for (size_t i = 0; i + 3 < b.size(); i += 4) {
        const float f = std::uniform_real_distribution<float>(-1, 1)(rng_);
        std::memcpy(b.data() + i, &f, 4);
      }
    };
  }
  // int32 values: value(i) for element i of a contiguous view starting at byte 0.
  static std::function<void(std::vector<uint8_t>&)> i32(const std::function<int32_t(int64_t)>& value) {
    return [value](std::vector<uint8_t>& b) {
      for (size_t i = 0; i + 3 < b.size(); i += 4) {
        const int32_t v = value(static_cast<int64_t>(i / 4));
        std::memcpy(b.data() + i, &v, 4);
      }
    };
  }
  std::mt19937_64& rng() { return rng_; }

 private:
  Device& device_;
  std::mt19937_64 rng_;
};

// Paged indexer logits and top-k decode over them: B requests of next_n tokens at one context.
void indexer_workloads(Device& device, bool small, std::vector<Workload>& out) {
  const int64_t B = small ? 2 : 32, next_n = small ? 1 : 2, H = small ? 4 : 64, D = small ? 32 : 128;
  const int64_t context = small ? 300 : 8192, bs = 64, W = (context + bs - 1) / bs, rows = B * next_n;
  const int64_t k = small ? 16 : 2048, row_stride = (context + 255) / 256 * 256;
  Builder make(device, 1);
  Workload logits;
  logits.kernel = "paged_mqa_logits";
  logits.shape = "B " + std::to_string(B) + ", next_n " + std::to_string(next_n) + ", H " + std::to_string(H) + ", D " +
                 std::to_string(D) + ", context " + std::to_string(context);
  const Staged& q = make.add(logits, "q", View::contiguous(DType::kFP8E4M3, {B, next_n, H, D}), false, make.fp8());
  // Every request's pages, distinct, in a cache of exactly those pages: keys fp8, scales 2^-4.
  const int64_t block_stride = bs * (D + 4), num_blocks = B * W;
  const Staged& kv = make.add(logits, "kv_blocks", View::contiguous(DType::kU8, {num_blocks, block_stride}), false,
                              [&](std::vector<uint8_t>& b) {
                                make.fp8()(b);
                                const float scale = 0.0625f;
                                for (int64_t p = 0; p < num_blocks; ++p) {
                                  for (int64_t s = 0; s < bs; ++s) std::memcpy(b.data() + p * block_stride + bs * D + 4 * s, &scale, 4);
                                }
                              });
  const Staged& w = make.add(logits, "weights", View::contiguous(DType::kF32, {rows, H}), false, make.f32());
  const Staged& lens = make.add(logits, "context_lens", View::contiguous(DType::kI32, {B}), false,
                                Builder::i32([&](int64_t) { return static_cast<int32_t>(context); }));
  const Staged& table = make.add(logits, "block_table", View::contiguous(DType::kI32, {B, W}), false,
                                 Builder::i32([&](int64_t i) { return static_cast<int32_t>(i); }));
  const Staged& lg = make.add(logits, "logits", View::padded_rows(DType::kF32, {rows, context}, row_stride), true,
                              make.f32());
  kernels::PagedMqaLogitsArgs a;
  a.q = q.tensor(), a.kv_blocks = kv.tensor(), a.block_size = bs, a.weights = w.tensor();
  a.context_lens = lens.tensor(), a.block_table = table.tensor(), a.max_context_len = context;
  a.logits = lg.tensor(), a.mode = kernels::LogitsMode::kUnclean;
  logits.launch = [a](Device& d) { kernels::paged_mqa_logits(d, a); };
  // Top-k reads the logits as its input: a buffer of its own, filled with random logits.
  Workload topk;
  topk.kernel = "topk_decode";
  topk.shape = std::to_string(rows) + " rows of " + std::to_string(context) + ", k " + std::to_string(k);
  const Staged& tl = make.add(topk, "logits", View::padded_rows(DType::kF32, {rows, context}, row_stride), false, make.f32());
  const Staged& sl = make.add(topk, "seq_lens", View::contiguous(DType::kI32, {B}), false,
                              Builder::i32([&](int64_t) { return static_cast<int32_t>(context); }));
  const Staged& to = make.add(topk, "topk_indices", View::contiguous(DType::kI32, {rows, k}), true,
                              Builder::i32([](int64_t) { return 0; }));
  const int64_t ws_bytes = std::max<int64_t>(4, kernels::topk_workspace_bytes(rows, k, context));
  const Staged& ws = make.add(topk, "workspace", View::contiguous(DType::kU8, {ws_bytes}), true, [](std::vector<uint8_t>&) {});
  const DeviceTensor tl_t = tl.tensor(), sl_t = sl.tensor(), to_t = to.tensor(), ws_t = ws.tensor();
  topk.launch = [=](Device& d) { kernels::topk_per_row_decode(d, tl_t, next_n, sl_t, k, to_t, ws_t); };
  out.push_back(std::move(logits));
  out.push_back(std::move(topk));
}

// Sparse MLA decode over a cache of fp8_ds_mla tokens, topk entries per query.
Workload sparse_workload(Device& device, bool small) {
  const int64_t b = small ? 2 : 32, h = small ? 16 : 128, topk = small ? 64 : 2048, tokens = small ? 256 : 65536;
  const int64_t page = 64, blocks = tokens / page;
  Builder make(device, 2);
  Workload w;
  w.kernel = "sparse_mla_decode";
  w.shape = "b " + std::to_string(b) + ", h " + std::to_string(h) + ", topk " + std::to_string(topk) + " of " +
            std::to_string(tokens) + " tokens";
  const Staged& q = make.add(w, "q", View::contiguous(DType::kBF16, {b, 1, h, kernels::kSparseMlaHeadDim}), false, make.bf16());
  // Each token: 512 fp8 values, four fp32 tile scales of 2^-3, 64 bf16 rope values.
  const Staged& kv = make.add(w, "kv_cache", View::contiguous(DType::kU8, {blocks, page, kernels::kSparseMlaTokenBytes}),
                              false, [&](std::vector<uint8_t>& bytes) {
                                make.fp8()(bytes);
                                const float scale = 0.125f;
                                for (int64_t t = 0; t < tokens; ++t) {
                                  uint8_t* token = bytes.data() + t * kernels::kSparseMlaTokenBytes;
                                  for (int s = 0; s < 4; ++s) std::memcpy(token + 512 + 4 * s, &scale, 4);
                                  for (int r = 0; r < 64; ++r) {
                                    const uint16_t v = static_cast<uint16_t>(0x3C00 + make.rng()() % 0x100);
                                    std::memcpy(token + 528 + 2 * r, &v, 2);
                                  }
                                }
                              });
  const Staged& idx = make.add(w, "indices", View::contiguous(DType::kI32, {b, 1, topk}), false,
                               Builder::i32([&](int64_t) { return static_cast<int32_t>(make.rng()() % tokens); }));
  const Staged& o = make.add(w, "out", View::contiguous(DType::kBF16, {b, 1, h, kernels::kSparseMlaLatent}), true, make.bf16());
  const Staged& lse = make.add(w, "lse", View::contiguous(DType::kF32, {b, h, 1}), true, make.f32());
  kernels::SparseMlaArgs a;
  a.q = q.tensor(), a.kv_cache = kv.tensor(), a.indices = idx.tensor(), a.softmax_scale = 1.0 / std::sqrt(192.0);
  a.out = o.tensor(), a.lse = lse.tensor();
  w.launch = [a](Device& d) { kernels::sparse_mla_decode(d, a); };
  return w;
}

// Dense split-KV MLA decode: bf16 q, fp8 paged KV, the split count the heuristic picks.
Workload dense_workload(Device& device, bool small) {
  const int64_t B = small ? 2 : 32, q_len = 1, H = small ? 16 : 128, seq = small ? 200 : 8192, page = 64;
  const int64_t W = (seq + page - 1) / page, blocks = B * W;
  const int64_t splits = kernels::mla_decode_num_splits(B, q_len, H, seq, device.multiprocessors());
  Builder make(device, 3);
  Workload w;
  w.kernel = "mla_decode";
  w.shape = "B " + std::to_string(B) + ", H " + std::to_string(H) + ", seq " + std::to_string(seq) + ", fp8 KV, " +
            std::to_string(splits) + " splits";
  const Staged& q = make.add(w, "q", View::contiguous(DType::kBF16, {B, q_len, H, kernels::kMlaHeadDim}), false, make.bf16());
  const Staged& kv = make.add(w, "kv_cache", View::contiguous(DType::kFP8E4M3, {blocks, page, kernels::kMlaHeadDim}), false,
                              make.fp8());
  const Staged& table = make.add(w, "block_table", View::contiguous(DType::kI32, {B, W}), false,
                                 Builder::i32([](int64_t i) { return static_cast<int32_t>(i); }));
  const Staged& lens = make.add(w, "seq_lens", View::contiguous(DType::kI32, {B}), false,
                                Builder::i32([&](int64_t) { return static_cast<int32_t>(seq); }));
  const int64_t floats = kernels::mla_decode_workspace_floats(B, q_len, H, splits);
  const Staged& ws = make.add(w, "workspace", View::contiguous(DType::kF32, {floats}), true, [](std::vector<uint8_t>&) {});
  const Staged& o = make.add(w, "o", View::contiguous(DType::kBF16, {B, q_len, H, kernels::kMlaValueDim}), true, make.bf16());
  const Staged& lse = make.add(w, "lse", View::contiguous(DType::kF32, {B, q_len, H}), true, make.f32());
  kernels::MlaDecodeArgs a;
  a.q = q.tensor(), a.kv_cache = kv.tensor(), a.block_table = table.tensor(), a.seq_lens = lens.tensor();
  a.base_scale = 1.0 / std::sqrt(192.0), a.k_scale = 0.0625, a.num_splits = splits;
  a.workspace = ws.tensor(), a.o = o.tensor(), a.lse = lse.tensor();
  w.launch = [a](Device& d) { kernels::mla_decode(d, a); };
  return w;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

constexpr int kSteps = 5;
const char* const kStepNames[kSteps] = {"arm", "launch", "check", "wait", "reports"};

struct Row {
  std::string kernel, shape;
  double plain = 0, guarded = 0, checksum = -1;  // medians, ms; checksum -1: not on this backend
  double chained = -1;  // the checksum path with chained arms (DeviceGuardedBuffer::set_chained_arms)
  double graph = -1;  // arm, launch and check captured in one CUDA graph and replayed; -1: not captured
  double chained_graph = -1;  // the same graph with chained arms
  std::string graph_refused;  // why the capture failed, if it did
  // Host clock of a guarded run's steps, medians, µs: arm_all, the launch, queue_check_all, the
  // synchronization, the reports (kSteps), for the exact path and with chained arms (-1: none).
  double steps[kSteps] = {}, chained_steps[kSteps] = {-1, -1, -1, -1, -1};
  int64_t guarded_bytes = 0;
};

// The guards' path on every device buffer of w: the checksum fast path, and chained arms on it.
// False where there is none (the host backend).
bool set_path(Workload& w, bool checksum, bool chained) {
#ifdef MLACHECK_HAVE_CUDA
  bool any = false;
  for (Staged& s : w.buffers) {
    if (auto* d = dynamic_cast<DeviceGuardedBuffer*>(s.memory.get())) {
      d->set_checksum_fast_path(checksum), d->set_chained_arms(chained), any = true;
    }
  }
  return any;
#else
  (void)w, (void)checksum, (void)chained;
  return false;
#endif
}

// A benchmark's launches are correct: every guard report of w's buffers is clean, or an Error.
void require_clean(const std::vector<GuardReport>& reports, const Workload& w, const std::vector<GuardedMemory*>& memory,
                   const char* where) {
  for (size_t i = 0; i < reports.size(); ++i) {
    MLA_REQUIRE(reports[i].ok(), where, ": ", w.kernel, ": ", memory[i]->name(), ": ", reports[i].describe());
  }
}

// Arm, launch and check of w captured once in one CUDA graph (on the path its buffers are on now)
// and replayed `repeats` times, each replay alternating with a plain run (appended to `plain`).
// The replays' times, ms; none when the capture failed (why, in *refused).
template <typename PlainRun>
std::vector<double> measure_graph(Device& device, Workload& w, const std::vector<GuardedMemory*>& memory, int repeats,
                                  const PlainRun& plain_run, std::vector<double>& plain, std::string* refused) {
  QueuedChecks checks;
  std::unique_ptr<kernels::DeviceGraph> graph;
  try {
    graph = device.capture([&] {
      arm_all(memory, device.stream());
      w.launch(device);
      checks = queue_check_all(memory, device.stream());
    });
  } catch (const std::exception& e) {
    *refused = e.what();
    return {};
  }
  bool first = true;
  const auto graph_run = [&] {
    const Clock::time_point t = Clock::now();
    graph->replay();
    device.synchronize();
    if (!first) checks.replayed();
    first = false;
    require_clean(checks.reports(), w, memory, "guards in a graph");
    return ms_since(t);
  };
  graph_run();  // warm-up: the graph's first launch uploads it
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    plain.push_back(plain_run());
    times.push_back(graph_run());
  }
  return times;
}

Row measure(Device& device, Workload& w, int repeats) {
  Row r;
  r.kernel = w.kernel, r.shape = w.shape;
  std::vector<GuardedMemory*> memory;
  for (const Staged& s : w.buffers) r.guarded_bytes += s.memory->size(), memory.push_back(s.memory.get());
  // What the property suite does around a launch (harness/testbed.cpp): the arm, the launch and
  // the check queued on the device's stream, one synchronization, the reports.
  // Each step's host time goes to `steps` when given (Row::steps).
  const auto guarded_run = [&](std::vector<double>* steps = nullptr) {
    Clock::time_point mark[6];
    mark[0] = Clock::now();
    arm_all(memory, device.stream());
    mark[1] = Clock::now();
    w.launch(device);
    mark[2] = Clock::now();
    QueuedChecks checks = queue_check_all(memory, device.stream());
    mark[3] = Clock::now();
    device.synchronize();
    mark[4] = Clock::now();
    require_clean(checks.reports(), w, memory, "guards");
    mark[5] = Clock::now();
    for (int k = 0; steps != nullptr && k < kSteps; ++k) {
      steps[k].push_back(std::chrono::duration<double, std::micro>(mark[k + 1] - mark[k]).count());
    }
    return std::chrono::duration<double, std::milli>(mark[5] - mark[0]).count();
  };
  const auto plain_run = [&] {
    const Clock::time_point t = Clock::now();
    w.launch(device);
    device.synchronize();
    return ms_since(t);
  };
  guarded_run();  // warm-up: allocation caches, module load, first-touch
  plain_run();
  std::vector<double> plain, guarded, checksum, chained;
  // Exact guards, then the checksum path, then chained arms, each alternating with plain runs. Not
  // alternated with each other: switching the path makes the next arm copy its snapshot (the gated
  // copy needs a clean check by the same path first), which is not what a run of launches under one
  // path costs. The plain launches between chained runs write the outputs only, which the next arm
  // poisons again: the promise chained arms ask for holds.
  std::vector<double> steps[kSteps], chained_steps[kSteps];
  for (int i = 0; i < repeats; ++i) {
    plain.push_back(plain_run());
    guarded.push_back(guarded_run(steps));
  }
  for (int k = 0; k < kSteps; ++k) r.steps[k] = median(steps[k]);
  const bool has_checksum = set_path(w, true, false);
  if (has_checksum) {
    guarded_run();  // the first arm on the path copies its snapshot
    for (int i = 0; i < repeats; ++i) {
      plain.push_back(plain_run());
      checksum.push_back(guarded_run());
    }
    set_path(w, true, true);
    guarded_run();  // its check is the clean one the next arm chains from
    for (int i = 0; i < repeats; ++i) {
      plain.push_back(plain_run());
      chained.push_back(guarded_run(chained_steps));
    }
    for (int k = 0; k < kSteps; ++k) r.chained_steps[k] = median(chained_steps[k]);
    set_path(w, false, false);
  }
  // On a device: arm, launch and check captured once in one CUDA graph and replayed, what a run of
  // launches on the same buffers can do: on the exact path, and with chained arms. The host
  // backend's capture records launches only, not the guards, so there is no graph there.
  std::vector<double> graphed, chained_graphed;
  if (has_checksum) {
    graphed = measure_graph(device, w, memory, repeats, plain_run, plain, &r.graph_refused);
    set_path(w, true, true);
    guarded_run(), guarded_run();  // the path's first arm copies its snapshot; the second chains from a clean check
    chained_graphed = measure_graph(device, w, memory, repeats, plain_run, plain, &r.graph_refused);
    set_path(w, false, false);
  }
  r.plain = median(plain), r.guarded = median(guarded);
  if (!graphed.empty()) r.graph = median(graphed);
  if (!chained_graphed.empty()) r.chained_graph = median(chained_graphed);
  if (has_checksum) r.checksum = median(checksum), r.chained = median(chained);
  return r;
}

std::string fixed(double v, int digits) { return format_fixed(v, digits); }

}  // namespace

std::string format_fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

int run_bench_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  flags::BenchFlags f;
  if (const int rc = flags::parse_bench(args, f, out, err); rc >= 0) return rc;
  if (f.positional[0] == "fuzz") return run_bench_fuzz(f, out, err);
  if (f.positional[0] != "guards") {
    return flags::usage_error(err, "bench", "no benchmark '" + f.positional[0] + "' (the benchmarks: guards, fuzz)");
  }
  const std::string backend = f.backend, size = f.size, format = f.format;
  const int repeats = static_cast<int>(f.repeats);
  try {
    const auto b = parse_backend(backend);
    MLA_REQUIRE(b.has_value(), "--backend '", backend, "' is not one of host, cuda, hip");
    MLA_REQUIRE(*b != Backend::kHost || size == "small",
                "production shapes are for a GPU (--backend cuda); the host backend runs --size small");
    MLA_REQUIRE(kernels::guards_enabled(), "MLACHECK_GUARDS=0 turns off what this measures");
    const auto device = kernels::make_device(*b);
    std::vector<Workload> workloads;
    const bool small = size == "small";
    indexer_workloads(*device, small, workloads);
    workloads.push_back(sparse_workload(*device, small));
    workloads.push_back(dense_workload(*device, small));
    std::vector<Row> rows;
    for (Workload& w : workloads) rows.push_back(measure(*device, w, repeats));
    if (format == "json") {
      out << "{\"backend\": \"" << backend << "\", \"repeats\": " << repeats << ", \"kernels\": [\n";
      for (size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        out << "  {\"kernel\": \"" << r.kernel << "\", \"shape\": \"" << r.shape << "\", \"plain_ms\": " << fixed(r.plain, 4)
            << ", \"guarded_ms\": " << fixed(r.guarded, 4) << ", \"checksum_ms\": " << fixed(r.checksum, 4)
            << ", \"chained_ms\": " << fixed(r.chained, 4) << ", \"graph_ms\": " << fixed(r.graph, 4)
            << ", \"chained_graph_ms\": " << fixed(r.chained_graph, 4)
            << ", \"guarded_bytes\": " << r.guarded_bytes << "}" << (i + 1 < rows.size() ? "," : "") << '\n';
      }
      out << "]}\n";
      return 0;
    }
    out << "mlacheck bench guards: " << backend << " backend, median of " << repeats
        << " runs each, plain and guarded alternating on the same buffers\n";
    char line[420];
    std::snprintf(line, sizeof line, "%-18s %-46s %10s %10s %8s %10s %8s %10s %8s %9s %8s %12s %8s %9s\n", "kernel",
                  "shape", "plain ms", "guarded ms", "ratio", "checksum ms", "ratio", "chained ms", "ratio", "graph ms",
                  "ratio", "ch.graph ms", "ratio", "guarded MB");
    out << line;
    const auto ms_and_ratio = [](double ms, double plain) {
      return ms < 0 ? std::make_pair(std::string("-"), std::string("-")) : std::make_pair(fixed(ms, 3), fixed(ms / plain, 2) + "x");
    };
    for (const Row& r : rows) {
      const auto cs = ms_and_ratio(r.checksum, r.plain), ch = ms_and_ratio(r.chained, r.plain);
      const auto gr = ms_and_ratio(r.graph, r.plain), cg = ms_and_ratio(r.chained_graph, r.plain);
      std::snprintf(line, sizeof line, "%-18s %-46s %10.3f %10.3f %7.2fx %10s %8s %10s %8s %9s %8s %12s %8s %9.1f\n",
                    r.kernel.c_str(), r.shape.c_str(), r.plain, r.guarded, r.guarded / r.plain, cs.first.c_str(),
                    cs.second.c_str(), ch.first.c_str(), ch.second.c_str(), gr.first.c_str(), gr.second.c_str(),
                    cg.first.c_str(), cg.second.c_str(), static_cast<double>(r.guarded_bytes) / (1 << 20));
      out << line;
    }
    std::vector<double> ratios;
    for (const Row& r : rows) ratios.push_back(r.guarded / r.plain);
    out << "median ratio guarded / plain: " << fixed(median(ratios), 2) << "x";
    if (rows.front().checksum >= 0) {
      std::vector<double> cs;
      for (const Row& r : rows) cs.push_back(r.checksum / r.plain);
      out << "; with the checksum fast path: " << fixed(median(cs), 2) << "x";
    }
    // A path's median and maximum over the kernels, when every kernel has it.
    const auto summary = [&](const char* name, double Row::*ms) {
      if (!std::all_of(rows.begin(), rows.end(), [&](const Row& r) { return r.*ms >= 0; })) return;
      std::vector<double> v;
      for (const Row& r : rows) v.push_back(r.*ms / r.plain);
      out << "; " << name << ": " << fixed(median(v), 2) << "x (max " << fixed(*std::max_element(v.begin(), v.end()), 2) << "x)";
    };
    summary("chained", &Row::chained);
    summary("in a CUDA graph", &Row::graph);
    summary("chained in a graph", &Row::chained_graph);
    out << '\n';
    out << "host clock of a guarded run, medians in us (queueing arm_all, the launch, queue_check_all; the wait; "
           "the reports):\n";
    for (const Row& r : rows) {
      for (const bool with_chains : {false, true}) {
        const double* steps = with_chains ? r.chained_steps : r.steps;
        if (steps[0] < 0) continue;
        out << "  " << r.kernel << (with_chains ? ", chained:" : ", exact:  ");
        for (int k = 0; k < kSteps; ++k) out << ' ' << kStepNames[k] << ' ' << fixed(steps[k], 1);
        out << '\n';
      }
    }
    for (const Row& r : rows) {
      if (!r.graph_refused.empty()) out << r.kernel << ": no graph: " << r.graph_refused << '\n';
    }
    return 0;
  } catch (const Error& e) {
    err << flags::prefix("bench") << e.what() << '\n';
    return 2;
  }
}

}  // namespace mlacheck
