// Properties of the indexer decode step (properties/decode_step_properties.h).
#include "properties/decode_step_properties.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/compare.h"
#include "core/error.h"
#include "core/fp8.h"
#include "core/tolerances.h"
#include "core/topk_check.h"
#include "kernels/registry.h"
#include "oracle/decode_step.h"
#include "oracle/quantize.h"
#include "oracle/topk.h"
#include "harness/testbed.h"
#include "properties/random_values.h"

namespace mlacheck {

using namespace kernels;

namespace {

constexpr uint8_t kPoison = 0x7F;  // fp8 NaN: a key read where none was stored shows in the logits

}  // namespace

DecodeStepBuffers make_decode_step_buffers(const DecodeStepEngine& e, const DecodeStepCase& c, float weight_scale) {
  std::mt19937_64 rng(c.seed);
  const int64_t B = c.B(), T = c.T(), H = e.H, D = e.D, bs = e.block_size, k = e.k, W = e.W;
  const int64_t q_rows = T + c.graph_padding;
  // Pages: every needed (request, column) gets its own shuffled page of a cache with spare pages;
  // columns past what a request needs hold -1 or a spare page (never read).
  int64_t needed_total = 0;
  std::vector<int64_t> needed(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) needed_total += needed[static_cast<size_t>(b)] = (c.seq_lens[static_cast<size_t>(b)] + bs - 1) / bs;
  const int64_t num_blocks = needed_total + 2;
  std::vector<int32_t> pages(static_cast<size_t>(num_blocks));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);
  const int64_t block_stride = (bs * (D + 4) + 15) / 16 * 16 + 16 * int64_t(rng() % 2);

  DecodeStepBuffers s{
      Buffer("seq_lens", View::contiguous(DType::kI32, {B}, 4), 8, kPoison),
      Buffer("decode_lens", View::contiguous(DType::kI32, {B}, 8), 8, kPoison),
      Buffer("query_start_loc", View::contiguous(DType::kI32, {B + 1}), 8, kPoison),
      Buffer("block_table", View::padded_rows(DType::kI32, {B, W}, W + c.table_row_pad, 4), 16, kPoison),
      Buffer("index_q", View::contiguous(DType::kFP8E4M3, {q_rows, H, D}, 16), 64, kPoison),
      Buffer("index_weights", View::contiguous(DType::kF32, {q_rows, H}, 8), 64, kPoison),
      Buffer("kv_blocks", View(DType::kU8, {num_blocks, block_stride}, {block_stride, 1}, 16), 64, kPoison),
      Buffer("topk_buffer", View::padded_rows(DType::kI32, {T + c.prefill_rows, k}, k + 1), 8, 0),
      Buffer("topk_global", View::padded_rows(DType::kI32, {T + 1, k}, k + 2, 4), 8, 0),
      {}};
  int32_t start = 0;
  s.qsl.put<int32_t>({0}, 0);
  for (int64_t b = 0; b < B; ++b) {
    s.seq_lens.put<int32_t>({b}, c.seq_lens[static_cast<size_t>(b)]);
    s.decode_lens.put<int32_t>({b}, c.decode_lens[static_cast<size_t>(b)]);
    s.qsl.put<int32_t>({b + 1}, start += c.decode_lens[static_cast<size_t>(b)]);
  }
  s.host_table.assign(static_cast<size_t>(B * W), -1);
  size_t next = 0;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t w = 0; w < W; ++w) {
      const int32_t page = w < needed[static_cast<size_t>(b)] ? pages[next++] : (rng() % 2 ? -1 : pages.back());
      s.host_table[static_cast<size_t>(b * W + w)] = page;
      s.table.put<int32_t>({b, w}, page);
    }
  }
  fill_uniform_fp8(s.q.host.data(), s.q.view, rng);
  fill_uniform_f32(s.weights.host.data(), s.weights.view, rng, -1, 1, weight_scale);
  // Keys for the tokens a request reads; every other byte of the cache stays poison.
  const oracle::PagedIndexerCache cache{s.kv.host_tensor(), bs, D};
  std::vector<float> x(static_cast<size_t>(bs * D));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t w = 0; w < needed[static_cast<size_t>(b)]; ++w) {
      const int64_t n = std::min(bs, c.seq_lens[static_cast<size_t>(b)] - w * bs);
      for (float& v : x) v = uniform(rng, -1, 1);
      const oracle::Fp8Rows keys = oracle::quantize_per_token_fp8(
          std::vector<float>(x.begin(), x.begin() + n * D), n, D,
          c.ue8m0 ? oracle::ScaleFormat::kUe8m0 : oracle::ScaleFormat::kFp32);
      for (int64_t i = 0; i < n; ++i) {
        oracle::store_indexer_token(cache, s.host_table[static_cast<size_t>(b * W + w)], i, keys.codes.data() + i * D,
                                    keys.scales[static_cast<size_t>(i)]);
      }
    }
  }
  // The shared buffer's rows all hold a pattern; rows >= T are prefill tokens' and must survive.
  s.topk.view.for_each_index([&](const std::vector<int64_t>& at) { s.topk.put<int32_t>(at, int32_t(100000 + at[0] * 1000 + at[1])); });
  return s;
}

