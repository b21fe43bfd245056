// Properties of the indexer logits (properties/mqa_logits_properties.h).
// Why one file past 500 lines: the paged (decode) and ragged (prefill) logits share their staging,
// their comparison and the property that runs one as the other (paged = prefill over gathered keys).
#include "properties/mqa_logits_properties.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/compare.h"
#include "core/error.h"
#include "core/fp8.h"
#include "core/tolerances.h"
#include "kernels/registry.h"
#include "oracle/quantize.h"
#include "properties/random_values.h"

namespace mlacheck {

using namespace kernels;

namespace {

// The logits buffer around its view: a pattern no kernel would write (fp32 -4.6e-15).
constexpr uint8_t kLogitsFill = 0xA7;


oracle::LogitsMode oracle_mode(LogitsMode m) {
  return m == LogitsMode::kClean ? oracle::LogitsMode::kClean : oracle::LogitsMode::kUnclean;
}

// n keys of D values as production quantizes them (fp32 or ue8m0 scales), about a third of the
// tokens special per the pattern, then every scale times 2^exponent (exact: a power of two).
oracle::Fp8Rows make_keys(std::mt19937_64& rng, int64_t n, int64_t D, bool ue8m0, KeyPattern pattern, int exponent) {
  std::vector<float> x(static_cast<size_t>(n * D));
  std::vector<float> shared;  // the last shared-scale row: repeated now and then (tied logits)
  for (int64_t s = 0; s < n; ++s) {
    float* row = x.data() + s * D;
    for (int64_t d = 0; d < D; ++d) row[d] = uniform(rng, -1, 1);
    KeyPattern kind = pattern;
    if (pattern == KeyPattern::kMixed) kind = static_cast<KeyPattern>(1 + rng() % 3);
    if (pattern == KeyPattern::kRandom || rng() % 3 != 0) continue;
    if (kind == KeyPattern::kZeroRows) {
      std::fill(row, row + D, 0.0f);
    } else if (kind == KeyPattern::kSharedScale) {
      if (!shared.empty() && rng() % 2 == 0) {
        std::copy(shared.begin(), shared.end(), row);
      } else {
        row[rng() % static_cast<uint64_t>(D)] = rng() % 2 ? 1.0f : -1.0f;  // amax exactly 1: one scale for all
        shared.assign(row, row + D);
      }
    } else if (kind == KeyPattern::kBelowFloor) {
      const float m = uniform(rng, 1e-6f, 1e-5f);
      for (int64_t d = 0; d < D; ++d) row[d] *= m;
    }
  }
  oracle::Fp8Rows keys =
      oracle::quantize_per_token_fp8(x, n, D, ue8m0 ? oracle::ScaleFormat::kUe8m0 : oracle::ScaleFormat::kFp32);
  for (float& s : keys.scales) s = std::ldexp(s, exponent);
  return keys;
}

// Runs launch in the testbed (harness/testbed.h) under the case's schedule, every buffer guarded
// and out's view the launch's only output; out.host then holds the device's bytes. (No payload is
// declared non-zero: a case of one head of head_dim 1 may draw a zero q, and keys may be zero rows.)
Verdict run_guarded(Device& device, const CaseSchedule& schedule, const std::vector<Buffer*>& inputs, Buffer& out,
                    const std::function<void()>& launch) {
  Testbed bed(device, schedule);
  for (Buffer* b : inputs) bed.input(*b);
  bed.output(out);
  return bed.launch(launch);
}

// The logits view's values, [rows, cols] dense.
std::vector<float> dense(Buffer& logits) {
  const int64_t cols = logits.view.size(1);
  std::vector<float> got(static_cast<size_t>(logits.view.size(0) * cols));
  const HostTensor t = logits.host_tensor();
  logits.view.for_each_index([&](const std::vector<int64_t>& at) {
    got[static_cast<size_t>(at[0] * cols + at[1])] = static_cast<float>(t.load(at));
  });
  return got;
}

// Compares got ([rows, cols] dense) with the oracle where the mode specifies a value, both divided by
// 2^key_exponent (exact) so that the table's tolerance applies at the generators' magnitudes.
// want.slack (a declared accumulation's, when there is one) is taken off each element's error first.
Verdict compare_with_oracle(const std::vector<float>& got, const oracle::LogitsResult& want, LogitsMode mode,
                            int key_exponent, const char* op) {
  const int64_t rows = want.logits.shape[0], cols = want.logits.shape[1];
  std::vector<double> g(static_cast<size_t>(rows * cols)), w(g.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t col = 0; col < cols; ++col) {
      const size_t i = static_cast<size_t>(r * cols + col);
      w[i] = std::ldexp(want.logits.at({r, col}), -key_exponent);
      g[i] = want.specified(r, col, oracle_mode(mode)) ? std::ldexp(double(got[i]), -key_exponent) : w[i];
    }
  }
  if (!want.slack.values.empty()) {
    std::vector<double> slack(want.slack.values.size());
    for (size_t i = 0; i < slack.size(); ++i) slack[i] = std::ldexp(want.slack.values[i], -key_exponent);
    move_by_slack(g, w, slack);
  }
  const CompareReport rep = compare_close(HostTensor(g.data(), View::contiguous(DType::kF64, {rows, cols})),
                                          HostTensor(w.data(), View::contiguous(DType::kF64, {rows, cols})),
                                          tolerance_for(op, "logits"));
  if (rep.ok) return std::nullopt;
  return std::string(op) + " logits" + (key_exponent ? " / 2^" + std::to_string(key_exponent) : "") + ": " +
         rep.describe();
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0 || (a != a && b != b); }

// Every digit a float has (std::to_string shows 2^-90 as 0.000000).
std::string show(float x) {
  char s[32];
  std::snprintf(s, sizeof s, "%.9g", double(x));
  return s;
}

// Compares two runs' logits ([rows, cols] dense) bit for bit where specified(r, col), b against
// scale x a (scale a power of two); names the first difference.
Verdict compare_exactly(const std::vector<float>& a, const std::vector<float>& b, int64_t cols, float scale,
                        const std::function<bool(int64_t, int64_t)>& specified, const std::string& what) {
  for (size_t i = 0; i < a.size(); ++i) {
    const int64_t r = static_cast<int64_t>(i) / cols, col = static_cast<int64_t>(i) % cols;
    if (!specified(r, col) || same_bits(scale * a[i], b[i])) continue;
    return what + ": row " + std::to_string(r) + " column " + std::to_string(col) + " logit " + show(b[i]) + ", want " +
           (scale == 1.0f ? "" : "exactly 2 x ") + show(a[i]);
  }
  return std::nullopt;
}

// ---- paged -------------------------------------------------------------------------------------------

// The staged buffers of a paged case (host bytes; upload() makes the guarded device copies).
struct PagedStaged {
  Buffer q, w, lens, table, kv, logits;
};

// Poison everywhere the implementation must not read: q and weights padding, the lengths' stride
// gaps, the table's row padding, and in the cache every byte but the keys and scales of the tokens
// some request reads (a shared page holds the tokens of its longest user).
PagedStaged stage_paged(const PagedLogitsCase& c, float weight_scale) {
  std::mt19937_64 rng(c.seed);
  const int64_t rows = c.rows(), H = c.H, D = c.D, bs = c.block_size;
  PagedStaged s;
  rng();  // the draw that placed q before the case said where (q_offset): the data stays the same
  s.q = Buffer("q", View::contiguous(DType::kFP8E4M3, {c.B, c.next_n, H, D}, c.q_offset), 64, c.poison);
  fill_uniform_fp8(s.q.host.data(), s.q.view, rng);
  rng();  // likewise the weights' (weights_offset)
  s.w = Buffer("weights", View::contiguous(DType::kF32, {rows, H}, c.weights_offset), 64, c.poison);
  fill_uniform_f32(s.w.host.data(), s.w.view, rng, -1, 1, weight_scale);
  s.lens = Buffer(
      "context_lens",
      c.lens_2d ? View::contiguous(DType::kI32, {c.B, c.next_n}, 4) : View(DType::kI32, {c.B}, {c.lens_stride}, 4), 64,
      c.poison);
  for (int64_t i = 0; i < static_cast<int64_t>(c.lens.size()); ++i) {
    s.lens.put(c.lens_2d ? std::vector<int64_t>{i / c.next_n, i % c.next_n} : std::vector<int64_t>{i},
               c.lens[static_cast<size_t>(i)]);
  }
  s.table = Buffer("block_table",
                   View::padded_rows(DType::kI32, {c.B, c.W}, std::max<int64_t>(c.W + c.table_row_pad, 1), 8), 64,
                   c.poison);
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t col = 0; col < c.W; ++col) {
      s.table.put({b, col}, static_cast<int32_t>(col < c.needed(b) ? c.page(b, col) : c.table[static_cast<size_t>(b * c.W + col)]));
    }
  }
  // The pages some request reads, each with the tokens of its longest user, in increasing order.
  std::map<int64_t, int64_t> valid;
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t col = 0; col < c.needed(b); ++col) {
      int64_t& n = valid[c.page(b, col)];
      n = std::max(n, std::min(bs, c.longest(b) - col * bs));
    }
  }
  const View kv_view(DType::kU8, {c.num_blocks, c.block_stride}, {c.block_stride, 1}, c.kv_offset);
  if (c.reserved_cache()) {  // only the pages read are backed
    std::vector<ByteSpan> backed;
    for (const auto& [page, n] : valid) backed.push_back({c.kv_offset + page * c.block_stride, c.kv_offset + (page + 1) * c.block_stride});
    s.kv = Buffer::reserved("kv_blocks", kv_view, backed, c.poison);
  } else {
    s.kv = Buffer("kv_blocks", kv_view, 64, c.poison);
  }
  // Keys for the pages read, in page order (a page no request reads would draw nothing).
  const oracle::PagedIndexerCache cache{s.kv.host_tensor(), bs, D};
  for (const auto& [page, n] : valid) {
    const oracle::Fp8Rows keys = make_keys(rng, n, D, c.ue8m0, c.keys, c.key_exponent);
    for (int64_t slot = 0; slot < keys.rows; ++slot) {
      oracle::store_indexer_token(cache, page, slot, keys.codes.data() + slot * D, keys.scales[static_cast<size_t>(slot)]);
    }
  }
  s.logits = Buffer("logits",
                    View::padded_rows(DType::kF32, {rows, c.max_context_len}, c.logits_stride, 4 * c.logits_offset),
                    64, kLogitsFill);
  return s;
}

