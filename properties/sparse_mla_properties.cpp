// Properties of sparse MLA decode (properties/sparse_mla_properties.h).
#include "properties/sparse_mla_properties.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <set>
#include <string>

#include "core/compare.h"
#include "core/contract.h"
#include "core/error.h"
#include "core/poison.h"
#include "core/fp16.h"
#include "core/fp8.h"
#include "core/tolerances.h"
#include "kernels/registry.h"
#include "oracle/oracle_tensor.h"
#include "oracle/sparse_mla.h"
#include "harness/testbed.h"
#include "properties/random_values.h"

namespace mlacheck {


using kernels::Device;

namespace {

constexpr int64_t kDim = kernels::kSparseMlaHeadDim, kLatent = kernels::kSparseMlaLatent;
constexpr int64_t kTile = kernels::kSparseMlaScaleTile, kRope = kernels::kSparseMlaRope;
constexpr int64_t kToken = kernels::kSparseMlaTokenBytes;
// The output buffers around their views: a pattern no kernel would write.
constexpr uint8_t kOutFill = 0xA7;

// Fills every 4-byte word of a buffer (view and padding) with value.
void fill_words(Buffer& buf, int32_t value) {
  for (size_t at = 0; at + 4 <= buf.host.size(); at += 4) std::memcpy(buf.host.data() + at, &value, 4);
}

// One fp8_ds_mla token of the case's values: 4 tiles of latent of magnitude 2^-2 .. 2^2 quantized
// with the case's scale format, every tile scale then x 2^magnitude_log2 (exact: both formats stay
// what they are), 64 bf16 rope values; all zero (codes, rope, and for fp32 sometimes the scales)
// when zero.
void write_token(const SparseMlaCase& c, std::mt19937_64& rng, bool zero, uint8_t* token) {
  for (int64_t tile = 0; tile < kLatent / kTile; ++tile) {
    float latent[kTile];
    const float magnitude = std::ldexp(1.0f, static_cast<int>(rng() % 5) - 2);
    float amax = 0;
    for (float& v : latent) {
      v = zero ? 0.0f : magnitude * uniform(rng, -1, 1);
      amax = std::max(amax, std::fabs(v));
    }
    if (zero) amax = magnitude;
    float scale = c.scale_format == SparseMlaScaleFormat::kFp32 ? fp8_e4m3_scale_fp32(amax)
                                                                : ue8m0_to_float(fp8_e4m3_scale_ue8m0(amax));
    for (int64_t e = 0; e < kTile; ++e) token[tile * kTile + e] = float_to_fp8_e4m3(latent[e] / scale);
    scale = std::ldexp(scale, c.magnitude_log2);
    if (zero && c.scale_format == SparseMlaScaleFormat::kFp32 && rng() % 2 == 0) scale = 0.0f;
    std::memcpy(token + kLatent + 4 * tile, &scale, 4);
  }
  for (int64_t r = 0; r < kRope; ++r) {
    const uint16_t h = float_to_bf16(zero ? 0.0f : uniform(rng, -1, 1));
    std::memcpy(token + kLatent + 16 + 2 * r, &h, 2);
  }
}

// The slots the case's counted valid entries name.
std::set<int32_t> named_slots(const SparseMlaCase& c) {
  std::set<int32_t> named;
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t s = 0; s < c.S; ++s) {
      for (int64_t i = 0; i < c.topk; ++i) {
        if (c.counted_valid(b, s, i)) named.insert(c.index(b, s, i));
      }
    }
  }
  return named;
}

