// Tests of kernels/topk_glue.h (SPEC.md 3): top-k per row, decode and prefill, both paths, on the host
// device (and cuda when usable), every buffer guarded, every row checked by core/topk_check.h.
#include "kernels/topk_glue.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/backend/host_executor.h"
#include "core/error.h"
#include "core/topk_check.h"
#include "oracle/topk.h"

namespace mlacheck::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---- row contents ------------------------------------------------------------------------------

// What a row's [0, n) holds. Everything else of the logits buffer is garbage that would win the
// selection if it were read (+inf, huge values, NaN).
enum class Pattern {
  kDistinct,        // normal floats
  kFewValues,       // 1 to 3 distinct values: ties across the threshold
  kSharedHighBits,  // values 1 + i ulp, i < 256: every key shares its top three bytes
  kAllEqual,
  kNegInf,       // mostly -inf, a few finite
  kSignedZeros,  // +0, -0 and a few small values
  kNaN,          // normal floats with NaNs among them
  kNegative,     // all negative
  kExtremes,     // +-inf, +-FLT_MAX, subnormals, +-0
  kCount
};

const char* pattern_name(Pattern p) {
  static const char* names[] = {"distinct",     "few-values", "shared-high-bits", "all-equal", "neg-inf",
                                "signed-zeros", "nan",        "negative",         "extremes"};
  return names[static_cast<int>(p)];
}

void fill_row(float* v, int64_t stride, int64_t n, Pattern pattern, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 4.0f);
  auto pick = [&](int64_t m) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(m)); };
  float few[3] = {normal(rng), normal(rng), normal(rng)};
  const int64_t few_count = 1 + pick(3);
  for (int64_t i = 0; i < n; ++i) {
    float x = 0;
    switch (pattern) {
      case Pattern::kDistinct: x = normal(rng); break;
      case Pattern::kFewValues: x = few[pick(few_count)]; break;
      case Pattern::kSharedHighBits: {
        const uint32_t bits = 0x3F800000u + static_cast<uint32_t>(pick(256));
        std::memcpy(&x, &bits, 4);
        break;
      }
      case Pattern::kAllEqual: x = few[0]; break;
      case Pattern::kNegInf: x = pick(8) == 0 ? normal(rng) : -kInf; break;
      case Pattern::kSignedZeros:
        x = pick(3) == 0 ? 0.0f : (pick(3) == 0 ? -0.0f : (pick(4) == 0 ? 1e-3f : 0.0f));
        break;
      case Pattern::kNaN: x = pick(5) == 0 ? kNaN : normal(rng); break;
      case Pattern::kNegative: x = -std::fabs(normal(rng)) - 1e-3f; break;
      case Pattern::kExtremes: {
        constexpr float kMax = std::numeric_limits<float>::max(), kTiny = std::numeric_limits<float>::denorm_min();
        const float e[] = {kInf, -kInf, kMax, -kMax, kTiny, -kTiny, 0.0f, -0.0f, 1.0f};
        x = e[pick(9)];
        break;
      }
      case Pattern::kCount: break;
    }
    v[i * stride] = x;
  }
}

float garbage(std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0: return kInf;
    case 1: return kNaN;
    case 2: return 3e38f;
    default: return 1e6f + static_cast<float>(rng() % 1000);
  }
}

// ---- a case ------------------------------------------------------------------------------------

enum class Lengths { kDecode1D, kDecode2D, kPrefill };
const char* lengths_name(Lengths l) {
  return l == Lengths::kDecode1D ? "decode 1-D" : l == Lengths::kDecode2D ? "decode 2-D" : "prefill";
}
void showValue(Lengths l, std::ostream& os) { os << lengths_name(l); }

struct TopkCase {
  Lengths lengths = Lengths::kDecode1D;
  int64_t k = 1;
  int64_t next_n = 1;
  std::vector<int32_t> seq_lens;  // decode: [B] or [B * next_n]
  std::vector<int32_t> ks, ke;    // prefill
  int64_t rows = 0, cols = 0;
  int64_t logits_lead = 0, logits_row_pad = 0, logits_col_stride = 1;
  int64_t out_row_pad = 0, out_rows_before = 0, out_rows_after = 0;
  std::vector<Pattern> patterns;                  // one per row
  std::vector<std::vector<float>> explicit_rows;  // when given, row r's [0, n) instead of its pattern
  uint64_t seed = 0;
  int warp_size = 32;  // host backend only

  friend void showValue(const TopkCase& c, std::ostream& os) {
    os << lengths_name(c.lengths) << ", k " << c.k << ", rows " << c.rows << ", cols " << c.cols << ", next_n "
       << c.next_n << ", warp " << c.warp_size << ", col stride " << c.logits_col_stride << ", seed " << c.seed << "\n";
    auto list = [&](const char* name, const std::vector<int32_t>& v) {
      if (v.empty()) return;
      os << "  " << name << ":";
      for (int32_t x : v) os << ' ' << x;
      os << "\n";
    };
    list("seq_lens", c.seq_lens);
    list("ks", c.ks);
    list("ke", c.ke);
    os << "  patterns:";
    for (Pattern p : c.patterns) os << ' ' << pattern_name(p);
  }
};