// Runs impl on the staged case; s.logits.host then holds the device's bytes.
Verdict launch_paged(Device& device, PagedMqaLogitsFn* impl, const PagedLogitsCase& c, PagedStaged& s,
                     bool pass_host_lens) {
  return run_guarded(device, c, {&s.q, &s.w, &s.lens, &s.table, &s.kv}, s.logits, [&] {
    PagedMqaLogitsArgs a;
    a.q = s.q.device_tensor();
    a.kv_blocks = s.kv.device_tensor();
    a.block_size = c.block_size;
    a.weights = s.w.device_tensor();
    a.context_lens = s.lens.device_tensor();
    a.block_table = s.table.device_tensor();
    a.max_context_len = c.max_context_len;
    a.logits = s.logits.device_tensor();
    a.mode = c.mode;
    a.host_context_lens = pass_host_lens ? &c.lens : nullptr;
    impl(device, a);
  });
}

// Whether the mode specifies column col of row r: every column in clean mode, [0, ctx) in unclean.
std::function<bool(int64_t, int64_t)> paged_specified(const PagedLogitsCase& c, LogitsMode mode) {
  return [&c, mode](int64_t r, int64_t col) {
    return mode == LogitsMode::kClean || col < c.row_len(r / c.next_n, r % c.next_n);
  };
}

}  // namespace