// The cache, every byte poison. Past 256 MiB (far slots) it is reserved memory with only the
// tokens named and the trap's backed (core/reserved_buffer.h): a read of any other token of the
// cache, or of the 4 GiB around it, is seen.
Buffer stage_cache(const SparseMlaCase& c, const std::set<int32_t>& named) {
  const View view(DType::kU8, {c.num_blocks, c.page, kToken}, {c.block_stride, c.token_stride, 1}, c.kv_offset);
  if (!c.reserved_cache()) return Buffer("kv_cache", view, 64, c.poison);
  std::vector<ByteSpan> backed;
  const auto back = [&](int64_t slot) {
    const int64_t at = view.byte_offset_of({slot / c.page, slot % c.page, 0});
    backed.push_back({at, at + kToken});
  };
  for (const int32_t slot : named) back(slot);
  if (oracle::sparse_mla_index_valid(c.staged(c.trap), c.num_slots())) back(c.staged(c.trap));
  return Buffer::reserved("kv_cache", view, backed, c.poison);
}

// The staged buffers of one case.
struct Staged {
  std::set<int32_t> named;  // the slots counted valid entries name
  Buffer q, kv, indices, lengths, sink, out, lse;

  explicit Staged(const SparseMlaCase& c)
      : named(named_slots(c)),
        q("q", View::contiguous(DType::kBF16, {c.B, c.S, c.H, kDim}, 2 * c.q_offset), 64, c.poison),
        kv(stage_cache(c, named)),
        indices("indices", View::contiguous(DType::kI32, {c.B, c.S, c.topk}, 4 * c.indices_offset), 64, 0),
        lengths("topk_length", View::contiguous(DType::kI32, {c.B}, 4 * c.aux_offset), 64, 0),
        sink("attn_sink", View::contiguous(DType::kF32, {c.H}, 4 * c.aux_offset), 64, c.poison),
        out("out", View::contiguous(DType::kBF16, {c.B, c.S, c.H, kLatent}, 2 * c.out_offset), 64, kOutFill),
        lse("lse", View::contiguous(DType::kF32, {c.B, c.H, c.S}, 4 * c.lse_offset), 64, kOutFill) {
    std::mt19937_64 rng(c.seed);
    // q: latent x 2^-magnitude_log2, so scores do not move with the cache's magnitude. A product with
    // the power of two is ldexp's value bit for bit (both round the exact product once) while the
    // power is a normal float; ldexp per value was a sixth of a small case.
    const bool exact_scale = c.magnitude_log2 >= -100 && c.magnitude_log2 <= 100;
    const float q_scale = exact_scale ? std::ldexp(1.0f, -c.magnitude_log2) : 0.0f;
    for (int64_t row = 0; row < c.B * c.S * c.H; ++row) {
      const bool zero = c.zero_rows && rng() % 4 == 0;
      for (int64_t d = 0; d < kDim; ++d) {
        const float v = zero ? 0.0f : uniform(rng, -2, 2);
        const uint16_t h = float_to_bf16(d < kLatent ? (exact_scale ? v * q_scale : std::ldexp(v, -c.magnitude_log2)) : v);
        std::memcpy(q.host.data() + q.view.byte_offset() + 2 * (row * kDim + d), &h, 2);
      }
    }
    // The cache: every byte poison, then the tokens counted valid entries name.
    for (const int32_t slot : named) {
      const bool zero = c.zero_rows && rng() % 4 == 0;
      write_token(c, rng, zero, kv.bytes() + kv.view.byte_offset_of({slot / c.page, slot % c.page, 0}));
    }
    fill_words(indices, c.staged(c.trap));
    for (int64_t b = 0; b < c.B; ++b) {
      for (int64_t s = 0; s < c.S; ++s) {
        for (int64_t i = 0; i < c.topk; ++i) indices.put({b, s, i}, c.index(b, s, i));
      }
    }
    fill_words(lengths, static_cast<int32_t>(c.topk));  // a neighbour's word would count the poisoned tail
    if (c.has_length) {
      for (int64_t b = 0; b < c.B; ++b) lengths.put({b}, c.lengths[static_cast<size_t>(b)]);
    }
    if (c.has_sink) {
      for (int64_t h = 0; h < c.H; ++h) sink.put({h}, c.sink[static_cast<size_t>(h)]);
    }
  }