// One guarded buffer holding host data; returns the device tensor.
struct Staged {
  std::unique_ptr<GuardedMemory> memory;
  DeviceTensor tensor;
};
template <class T>
Staged stage(Device& device, const std::string& name, const View& v, const std::vector<T>& host) {
  const int64_t bytes = std::max<int64_t>(1, static_cast<int64_t>(host.size() * sizeof(T)));
  Staged s{device.allocate(name, bytes), {}};
  if (!host.empty()) s.memory->write(0, host.data(), static_cast<int64_t>(host.size() * sizeof(T)));
  s.tensor = {s.memory->data(), v};
  return s;
}
template <class T>
std::vector<T> fetch(const GuardedMemory& m) {
  std::vector<T> out(static_cast<size_t>(m.size()) / sizeof(T));
  m.read(0, out.data(), static_cast<int64_t>(out.size() * sizeof(T)));
  return out;
}

enum class Launch { kGlue, kFast, kGeneral };  // kGlue: the glue's own choice

struct TopkRun {
  std::string problem;                        // "" when every check passed
  std::vector<std::vector<int32_t>> indices;  // per row, k each
  std::vector<std::vector<double>> values;    // the row's values [0, n), as the checker saw them
  std::vector<int64_t> lengths;
  std::vector<int32_t> counts;  // TopkRowClass counters
  TopkPath path = TopkPath::kGeneral;
};

// Runs one case: logits row-padded and offset in their buffer with garbage around every row, the
// output a row-padded slice of a larger shared buffer; then checks every guard and every row.
TopkRun run_case(Device& device, const TopkCase& c, Launch launch) {
  TopkRun run;
  std::mt19937_64 rng(c.seed);
  // Row lengths and starts, from the oracle.
  std::vector<int64_t> starts(static_cast<size_t>(c.rows), 0);
  View seq_view, ks_view;
  if (c.lengths == Lengths::kPrefill) {
    ks_view = View::contiguous(DType::kI32, {c.rows});
    std::vector<int32_t> ks = c.ks, ke = c.ke;
    run.lengths = oracle::topk_prefill_row_lengths(HostTensor(ks.data(), ks_view), HostTensor(ke.data(), ks_view));
    for (int64_t r = 0; r < c.rows; ++r) starts[static_cast<size_t>(r)] = c.ks[static_cast<size_t>(r)];
  } else {
    const int64_t B = c.rows / c.next_n;
    seq_view = c.lengths == Lengths::kDecode2D ? View::contiguous(DType::kI32, {B, c.next_n})
                                               : View::contiguous(DType::kI32, {B});
    std::vector<int32_t> seq = c.seq_lens;
    run.lengths = oracle::topk_decode_row_lengths(HostTensor(seq.data(), seq_view), c.next_n);
  }

  // Logits: garbage everywhere, each row's [start, start + n) by its pattern.
  const int64_t row_stride = c.cols * c.logits_col_stride + c.logits_row_pad;
  std::vector<float> logits(static_cast<size_t>(c.logits_lead + c.rows * row_stride + 3));
  for (float& x : logits) x = garbage(rng);
  const View logits_view(DType::kF32, {c.rows, c.cols}, {row_stride, c.logits_col_stride}, c.logits_lead * 4);
  for (int64_t r = 0; r < c.rows; ++r) {
    float* row = logits.data() + c.logits_lead + r * row_stride + starts[static_cast<size_t>(r)] * c.logits_col_stride;
    const int64_t n = run.lengths[static_cast<size_t>(r)];
    if (c.explicit_rows.empty()) {
      fill_row(row, c.logits_col_stride, n, c.patterns[static_cast<size_t>(r)], rng);
    } else {
      const std::vector<float>& v = c.explicit_rows[static_cast<size_t>(r)];
      for (int64_t i = 0; i < n; ++i) row[i * c.logits_col_stride] = v[static_cast<size_t>(i)];
    }
  }

  // The output: rows [before, before + rows) of a shared [before + rows + after, k] buffer.
  const int64_t out_stride = c.k + c.out_row_pad;
  const int64_t out_total_rows = c.out_rows_before + c.rows + c.out_rows_after;
  const View out_view(DType::kI32, {c.rows, c.k}, {out_stride, 1}, c.out_rows_before * out_stride * 4);
  const int64_t ws_bytes = topk_workspace_bytes(c.rows, c.k, c.cols);

  Staged lg = stage(device, "logits", logits_view, logits);
  Staged out = stage(device, "topk_indices_buffer", out_view,
                     std::vector<int32_t>(static_cast<size_t>(out_total_rows * out_stride + 2), 77));
  Staged ws =
      stage(device, "workspace", View::contiguous(DType::kU8, {ws_bytes}), std::vector<uint8_t>(size_t(ws_bytes)));
  Staged counts = stage(device, "row_class_counts", View::contiguous(DType::kI32, {kTopkRowClassCount}),
                        std::vector<int32_t>(kTopkRowClassCount));
  Staged seq, ks, ke;
  if (c.lengths == Lengths::kPrefill) {
    ks = stage(device, "ks", ks_view, c.ks);
    ke = stage(device, "ke", ks_view, c.ke);
  } else {
    seq = stage(device, "seq_lens", seq_view, c.seq_lens);
  }
  out.memory->declare_output("out", out_view);
  if (ws_bytes > 0) ws.memory->declare_output("workspace", ws.tensor.view);
  counts.memory->declare_output("counts", counts.tensor.view);
  std::vector<GuardedMemory*> all;
  for (Staged* s : {&lg, &out, &ws, &counts, &seq, &ks, &ke}) {
    if (s->memory) all.push_back(s->memory.get());
  }
  for (GuardedMemory* m : all) m->arm();
  const std::vector<int32_t> zeros(kTopkRowClassCount, 0);
  counts.memory->write(0, zeros.data(), kTopkRowClassCount * 4);  // arm() poisoned them
  const DeviceTensor workspace = ws_bytes > 0 ? ws.tensor : DeviceTensor{};

  const bool prefill = c.lengths == Lengths::kPrefill;
  if (launch == Launch::kGlue) {
    run.path =
        prefill
            ? topk_per_row_prefill(device, lg.tensor, ks.tensor, ke.tensor, c.k, out.tensor, workspace, counts.tensor)
            : topk_per_row_decode(device, lg.tensor, c.next_n, seq.tensor, c.k, out.tensor, workspace, counts.tensor);
  } else {
    const TopkParams p =
        prefill ? topk_prefill_params(lg.tensor, ks.tensor, ke.tensor, c.k, out.tensor, workspace, counts.tensor)
                : topk_decode_params(lg.tensor, c.next_n, seq.tensor, c.k, out.tensor, workspace, counts.tensor);
    run.path = launch == Launch::kFast ? TopkPath::kFastK2048 : TopkPath::kGeneral;
    launch_topk(device, p, run.path);
  }
  device.synchronize();

  std::ostringstream problems;
  for (GuardedMemory* m : all) {
    const GuardReport g = m->check();
    if (!g.ok()) problems << "guard of " << m->name() << ": " << g.describe() << "; ";
  }
  const std::vector<int32_t> out_host = fetch<int32_t>(*out.memory);
  const HostTensor out_tensor(const_cast<int32_t*>(out_host.data()), out_view);
  const HostTensor logits_tensor(logits.data(), logits_view);
  const TopkReport report = check_topk(out_tensor, logits_tensor, starts, run.lengths);
  if (!report.ok) problems << topk_path_name(run.path) << " path: " << report.describe();
  run.problem = problems.str();
  run.counts = fetch<int32_t>(*counts.memory);
  for (int64_t r = 0; r < c.rows; ++r) {
    std::vector<int32_t> idx(static_cast<size_t>(c.k));
    for (int64_t i = 0; i < c.k; ++i) idx[static_cast<size_t>(i)] = out_tensor.at<int32_t>({r, i});
    std::vector<double> vals;
    for (int64_t i = 0; i < run.lengths[static_cast<size_t>(r)]; ++i)
      vals.push_back(logits_tensor.load({r, starts[static_cast<size_t>(r)] + i}));
    run.indices.push_back(std::move(idx));
    run.values.push_back(std::move(vals));
  }
  return run;
}