PagedLogitsOutcome run_paged_logits(Device& device, PagedMqaLogitsFn* impl, const PagedLogitsCase& c,
                                    const PagedRunOptions& options) {
  PagedStaged s = stage_paged(c, options.weight_scale);
  PagedLogitsOutcome out;
  if (options.compare_with_oracle) {
    out.want = oracle::paged_mqa_logits({s.q.host_tensor(), {s.kv.host_tensor(), c.block_size, c.D}, s.w.host_tensor(),
                                         s.lens.host_tensor(), s.table.host_tensor(), c.max_context_len, c.qk_unit});
  }
  if (options.tamper) options.tamper(s.lens, s.table);
  out.failure = launch_paged(device, impl, c, s, c.pass_host_lens && !options.tamper);
  if (out.failure) return out;
  out.got = dense(s.logits);
  if (options.compare_with_oracle) {
    out.failure = compare_with_oracle(out.got, out.want, c.mode, c.key_exponent, "paged_mqa_logits");
  }
  return out;
}

Verdict paged_logits_equal_oracle(Device& device, PagedMqaLogitsFn* impl, const PagedLogitsCase& c) {
  return run_paged_logits(device, impl, c).failure;
}

Verdict paged_logits_fast_path_equals_general_path(Device& device, PagedMqaLogitsFn* impl, const PagedLogitsCase& c) {
  if (!c.misaligned_cache_admitted) {
    throw OutsideContract("case: the general path's run moves the cache to kv_offset " +
                          std::to_string(c.kv_offset + 4) + ", outside the contract");
  }
  PagedRunOptions guards_only;
  guards_only.compare_with_oracle = false;
  const PagedLogitsOutcome given = run_paged_logits(device, impl, c, guards_only);
  const std::string path = c.fast_path_shape() ? "fast path" : "cache as given";
  if (given.failure) return path + ": " + *given.failure;
  PagedLogitsCase off = c;
  off.kv_offset += 4;  // never 16-byte aligned: the general path
  const PagedLogitsOutcome general = run_paged_logits(device, impl, off, guards_only);
  if (general.failure) return "general path (cache 4 bytes off alignment): " + *general.failure;
  return compare_exactly(given.got, general.got, std::max<int64_t>(c.max_context_len, 1), 1.0f,
                         paged_specified(c, c.mode), "general path (cache 4 bytes off alignment) vs " + path);
}

