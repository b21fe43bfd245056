// Properties of dense split-KV MLA decode (properties/mla_decode_properties.h).
#include "properties/mla_decode_properties.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <random>

#include "core/backend/host_executor.h"
#include "core/compare.h"
#include "core/contract.h"
#include "core/error.h"
#include "core/poison.h"
#include "core/fp16.h"
#include "core/tolerances.h"
#include "kernels/registry.h"
#include "oracle/oracle_tensor.h"

namespace mlacheck {


using kernels::Device;

namespace {

constexpr int64_t kDim = kernels::kMlaHeadDim, kLatent = kernels::kMlaValueDim;

// Random values of magnitude <= 1 as fp8 or bf16 codes, straight from random bits (a case fills up
// to ~10^6 of them; encoding floats would dominate the test's time): fp8 codes 0..0x38 (0 to 1.0)
// with a random sign, bf16 of 16-bit fractions in [-1, 1) x 2^scale_log2 (exact: a power of two).
class RandomCodes {
 public:
  explicit RandomCodes(uint64_t seed) : rng_(seed) {}
  void store(uint8_t* buf, int64_t at, DType t, int scale_log2) {
    const uint32_t r = next16();
    if (t == DType::kFP8E4M3) {
      buf[at] = static_cast<uint8_t>((r >> 1) % 57 | (r & 1) << 7);
    } else {
      const float x = static_cast<float>(r) * 0x1p-15f - 1.0f;
      // x times a normal power of two is ldexp's value bit for bit (each rounds the exact product
      // once); ldexp per value was a tenth of a small case.
      if (scale_log2 != factor_log2_) factor_log2_ = scale_log2, factor_ = std::ldexp(1.0f, scale_log2);
      const bool exact = scale_log2 >= -100 && scale_log2 <= 100;
      const uint16_t h = float_to_bf16(exact ? x * factor_ : std::ldexp(x, scale_log2));
      std::memcpy(buf + at, &h, 2);
    }
  }
  // Whether the next row is a zero row (one in four, when the case has them).
  bool zero_row(bool zero_rows) { return zero_rows && next16() % 4 == 0; }