// "" when two runs of one case took the same multiset of values in every row without NaN.
std::string same_selected_values(const TopkRun& a, const TopkRun& b) {
  for (size_t r = 0; r < a.indices.size(); ++r) {
    const std::vector<double>& v = a.values[r];
    if (std::any_of(v.begin(), v.end(), [](double x) { return std::isnan(x); })) continue;
    std::vector<double> x, y;
    for (const auto& [run, selected] : {std::pair{&a, &x}, std::pair{&b, &y}}) {
      for (int32_t i : run->indices[r]) {
        if (i >= static_cast<int64_t>(v.size()))
          return "row " + std::to_string(r) + ": index " + std::to_string(i) + " past n";
        selected->push_back(i >= 0 ? v[static_cast<size_t>(i)] : -HUGE_VAL);
      }
    }
    std::sort(x.begin(), x.end());
    std::sort(y.begin(), y.end());
    if (x != y) return "row " + std::to_string(r) + ": the two paths selected different values";
  }
  return "";
}

// Runs c with the host backend's shuffled schedule (a missing barrier or a race shows as a wrong
// or seed-dependent result) and the case's warp size.
TopkRun run_on_host(const TopkCase& c, Launch launch) {
  simt::host::Options o;
  o.warp_size = c.warp_size;
  o.schedule = simt::host::Schedule::kShuffled;
  o.seed = c.seed;
  const simt::host::ScopedOptions scoped(o);
  const auto device = make_device(Backend::kHost);
  return run_case(*device, c, launch);
}

// ---- generators --------------------------------------------------------------------------------

rc::Gen<Pattern> gen_pattern() {
  return rc::gen::weightedOneOf<Pattern>({{6, rc::gen::just(Pattern::kDistinct)},
                                          {2, rc::gen::just(Pattern::kFewValues)},
                                          {2, rc::gen::just(Pattern::kSharedHighBits)},
                                          {1, rc::gen::just(Pattern::kAllEqual)},
                                          {1, rc::gen::just(Pattern::kNegInf)},
                                          {1, rc::gen::just(Pattern::kSignedZeros)},
                                          {1, rc::gen::just(Pattern::kNaN)},
                                          {1, rc::gen::just(Pattern::kNegative)},
                                          {1, rc::gen::just(Pattern::kExtremes)}});
}

// Uniform in [lo, hi] at every size (rc::gen::inRange favours lo while the size is small), still
// shrinking towards lo.
rc::Gen<int64_t> uniform(int64_t lo, int64_t hi) { return rc::gen::resize(100, rc::gen::inRange<int64_t>(lo, hi + 1)); }