Verdict paged_logits_clean_equals_unclean(Device& device, PagedMqaLogitsFn* impl, const PagedLogitsCase& c) {
  if (!c.both_modes_admitted) throw OutsideContract("case: the property runs both modes, and one is outside the contract");
  PagedRunOptions guards_only;
  guards_only.compare_with_oracle = false;
  PagedLogitsCase clean = c, unclean = c;
  clean.mode = LogitsMode::kClean, unclean.mode = LogitsMode::kUnclean;
  const PagedLogitsOutcome a = run_paged_logits(device, impl, clean, guards_only);
  if (a.failure) return "clean: " + *a.failure;
  const PagedLogitsOutcome b = run_paged_logits(device, impl, unclean, guards_only);
  if (b.failure) return "unclean: " + *b.failure;
  return compare_exactly(a.got, b.got, std::max<int64_t>(c.max_context_len, 1), 1.0f,
                         paged_specified(c, LogitsMode::kUnclean), "unclean vs clean");
}

Verdict paged_logits_weights_scale_exactly(Device& device, PagedMqaLogitsFn* impl, const PagedLogitsCase& c) {
  PagedRunOptions once, twice;
  once.compare_with_oracle = twice.compare_with_oracle = false;
  twice.weight_scale = 2.0f;
  const PagedLogitsOutcome a = run_paged_logits(device, impl, c, once);
  if (a.failure) return *a.failure;
  const PagedLogitsOutcome b = run_paged_logits(device, impl, c, twice);
  if (b.failure) return "weights x 2: " + *b.failure;
  return compare_exactly(a.got, b.got, std::max<int64_t>(c.max_context_len, 1), 2.0f, paged_specified(c, c.mode),
                         "weights x 2");
}

// ---- prefill ---------------------------------------------------------------------------------------