IndexerDecodeStepInputs decode_step_inputs(const DecodeStepBuffers& s, const DecodeStepEngine& e,
                                           const DecodeStepCase& c) {
  const int64_t T = c.T();
  IndexerDecodeStepInputs in;
  in.batch.seq_lens = s.seq_lens.device_tensor();
  in.batch.decode_lens = s.decode_lens.device_tensor();
  in.batch.query_start_loc = s.qsl.device_tensor();
  in.batch.block_table = s.table.device_tensor();
  in.batch.host_decode_lens = c.decode_lens;
  if (c.pass_host_seq_lens) in.batch.host_seq_lens = c.seq_lens;
  in.batch.num_decode_tokens = T;
  if (c.layout == MetadataLayout::kFlattened) in.batch.num_padded_tokens = T + c.graph_padding;
  in.batch.layout = c.layout;
  in.batch.path = c.path;
  in.index_q = s.q.device_tensor();
  in.index_weights = s.weights.device_tensor();
  in.kv_blocks = s.kv.device_tensor();
  in.block_size = e.block_size;
  in.max_context_len = c.max_context_len;
  in.topk_buffer = s.topk.device_tensor();
  in.topk_global = s.global.device_tensor();
  return in;
}

namespace {

// Runs the staged case s on step in the testbed (harness/testbed.h), every buffer guarded and the
// decode and global rows the only outputs; their host bytes then hold the device's.
Verdict run_staged_step(Device& device, IndexerDecodeStep& step, const DecodeStepEngine& e, const DecodeStepCase& c,
                        DecodeStepBuffers& s, IndexerDecodeStepResult& r) {
  const int64_t T = c.T(), k = e.k;
  Testbed bed(device, c);
  for (Buffer* b : s.all()) {
    if (b != &s.topk && b != &s.global) bed.input(*b);
  }
  bed.output(s.topk, "decode rows", View::padded_rows(DType::kI32, {T, k}, k + 1));
  bed.output(s.global, "global rows", View::padded_rows(DType::kI32, {T, k}, k + 2, 4));
  return bed.launch([&] { r = step.run(decode_step_inputs(s, e, c)); });
}

// Stages the case and runs it (run_staged_step).
Verdict run_guarded_step(Device& device, IndexerDecodeStep& step, const DecodeStepEngine& e, const DecodeStepCase& c,
                         float weight_scale, DecodeStepBuffers& s, IndexerDecodeStepResult& r) {
  s = make_decode_step_buffers(e, c, weight_scale);
  return run_staged_step(device, step, e, c, s, r);
}

// The logits row of each token over its length, dense [T, cols] (zero past each length).
std::vector<float> token_logits(IndexerDecodeStep& step, const IndexerDecodeStepResult& r,
                                const std::vector<int64_t>& lengths, int64_t cols) {
  const int64_t T = static_cast<int64_t>(lengths.size());
  std::vector<float> got(static_cast<size_t>(T * cols), 0.0f);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t n = std::min(lengths[static_cast<size_t>(t)], cols);
    if (n > 0) {
      step.logits_memory().read(r.logits.view.byte_offset_of({r.logits_row_of_token[static_cast<size_t>(t)], 0}),
                                got.data() + t * cols, n * 4);
    }
  }
  return got;
}