  // Runs launch in the testbed (harness/testbed.h) under c's schedule; out and lse then hold the
  // device's bytes. q is 576 random values a row unless the case zeroes rows on purpose.
  Verdict run(Device& device, const SparseMlaCase& c, const std::function<void()>& launch) {
    Testbed bed(device, c);
    bed.input(q, c.zero_rows ? Content::kAny : Content::kNonZero).input(kv).input(indices);
    if (c.has_length) bed.input(lengths);
    if (c.has_sink) bed.input(sink);
    bed.output(out).output(lse);
    return bed.launch(launch);
  }

  kernels::SparseMlaArgs args(const SparseMlaCase& c) const {
    kernels::SparseMlaArgs a;
    a.q = q.device_tensor();
    a.kv_cache = kv.device_tensor();
    a.indices = indices.device_tensor();
    if (c.has_length) a.topk_length = lengths.device_tensor();
    if (c.has_sink) a.attn_sink = sink.device_tensor();
    a.softmax_scale = c.softmax_scale;
    a.out = out.device_tensor();
    a.lse = lse.device_tensor();
    return a;
  }
};

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

bool same_special(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// `lse none`: an implementation that returns no lse must leave every element of the lse view
// unwritten, holding the output poison the testbed put there (core/poison.h); a write there is a
// write to a view it declared it does not produce.
Verdict lse_left_unwritten(const Buffer& lse, const std::string& who) {
  const uint8_t* p = lse.host.data() + lse.view.byte_offset();
  for (int64_t i = 0; i < lse.view.numel(); ++i) {
    if (is_output_poison(DType::kF32, p + 4 * i)) continue;
    const std::vector<int64_t> at = lse.view.coords_of_byte(lse.view.byte_offset() + 4 * i);
    return who + "lse element " + shape_string(at) + " written (" + value_text(load_f32(p + 4 * i)) +
           ") though the contract declares `lse none` (the implementation returns no lse)";
  }
  return std::nullopt;
}

// out against the oracle's with both x 2^-magnitude_log2 (exact), so the table's atol, meant for
// outputs of magnitude ~1, keeps its meaning where the case moved out to 2^+-100: cancellation in
// fp32 leaves errors relative to the row's magnitude, not absolute ones.
CompareReport compare_out(const HostTensor& got, const oracle::OracleTensor& want, int magnitude_log2) {
  const Tolerance& tol = tolerance_for("sparse_mla_decode", "out");
  if (magnitude_log2 == 0) return compare_close(got, want.tensor(), tol);
  oracle::OracleTensor g = oracle::load(got), w = want;
  for (double& v : g.values) v = std::ldexp(v, -magnitude_log2);
  for (double& v : w.values) v = std::ldexp(v, -magnitude_log2);
  return compare_close(g.tensor(), w.tensor(), tol);
}

}  // namespace

SparseMlaOutcome run_sparse_mla(Device& device, SparseMlaFn* fn, const SparseMlaCase& c, bool compare,
                                oracle::SparseMlaResult* exact) {
  Staged st(c);
  SparseMlaOutcome o;
  o.failure = st.run(device, c, [&] { fn(device, st.args(c)); });
  if (o.failure) return o;
  o.out.resize(static_cast<size_t>(st.out.view.numel()));
  std::memcpy(o.out.data(), st.out.host.data() + st.out.view.byte_offset(), 2 * o.out.size());
  o.lse.resize(static_cast<size_t>(st.lse.view.numel()));
  std::memcpy(o.lse.data(), st.lse.host.data() + st.lse.view.byte_offset(), 4 * o.lse.size());
  if (c.lse_none && (o.failure = lse_left_unwritten(st.lse, ""))) return o;
  if (!compare && exact == nullptr) return o;

  oracle::SparseMlaInputs in{st.q.host_tensor(), st.kv.host_tensor(), st.indices.host_tensor(),
                             std::nullopt,       c.softmax_scale,     std::nullopt, c.precision};
  if (c.has_length) in.topk_length = st.lengths.host_tensor();
  if (c.has_sink) in.attn_sink = st.sink.host_tensor();
  oracle::SparseMlaResult want = oracle::sparse_mla_decode(in);
  if (compare) {
    o.failure = compare_sparse_mla(st.out.host_tensor(), st.lse.host_tensor(), want, c.magnitude_log2, !c.lse_none);
  }
  if (exact != nullptr) *exact = std::move(want);
  return o;
}