 private:
  uint32_t next16() {
    if (left_ == 0) bits_ = rng_(), left_ = 4;
    --left_;
    const uint32_t r = static_cast<uint32_t>(bits_ & 0xFFFF);
    bits_ >>= 16;
    return r;
  }
  std::mt19937_64 rng_;
  uint64_t bits_ = 0;
  int left_ = 0;
  int factor_log2_ = 0;
  float factor_ = 1.0f;  // 2^factor_log2_
};

// Two bf16 outputs of one exact value, each rounded once, may straddle a rounding boundary: then
// they are one bf16 ulp apart, which can exceed the oracle tolerance's rtol (2^-8 of values in
// [0.5, 1) is less than their ulp). So run against run allows the table's atol (outputs whose
// inputs cancel) plus one ulp of the larger, and special values must match exactly. rows maps an
// element of got to the element of want it must equal.
// Both are taken x 2^-magnitude_log2 first (compare_mla_decode says why). slack, when given, is the
// oracle's o_slack for want's elements: each run may be that far from the exact value (fp32
// cancellation, large scales), so two runs that sum in different orders may be twice that apart.
Verdict within_one_bf16_ulp(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want,
                            const std::function<size_t(size_t)>& at, const std::string& what, int magnitude_log2,
                            const std::vector<double>* slack = nullptr) {
  const double atol = tolerance_for("mla_decode", "o").atol;
  for (size_t i = 0; i < got.size(); ++i) {
    const double a = std::ldexp(double(bf16_to_float(got[i])), -magnitude_log2);
    const double b = std::ldexp(double(bf16_to_float(want[at(i)])), -magnitude_log2);
    const double apart = slack != nullptr && std::isfinite((*slack)[at(i)]) ? 2 * std::ldexp((*slack)[at(i)], -magnitude_log2) : 0;
    const bool same_special = (std::isnan(a) && std::isnan(b)) || a == b;  // equal, zeros and infinities included
    if (same_special ||
        (std::isfinite(a) && std::isfinite(b) &&
         std::abs(a - b) <= atol + apart + std::ldexp(1.0, std::ilogb(std::max(std::abs(a), std::abs(b))) - 7))) {
      continue;
    }
    return "o element " + std::to_string(i) + " (row " + std::to_string(i / kLatent) + ", column " +
           std::to_string(i % kLatent) + "): " + std::to_string(a) + " against " + std::to_string(b) + " " + what +
           ", more than one bf16 ulp apart";
  }
  return std::nullopt;
}

// Runs fn on staged buffers and reads o and lse back (dense).
MlaDecodeOutcome run_staged(Device& device, MlaDecodeFn* fn, const MlaDecodeCase& c, MlaDecodeBuffers& st) {
  MlaDecodeOutcome out;
  out.failure = st.run_guarded(device, c, [&] { fn(device, st.args(c)); });
  if (out.failure) return out;
  out.o.resize(static_cast<size_t>(st.o.view.numel()));
  std::memcpy(out.o.data(), st.o.host.data() + c.out_offset, out.o.size() * 2);
  out.lse.resize(static_cast<size_t>(st.lse.view.numel()));
  std::memcpy(out.lse.data(), st.lse.host.data() + c.out_offset, out.lse.size() * 4);
  return out;
}

// The pages some request reads, each with the tokens of its longest user, in increasing order.
std::map<int64_t, int64_t> pages_read(const MlaDecodeCase& c) {
  std::map<int64_t, int64_t> valid;
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t col = 0; col < c.needed(b); ++col) {
      int64_t& n = valid[c.read_page(b, col)];
      n = std::max<int64_t>(n, std::min<int64_t>(c.page, c.lens[static_cast<size_t>(b)] - col * c.page));
    }
  }
  return valid;
}

// The cache, every byte poison. Past 256 MiB (far pages) it is reserved memory with only the pages
// read backed (core/reserved_buffer.h): a read of any other page, or of the 4 GiB around the
// cache, is seen.
Buffer stage_mla_cache(const MlaDecodeCase& c, const std::map<int64_t, int64_t>& read) {
  const View view(c.kv_fp8 ? DType::kFP8E4M3 : DType::kBF16, {c.num_blocks, c.page, kDim},
                  {c.block_stride(), c.token_stride, 1}, c.kv_offset);
  if (!c.reserved_cache()) return Buffer("kv_cache", view, c.kv_tail, c.poison);
  const int64_t block_bytes = view.element_size() * c.block_stride(), end = view.byte_span().end;
  std::vector<ByteSpan> backed;  // whole blocks (the last one's padding lies past the view)
  for (const auto& [page, n] : read) {
    backed.push_back({c.kv_offset + page * block_bytes, std::min(end, c.kv_offset + (page + 1) * block_bytes)});
  }
  return Buffer::reserved("kv_cache", view, backed, c.poison);
}

}  // namespace

// ---- staging -------------------------------------------------------------------------------------