// A row length in [0, cols] near one of the points the kernels switch at, or anywhere.
int64_t gen_length(int64_t k, int64_t cols, const std::vector<int64_t>& switch_points) {
  int64_t n = 0;
  switch (*rc::gen::element(0, 1, 2, 3)) {  // element, not inRange: uniform at every size
    case 0: n = k + *rc::gen::element<int64_t>(-1, 0, 1); break;
    case 1: n = *uniform(0, cols); break;
    case 2:
      n = switch_points.empty() ? cols : *rc::gen::elementOf(switch_points) + *rc::gen::element<int64_t>(-1, 0, 1);
      break;
    default: n = *rc::gen::element<int64_t>(0, cols); break;
  }
  return std::clamp<int64_t>(n, 0, cols);
}

// Rows of lengths near k and the given switch points, within [min_cols, max_cols] columns.
rc::Gen<TopkCase> gen_case(Lengths lengths, int64_t min_k, int64_t max_k, int64_t min_cols, int64_t max_cols,
                           int64_t max_rows, std::vector<int64_t> switch_points = {}) {
  return rc::gen::exec([=] {
    TopkCase c;
    c.lengths = lengths;
    c.k = *uniform(min_k, max_k);
    c.cols = *uniform(min_cols, max_cols);
    c.next_n = lengths == Lengths::kPrefill ? 1 : *rc::gen::inRange<int64_t>(1, 4);
    const int64_t groups = *rc::gen::inRange<int64_t>(1, std::max<int64_t>(2, max_rows / c.next_n + 1));
    c.rows = groups * c.next_n;
    for (int64_t g = 0; g < groups; ++g) {
      if (lengths == Lengths::kDecode1D) {
        // Row j of the group has length L - next_n + j + 1: aim its last row at the length drawn.
        const int64_t last = gen_length(c.k, c.cols, switch_points);
        c.seq_lens.push_back(static_cast<int32_t>(*rc::gen::weightedElement<int64_t>({{8, last}, {1, 0}, {1, -1}})));
      } else {
        for (int64_t j = 0; j < c.next_n; ++j) {
          const int64_t n = gen_length(c.k, c.cols, switch_points);
          if (lengths == Lengths::kDecode2D) {
            c.seq_lens.push_back(static_cast<int32_t>(n));
          } else {
            const int64_t ks = *rc::gen::inRange<int64_t>(0, c.cols - n + 1);
            c.ks.push_back(static_cast<int32_t>(ks));
            c.ke.push_back(static_cast<int32_t>(ks + n));
          }
        }
      }
    }
    c.patterns = *rc::gen::container<std::vector<Pattern>>(static_cast<size_t>(c.rows), gen_pattern());
    c.logits_lead = *rc::gen::inRange<int64_t>(0, 4);
    c.logits_row_pad = *rc::gen::inRange<int64_t>(0, 5);
    c.logits_col_stride = *rc::gen::weightedElement<int64_t>({{5, 1}, {1, 2}});
    c.out_row_pad = *rc::gen::inRange<int64_t>(0, 4);
    c.out_rows_before = *rc::gen::inRange<int64_t>(0, 3);
    c.out_rows_after = *rc::gen::inRange<int64_t>(0, 3);
    c.seed = *rc::gen::arbitrary<uint64_t>();
    c.warp_size = *rc::gen::element(32, 64);
    return c;
  });
}

void tag_row_classes(const TopkRun& run) {
  RC_CLASSIFY(run.counts[kTopkFillRow] > 0, "fill rows");
  RC_CLASSIFY(run.counts[kTopkShortRow] > 0, "short rows");
  RC_CLASSIFY(run.counts[kTopkLongRow] > 0, "long rows");
  RC_CLASSIFY(run.counts[kTopkStreamedSelect] > 0, "streamed selection");
  RC_CLASSIFY(run.counts[kTopkEarlyExit] > 0, "early exit");
}

// ---- properties on the host device -------------------------------------------------------------

RC_GTEST_PROP(TopkDecode, RowsAreAdmissibleAndOnlyTheOutputViewIsWritten, ()) {
  const Lengths lengths = *rc::gen::element(Lengths::kDecode1D, Lengths::kDecode2D);
  const TopkCase c = *gen_case(lengths, 1, 40, 1, 200, 8);
  const TopkRun run = run_on_host(c, Launch::kGlue);
  tag_row_classes(run);
  RC_ASSERT(run.problem == "");
}

RC_GTEST_PROP(TopkPrefill, RowsRelativeToKsAreAdmissibleAndOnlyTheOutputViewIsWritten, ()) {
  const TopkCase c = *gen_case(Lengths::kPrefill, 1, 40, 1, 200, 6);
  const TopkRun run = run_on_host(c, Launch::kGlue);
  tag_row_classes(run);
  RC_ASSERT(run.problem == "");
}

// Rows around the short / long switch, with ties that overflow the shared pool.
RC_GTEST_PROP(TopkLongRows, RowsAcrossTheShortLongSwitchAreAdmissible, ()) {
  const Lengths lengths = *rc::gen::element(Lengths::kDecode2D, Lengths::kPrefill);
  const TopkCase c = *gen_case(lengths, 1, 24, kTopkShortRowMaxLen - 2, kTopkShortRowMaxLen + 600, 1,
                               {kTopkShortRowMaxLen, kTopkShortRowMaxLen + 1});
  const TopkRun run = run_on_host(c, Launch::kGlue);
  tag_row_classes(run);
  RC_ASSERT(run.problem == "");
}