Verdict compare_sparse_mla(const HostTensor& out, const HostTensor& lse, const oracle::SparseMlaResult& want,
                           int magnitude_log2, bool lse_compared) {
  // A declared precision (want.out_slack not all 0): each out element first moved toward the oracle by
  // the slack the declared roundings allow (oracle/sparse_mla.h); what is left must pass the table.
  oracle::OracleTensor got_out = oracle::load(out);
  const bool out_moved =  // a result made without out_slack (by hand) has none
      !want.out_slack.values.empty() && move_by_slack(got_out.values, want.out.values, want.out_slack.values);
  const CompareReport r_out = compare_out(got_out.tensor(), want.out, magnitude_log2);
  oracle::OracleTensor got_lse = oracle::load(lse);
  const bool moved = move_by_slack(got_lse.values, want.lse.values, want.lse_slack.values);
  const CompareReport r_lse = compare_close(got_lse.tensor(), want.lse.tensor(), tolerance_for("sparse_mla_decode", "lse"));
  std::string failure;
  if (!r_out.ok) {
    failure = (magnitude_log2 == 0 ? "out: " : "out x 2^" + std::to_string(-magnitude_log2) + ": ") + r_out.describe() +
              (out_moved ? " (after each element moved toward the oracle by the declared precision's slack)" : "") +
              unwritten_note(out);
  }
  if (lse_compared && !r_lse.ok) {
    failure += (failure.empty() ? "lse: " : "; lse: ") + r_lse.describe() +
               (moved ? " (after each element moved toward the oracle by its fp32 rounding slack)" : "") +
               unwritten_note(lse);
  }
  if (failure.empty()) return std::nullopt;
  return failure;
}

Verdict sparse_mla_equals_oracle(Device& device, SparseMlaFn* fn, const SparseMlaCase& c) {
  return run_sparse_mla(device, fn, c, true).failure;
}

SparseMlaCase permute_sparse_mla_rows(const SparseMlaCase& c, uint64_t permutation_seed) {
  SparseMlaCase p = c;
  std::mt19937_64 rng(permutation_seed);
  for (int64_t b = 0; b < c.B; ++b) {
    const int64_t counted = c.row_length(b);
    for (int64_t s = 0; s < c.S; ++s) {
      const auto row = p.indices.begin() + (b * c.S + s) * c.topk;
      std::shuffle(row, row + counted, rng);
      std::shuffle(row + counted, row + c.topk, rng);
    }
  }
  return p;
}