namespace {

struct PrefillStaged {
  Buffer q, w, k, scale, ks, ke, logits;
  std::vector<int32_t> host_ks, host_ke;
};

// Keys outside every row's range (and the row and scale padding) are poison.
PrefillStaged stage_prefill(const PrefillLogitsCase& c, float weight_scale) {
  std::mt19937_64 rng(c.seed);
  const int64_t M = c.M, N = c.N, H = c.H, D = c.D;
  PrefillStaged s;
  rng();  // the draw that placed q before the case said where (q_offset): the data stays the same
  s.q = Buffer("q", View::contiguous(DType::kFP8E4M3, {M, H, D}, c.q_offset), 64, c.poison);
  fill_uniform_fp8(s.q.host.data(), s.q.view, rng);
  rng();  // likewise the weights' (weights_offset)
  s.w = Buffer("weights", View::contiguous(DType::kF32, {M, H}, c.weights_offset), 64, c.poison);
  fill_uniform_f32(s.w.host.data(), s.w.view, rng, -1, 1, weight_scale);
  s.k = Buffer("k", View(DType::kFP8E4M3, {N, D}, {c.k_stride, 1}, c.k_offset), 64, c.poison);
  s.scale = Buffer("k_scale", View(DType::kF32, {N}, {c.scale_stride}, 12), 64, c.poison);
  const oracle::Fp8Rows keys = make_keys(rng, N, D, c.ue8m0, c.keys, c.key_exponent);
  for (int64_t n = 0; n < N; ++n) {
    bool read = false;
    for (int64_t m = 0; m < M; ++m) read |= c.ks[static_cast<size_t>(m)] <= n && n < c.ke[static_cast<size_t>(m)];
    if (!read) continue;
    for (int64_t d = 0; d < D; ++d) s.k.put({n, d}, keys.codes[static_cast<size_t>(n * D + d)]);
    s.scale.put({n}, keys.scales[static_cast<size_t>(n)]);
  }
  s.ks = Buffer("ks", View(DType::kI32, {M}, {c.range_stride}, 0), 64, c.poison);
  s.ke = Buffer("ke", View(DType::kI32, {M}, {c.range_stride}, 4), 64, c.poison);
  for (int64_t m = 0; m < M; ++m) {
    s.ks.put({m}, c.ks[static_cast<size_t>(m)]);
    s.ke.put({m}, c.ke[static_cast<size_t>(m)]);
  }
  s.host_ks = c.ks, s.host_ke = c.ke;
  s.logits = Buffer("logits", View::padded_rows(DType::kF32, {M, N}, c.logits_stride, 4 * c.logits_offset), 64,
                    kLogitsFill);
  return s;
}

Verdict launch_prefill(Device& device, MqaLogitsFn* impl, PrefillStaged& s, LogitsMode mode, bool pass_host_ranges,
                       const CaseSchedule& schedule) {
  return run_guarded(device, schedule, {&s.q, &s.w, &s.k, &s.scale, &s.ks, &s.ke}, s.logits, [&] {
    MqaLogitsArgs a;
    a.q = s.q.device_tensor();
    a.k = s.k.device_tensor();
    a.k_scale = s.scale.device_tensor();
    a.weights = s.w.device_tensor();
    a.ks = s.ks.device_tensor();
    a.ke = s.ke.device_tensor();
    a.logits = s.logits.device_tensor();
    a.mode = mode;
    a.host_ks = pass_host_ranges ? &s.host_ks : nullptr;
    a.host_ke = pass_host_ranges ? &s.host_ke : nullptr;
    impl(device, a);
  });
}

std::function<bool(int64_t, int64_t)> prefill_specified(const PrefillLogitsCase& c, LogitsMode mode) {
  return [&c, mode](int64_t m, int64_t n) {
    return mode == LogitsMode::kClean ||
           (n >= c.ks[static_cast<size_t>(m)] && n < c.ke[static_cast<size_t>(m)]);
  };
}

}  // namespace

PrefillLogitsOutcome run_prefill_logits(Device& device, MqaLogitsFn* impl, const PrefillLogitsCase& c,
                                        const PrefillRunOptions& options) {
  PrefillStaged s = stage_prefill(c, options.weight_scale);
  PrefillLogitsOutcome out;
  oracle::LogitsResult want;
  if (options.compare_with_oracle) {
    want = oracle::mqa_logits({s.q.host_tensor(), s.k.host_tensor(), s.scale.host_tensor(), s.w.host_tensor(),
                               s.ks.host_tensor(), s.ke.host_tensor()});
  }
  out.failure = launch_prefill(device, impl, s, c.mode, c.pass_host_ranges, c);
  if (out.failure) return out;
  out.got = dense(s.logits);
  if (options.compare_with_oracle) out.failure = compare_with_oracle(out.got, want, c.mode, c.key_exponent, "mqa_logits");
  return out;
}

Verdict prefill_logits_equal_oracle(Device& device, MqaLogitsFn* impl, const PrefillLogitsCase& c) {
  return run_prefill_logits(device, impl, c).failure;
}

Verdict prefill_logits_clean_equals_unclean(Device& device, MqaLogitsFn* impl, const PrefillLogitsCase& c) {
  PrefillRunOptions guards_only;
  guards_only.compare_with_oracle = false;
  PrefillLogitsCase clean = c, unclean = c;
  clean.mode = LogitsMode::kClean, unclean.mode = LogitsMode::kUnclean;
  const PrefillLogitsOutcome a = run_prefill_logits(device, impl, clean, guards_only);
  if (a.failure) return "clean: " + *a.failure;
  const PrefillLogitsOutcome b = run_prefill_logits(device, impl, unclean, guards_only);
  if (b.failure) return "unclean: " + *b.failure;
  return compare_exactly(a.got, b.got, std::max<int64_t>(c.N, 1), 1.0f, prefill_specified(c, LogitsMode::kUnclean),
                         "unclean vs clean");
}