// Compares each token of a run with the oracle: its logits row over its length, its row of the
// shared buffer as a top-k of those logits, its global slots as the oracle's conversion.
Verdict compare_with_oracle(IndexerDecodeStep& step, const DecodeStepEngine& e, const DecodeStepCase& c,
                            DecodeStepBuffers& s, const IndexerDecodeStepResult& r) {
  const int64_t B = c.B(), T = c.T(), k = e.k;
  // The oracle, over the token rows only.
  oracle::DecodeStepInputs o;
  o.batch = {s.seq_lens.host_tensor(), s.decode_lens.host_tensor(), s.table.host_tensor(), e.next_n};
  const View& qv = s.q.view;
  o.index_q = HostTensor(s.q.host.data(), View(qv.dtype(), {T, e.H, e.D}, qv.strides(), qv.byte_offset()));
  o.index_weights = HostTensor(s.weights.host.data(), View(DType::kF32, {T, e.H}, s.weights.view.strides(),
                                                           s.weights.view.byte_offset()));
  o.index_cache = {s.kv.host_tensor(), e.block_size, e.D};
  o.topk = k;
  const oracle::DecodeStepResult want = oracle::indexer_decode_step(o);

  // Logits: each token's row of the step's logits equals the oracle's over the token's length.
  if (static_cast<int64_t>(r.logits_row_of_token.size()) != T) return "the step mapped " + std::to_string(r.logits_row_of_token.size()) + " tokens, not " + std::to_string(T);
  const int64_t cols = c.max_context_len;
  const std::vector<float> got = token_logits(step, r, want.context_len, cols);
  std::vector<double> got64(static_cast<size_t>(T * cols)), want64(static_cast<size_t>(T * cols));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t n = want.context_len[static_cast<size_t>(t)];
    for (int64_t col = 0; col < cols; ++col) {
      const size_t i = static_cast<size_t>(t * cols + col);
      want64[i] = col < n ? want.logits.logits.values[static_cast<size_t>(t) * static_cast<size_t>(want.logits.logits.shape[1]) + static_cast<size_t>(col)] : 0.0;
      got64[i] = col < n ? double(got[i]) : 0.0;
    }
  }
  const CompareReport lr = compare_close(HostTensor(got64.data(), View::contiguous(DType::kF64, {T, cols})),
                                         HostTensor(want64.data(), View::contiguous(DType::kF64, {T, cols})),
                                         tolerance_for("paged_mqa_logits", "logits"));
  if (!lr.ok) return "token logits: " + lr.describe();

  // Top-k: the token rows of the shared buffer are a valid top-k of those logits.
  const HostTensor topk_rows(s.topk.host.data(), View::padded_rows(DType::kI32, {T, k}, k + 1));
  const std::vector<int64_t> lengths(want.context_len.begin(), want.context_len.end());
  const TopkReport tr =
      check_topk(topk_rows, HostTensor(const_cast<float*>(got.data()), View::contiguous(DType::kF32, {T, cols})), lengths);
  if (!tr.ok) return "top-k rows of the shared buffer: " + tr.describe();

  // Global slots: the oracle's conversion of the step's own choice.
  const HostTensor host_table(s.host_table.data(), View::contiguous(DType::kI32, {B, e.W}));
  const HostTensor global_rows(s.global.host.data(), View::padded_rows(DType::kI32, {T, k}, k + 2, 4));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < k; ++i) {
      const int32_t w = oracle::topk_to_global(topk_rows.at<int32_t>({t, i}), host_table,
                                               want.request[static_cast<size_t>(t)], e.block_size);
      if (global_rows.at<int32_t>({t, i}) != w) {
        return "global slot of token " + std::to_string(t) + " position " + std::to_string(i) + ": " +
               std::to_string(global_rows.at<int32_t>({t, i})) + ", want " + std::to_string(w);
      }
    }
  }
  return std::nullopt;
}