Verdict sparse_mla_permutation_invariant(Device& device, SparseMlaFn* fn, const SparseMlaCase& c,
                                         uint64_t permutation_seed) {
  // Both runs stage the same slots (the set of counted valid entries is the same), so the cache
  // bytes are identical, and the oracle's result (a sum over a multiset) is the same for both.
  oracle::SparseMlaResult exact;
  const SparseMlaOutcome a = run_sparse_mla(device, fn, c, false, &exact);
  if (a.failure) return "original rows: " + *a.failure;
  const SparseMlaOutcome b = run_sparse_mla(device, fn, permute_sparse_mla_rows(c, permutation_seed), false);
  if (b.failure) return "permuted rows: " + *b.failure;
  // out: two roundings of one exact value may straddle a bf16 boundary, one ulp apart (more than
  // the table's rtol for values just above a power of two), so allow atol plus one ulp of the larger,
  // on out x 2^-magnitude_log2 (compare_out says why).
  const double atol = tolerance_for("sparse_mla_decode", "out").atol;
  for (size_t i = 0; i < a.out.size(); ++i) {
    const double x = std::ldexp(double(bf16_to_float(a.out[i])), -c.magnitude_log2);
    const double y = std::ldexp(double(bf16_to_float(b.out[i])), -c.magnitude_log2);
    if (same_special(x, y)) continue;
    // Under a declared precision each run may sit its slack away from the exact value: twice it apart.
    const double declared =
        exact.out_slack.values.empty() ? 0.0 : 2 * std::ldexp(exact.out_slack.values[i], -c.magnitude_log2);
    if (std::isfinite(x) && std::isfinite(y) &&
        std::fabs(x - y) <= atol + declared + std::ldexp(1.0, std::ilogb(std::max(std::fabs(x), std::fabs(y))) - 7)) {
      continue;
    }
    const int64_t row = static_cast<int64_t>(i) / kLatent;
    return "out of (b " + std::to_string(row / (c.S * c.H)) + ", s " + std::to_string(row / c.H % c.S) + ", head " +
           std::to_string(row % c.H) + ") column " + std::to_string(i % kLatent) + ": " + std::to_string(y) +
           " with the rows permuted, " + std::to_string(x) + " before, more than one bf16 ulp apart";
  }
  if (c.lse_none) return std::nullopt;  // both runs left lse unwritten (run_sparse_mla checked)
  // lse: each run may be off the exact lse by its slack plus the table's rule (what equals_oracle
  // allows), so the two by twice that. A campaign on the H200 found the one-sided rule too tight:
  // 1.008x the table's tolerance between two orders of one row, each within it of the oracle.
  const int64_t rows = c.B * c.H * c.S;
  const std::vector<double> la(a.lse.begin(), a.lse.end()), lb(b.lse.begin(), b.lse.end());
  const CompareReport r = compare_runs(lb, la, exact.lse.values, exact.lse_slack.values, {c.B, c.H, c.S},
                                       tolerance_for("sparse_mla_decode", "lse"));
  if (!r.ok) {
    return "lse with the rows permuted against before (" + std::to_string(rows) + " rows): " + r.describe() +
           " (after each element moved toward before by twice its slack and the table's rule at the exact lse)";
  }
  return std::nullopt;
}

namespace {

Verdict rows_within_rounding(Staged& st, Buffer& out, Buffer& lse, const SparseMlaCase& c, int64_t b,
                             const std::string& who) {
  // `batch_rows rounding`: each launch may sit its slack away from the exact value (the oracle's,
  // with the declared precision), so the two up to twice it apart, as topk_permutation_invariant
  // judges two orders of one row: out within atol, twice the slack and one bf16 ulp (x
  // 2^-magnitude_log2), lse within twice its slack and the table's rule.
  oracle::SparseMlaInputs in{st.q.host_tensor(), st.kv.host_tensor(), st.indices.host_tensor(),
                             std::nullopt,       c.softmax_scale,     std::nullopt, c.precision};
  if (c.has_length) in.topk_length = st.lengths.host_tensor();
  if (c.has_sink) in.attn_sink = st.sink.host_tensor();
  const oracle::SparseMlaResult exact = oracle::sparse_mla_decode(in);
  const int64_t per_out = c.S * c.H * kLatent, per_lse = c.H * c.S;
  const double atol = tolerance_for("sparse_mla_decode", "out").atol;
  for (int64_t i = 0; i < per_out; ++i) {
    const int64_t at = b * per_out + i;
    const double x = std::ldexp(
        double(bf16_to_float(load_u16(st.out.host.data() + st.out.view.byte_offset() + 2 * at))), -c.magnitude_log2);
    const double y =
        std::ldexp(double(bf16_to_float(load_u16(out.host.data() + out.view.byte_offset() + 2 * i))), -c.magnitude_log2);
    if (same_special(x, y)) continue;
    const double declared =
        exact.out_slack.values.empty() ? 0.0 : 2 * std::ldexp(exact.out_slack.values[static_cast<size_t>(at)], -c.magnitude_log2);
    if (std::isfinite(x) && std::isfinite(y) &&
        std::fabs(x - y) <= atol + declared + std::ldexp(1.0, std::ilogb(std::max(std::fabs(x), std::fabs(y))) - 7)) {
      continue;
    }
    return who + " launched alone vs in its batch: out element " + std::to_string(i) + " of the request " +
           std::to_string(y) + ", in the batch " + std::to_string(x) +
           " (x 2^-magnitude_log2), more than twice the declared slack and one bf16 ulp apart (batch_rows rounding)";
  }
  if (c.lse_none) return std::nullopt;  // neither launch wrote lse (checked after each)
  std::vector<double> in_batch, alone, want, slack;
  for (int64_t i = 0; i < per_lse; ++i) {
    const size_t at = static_cast<size_t>(b * per_lse + i);
    in_batch.push_back(load_f32(st.lse.host.data() + st.lse.view.byte_offset() + 4 * static_cast<int64_t>(at)));
    alone.push_back(load_f32(lse.host.data() + lse.view.byte_offset() + 4 * i));
    want.push_back(exact.lse.values[at]);
    slack.push_back(exact.lse_slack.values.empty() ? 0.0 : exact.lse_slack.values[at]);
  }
  const CompareReport r =
      compare_runs(alone, in_batch, want, slack, {c.H, c.S}, tolerance_for("sparse_mla_decode", "lse"));
  if (!r.ok) return who + " launched alone vs in its batch: lse " + r.describe() + " (batch_rows rounding)";
  return std::nullopt;
}

}  // namespace