MlaDecodeBuffers::MlaDecodeBuffers(const MlaDecodeCase& c)
    : q("q", View::contiguous(c.q_fp8 ? DType::kFP8E4M3 : DType::kBF16, {c.B, c.q_len, c.H, kDim}, c.q_offset), 64,
        c.poison),
      kv(stage_mla_cache(c, pages_read(c))),
      table("block_table", View::padded_rows(DType::kI32, {c.B, c.W}, std::max<int64_t>(c.W + c.table_row_pad, 1), 8),
            64, c.poison),
      lens("seq_lens", View::contiguous(DType::kI32, {c.B}, 4), 64, c.poison),
      workspace("workspace",
                View::contiguous(DType::kF32,
                                 {kernels::mla_decode_workspace_floats(c.B, c.q_len, c.H, c.num_splits) + c.workspace_extra},
                                 c.out_offset),
                64, 0xA7),
      o("o", View::contiguous(DType::kBF16, {c.B, c.q_len, c.H, kLatent}, c.out_offset), 64, 0xA7),
      lse("lse", View::contiguous(DType::kF32, {c.B, c.q_len, c.H}, c.out_offset), 64, 0xA7),
      workspace_used(View::contiguous(DType::kF32, {kernels::mla_decode_workspace_floats(c.B, c.q_len, c.H, c.num_splits)},
                                      c.out_offset)) {
  RandomCodes codes(c.seed);
  // q x 2^-magnitude_log2 (bf16; fp8 q takes it in q_scale), keys x 2^magnitude_log2 likewise.
  const int64_t qes = q.view.element_size();
  for (int64_t row = 0; row < c.B * c.q_len * c.H; ++row) {
    const int64_t at = c.q_offset + row * kDim * qes;
    if (codes.zero_row(c.zero_rows)) {
      std::memset(q.host.data() + at, 0, static_cast<size_t>(kDim * qes));
      continue;
    }
    for (int64_t d = 0; d < kDim; ++d) codes.store(q.host.data(), at + d * qes, q.view.dtype(), -c.magnitude_log2);
  }
  for (int64_t b = 0; b < c.B; ++b) {
    lens.put<int32_t>({b}, c.lens[static_cast<size_t>(b)]);
    for (int64_t w = 0; w < c.W; ++w) {
      table.put<int32_t>({b, w}, static_cast<int32_t>(w < c.needed(b) ? c.read_page(b, w) : c.table[static_cast<size_t>(b * c.W + w)]));
    }
  }
  // Keys of the slots some request reads (a shared page holds its longest user's); every other
  // byte of the cache (other slots, token and block padding, spare pages) stays poison.
  const int64_t kes = kv.view.element_size();
  for (const auto& [page, n] : pages_read(c)) {
    for (int64_t s = 0; s < n; ++s) {
      const int64_t row = c.kv_offset + (page * c.block_stride() + s * c.token_stride) * kes;
      if (codes.zero_row(c.zero_rows)) {
        std::memset(kv.bytes() + row, 0, static_cast<size_t>(kDim * kes));
        continue;
      }
      for (int64_t d = 0; d < kDim; ++d) codes.store(kv.bytes(), row + d * kes, kv.view.dtype(), c.magnitude_log2);
    }
  }
}

oracle::MlaDecodeInputs MlaDecodeBuffers::oracle_inputs(const MlaDecodeCase& c) {
  return {q.host_tensor(), kv.host_tensor(), table.host_tensor(), lens.host_tensor(),
          c.base_scale,    c.launch_q_scale(), c.launch_k_scale(), c.precision};
}

kernels::MlaDecodeArgs MlaDecodeBuffers::args(const MlaDecodeCase& c) const {
  kernels::MlaDecodeArgs a;
  a.q = q.device_tensor();
  a.kv_cache = kv.device_tensor();
  a.block_table = table.device_tensor();
  a.seq_lens = lens.device_tensor();
  a.base_scale = c.base_scale;
  a.q_scale = c.launch_q_scale();
  a.k_scale = c.launch_k_scale();
  a.num_splits = c.num_splits;
  a.workspace = workspace.device_tensor();
  a.o = o.device_tensor();
  a.lse = lse.device_tensor();
  a.host_seq_lens = c.pass_host_lens ? &c.lens : nullptr;
  return a;
}

Verdict MlaDecodeBuffers::run_guarded(Device& device, const MlaDecodeCase& c, const std::function<void()>& launch) {
  // q is 576 random codes a row unless the case zeroes some rows on purpose. (The cache is not
  // declared: with every request empty it holds only its poison, which may be zero bytes.)
  Testbed bed(device, c);
  bed.input(q, c.zero_rows ? Content::kAny : Content::kNonZero).input(kv).input(table).input(lens);
  bed.output(workspace, "workspace", workspace_used).output(o).output(lse);
  return bed.launch(launch);
}