// "" when t is a view of dtype and shape `shape` that lies wholly inside memory m, else why not.
std::string view_inside(const char* what, const DeviceTensor& t, GuardedMemory& m, DType dtype,
                        const std::vector<int64_t>& shape, bool contiguous) {
  const std::string got = std::string(what) + " " + t.view.to_string();
  if (t.base != m.data()) return got + " does not point into its buffer '" + m.name() + "'";
  if (t.view.dtype() != dtype || t.view.shape() != shape) {
    std::string want = "[";
    for (size_t i = 0; i < shape.size(); ++i) want += (i ? ", " : "") + std::to_string(shape[i]);
    return got + " is not " + std::string(dtype_name(dtype)) + want + "]";
  }
  if (contiguous && !t.view.is_contiguous()) return got + " is not C-contiguous";
  const ByteSpan span = t.view.byte_span();
  if (t.view.numel() > 0 && (span.begin < 0 || span.end > m.size())) {
    return got + " reaches bytes [" + std::to_string(span.begin) + ", " + std::to_string(span.end) + ") of the " +
           std::to_string(m.size()) + "-byte buffer '" + m.name() + "'";
  }
  return "";
}

// The views the step hands back are what they claim: the token rows of the two outputs, the logits
// inside the step's buffer, one distinct logits row per token, and the metadata's views inside the
// builder's buffers with their documented shapes (a non-contiguous context_lens is caught here,
// where it is made, not when a kernel later reads it wrong).
Verdict result_views_hold(IndexerDecodeStep& step, const IndexerDecodeStepResult& r, const DecodeStepEngine& e,
                          const DecodeStepCase& c, const DecodeStepBuffers& s) {
  const int64_t T = c.T(), k = e.k;
  if (r.num_decode_tokens != T) return "result: " + std::to_string(r.num_decode_tokens) + " decode tokens, not " + std::to_string(T);
  const View rows_of = View(DType::kI32, {T, k}, s.topk.view.strides(), s.topk.view.byte_offset());
  if (r.topk.base != s.topk.memory->data() || !(r.topk.view == rows_of)) {
    return "result: topk " + r.topk.view.to_string() + " is not rows [0, T) of the shared buffer " + s.topk.view.to_string();
  }
  const View global_of = View(DType::kI32, {T, k}, s.global.view.strides(), s.global.view.byte_offset());
  if (r.global.base != s.global.memory->data() || !(r.global.view == global_of)) {
    return "result: global " + r.global.view.to_string() + " is not rows [0, T) of topk_global " + s.global.view.to_string();
  }
  if (r.logits.view.rank() != 2) return "result: logits " + r.logits.view.to_string() + " is not 2-D";
  std::string w = view_inside("result: logits", r.logits, step.logits_memory(), DType::kF32,
                              {r.rows, r.logits.view.size(1)}, false);
  if (!w.empty()) return w;
  if (r.logits.view.size(1) < c.max_context_len) return "result: logits " + r.logits.view.to_string() + " has fewer columns than max_context_len " + std::to_string(c.max_context_len);
  std::vector<int64_t> seen = r.logits_row_of_token;
  std::sort(seen.begin(), seen.end());
  for (size_t i = 0; i < seen.size(); ++i) {
    if (seen[i] < 0 || seen[i] >= r.rows || (i > 0 && seen[i] == seen[i - 1])) {
      return "result: logits row " + std::to_string(seen[i]) + " of a token is out of [0, " + std::to_string(r.rows) + ") or shared";
    }
  }
  MetadataBuilder& mb = step.metadata_builder();
  const MetadataResult& m = r.metadata;
  if (m.layout != c.layout) return "result: metadata in the other layout than asked";
  if (m.layout == MetadataLayout::kFlattened) {
    for (const auto& [what, t, mem] : {std::tuple{"seq_lens", &m.seq_lens, &mb.seq_lens_memory()},
                                       std::tuple{"decode_lens", &m.decode_lens, &mb.decode_lens_memory()}}) {
      w = view_inside(what, *t, *mem, DType::kI32, {m.rows}, true);
      if (!w.empty()) return "result: metadata " + w;
    }
    if (m.rows != T + c.graph_padding) return "result: metadata has " + std::to_string(m.rows) + " rows, not T + graph padding " + std::to_string(T + c.graph_padding);
  } else {
    int32_t next_n_live = 0;
    for (int32_t d : c.decode_lens) next_n_live = std::max(next_n_live, d);
    w = view_inside("context_lens", m.context_lens, mb.context_lens_memory(), DType::kI32, {c.B(), next_n_live}, true);
    if (!w.empty()) return "result: metadata " + w;
  }
  return std::nullopt;
}

}  // namespace

