// Properties of top-k per row (properties/topk_properties.h).
#include "properties/topk_properties.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>

#include "core/contract.h"
#include "core/error.h"
#include "core/topk_check.h"
#include "kernels/registry.h"
#include "oracle/topk.h"
#include "harness/testbed.h"

namespace mlacheck {

using namespace kernels;

namespace {

constexpr uint8_t kIndexPoison = 0x7F;  // int32 0x7F7F7F7F around seq_lens / ks / ke

// The staged buffers of one case (host side filled, then run through the testbed by run_staged).
struct TopkBuffers {
  Buffer logits, out, workspace, counts, seq_lens, ks, ke;
};

// The tensors a launch takes.
struct TopkTensors {
  DeviceTensor logits, seq_lens, ks, ke, out, workspace, counts;
};

using Launcher = std::function<TopkPath(Device&, const TopkTensors&)>;

TopkRun run_staged(Device& device, const TopkCase& c, const Launcher& launch, const TopkDeclared& declared = {}) {
  TopkRun run;
  uint64_t garbage_state = c.seed;
  const int64_t B = c.prefill() ? c.rows : c.rows / c.next_n;
  TopkBuffers s;
  const int64_t lead = c.index_lead * 4;
  if (c.prefill()) {
    s.ks = Buffer("ks", View::contiguous(DType::kI32, {c.rows}, lead), 8, kIndexPoison);
    s.ke = Buffer("ke", View::contiguous(DType::kI32, {c.rows}, lead), 8, kIndexPoison);
    for (int64_t r = 0; r < c.rows; ++r) {
      s.ks.put<int32_t>({r}, c.ks[static_cast<size_t>(r)]);
      s.ke.put<int32_t>({r}, c.ke[static_cast<size_t>(r)]);
    }
    run.lengths = oracle::topk_prefill_row_lengths(s.ks.host_tensor(), s.ke.host_tensor());
  } else {
    const View v = c.lengths == TopkLengths::kDecode2D ? View::contiguous(DType::kI32, {B, c.next_n}, lead)
                                                       : View::contiguous(DType::kI32, {B}, lead);
    s.seq_lens = Buffer("seq_lens", v, 8, kIndexPoison);
    for (size_t i = 0; i < c.seq_lens.size(); ++i) {
      std::memcpy(s.seq_lens.host.data() + lead + 4 * i, &c.seq_lens[i], 4);
    }
    run.lengths = oracle::topk_decode_row_lengths(s.seq_lens.host_tensor(), c.next_n);
  }
  const std::vector<int64_t> starts = topk_row_starts(c);

  // Logits: garbage everywhere, each row's [start, start + n) its values. Far rows: reserved
  // memory, of which only each row of the view (all its columns: a kernel may read a whole row and
  // mask what lies past n) and 64 bytes of garbage either side are backed.
  const int64_t row_stride = topk_logits_row_stride(c);
  const View logits_view(DType::kF32, {c.rows, c.cols}, {row_stride, c.logits_col_stride}, c.logits_lead * 4);
  if (c.logits_row_stride > 0) {
    const int64_t bytes = std::max(logits_view.byte_span().end, logits_view.byte_offset());
    std::vector<ByteSpan> backed;
    for (int64_t r = 0; r < c.rows && c.cols > 0; ++r) {
      const int64_t begin = 4 * (c.logits_lead + r * row_stride);
      const int64_t end = begin + 4 * ((c.cols - 1) * c.logits_col_stride + 1);
      backed.push_back({std::max<int64_t>(0, begin - 64), std::min(bytes, end + 64)});
    }
    s.logits = Buffer::reserved("logits", logits_view, backed, 0);
    for (const ByteSpan& b : backed) {
      for (int64_t at = b.begin; at + 4 <= b.end; at += 4) {
        const float g = topk_garbage(garbage_state);
        std::memcpy(s.logits.bytes() + at, &g, 4);
      }
    }
  } else {
    s.logits = Buffer("logits", logits_view, 12, 0);
    float* all = reinterpret_cast<float*>(s.logits.bytes());
    for (size_t i = 0; i < s.logits.host.size() / 4; ++i) all[i] = topk_garbage(garbage_state);
  }
  float* lg = reinterpret_cast<float*>(s.logits.bytes());
  const std::vector<std::vector<float>> values = topk_row_values(c);
  for (int64_t r = 0; r < c.rows; ++r) {
    const size_t i = static_cast<size_t>(r);
    MLA_REQUIRE(static_cast<int64_t>(values[i].size()) >= run.lengths[i], "topk case: row ", r, " has ",
                values[i].size(), " values for length ", run.lengths[i]);
    float* row = lg + c.logits_lead + r * row_stride + starts[i] * c.logits_col_stride;
    for (int64_t x = 0; x < run.lengths[i]; ++x) row[x * c.logits_col_stride] = values[i][static_cast<size_t>(x)];
    if (declared.rules.neg_inf_masked) {
      // "neg_inf masked": what the caller's logits kernel leaves outside the row: -inf, not garbage.
      float* whole = lg + c.logits_lead + r * row_stride;
      const int64_t n = std::max<int64_t>(run.lengths[i], 0);
      for (int64_t x = 0; x < c.cols; ++x) {
        if (x < starts[i] || x >= starts[i] + n) whole[x * c.logits_col_stride] = -HUGE_VALF;
      }
    }
  }

  // The output: rows [before, before + rows) of a shared buffer, every other byte a pattern.
  const int64_t out_stride = c.k + c.out_row_pad;
  const View out_view(DType::kI32, {c.rows, c.k}, {out_stride, 1}, c.out_rows_before * out_stride * 4);
  s.out = Buffer("topk_indices_buffer", out_view, (c.out_rows_after * out_stride + 2) * 4, 77);
  const int64_t ws_bytes = topk_workspace_bytes(c.rows, c.k, c.cols);
  if (ws_bytes > 0) s.workspace = Buffer("workspace", View::contiguous(DType::kU8, {ws_bytes}), 0, 0);
  s.counts = Buffer("row_class_counts", View::contiguous(DType::kI32, {kTopkRowClassCount}), 0, 0);

  // The tensors a launch takes, made once the testbed has uploaded the buffers.
  const auto tensors = [&] {
    TopkTensors t;
    t.logits = s.logits.device_tensor();
    t.out = s.out.device_tensor();
    t.counts = s.counts.device_tensor();
    if (ws_bytes > 0) t.workspace = s.workspace.device_tensor();
    if (c.prefill()) {
      t.ks = s.ks.device_tensor();
      t.ke = s.ke.device_tensor();
    } else {
      t.seq_lens = s.seq_lens.device_tensor();
    }
    return t;
  };
  Testbed bed(device, c);
  bed.input(s.logits).output(s.out, "out", out_view).output(s.counts, "counts", s.counts.view);
  if (ws_bytes > 0) bed.output(s.workspace, "workspace", s.workspace.view);
  // docs/ops.md 3 leaves the order within a row free, and the split candidates' order with it: a
  // repeated launch (topk_*.deterministic) must select the same set per row.
  if (declared.ties_any) {
    // "ties any": each later launch is judged alone, as the first is below.
    bed.same_across_launches("out", [&]() -> Verdict {
      const TopkReport r = check_topk(s.out.host_tensor(), s.logits.host_tensor(), starts, run.lengths, declared.rules);
      if (r.ok) return std::nullopt;
      return r.describe() + " (each launch judged alone: the contract declares 'ties any')";
    });
  } else {
    bed.same_across_launches("out", Sameness::kRowSets);
  }
  if (ws_bytes > 0) bed.same_across_launches("workspace", Sameness::kNotAsked);
  for (Buffer* b : {&s.seq_lens, &s.ks, &s.ke}) {
    if (!b->host.empty()) bed.input(*b);
  }
  bed.rewrite_after_arm(s.counts, std::vector<uint8_t>(kTopkRowClassCount * 4, 0));  // arming poisoned the counters
  if (Verdict guard = bed.launch([&] { run.path = launch(device, tensors()); })) {
    run.problem = *guard;
    return run;
  }

  std::ostringstream problems;
  const HostTensor out_tensor = s.out.host_tensor();
  const HostTensor logits_tensor = s.logits.host_tensor();
  const TopkReport report = check_topk(out_tensor, logits_tensor, starts, run.lengths, declared.rules);
  if (!report.ok) {
    if (run.path != TopkPath::kUnstated) problems << topk_path_name(run.path) << " path: ";
    problems << report.describe();
  }
  run.problem = problems.str();
  run.counts.resize(kTopkRowClassCount);
  std::memcpy(run.counts.data(), s.counts.host.data(), kTopkRowClassCount * 4);
  for (int64_t r = 0; r < c.rows; ++r) {
    std::vector<int32_t> idx(static_cast<size_t>(c.k));
    std::memcpy(idx.data(), s.out.host.data() + out_view.byte_offset_of({r, 0}), static_cast<size_t>(c.k) * 4);
    const std::vector<float>& row = values[static_cast<size_t>(r)];  // what the logits hold (inputs unchanged)
    run.indices.push_back(std::move(idx));
    run.values.emplace_back(row.begin(), row.begin() + run.lengths[static_cast<size_t>(r)]);
  }
  return run;
}

// The sorted values row r of run selected (-inf for -1), or the reason it cannot say.
Verdict selected_values(const TopkRun& run, size_t r, std::vector<double>& out) {
  const std::vector<double>& v = run.values[r];
  out.clear();
  for (int32_t i : run.indices[r]) {
    if (i >= static_cast<int64_t>(v.size())) return "row " + std::to_string(r) + ": index " + std::to_string(i) + " past n";
    out.push_back(i >= 0 ? v[static_cast<size_t>(i)] : -HUGE_VAL);
  }
  std::sort(out.begin(), out.end());
  return std::nullopt;
}

bool has_nan(const std::vector<double>& v) {
  return std::any_of(v.begin(), v.end(), [](double x) { return std::isnan(x); });
}

Verdict as_verdict(const std::string& what, const TopkRun& run) {
  if (run.problem.empty()) return std::nullopt;
  return what + run.problem;
}

}  // namespace

TopkDeclared topk_declared(const std::string& impl) {
  TopkDeclared d;
  const std::shared_ptr<const Contract> contract = registry().contract(impl);
  if (!contract) return d;
  const auto said = [&](const char* term, const char* word) {
    const auto at = contract->declared.find(term);
    return at != contract->declared.end() && at->second == word;
  };
  d.rules.short_rows_any_order = said("short_rows", "any-order");
  d.rules.neg_inf_masked = said("neg_inf", "masked");
  d.ties_any = said("ties", "any");
  return d;
}

TopkRun run_topk(Device& device, TopkDecodeFn* impl, const TopkCase& c, const TopkDeclared& declared) {
  MLA_REQUIRE(!c.prefill(), "topk_decode: the case has prefill lengths");
  return run_staged(device, c, [&](Device& d, const TopkTensors& t) {
    return impl(d, t.logits, c.next_n, t.seq_lens, c.k, t.out, t.workspace, t.counts);
  }, declared);
}

TopkRun run_topk(Device& device, TopkPrefillFn* impl, const TopkCase& c, const TopkDeclared& declared) {
  MLA_REQUIRE(c.prefill(), "topk_prefill: the case has decode lengths");
  return run_staged(device, c, [&](Device& d, const TopkTensors& t) {
    return impl(d, t.logits, t.ks, t.ke, c.k, t.out, t.workspace, t.counts);
  }, declared);
}

TopkRun run_topk_path(Device& device, TopkLaunchFn* launch, TopkPath path, const TopkCase& c) {
  return run_staged(device, c, [&](Device& d, const TopkTensors& t) {
    const TopkParams p = c.prefill() ? topk_prefill_params(t.logits, t.ks, t.ke, c.k, t.out, t.workspace, t.counts)
                                     : topk_decode_params(t.logits, c.next_n, t.seq_lens, c.k, t.out, t.workspace,
                                                          t.counts);
    launch(d, p, path);
    return path;
  });
}

std::string topk_same_selected_values(const TopkRun& a, const TopkRun& b) {
  std::vector<double> x, y;
  for (size_t r = 0; r < a.indices.size(); ++r) {
    if (has_nan(a.values[r])) continue;
    // The same indices over the same values select the same values: no sort needed (the common case).
    if (r < b.indices.size() && a.indices[r] == b.indices[r] && a.values[r] == b.values[r]) {
      bool inside = true;
      for (int32_t i : a.indices[r]) inside = inside && i < static_cast<int64_t>(a.values[r].size());
      if (inside) continue;
    }
    if (Verdict v = selected_values(a, r, x)) return *v;
    if (Verdict v = selected_values(b, r, y)) return *v;
    if (x != y) return "row " + std::to_string(r) + ": the two runs selected different values";
  }
  return "";
}

Verdict topk_decode_rows_admissible(Device& device, TopkDecodeFn* impl, const TopkCase& c, const TopkDeclared& declared) {
  return as_verdict("", run_topk(device, impl, c, declared));
}

Verdict topk_prefill_rows_admissible(Device& device, TopkPrefillFn* impl, const TopkCase& c,
                                     const TopkDeclared& declared) {
  return as_verdict("", run_topk(device, impl, c, declared));
}

Verdict topk_fast_path_equals_general(Device& device, TopkLaunchFn* launch, const TopkCase& c) {
  MLA_REQUIRE(c.k == kTopkFastK, "fast path property: k is ", c.k, ", the fast path needs ", kTopkFastK);
  const TopkRun fast = run_topk_path(device, launch, TopkPath::kFastK2048, c);
  if (Verdict v = as_verdict("", fast)) return v;
  const TopkRun general = run_topk_path(device, launch, TopkPath::kGeneral, c);
  if (Verdict v = as_verdict("", general)) return v;
  const std::string diff = topk_same_selected_values(fast, general);
  if (!diff.empty()) return "fast vs general path: " + diff;
  return std::nullopt;
}

Verdict topk_split_rows_equal_chunked_general(Device& device, TopkDecodeFn* impl, TopkLaunchFn* launch,
                                              const TopkCase& c) {
  MLA_REQUIRE(c.lengths == TopkLengths::kDecode2D && c.next_n == 1, "split property: needs decode-2d rows, next_n 1");
  // At most kTopkMaxSplits chunks of at most k candidates: k <= 4096 keeps them one unsplit row.
  MLA_REQUIRE(c.k * kTopkMaxSplits <= kTopkSplitRowMinLen, "split property: k ", c.k, " > ",
              kTopkSplitRowMinLen / kTopkMaxSplits, " (the chunks' candidates would be split again)");
  // The whole rows through the implementation (its own path choice, split for n > the minimum).
  const TopkRun whole = run_topk(device, impl, c);
  if (Verdict v = as_verdict("whole rows: ", whole)) return v;
  for (size_t r = 0; r < whole.values.size(); ++r) {
    const std::vector<double>& row = whole.values[r];
    const int64_t n = static_cast<int64_t>(row.size());
    if (n <= kTopkSplitRowMinLen || n <= c.k || has_nan(row)) continue;
    // Each chunk as its own prefill row [0, chunk length), general path.
    const int32_t splits = topk_num_splits(static_cast<int32_t>(n)), chunk = topk_split_chunk_len(static_cast<int32_t>(n));
    TopkCase chunks;
    chunks.lengths = TopkLengths::kPrefill;
    chunks.k = c.k;
    chunks.rows = splits;
    chunks.cols = chunk;
    chunks.seed = c.seed, chunks.warp_size = c.warp_size, chunks.shuffled = c.shuffled;
    for (int32_t s = 0; s < splits; ++s) {
      const int64_t begin = int64_t{s} * chunk, end = std::min<int64_t>(n, begin + chunk);
      chunks.ks.push_back(0);
      chunks.ke.push_back(static_cast<int32_t>(end - begin));
      chunks.patterns.push_back(c.patterns[r]);
      chunks.explicit_rows.emplace_back(row.begin() + begin, row.begin() + end);
    }
    const TopkRun parts = run_topk_path(device, launch, TopkPath::kGeneral, chunks);
    if (Verdict v = as_verdict("row " + std::to_string(r) + "'s chunks, general path: ", parts)) return v;
    // Their selected values, concatenated, as one unsplit decode row.
    TopkCase merge;
    merge.lengths = TopkLengths::kDecode2D;
    merge.k = c.k;
    merge.rows = 1;
    merge.seed = c.seed, merge.warp_size = c.warp_size, merge.shuffled = c.shuffled;
    merge.patterns = {c.patterns[r]};
    merge.explicit_rows.emplace_back();
    for (size_t s = 0; s < parts.indices.size(); ++s) {
      for (int32_t i : parts.indices[s]) {
        if (i >= 0) merge.explicit_rows[0].push_back(static_cast<float>(parts.values[s][static_cast<size_t>(i)]));
      }
    }
    merge.cols = static_cast<int64_t>(merge.explicit_rows[0].size());
    merge.seq_lens = {static_cast<int32_t>(merge.cols)};
    const TopkRun merged = run_topk_path(device, launch, TopkPath::kGeneral, merge);
    if (Verdict v = as_verdict("row " + std::to_string(r) + "'s merged candidates, general path: ", merged)) return v;
    std::vector<double> x, y;
    if (Verdict v = selected_values(whole, r, x)) return v;
    if (Verdict v = selected_values(merged, 0, y)) return v;
    if (x != y) {
      return "row " + std::to_string(r) + " (n " + std::to_string(n) + ", " + std::to_string(splits) +
             " chunks): the split selection takes other values than the general path over its chunks";
    }
  }
  return std::nullopt;
}

TopkCase topk_permuted_case(const TopkCase& c, const std::vector<int>& perm) {
  MLA_REQUIRE(!c.prefill(), "permutation: the case has prefill lengths");
  const int64_t B = c.rows / c.next_n;
  MLA_REQUIRE(static_cast<int64_t>(perm.size()) == B, "permutation: ", perm.size(), " entries for ", B, " requests");
  std::vector<bool> seen(static_cast<size_t>(B), false);
  for (int p : perm) {
    MLA_REQUIRE(p >= 0 && p < B && !seen[static_cast<size_t>(p)], "permutation: ", p, " is not a new request index");
    seen[static_cast<size_t>(p)] = true;
  }
  const std::vector<std::vector<float>> values = topk_row_values(c);
  TopkCase p = c;
  p.explicit_rows.assign(static_cast<size_t>(c.rows), {});
  const int64_t per = c.lengths == TopkLengths::kDecode2D ? c.next_n : 1;  // seq_lens entries per request
  for (int64_t i = 0; i < B; ++i) {
    const int64_t b = perm[static_cast<size_t>(i)];
    for (int64_t j = 0; j < per; ++j) p.seq_lens[static_cast<size_t>(i * per + j)] = c.seq_lens[static_cast<size_t>(b * per + j)];
    for (int64_t j = 0; j < c.next_n; ++j) {
      p.explicit_rows[static_cast<size_t>(i * c.next_n + j)] = values[static_cast<size_t>(b * c.next_n + j)];
      p.patterns[static_cast<size_t>(i * c.next_n + j)] = c.patterns[static_cast<size_t>(b * c.next_n + j)];
    }
  }
  return p;
}

Verdict topk_decode_permutation_commutes(Device& device, TopkDecodeFn* impl, const TopkCase& c,
                                         const std::vector<int>& perm, const TopkDeclared& declared) {
  const TopkCase p = topk_permuted_case(c, perm);
  const TopkRun once = run_topk(device, impl, c, declared);
  if (Verdict v = as_verdict("original order: ", once)) return v;  // a stray write, say: its values are not read
  const TopkRun moved = run_topk(device, impl, p, declared);
  if (Verdict v = as_verdict("permuted: ", moved)) return v;
  std::vector<double> x, y;
  for (size_t i = 0; i < perm.size(); ++i) {
    for (int64_t j = 0; j < c.next_n; ++j) {
      const size_t r1 = static_cast<size_t>(perm[i] * c.next_n + j), r2 = static_cast<size_t>(int64_t(i) * c.next_n + j);
      if (has_nan(once.values[r1])) continue;
      if (Verdict v = selected_values(once, r1, x)) return "original order: " + *v;
      if (Verdict v = selected_values(moved, r2, y)) return "permuted: " + *v;
      if (x != y) {
        return "request " + std::to_string(perm[i]) + " moved to position " + std::to_string(i) + ": its row " +
               std::to_string(j) + " selects other values than in the original order";
      }
    }
  }
  return std::nullopt;
}

void register_topk_properties(PropertyRegistry& r) {
  r.add(make_property<TopkCase>(
      "topk_decode.rows_admissible", "topk_decode",
      "every decode row is an admissible top-k of its [0, n); only the output view is written", topk_decode_from_text,
      [](Device& device, const std::string& impl, const TopkCase& c) {
        return topk_decode_rows_admissible(device, registry().find<TopkDecodeFn>(impl), c, topk_declared(impl));
      }));
  r.add(make_property<TopkCase>(
      "topk_prefill.rows_admissible", "topk_prefill",
      "every prefill row is an admissible top-k of [ks, ke), relative to ks; only the output view is written",
      topk_prefill_from_text, [](Device& device, const std::string& impl, const TopkCase& c) {
        return topk_prefill_rows_admissible(device, registry().find<TopkPrefillFn>(impl), c, topk_declared(impl));
      }));
  r.add(make_property<TopkCase>(
      "topk_decode.far_rows", "topk_decode",
      "decode rows spread across byte 2^31, 2^32 or 2^33 of reserved logits (a row stride of up to 1.5 G "
      "elements) are each an admissible top-k; nothing outside a row's span is read",
      topk_decode_far_from_text, [](Device& device, const std::string& impl, const TopkCase& c) {
        return topk_decode_rows_admissible(device, registry().find<TopkDecodeFn>(impl), c, topk_declared(impl));
      }));
  r.add(make_property<TopkCase>(
      "topk_prefill.far_rows", "topk_prefill",
      "prefill rows spread across byte 2^31, 2^32 or 2^33 of reserved logits are each an admissible top-k of "
      "[ks, ke); nothing outside a row's span is read",
      topk_prefill_far_from_text, [](Device& device, const std::string& impl, const TopkCase& c) {
        return topk_prefill_rows_admissible(device, registry().find<TopkPrefillFn>(impl), c, topk_declared(impl));
      }));
  using Permuted = std::pair<TopkCase, std::vector<int>>;
  r.add(make_property<Permuted>(
      "topk_decode.permutation_commutes", "topk_decode",
      "reordering the requests (seq_lens and logits rows) reorders the rows' selected values",
      [](const CaseText& t) {
        TopkCase c = topk_decode_from_text(t);
        std::vector<int> perm = t.permutation("permutation", c.rows / c.next_n);
        return Permuted{std::move(c), std::move(perm)};
      },
      [](Device& device, const std::string& impl, const Permuted& p) {
        return topk_decode_permutation_commutes(device, registry().find<TopkDecodeFn>(impl), p.first, p.second,
                                                topk_declared(impl));
      }));
  r.add(make_ref_property<TopkCase>(
      "topk_decode.fast_path_equals_general", "topk_decode",
      "ref only: at k = 2048 the fast path and the general path select the same values",
      [](const CaseText& t) { return topk_fast_k_from_text(t, false); },
      [](Device& device, const std::string&, const TopkCase& c) {
        return topk_fast_path_equals_general(device, &launch_topk, c);
      }));
  r.add(make_ref_property<TopkCase>(
      "topk_prefill.fast_path_equals_general", "topk_prefill",
      "ref only: at k = 2048 the fast path and the general path select the same values",
      [](const CaseText& t) { return topk_fast_k_from_text(t, true); },
      [](Device& device, const std::string&, const TopkCase& c) {
        return topk_fast_path_equals_general(device, &launch_topk, c);
      }));
  r.add(make_ref_property<TopkCase>(
      "topk_decode.split_rows_equal_chunked_general", "topk_decode",
      "ref only: a row split in chunks selects what the general path selects over the chunks' selections",
      topk_split_from_text, [](Device& device, const std::string& impl, const TopkCase& c) {
        return topk_split_rows_equal_chunked_general(device, registry().find<TopkDecodeFn>(impl), &launch_topk, c);
      }));
}

}  // namespace mlacheck