// ---- running and comparing -----------------------------------------------------------------------

Verdict compare_mla_decode(const HostTensor& o, const HostTensor& lse, const oracle::MlaDecodeResult& want,
                           int magnitude_log2) {
  // Each element may first move by its slack (oracle::MlaDecodeResult: the fp32 rounding of the
  // scores, probabilities and sums, which the table's tolerances do not cover when o cancels, takes
  // a large scale or the softmax scale is large); what is left must pass the table.
  const char* const after = " (after each element moved toward the oracle by its fp32 rounding slack)";
  oracle::OracleTensor got = oracle::load(o), expect = want.o;
  const bool o_moved = move_by_slack(got.values, want.o.values, want.o_slack.values);
  if (magnitude_log2 != 0) {
    for (double& v : got.values) v = std::ldexp(v, -magnitude_log2);
    for (double& v : expect.values) v = std::ldexp(v, -magnitude_log2);
  }
  const CompareReport ro = compare_close(got.tensor(), expect.tensor(), tolerance_for("mla_decode", "o"));
  if (!ro.ok) {
    return "mla_decode o" + (magnitude_log2 != 0 ? " x 2^" + std::to_string(-magnitude_log2) : std::string()) +
           ": " + ro.describe() + (o_moved ? after : "") + unwritten_note(o);
  }
  oracle::OracleTensor got_lse = oracle::load(lse);
  const bool lse_moved = move_by_slack(got_lse.values, want.lse.values, want.lse_slack.values);
  const CompareReport rl = compare_close(got_lse.tensor(), want.lse.tensor(), tolerance_for("mla_decode", "lse"));
  if (!rl.ok) return "mla_decode lse: " + rl.describe() + (lse_moved ? after : "") + unwritten_note(lse);
  return std::nullopt;
}

MlaDecodeOutcome run_mla_decode(Device& device, MlaDecodeFn* fn, const MlaDecodeCase& c,
                                const std::function<void(MlaDecodeBuffers&)>& tamper) {
  MlaDecodeBuffers st(c);
  const oracle::MlaDecodeResult want = oracle::mla_decode(st.oracle_inputs(c));
  if (tamper) tamper(st);
  MlaDecodeOutcome out = run_staged(device, fn, c, st);
  out.want = want;
  if (!out.failure) out.failure = compare_mla_decode(st.o.host_tensor(), st.lse.host_tensor(), out.want, c.magnitude_log2);
  return out;
}

Verdict mla_decode_equals_oracle(Device& device, MlaDecodeFn* fn, const MlaDecodeCase& c) {
  return run_mla_decode(device, fn, c).failure;
}

std::vector<int64_t> mla_decode_split_counts(Device& device, const MlaDecodeCase& c) {
  std::vector<int64_t> others;
  // Counts whose split workspace would pass the 256 MiB the case's own count is held to are left
  // out (64 splits of a large case once wanted gigabytes).
  const int64_t max_workspace_bytes = int64_t{1} << 28;
  for (int64_t s : {kernels::mla_decode_num_splits(c.B, c.q_len, c.H, c.max_len(), device.multiprocessors()),
                    c.num_splits, int64_t{kernels::kMlaMaxSplits}}) {
    const bool fits = 4 * kernels::mla_decode_workspace_floats(c.B, c.q_len, c.H, s) <= max_workspace_bytes;
    if (s != 1 && fits && std::find(others.begin(), others.end(), s) == others.end()) others.push_back(s);
  }
  // One other count per case, picked by its seed: half the runs of trying all, and over many cases
  // each count is tried about as often.
  std::vector<int64_t> counts = {1};
  if (!others.empty()) counts.push_back(others[static_cast<size_t>(c.seed % others.size())]);
  return counts;
}