Verdict decode_step_equals_oracle(Device& device, IndexerDecodeStep& step, const DecodeStepEngine& e,
                                  const DecodeStepCase& c, IndexerDecodeStepResult* result) {
  DecodeStepBuffers s;
  IndexerDecodeStepResult r;
  if (Verdict v = run_guarded_step(device, step, e, c, 1.0f, s, r)) return v;
  if (result != nullptr) *result = r;
  if (Verdict v = result_views_hold(step, r, e, c, s)) return v;
  return compare_with_oracle(step, e, c, s, r);
}

Verdict decode_step_weights_scale_exactly(Device& device, IndexerDecodeStep& step, const DecodeStepEngine& e,
                                          const DecodeStepCase& c) {
  DecodeStepBuffers s1, s2;
  IndexerDecodeStepResult r1, r2;
  if (Verdict v = run_guarded_step(device, step, e, c, 1.0f, s1, r1)) return v;
  std::vector<int64_t> lengths;
  for (size_t b = 0; b < c.decode_lens.size(); ++b) {
    const int32_t d = c.decode_lens[b], L = c.seq_lens[b];
    for (int32_t t = 0; t < d; ++t) lengths.push_back(std::max(0, L - d + t + 1));
  }
  const std::vector<float> once = token_logits(step, r1, lengths, c.max_context_len);
  if (Verdict v = run_guarded_step(device, step, e, c, 2.0f, s2, r2)) return v;
  const std::vector<float> twice = token_logits(step, r2, lengths, c.max_context_len);
  for (size_t i = 0; i < once.size(); ++i) {
    const float want = 2.0f * once[i];
    if (std::memcmp(&want, &twice[i], 4) != 0 && !(want != want && twice[i] != twice[i])) {
      const int64_t t = static_cast<int64_t>(i) / std::max<int64_t>(c.max_context_len, 1);
      return "weights x 2: token " + std::to_string(t) + " column " +
             std::to_string(static_cast<int64_t>(i) % std::max<int64_t>(c.max_context_len, 1)) + " logit " +
             std::to_string(twice[i]) + ", want exactly 2 x " + std::to_string(once[i]);
    }
  }
  return std::nullopt;
}

std::string decode_step_route(const IndexerDecodeStepResult& r) {
  std::string s = r.metadata.layout == MetadataLayout::kFlattened ? "flattened" : "native";
  if (r.packed) s += " packed";
  if (r.padded_topk) s += " padded top-k";
  s += std::string(" ") + topk_path_name(r.topk_path);
  return s;
}