Verdict sparse_mla_rows_independent_of_batch(Device& device, SparseMlaFn* fn, const SparseMlaCase& c,
                                             bool rounding) {
  Staged st(c);
  if (Verdict v = st.run(device, c, [&] { fn(device, st.args(c)); })) return "the batch: " + *v;
  if (c.lse_none) {
    if (Verdict v = lse_left_unwritten(st.lse, "the batch: ")) return v;
  }
  const int64_t b = static_cast<int64_t>(c.seed % static_cast<uint64_t>(c.B));
  const std::string who = "request " + std::to_string(b) + " of " + std::to_string(c.B);
  Buffer out("out of " + who, View::contiguous(DType::kBF16, {1, c.S, c.H, kLatent}, 2 * c.out_offset), 64, kOutFill);
  Buffer lse("lse of " + who, View::contiguous(DType::kF32, {1, c.H, c.S}, 4 * c.lse_offset), 64, kOutFill);
  Testbed bed(device, c);
  bed.input(st.q).input(st.kv).input(st.indices);
  if (c.has_length) bed.input(st.lengths);
  if (c.has_sink) bed.input(st.sink);
  bed.output(out).output(lse);
  const Verdict v = bed.launch([&] {
    kernels::SparseMlaArgs a = st.args(c);
    a.q.view = a.q.view.slice(0, b, b + 1);
    a.indices.view = a.indices.view.slice(0, b, b + 1);
    if (c.has_length) a.topk_length.view = a.topk_length.view.slice(0, b, b + 1);
    a.out = out.device_tensor();
    a.lse = lse.device_tensor();
    fn(device, a);
  });
  if (v) return who + " alone: " + *v;
  if (c.lse_none) {
    if (Verdict u = lse_left_unwritten(lse, who + " alone: ")) return u;
  }
  if (rounding) return rows_within_rounding(st, out, lse, c, b, who);
  // Bit for bit, element by element: request b's block of the batch's out and lse.
  const auto differ = [&](const Buffer& batch, const Buffer& alone, int64_t per_request, int64_t bytes,
                          const std::string& name) -> Verdict {
    const uint8_t* x = batch.host.data() + batch.view.byte_offset() + b * per_request * bytes;
    const uint8_t* y = alone.host.data() + alone.view.byte_offset();
    for (int64_t i = 0; i < per_request; ++i) {
      if (std::memcmp(x + i * bytes, y + i * bytes, static_cast<size_t>(bytes)) == 0) continue;
      const std::vector<int64_t> at = alone.view.coords_of_byte(alone.view.byte_offset() + i * bytes);
      const double got = bytes == 2 ? bf16_to_float(load_u16(y + i * bytes)) : load_f32(y + i * bytes);
      const double want = bytes == 2 ? bf16_to_float(load_u16(x + i * bytes)) : load_f32(x + i * bytes);
      return who + " launched alone vs in its batch: " + name + " element " + shape_string(at) + " (of the request) " +
             value_text(got) + ", in the batch " + value_text(want) + " (other bits)";
    }
    return std::nullopt;
  };
  if (Verdict d = differ(st.out, out, c.S * c.H * kLatent, 2, "out")) return d;
  return c.lse_none ? std::nullopt : differ(st.lse, lse, c.H * c.S, 4, "lse");
}