Verdict prefill_logits_weights_scale_exactly(Device& device, MqaLogitsFn* impl, const PrefillLogitsCase& c) {
  PrefillRunOptions once, twice;
  once.compare_with_oracle = twice.compare_with_oracle = false;
  twice.weight_scale = 2.0f;
  const PrefillLogitsOutcome a = run_prefill_logits(device, impl, c, once);
  if (a.failure) return *a.failure;
  const PrefillLogitsOutcome b = run_prefill_logits(device, impl, c, twice);
  if (b.failure) return "weights x 2: " + *b.failure;
  return compare_exactly(a.got, b.got, std::max<int64_t>(c.N, 1), 2.0f, prefill_specified(c, c.mode), "weights x 2");
}

// ---- a request alone, as in its batch ------------------------------------------------------------------

// Batch invariance (docs/ops.md 2.1: a row's logits depend on its request only): the batch launched
// once, then one request (drawn from the seed) launched alone on the same buffers, each input viewed
// at that request's rows (q, weights, context_lens, block_table) and a logits buffer of its own:
// its rows must be the batch's bit for bit wherever the mode specifies them.
Verdict paged_logits_rows_independent_of_batch(Device& device, PagedMqaLogitsFn* impl, const PagedLogitsCase& c) {
  PagedStaged s = stage_paged(c, 1.0f);
  if (Verdict v = launch_paged(device, impl, c, s, false)) return "the batch: " + *v;
  const std::vector<float> batch = dense(s.logits);
  const int64_t b = static_cast<int64_t>(c.seed % static_cast<uint64_t>(c.B)), n = c.next_n;
  const int64_t cols = std::max<int64_t>(c.max_context_len, 1);
  Buffer alone("logits of request " + std::to_string(b),
               View::padded_rows(DType::kF32, {n, c.max_context_len}, c.logits_stride, 4 * c.logits_offset), 64,
               kLogitsFill);
  const auto rows_of = [b](const Buffer& buf, int64_t per_request) {
    DeviceTensor t = buf.device_tensor();
    t.view = t.view.slice(0, b * per_request, (b + 1) * per_request);
    return t;
  };
  const Verdict v = run_guarded(device, c, {&s.q, &s.w, &s.lens, &s.table, &s.kv}, alone, [&] {
    PagedMqaLogitsArgs a;
    a.q = rows_of(s.q, 1);
    a.kv_blocks = s.kv.device_tensor();
    a.block_size = c.block_size;
    a.weights = rows_of(s.w, n);
    a.context_lens = rows_of(s.lens, 1);
    a.block_table = rows_of(s.table, 1);
    a.max_context_len = c.max_context_len;
    a.logits = alone.device_tensor();
    a.mode = c.mode;
    impl(device, a);
  });
  if (v) return "request " + std::to_string(b) + " alone: " + *v;
  const std::vector<float> got = dense(alone);
  const int64_t width = c.max_context_len;  // dense()'s columns (0 for an empty logits view)
  const std::vector<float> want(batch.begin() + b * n * width, batch.begin() + (b + 1) * n * width);
  return compare_exactly(want, got, cols, 1.0f,
                         [&](int64_t r, int64_t col) { return paged_specified(c, c.mode)(b * n + r, col); },
                         "request " + std::to_string(b) + " of " + std::to_string(c.B) +
                             " launched alone vs in its batch (as [row of the request, column])");
}

// ---- paged = prefill over the gathered keys ----------------------------------------------------------