namespace {

// The first token row of each request, and T at the end.
std::vector<int64_t> request_starts(const DecodeStepCase& c) {
  std::vector<int64_t> st(1, 0);
  for (int32_t d : c.decode_lens) st.push_back(st.back() + d);
  return st;
}

// Each token's length (docs/ops.md 1: the j-th of d tokens of a request of length L sees L - d + j + 1).
std::vector<int64_t> token_lengths(const DecodeStepCase& c) {
  std::vector<int64_t> lengths;
  for (size_t b = 0; b < c.decode_lens.size(); ++b) {
    const int32_t d = c.decode_lens[b], L = c.seq_lens[b];
    for (int32_t t = 0; t < d; ++t) lengths.push_back(std::max(0, L - d + t + 1));
  }
  return lengths;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0 || (a != a && b != b); }

// The values a token's top-k row selects, sorted (-inf for a -1 entry); an index past n is reported.
Verdict selected_values(const DecodeStepBuffers& s, const std::vector<float>& logits, int64_t cols, int64_t k,
                        int64_t token, int64_t n, std::vector<float>& out) {
  out.clear();
  const HostTensor rows(const_cast<uint8_t*>(s.topk.host.data()), s.topk.view);
  for (int64_t i = 0; i < k; ++i) {
    const int32_t idx = rows.at<int32_t>({token, i});
    if (idx >= n || idx < -1) return "token " + std::to_string(token) + " selected index " + std::to_string(idx) + " of a row of " + std::to_string(n);
    out.push_back(idx < 0 ? -INFINITY : logits[static_cast<size_t>(token * cols + idx)]);
  }
  std::sort(out.begin(), out.end(), [](float a, float b) { return a < b || (a == a && b != b); });
  return std::nullopt;
}

}  // namespace

Verdict decode_step_permutation_commutes(Device& device, IndexerDecodeStep& step, const DecodeStepEngine& e,
                                         const DecodeStepCase& c, const std::vector<int>& perm) {
  const size_t B = c.decode_lens.size();
  std::vector<int> sorted = perm, identity(B);
  std::sort(sorted.begin(), sorted.end());
  std::iota(identity.begin(), identity.end(), 0);
  MLA_REQUIRE(sorted == identity, "permutation: ", perm.size(), " values that are not a permutation of the ", B, " requests");
  DecodeStepCase p = c;
  for (size_t i = 0; i < B; ++i) {
    p.decode_lens[i] = c.decode_lens[static_cast<size_t>(perm[i])];
    p.seq_lens[i] = c.seq_lens[static_cast<size_t>(perm[i])];
  }
  DecodeStepBuffers s1 = make_decode_step_buffers(e, c), s2 = make_decode_step_buffers(e, p);
  // The permuted batch carries the original's data: token rows of q and weights, table rows, cache.
  const std::vector<int64_t> st1 = request_starts(c), st2 = request_starts(p);
  for (size_t i = 0; i < B; ++i) {
    const size_t src = static_cast<size_t>(perm[i]);
    const int64_t d = c.decode_lens[src];
    if (d > 0) {
      std::memcpy(s2.q.host.data() + s2.q.view.byte_offset_of({st2[i], 0, 0}),
                  s1.q.host.data() + s1.q.view.byte_offset_of({st1[src], 0, 0}), static_cast<size_t>(d * e.H * e.D));
      std::memcpy(s2.weights.host.data() + s2.weights.view.byte_offset_of({st2[i], 0}),
                  s1.weights.host.data() + s1.weights.view.byte_offset_of({st1[src], 0}), static_cast<size_t>(d * e.H * 4));
    }
    for (int64_t w = 0; w < e.W; ++w) {
      const int32_t page = s1.host_table[src * static_cast<size_t>(e.W) + static_cast<size_t>(w)];
      s2.host_table[i * static_cast<size_t>(e.W) + static_cast<size_t>(w)] = page;
      s2.table.put<int32_t>({static_cast<int64_t>(i), w}, page);
    }
  }
  s2.kv.view = s1.kv.view;
  s2.kv.host = s1.kv.host;

  IndexerDecodeStepResult r1, r2;
  const int64_t cols = c.max_context_len;
  if (Verdict v = run_staged_step(device, step, e, c, s1, r1)) return "original order: " + *v;
  const std::vector<int64_t> len1 = token_lengths(c), len2 = token_lengths(p);
  const std::vector<float> once = token_logits(step, r1, len1, cols);
  if (Verdict v = run_staged_step(device, step, e, p, s2, r2)) return "permuted: " + *v;
  const std::vector<float> permuted = token_logits(step, r2, len2, cols);
  std::vector<float> sel1, sel2;
  for (size_t i = 0; i < B; ++i) {
    const size_t src = static_cast<size_t>(perm[i]);
    for (int64_t j = 0; j < c.decode_lens[src]; ++j) {
      const int64_t t1 = st1[src] + j, t2 = st2[i] + j, n = len1[static_cast<size_t>(t1)];
      for (int64_t col = 0; col < std::min(n, cols); ++col) {
        const float a = once[static_cast<size_t>(t1 * cols + col)], b = permuted[static_cast<size_t>(t2 * cols + col)];
        if (!same_bits(a, b)) {
          return "request " + std::to_string(src) + " moved to position " + std::to_string(i) + ": token " +
                 std::to_string(j) + " column " + std::to_string(col) + " logit " + std::to_string(b) +
                 ", was " + std::to_string(a) + " in the original order";
        }
      }
      if (Verdict v = selected_values(s1, once, cols, e.k, t1, n, sel1)) return "original order: " + *v;
      if (Verdict v = selected_values(s2, permuted, cols, e.k, t2, n, sel2)) return "permuted: " + *v;
      for (size_t x = 0; x < sel1.size(); ++x) {
        if (!same_bits(sel1[x], sel2[x])) {
          return "request " + std::to_string(src) + " moved to position " + std::to_string(i) + ": token " +
                 std::to_string(j) + "'s top-k selects other values than in the original order";
        }
      }
    }
  }
  return std::nullopt;
}