void register_sparse_mla_properties(PropertyRegistry& r) {
  const auto find = [](const std::string& impl) { return kernels::registry().find<SparseMlaFn>(impl); };
  // The case with the roundings impl declares (its contract's precision clauses), for the oracle.
  const auto declared = [](SparseMlaCase c, const std::string& impl) {
    if (kernels::registry().contains(impl)) {
      if (const std::shared_ptr<const Contract> contract = kernels::registry().contract(impl)) {
        c.precision = oracle::mla_precision_of(contract->precision);
        const auto lse = contract->declared.find("lse");
        c.lse_none = lse != contract->declared.end() && lse->second == "none";
      }
    }
    return c;
  };
  r.add(make_property<SparseMlaCase>(
      "sparse_mla_decode.equals_oracle", "sparse_mla_decode",
      "out and lse equal the oracle's (no valid entry: 0 and +inf); only out and lse are written", sparse_mla_from_text,
      [find, declared](Device& device, const std::string& impl, const SparseMlaCase& c) {
        return sparse_mla_equals_oracle(device, find(impl), declared(c, impl));
      }));
  r.add(make_property<SparseMlaCase>(
      "sparse_mla_decode.far_slots", "sparse_mla_decode",
      "slots read past byte 2^31 or 2^32 of an 8 GiB cache, only they backed: the oracle's out and lse, no other token read",
      sparse_mla_far_from_text, [find, declared](Device& device, const std::string& impl, const SparseMlaCase& c) {
        return sparse_mla_equals_oracle(device, find(impl), declared(c, impl));
      }));
  r.add(make_property<SparseMlaCase>(
      "sparse_mla_decode.rows_independent_of_batch", "sparse_mla_decode",
      "one request launched alone on the batch's buffers gives its rows of the batch's out and lse bit for bit",
      sparse_mla_from_text, [find, declared](Device& device, const std::string& impl, const SparseMlaCase& c) {
        bool rounding = false;
        if (kernels::registry().contains(impl)) {
          if (const std::shared_ptr<const Contract> contract = kernels::registry().contract(impl)) {
            const auto it = contract->declared.find("batch_rows");
            rounding = it != contract->declared.end() && it->second == "rounding";
          }
        }
        return sparse_mla_rows_independent_of_batch(device, find(impl), declared(c, impl), rounding);
      }));
  using Permuted = std::pair<SparseMlaCase, uint64_t>;
  r.add(make_property<Permuted>(
      "sparse_mla_decode.topk_permutation_invariant", "sparse_mla_decode",
      "reordering each top-k row (its topk_length prefix kept) leaves out and lse equal within rounding",
      [](const CaseText& t) {
        SparseMlaCase c = sparse_mla_from_text(t);
        return Permuted{std::move(c), t.unsigned_integer("permutation_seed")};
      },
      [find, declared](Device& device, const std::string& impl, const Permuted& p) {
        return sparse_mla_permutation_invariant(device, find(impl), declared(p.first, impl), p.second);
      }));
}

}  // namespace mlacheck