// k = 2047, 2048 (the fast path) and 2049 through the glue; at 2048 the general path too, which
// must take the same values.
RC_GTEST_PROP(TopkFastPath, AroundK2048TheGlueIsRightAndBothPathsAgree, ()) {
  const Lengths lengths = *rc::gen::element(Lengths::kDecode1D, Lengths::kDecode2D, Lengths::kPrefill);
  const TopkCase c = *gen_case(lengths, kTopkFastK - 1, kTopkFastK + 1, kTopkFastK - 2, kTopkShortRowMaxLen + 600, 1,
                               {kTopkFastK, kTopkShortRowMaxLen});
  const TopkRun glue = run_on_host(c, Launch::kGlue);
  tag_row_classes(glue);
  RC_ASSERT(glue.path == (c.k == kTopkFastK ? TopkPath::kFastK2048 : TopkPath::kGeneral));
  RC_ASSERT(glue.problem == "");
  if (c.k == kTopkFastK) {
    const TopkRun general = run_on_host(c, Launch::kGeneral);
    RC_ASSERT(general.problem == "");
    RC_ASSERT(same_selected_values(glue, general) == "");
  }
}

// ---- production-sized cases ------------------------------------------------------------------

// One decode row per length, from a 2-D seq_lens [rows, 1].
TopkCase rows_of_lengths(int64_t k, const std::vector<int64_t>& lengths, int64_t cols, uint64_t seed,
                         const std::vector<Pattern>& patterns) {
  TopkCase c;
  c.lengths = Lengths::kDecode2D;
  c.k = k;
  c.cols = cols;
  c.rows = static_cast<int64_t>(lengths.size());
  for (size_t r = 0; r < lengths.size(); ++r) {
    c.seq_lens.push_back(static_cast<int32_t>(lengths[r]));
    c.patterns.push_back(patterns[r % patterns.size()]);
  }
  c.logits_row_pad = 5;
  c.out_row_pad = 3;
  c.out_rows_before = 1;
  c.out_rows_after = 2;
  c.seed = seed;
  return c;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Every switch point straddled (k - 1, k, k + 1; each threshold - 1, 0, + 1; the split count
// stepping from 3 to 4 chunks), for a small k, and for k = 2048 on both paths.
TEST(Topk, EveryRowLengthSwitchPointIsStraddled) {
  const std::vector<Pattern> patterns = {Pattern::kDistinct, Pattern::kFewValues, Pattern::kSharedHighBits,
                                         Pattern::kDistinct, Pattern::kNegInf};
  for (const int64_t k : {int64_t(5), int64_t(kTopkFastK)}) {
    std::vector<int64_t> lengths = {k - 1, k, k + 1};
    for (int64_t t : {int64_t(kTopkShortRowMaxLen), int64_t(kTopkSplitRowMinLen), int64_t(3 * kTopkSplitChunkLen)}) {
      for (int64_t d : {-1, 0, 1}) lengths.push_back(t + d);
    }
    const int64_t cols = lengths.back();
    const TopkCase c = rows_of_lengths(k, lengths, cols, 7 + uint64_t(k), patterns);
    const auto t0 = std::chrono::steady_clock::now();
    const TopkRun glue = run_on_host(c, Launch::kGlue);
    EXPECT_EQ(glue.problem, "") << "k " << k;
    EXPECT_EQ(glue.counts[kTopkFillRow], 2);
    EXPECT_EQ(glue.counts[kTopkShortRow], 3);  // k + 1, and the short maximum - 1 and 0
    EXPECT_EQ(glue.counts[kTopkLongRow], 3);   // the short maximum + 1, the split minimum - 1 and 0
    EXPECT_EQ(glue.counts[kTopkSplitRow], 4);
    if (k == kTopkFastK) {
      EXPECT_EQ(glue.path, TopkPath::kFastK2048);
      const TopkRun general = run_on_host(c, Launch::kGeneral);
      EXPECT_EQ(general.problem, "");
      EXPECT_EQ(same_selected_values(glue, general), "");
    }
    std::printf("[ timing ] k %lld, %lld rows up to %lld long: %.2f s on host\n", static_cast<long long>(k),
                static_cast<long long>(c.rows), static_cast<long long>(cols), seconds_since(t0));
  }
}

// Very long rows of every pattern, with a k above the split chunk (chunks copied whole), the fast k
// and a small k; 2-D and 1-D lengths and prefill. Lengths 100000 + r: the last chunk is the shorter
// one from r = 1 on.
TEST(Topk, VeryLongRowsOfEveryPatternAreAdmissible) {
  std::vector<Pattern> patterns;
  for (int p = 0; p < static_cast<int>(Pattern::kCount); ++p) patterns.push_back(static_cast<Pattern>(p));
  for (const int64_t k : {int64_t(3), int64_t(kTopkFastK), int64_t(40000)}) {
    std::vector<int64_t> lengths;
    for (size_t r = 0; r < patterns.size(); ++r) lengths.push_back(100000 + static_cast<int64_t>(r));
    TopkCase c = rows_of_lengths(k, lengths, 100010, 100 + uint64_t(k), patterns);
    const auto t0 = std::chrono::steady_clock::now();
    const TopkRun run = run_on_host(c, Launch::kGlue);
    EXPECT_EQ(run.problem, "") << "k " << k;
    EXPECT_EQ(run.counts[kTopkSplitRow], static_cast<int>(patterns.size()));
    std::printf("[ timing ] k %lld, %zu rows of about 100000: %.2f s on host\n", static_cast<long long>(k),
                patterns.size(), seconds_since(t0));
  }
  // Prefill rows starting past column 0, and 1-D decode lengths, both very long.
  TopkCase prefill = rows_of_lengths(kTopkFastK, {0, 0, 0}, 140000, 5, {Pattern::kDistinct, Pattern::kFewValues});
  prefill.lengths = Lengths::kPrefill;
  prefill.ks = {0, 9000, 139999};
  prefill.ke = {140000, 139001, 140000};
  EXPECT_EQ(run_on_host(prefill, Launch::kGlue).problem, "");
  TopkCase decode = rows_of_lengths(17, {0, 0, 0, 0}, 90000, 6, {Pattern::kDistinct, Pattern::kSignedZeros});
  decode.lengths = Lengths::kDecode1D;
  decode.next_n = 2;
  decode.seq_lens = {90000, 70000};
  EXPECT_EQ(run_on_host(decode, Launch::kGlue).problem, "");
}

// Which algorithm each row takes, read from the kernels' counters: ties wider than the shared pool
// stream every pass; a selection stops early once the threshold digit's elements are all taken.
TEST(Topk, EachAlgorithmRunsWhereItShould) {
  // 5000 equal values: the tie never fits the pool; no digit ever separates them.
  TopkRun run = run_on_host(rows_of_lengths(10, {5000}, 5000, 1, {Pattern::kAllEqual}), Launch::kGlue);
  EXPECT_EQ(run.problem, "");
  EXPECT_EQ(run.counts[kTopkLongRow], 1);
  EXPECT_EQ(run.counts[kTopkStreamedSelect], 1);
  EXPECT_EQ(run.counts[kTopkEarlyExit], 0);
  // Normal values: the long row's tie fits the pool after the first digit.
  run = run_on_host(rows_of_lengths(10, {300, 5000}, 5000, 2, {Pattern::kDistinct}), Launch::kGlue);
  EXPECT_EQ(run.problem, "");
  EXPECT_EQ(run.counts[kTopkShortRow], 1);
  EXPECT_EQ(run.counts[kTopkLongRow], 1);
  EXPECT_EQ(run.counts[kTopkStreamedSelect], 0);
  // n <= k fills; three positives over three negatives: the sign (top digit) decides, so the
  // selection stops after one digit.
  TopkCase c = rows_of_lengths(3, {3, 0, 6}, 8, 3, {Pattern::kDistinct});
  c.explicit_rows = {{5, 6, 7}, {}, {-1, 2, -1, 2, -1, 2}};
  run = run_on_host(c, Launch::kGlue);
  EXPECT_EQ(run.problem, "");
  EXPECT_EQ(run.counts[kTopkFillRow], 2);
  EXPECT_EQ(run.counts[kTopkShortRow], 1);
  EXPECT_EQ(run.counts[kTopkEarlyExit], 1);
  EXPECT_EQ(run.indices[2].size(), 3u);
  for (int32_t i : run.indices[2]) EXPECT_EQ(i % 2, 1) << "index " << i;
}

// A graph captured with short rows replays correctly after the lengths grow past the split point:
// nothing is decided on the host from device data, and the workspace is fixed.
TEST(Topk, GraphReplayAfterTheLengthsGrowMatchesTheNewLengths) {
  const int64_t rows = 2, cols = 70000, k = kTopkFastK;
  std::vector<float> logits(static_cast<size_t>(rows * cols));
  std::mt19937_64 rng(11);
  fill_row(logits.data(), 1, rows * cols, Pattern::kDistinct, rng);
  std::vector<int32_t> seq = {100, 3000}, out(static_cast<size_t>(rows * k), -7);  // seq never reallocates
  std::vector<uint8_t> ws(static_cast<size_t>(topk_workspace_bytes(rows, k, cols)));
  const DeviceTensor lg{logits.data(), View::contiguous(DType::kF32, {rows, cols})};
  const DeviceTensor sl{seq.data(), View::contiguous(DType::kI32, {rows})};
  const DeviceTensor o{out.data(), View::contiguous(DType::kI32, {rows, k})};
  const DeviceTensor w{ws.data(), View::contiguous(DType::kU8, {static_cast<int64_t>(ws.size())})};
  const TopkParams p = topk_decode_params(lg, 1, sl, k, o, w);
  simt::host::Stream stream;
  stream.begin_capture();
  host::topk_per_row_k2048(p, &stream);
  const simt::host::Graph graph = stream.end_capture();
  EXPECT_EQ(graph.launch_count(), 2u);  // the split kernel is captured although no row needs it yet
  seq[0] = 69000;
  seq[1] = static_cast<int32_t>(cols);
  graph.replay();
  const std::vector<int64_t> lengths = {69000, cols};
  const TopkReport r = check_topk(HostTensor(out.data(), o.view), HostTensor(logits.data(), lg.view), lengths);
  EXPECT_TRUE(r.ok) << r.describe();
}

// ---- bad input ---------------------------------------------------------------------------------

TEST(Topk, BadInputIsRefusedBeforeAnyLaunchWithOneLine) {
  const auto device = make_device(Backend::kHost);
  auto out_memory = device->allocate("out", 4 * 64);
  auto logits_memory = device->allocate("logits", 4 * 4 * 16);
  std::vector<int32_t> ints(64, 3);
  const DeviceTensor logits{logits_memory->data(), View::contiguous(DType::kF32, {4, 16})};
  const DeviceTensor seq1{ints.data(), View::contiguous(DType::kI32, {2})};  // next_n 2: 4 rows
  const DeviceTensor seq2{ints.data(), View::contiguous(DType::kI32, {2, 2})};
  const DeviceTensor ks{ints.data(), View::contiguous(DType::kI32, {4})};
  const DeviceTensor none{};
  auto out_of = [&](View v) { return DeviceTensor{out_memory->data(), v}; };
  const DeviceTensor out = out_of(View::contiguous(DType::kI32, {4, 3}));
  out_memory->declare_output("out", out.view);
  out_memory->arm();
  logits_memory->arm();
  auto refused = [&](const char* what, auto&& call) {
    try {
      call();
      ADD_FAILURE() << what << ": accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << what << ": " << e.what();
    }
  };
  auto decode = [&](DeviceTensor lg, int64_t next_n, DeviceTensor s, int64_t k, DeviceTensor o) {
    return [=, &device] { topk_per_row_decode(*device, lg, next_n, s, k, o, none); };
  };
  refused("k = 0", decode(logits, 2, seq1, 0, out_of(View::contiguous(DType::kI32, {4, 0}))));
  refused("k = -1", decode(logits, 2, seq1, -1, out));
  refused("out has k + 1 columns", decode(logits, 2, seq1, 3, out_of(View::contiguous(DType::kI32, {4, 4}))));
  refused("out has 3 rows for 4 logits rows",
          decode(logits, 2, seq1, 3, out_of(View::contiguous(DType::kI32, {3, 3}))));
  refused("out column stride 2", decode(logits, 2, seq1, 3, out_of(View(DType::kI32, {4, 3}, {6, 2}))));
  refused("out rows overlap", decode(logits, 2, seq1, 3, out_of(View(DType::kI32, {4, 3}, {2, 1}))));
  refused("out int64", decode(logits, 2, seq1, 3, out_of(View::contiguous(DType::kI64, {4, 3}))));
  refused("logits bf16", decode({logits.base, View::contiguous(DType::kBF16, {4, 16})}, 2, seq1, 3, out));
  refused("logits rank 3", decode({logits.base, View::contiguous(DType::kF32, {4, 4, 4})}, 2, seq1, 3, out));
  refused("seq_lens int64", decode(logits, 2, {ints.data(), View::contiguous(DType::kI64, {2})}, 3, out));
  refused("seq_lens strided", decode(logits, 2, {ints.data(), View(DType::kI32, {2}, {2})}, 3, out));
  refused("B * next_n != rows", decode(logits, 3, seq1, 3, out));
  refused("next_n 0", decode(logits, 0, seq1, 3, out));
  // The [:B, :next_n'] slice of a wider [B, next_n] buffer (vLLM #42135).
  refused("2-D seq_lens not contiguous", decode(logits, 2, {ints.data(), View(DType::kI32, {2, 2}, {3, 1})}, 3, out));
  refused("2-D seq_lens columns != next_n",
          decode(logits, 1, {ints.data(), View::contiguous(DType::kI32, {4, 2})}, 3, out));
  EXPECT_NO_THROW(decode(logits, 2, seq2, 3, out)());
  refused("ks of 3 rows", [&] {
    topk_per_row_prefill(*device, logits, {ints.data(), View::contiguous(DType::kI32, {3})}, ks, 3, out, none);
  });
  refused("ke int64", [&] {
    topk_per_row_prefill(*device, logits, ks, {ints.data(), View::contiguous(DType::kI64, {4})}, 3, out, none);
  });
  refused("row_class_counts of 2", [&] {
    topk_per_row_prefill(*device, logits, ks, ks, 3, out, none, {ints.data(), View::contiguous(DType::kI32, {2})});
  });
  // Rows long enough to be split need the workspace, and enough of it.
  std::vector<float> wide(2 * 70000);
  const DeviceTensor wide_logits{wide.data(), View::contiguous(DType::kF32, {2, 70000})};
  std::vector<int32_t> wide_out(2 * 8);
  const DeviceTensor wo{wide_out.data(), View::contiguous(DType::kI32, {2, 8})};
  const DeviceTensor seq_wide{ints.data(), View::contiguous(DType::kI32, {2})};
  const int64_t need = topk_workspace_bytes(2, 8, 70000);
  EXPECT_EQ(need, 2 * 8 * 8 * 8);
  EXPECT_EQ(topk_workspace_bytes(2, 8, kTopkSplitRowMinLen), 0);
  std::vector<uint8_t> ws(static_cast<size_t>(need));
  refused("no workspace", [&] { topk_per_row_decode(*device, wide_logits, 1, seq_wide, 8, wo, none); });
  refused("workspace too small", [&] {
    topk_per_row_decode(*device, wide_logits, 1, seq_wide, 8, wo,
                        {ws.data(), View::contiguous(DType::kU8, {need - 1})});
  });
  // The fast path is compiled for k = 2048 only.
  refused("fast path with k = 3",
          [&] { launch_topk(*device, topk_decode_params(logits, 2, seq1, 3, out, none), TopkPath::kFastK2048); });
  // Nothing above launched.
  EXPECT_TRUE(logits_memory->check().ok());
  const GuardReport g = out_memory->check();
  EXPECT_TRUE(g.ok()) << g.describe();
}

// ---- cuda --------------------------------------------------------------------------------------

TEST(Topk, OnCudaWhenAGpuIsPresent) {
  std::string why;
  if (!device_usable(Backend::kCuda, &why)) GTEST_SKIP() << "skipped: no GPU (" << why << ")";
  const auto device = make_device(Backend::kCuda);
  EXPECT_TRUE(rc::check("decode on cuda", [&] {
    const TopkCase c = *gen_case(*rc::gen::element(Lengths::kDecode1D, Lengths::kDecode2D), 1, 40, 1, 200, 8);
    RC_ASSERT(run_case(*device, c, Launch::kGlue).problem == "");
  }));
  EXPECT_TRUE(rc::check("prefill on cuda", [&] {
    RC_ASSERT(run_case(*device, *gen_case(Lengths::kPrefill, 1, 40, 1, 200, 6), Launch::kGlue).problem == "");
  }));
  EXPECT_TRUE(rc::check("long rows on cuda", [&] {
    const TopkCase c = *gen_case(Lengths::kDecode2D, 1, 24, kTopkShortRowMaxLen - 2, kTopkShortRowMaxLen + 600, 2,
                                 {kTopkShortRowMaxLen});
    RC_ASSERT(run_case(*device, c, Launch::kGlue).problem == "");
  }));
  EXPECT_TRUE(rc::check("k = 2048 on cuda, fast and general", [&] {
    const TopkCase c =
        *gen_case(Lengths::kDecode1D, kTopkFastK, kTopkFastK, kTopkFastK - 2, 3 * kTopkFastK, 4, {kTopkShortRowMaxLen});
    const TopkRun fast = run_case(*device, c, Launch::kFast), general = run_case(*device, c, Launch::kGeneral);
    RC_ASSERT(fast.problem == "");
    RC_ASSERT(general.problem == "");
    RC_ASSERT(same_selected_values(fast, general) == "");
  }));
  std::vector<Pattern> patterns;
  for (int p = 0; p < static_cast<int>(Pattern::kCount); ++p) patterns.push_back(static_cast<Pattern>(p));
  for (const int64_t k : {int64_t(5), int64_t(kTopkFastK), int64_t(40000)}) {
    std::vector<int64_t> lengths = {k - 1, k, k + 1};
    for (int64_t t : {int64_t(kTopkShortRowMaxLen), int64_t(kTopkSplitRowMinLen), int64_t(3 * kTopkSplitChunkLen),
                      int64_t(163840)}) {
      for (int64_t d : {-1, 0, 1}) lengths.push_back(t + d);
    }
    for (int64_t i = 0; i < 2 * static_cast<int64_t>(patterns.size()); ++i) lengths.push_back(100000 + i);
    const TopkCase c = rows_of_lengths(k, lengths, *std::max_element(lengths.begin(), lengths.end()), 9, patterns);
    const TopkRun glue = run_case(*device, c, Launch::kGlue);
    EXPECT_EQ(glue.problem, "") << "k " << k;
    if (k == kTopkFastK) {
      const TopkRun general = run_case(*device, c, Launch::kGeneral);
      EXPECT_EQ(general.problem, "");
      EXPECT_EQ(same_selected_values(glue, general), "");
    }
  }
  // Production size, timed: 128 decode rows of up to 163840 logits, k = 2048, both paths.
  const int64_t rows = 128, cols = 163840;
  std::vector<float> logits(static_cast<size_t>(rows * cols));
  std::mt19937_64 rng(5);
  fill_row(logits.data(), 1, rows * cols, Pattern::kDistinct, rng);
  std::vector<int32_t> seq(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) seq[static_cast<size_t>(r)] = static_cast<int32_t>(cols - r * 1000);
  const int64_t ws_bytes = topk_workspace_bytes(rows, kTopkFastK, cols);
  Staged lg = stage(*device, "logits", View::contiguous(DType::kF32, {rows, cols}), logits);
  Staged sl = stage(*device, "seq_lens", View::contiguous(DType::kI32, {rows}), seq);
  Staged out = stage(*device, "out", View::contiguous(DType::kI32, {rows, kTopkFastK}),
                     std::vector<int32_t>(static_cast<size_t>(rows * kTopkFastK)));
  Staged ws =
      stage(*device, "workspace", View::contiguous(DType::kU8, {ws_bytes}), std::vector<uint8_t>(size_t(ws_bytes)));
  const TopkParams p = topk_decode_params(lg.tensor, 1, sl.tensor, kTopkFastK, out.tensor, ws.tensor);
  for (const TopkPath path : {TopkPath::kFastK2048, TopkPath::kGeneral}) {
    launch_topk(*device, p, path);
    device->synchronize();
    const int calls = 20;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) launch_topk(*device, p, path);
    device->synchronize();
    std::printf("[ timing ] cuda, %s path: %lld rows of up to %lld, k 2048: %.1f us per call\n", topk_path_name(path),
                static_cast<long long>(rows), static_cast<long long>(cols), 1e6 * seconds_since(t0) / calls);
    const std::vector<int32_t> got = fetch<int32_t>(*out.memory);
    std::vector<int64_t> lengths(seq.begin(), seq.end());
    const TopkReport r = check_topk(HostTensor(const_cast<int32_t*>(got.data()), out.tensor.view),
                                    HostTensor(logits.data(), lg.tensor.view), lengths);
    EXPECT_TRUE(r.ok) << r.describe();
  }
}

}  // namespace
}  // namespace mlacheck::kernels