void register_decode_step_properties(PropertyRegistry& r) {
  auto make = [](Device& device, const std::string& impl, const DecodeStepEngine& e) {
    return kernels::registry().find<IndexerDecodeStepFactory>(impl)(device, e.limits());
  };
  using Step = std::pair<DecodeStepEngine, DecodeStepCase>;
  r.add(make_property<Step>(
      "indexer_decode_step.equals_oracle", "indexer_decode_step",
      "every token's logits, top-k row and global slots equal the oracle's; only rows [0, T) are written",
      decode_step_from_text, [make](Device& device, const std::string& impl, const Step& s) {
        return decode_step_equals_oracle(device, *make(device, impl, s.first), s.first, s.second);
      }));
  r.add(make_property<Step>("indexer_decode_step.weights_scale_exactly", "indexer_decode_step",
                            "index weights x 2 give every logit exactly x 2", decode_step_from_text,
                            [make](Device& device, const std::string& impl, const Step& s) {
                              return decode_step_weights_scale_exactly(device, *make(device, impl, s.first), s.first,
                                                                       s.second);
                            }));
  using Permuted = std::pair<Step, std::vector<int>>;
  r.add(make_property<Permuted>(
      "indexer_decode_step.permutation_commutes", "indexer_decode_step",
      "reordering the requests reorders the tokens' logits (bit for bit) and top-k choices",
      [](const CaseText& t) {
        Step s = decode_step_from_text(t);
        std::vector<int> perm = t.permutation("permutation", s.second.B());
        return Permuted{std::move(s), std::move(perm)};
      },
      [make](Device& device, const std::string& impl, const Permuted& p) {
        const auto& [e, c] = p.first;
        return decode_step_permutation_commutes(device, *make(device, impl, e), e, c, p.second);
      }));
}

}  // namespace mlacheck