Verdict paged_logits_equal_prefill_over_gathered_keys(Device& device, PagedMqaLogitsFn* impl, MqaLogitsFn* prefill,
                                                      const PagedLogitsCase& c) {
  PagedStaged s = stage_paged(c, 1.0f);
  // A declared accumulation (qk_unit): the paged oracle's slack for it, taken off the paged logits'
  // error (the prefill reference accumulates in fp32).
  const std::vector<double> declared_slack =
      c.qk_unit > 0 ? oracle::paged_mqa_logits({s.q.host_tensor(), {s.kv.host_tensor(), c.block_size, c.D},
                                                s.w.host_tensor(), s.lens.host_tensor(), s.table.host_tensor(),
                                                c.max_context_len, c.qk_unit})
                          .slack.values
                    : std::vector<double>();
  if (Verdict v = launch_paged(device, impl, c, s, c.pass_host_lens)) return "paged: " + *v;
  const std::vector<float> paged = dense(s.logits);

  // Request b's tokens [0, longest_b) at keys [offset_b, ...): codes and scales copied byte for byte.
  const int64_t rows = c.rows(), H = c.H, D = c.D, bs = c.block_size, cols = c.max_context_len;
  std::vector<int64_t> offset(static_cast<size_t>(c.B + 1), 0);
  for (int64_t b = 0; b < c.B; ++b) offset[static_cast<size_t>(b + 1)] = offset[static_cast<size_t>(b)] + c.longest(b);
  const int64_t N = offset.back();
  PrefillStaged p;
  p.q = Buffer("q", View::contiguous(DType::kFP8E4M3, {rows, H, D}), 0, 0);
  std::memcpy(p.q.host.data(), s.q.host.data() + s.q.view.byte_offset(), static_cast<size_t>(rows * H * D));
  p.w = Buffer("weights", View::contiguous(DType::kF32, {rows, H}), 0, 0);
  std::memcpy(p.w.host.data(), s.w.host.data() + s.w.view.byte_offset(), static_cast<size_t>(rows * H * 4));
  p.k = Buffer("k", View::contiguous(DType::kFP8E4M3, {N, D}), 0, 0);
  p.scale = Buffer("k_scale", View::contiguous(DType::kF32, {N}), 0, 0);
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t t = 0; t < c.longest(b); ++t) {
      const int64_t page = c.page(b, t / bs), slot = t % bs;
      const uint8_t* block = s.kv.bytes() + s.kv.view.byte_offset() + page * c.block_stride;
      const int64_t n = offset[static_cast<size_t>(b)] + t;
      std::memcpy(p.k.host.data() + n * D, block + slot * D, static_cast<size_t>(D));
      std::memcpy(p.scale.host.data() + n * 4, block + bs * D + 4 * slot, 4);
    }
  }
  p.ks = Buffer("ks", View::contiguous(DType::kI32, {rows}), 0, 0);
  p.ke = Buffer("ke", View::contiguous(DType::kI32, {rows}), 0, 0);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / c.next_n, at = offset[static_cast<size_t>(b)];
    p.host_ks.push_back(static_cast<int32_t>(at));
    p.host_ke.push_back(static_cast<int32_t>(at + c.row_len(b, r % c.next_n)));
    p.ks.put<int32_t>({r}, p.host_ks.back());
    p.ke.put<int32_t>({r}, p.host_ke.back());
  }
  p.logits = Buffer("logits", View::padded_rows(DType::kF32, {rows, N}, std::max<int64_t>(N, 1)), 0, kLogitsFill);
  if (Verdict v = launch_prefill(device, prefill, p, c.mode, true, c)) {
    return "prefill over the gathered keys: " + *v;
  }
  const std::vector<float> gathered = dense(p.logits);

  // Row r's columns [0, ctx_r) of both, divided by 2^key_exponent (exact); zero elsewhere.
  std::vector<double> a(static_cast<size_t>(rows * cols), 0.0), want(a.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / c.next_n, at = offset[static_cast<size_t>(b)];
    for (int64_t t = 0; t < c.row_len(b, r % c.next_n); ++t) {
      a[static_cast<size_t>(r * cols + t)] = std::ldexp(double(paged[static_cast<size_t>(r * cols + t)]), -c.key_exponent);
      want[static_cast<size_t>(r * cols + t)] =
          std::ldexp(double(gathered[static_cast<size_t>(r * N + at + t)]), -c.key_exponent);
    }
  }
  if (!declared_slack.empty()) {
    std::vector<double> slack(a.size(), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t t = 0; t < c.row_len(r / c.next_n, r % c.next_n); ++t) {
        const size_t i = static_cast<size_t>(r * cols + t);
        slack[i] = std::ldexp(declared_slack[i], -c.key_exponent);
      }
    }
    move_by_slack(a, want, slack);
  }
  const CompareReport rep = compare_close(HostTensor(a.data(), View::contiguous(DType::kF64, {rows, cols})),
                                          HostTensor(want.data(), View::contiguous(DType::kF64, {rows, cols})),
                                          tolerance_for("mqa_logits", "logits"));
  if (rep.ok) return std::nullopt;
  return "paged logits vs prefill over the gathered keys (as [row, column] of the paged view): " + rep.describe();
}