Verdict mla_decode_split_count_invariant(Device& device, MlaDecodeFn* fn, const MlaDecodeCase& c) {
  // The oracle once (its inputs do not depend on the split count), then each count on fresh buffers
  // (the workspace is sized for it).
  std::vector<uint16_t> o1;
  std::vector<float> l1;
  oracle::MlaDecodeResult want;
  for (const int64_t splits : mla_decode_split_counts(device, c)) {
    MlaDecodeCase run_case = c;
    run_case.num_splits = splits;
    MlaDecodeBuffers st(run_case);
    if (splits == 1) want = oracle::mla_decode(st.oracle_inputs(run_case));
    const MlaDecodeOutcome run = run_staged(device, fn, run_case, st);
    const std::string name = std::to_string(splits) + (splits == 1 ? " split" : " splits");
    if (run.failure) return name + ": " + *run.failure;
    if (Verdict v = compare_mla_decode(st.o.host_tensor(), st.lse.host_tensor(), want, c.magnitude_log2)) {
      return name + ": " + *v;
    }
    if (splits == 1) {
      o1 = run.o, l1 = run.lse;
      continue;
    }
    if (Verdict v = within_one_bf16_ulp(run.o, o1, [](size_t i) { return i; }, "with 1 split", c.magnitude_log2,
                                        &want.o_slack.values)) {
      return name + " against 1: " + *v;
    }
    // lse likewise: each run within its row's slack and the table's rule of the exact value, so
    // twice that apart at most (core/compare.h, compare_runs).
    const int64_t rows = c.B * c.q_len * c.H;
    const CompareReport rl = compare_runs(std::vector<double>(run.lse.begin(), run.lse.end()),
                                          std::vector<double>(l1.begin(), l1.end()), want.lse.values,
                                          want.lse_slack.values, {rows}, tolerance_for("mla_decode", "lse"));
    if (!rl.ok) return name + " against 1, lse: " + rl.describe();
  }
  return std::nullopt;
}

MlaDecodeCase permute_mla_decode_batch(const MlaDecodeCase& c, const std::vector<int>& perm) {
  std::vector<int> sorted = perm, identity(static_cast<size_t>(c.B));
  std::sort(sorted.begin(), sorted.end());
  std::iota(identity.begin(), identity.end(), 0);
  MLA_REQUIRE(sorted == identity, "permutation: ", perm.size(), " values that are not a permutation of the ", c.B,
              " requests");
  MlaDecodeCase p = c;
  for (size_t i = 0; i < perm.size(); ++i) {
    const size_t src = static_cast<size_t>(perm[i]);
    p.lens[i] = c.lens[src];
    std::copy_n(c.table.begin() + static_cast<int64_t>(src) * c.W, c.W, p.table.begin() + static_cast<int64_t>(i) * c.W);
  }
  return p;
}