// ---- registry ----------------------------------------------------------------------------------------

PagedLogitsCase paged_logits_declared(PagedLogitsCase c, const std::string& impl) {
  const std::map<std::string, std::string> declared = kernels::registry().declared_precision(impl);
  const auto qk = declared.find("qk");
  c.qk_unit = qk == declared.end() ? 0.0 : precision_unit(qk->second);
  return c;
}

void register_mqa_logits_properties(PropertyRegistry& r) {
  using PagedVerdict = Verdict (*)(Device&, PagedMqaLogitsFn*, const PagedLogitsCase&);
  using PrefillVerdict = Verdict (*)(Device&, MqaLogitsFn*, const PrefillLogitsCase&);
  const auto paged = [&r](const char* name, const char* summary, PagedVerdict f) {
    r.add(make_property<PagedLogitsCase>(
        std::string("paged_mqa_logits.") + name, "paged_mqa_logits", summary, paged_logits_from_text,
        [f](Device& device, const std::string& impl, const PagedLogitsCase& c) {
          return f(device, kernels::registry().find<PagedMqaLogitsFn>(impl), paged_logits_declared(c, impl));
        }));
  };
  const auto prefill = [&r](const char* name, const char* summary, PrefillVerdict f) {
    r.add(make_property<PrefillLogitsCase>(
        std::string("mqa_logits.") + name, "mqa_logits", summary, prefill_logits_from_text,
        [f](Device& device, const std::string& impl, const PrefillLogitsCase& c) {
          return f(device, kernels::registry().find<MqaLogitsFn>(impl), c);
        }));
  };
  paged("equals_oracle", "every row's logits equal the oracle's (-inf past ctx in clean mode); only the view is written",
        &paged_logits_equal_oracle);
  paged("fast_path_equals_general_path",
        "the cache as given (block-64 fast path when aligned) and 4 bytes off alignment (general path) agree bit for bit",
        &paged_logits_fast_path_equals_general_path);
  paged("clean_equals_unclean", "clean and unclean mode agree bit for bit on each row's [0, ctx)",
        &paged_logits_clean_equals_unclean);
  paged("weights_scale_exactly", "index weights x 2 give every specified logit exactly x 2",
        &paged_logits_weights_scale_exactly);
  paged("rows_independent_of_batch",
        "one request launched alone on the batch's buffers gives its rows of the batch's logits bit for bit",
        &paged_logits_rows_independent_of_batch);
  r.add(make_property<PagedLogitsCase>(
      "paged_mqa_logits.far_pages", "paged_mqa_logits",
      "pages read across byte 2^31 or 2^32 of an 8 GiB cache, only they backed: the oracle's logits, no other page read",
      paged_logits_far_from_text, [](Device& device, const std::string& impl, const PagedLogitsCase& c) {
        return paged_logits_equal_oracle(device, kernels::registry().find<PagedMqaLogitsFn>(impl),
                                         paged_logits_declared(c, impl));
      }));
  r.add(make_property<PagedLogitsCase>(
      "paged_mqa_logits.equals_prefill_over_gathered_keys", "paged_mqa_logits",
      "each request's logits equal mqa_logits@ref's over its keys gathered contiguously (mqa_logits tolerance)",
      paged_logits_from_text, [](Device& device, const std::string& impl, const PagedLogitsCase& c) {
        return paged_logits_equal_prefill_over_gathered_keys(device, kernels::registry().find<PagedMqaLogitsFn>(impl),
                                                             kernels::registry().find<MqaLogitsFn>("mqa_logits@ref"),
                                                             paged_logits_declared(c, impl));
      }));
  prefill("equals_oracle", "every row's logits equal the oracle's over [ks, ke) (-inf elsewhere in clean mode)",
          &prefill_logits_equal_oracle);
  prefill("clean_equals_unclean", "clean and unclean mode agree bit for bit on each row's [ks, ke)",
          &prefill_logits_clean_equals_unclean);
  prefill("weights_scale_exactly", "index weights x 2 give every specified logit exactly x 2",
          &prefill_logits_weights_scale_exactly);
}

}  // namespace mlacheck