Verdict mla_decode_batch_permutation_commutes(Device& device, MlaDecodeFn* fn, const MlaDecodeCase& c,
                                              const std::vector<int>& perm) {
  const MlaDecodeCase p = permute_mla_decode_batch(c, perm);
  MlaDecodeBuffers s1(c), s2(p);
  // The permuted batch carries the original's data: each request's q rows, and the same cache.
  const int64_t request_bytes = c.q_len * c.H * kDim * s1.q.view.element_size();
  for (size_t i = 0; i < perm.size(); ++i) {
    std::memcpy(s2.q.host.data() + c.q_offset + static_cast<int64_t>(i) * request_bytes,
                s1.q.host.data() + c.q_offset + perm[i] * request_bytes, static_cast<size_t>(request_bytes));
  }
  s2.kv.host = s1.kv.host;
  const MlaDecodeOutcome a = run_staged(device, fn, c, s1);
  if (a.failure) return "original order: " + *a.failure;
  const MlaDecodeOutcome b = run_staged(device, fn, p, s2);
  if (b.failure) return "permuted: " + *b.failure;
  // Row r of the permuted batch (request i) is row r + (perm[i] - i) * rows_per_request of the original.
  const size_t per_request = static_cast<size_t>(c.q_len * c.H);
  const auto original_row = [&](size_t row) { return static_cast<size_t>(perm[row / per_request]) * per_request + row % per_request; };
  if (Verdict v = within_one_bf16_ulp(b.o, a.o, [&](size_t e) { return original_row(e / kLatent) * kLatent + e % kLatent; },
                                      "in the original order", c.magnitude_log2)) {
    return "requests permuted: " + *v;
  }
  std::vector<float> moved(b.lse.size()), got = b.lse;
  for (size_t row = 0; row < moved.size(); ++row) moved[row] = a.lse[original_row(row)];
  const CompareReport rl = compare_close(HostTensor(got.data(), View::contiguous(DType::kF32, {c.B, c.q_len, c.H})),
                                         HostTensor(moved.data(), View::contiguous(DType::kF32, {c.B, c.q_len, c.H})),
                                         tolerance_for("mla_decode", "lse"));
  if (!rl.ok) return "requests permuted, lse against the original order: " + rl.describe();
  return std::nullopt;
}

oracle::MlaPrecision mla_decode_precision(const std::string& impl) {
  return oracle::mla_precision_of(kernels::registry().declared_precision(impl));
}

void register_mla_decode_properties(PropertyRegistry& r) {
  // The implementation, and the case with its declared precision (the oracle's slack follows it).
  const auto find = [](const std::string& impl) { return kernels::registry().find<MlaDecodeFn>(impl); };
  const auto read_case = [](const CaseText& t) { return mla_decode_from_text(t); };
  const auto declared = [](MlaDecodeCase c, const std::string& impl) {
    c.precision = mla_decode_precision(impl);
    return c;
  };
  r.add(make_property<MlaDecodeCase>(
      "mla_decode.equals_oracle", "mla_decode",
      "o and lse equal the oracle's (len 0: 0 and -inf); only o, lse and the used workspace are written",
      read_case, [find, declared](Device& device, const std::string& impl, const MlaDecodeCase& c) {
        return mla_decode_equals_oracle(device, find(impl), declared(c, impl));
      }));
  r.add(make_property<MlaDecodeCase>(
      "mla_decode.far_pages", "mla_decode",
      "pages read across byte 2^31 or 2^32 of an 8 GiB cache, only they backed: the oracle's o and lse, no other page read",
      mla_decode_far_from_text, [find, declared](Device& device, const std::string& impl, const MlaDecodeCase& c) {
        return mla_decode_equals_oracle(device, find(impl), declared(c, impl));
      }));
  r.add(make_property<MlaDecodeCase>(
      "mla_decode.split_count_invariant", "mla_decode",
      "1 split and one of the heuristic's count, the case's and 64 (by the seed) give the same o and lse within rounding",
      read_case, [find, declared](Device& device, const std::string& impl, const MlaDecodeCase& c) {
        return mla_decode_split_count_invariant(device, find(impl), declared(c, impl));
      }));
  using Permuted = std::pair<MlaDecodeCase, std::vector<int>>;
  r.add(make_property<Permuted>(
      "mla_decode.batch_permutation_commutes", "mla_decode",
      "reordering the requests of a batch reorders o and lse (within rounding)",
      [](const CaseText& t) {
        MlaDecodeCase c = mla_decode_from_text(t);
        std::vector<int> perm = t.permutation("permutation", c.B);
        return Permuted{std::move(c), std::move(perm)};
      },
      [find, declared](Device& device, const std::string& impl, const Permuted& p) {
        return mla_decode_batch_permutation_commutes(device, find(impl), declared(p.first, impl), p.second);
      }));
}

}  // namespace mlacheck
