// Properties of the indexer's K-cache gather (properties/k_cache_gather_properties.h).
#include "properties/k_cache_gather_properties.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "core/fp16.h"
#include "harness/testbed.h"
#include "kernels/k_cache_insert_glue.h"
#include "kernels/registry.h"
#include "oracle/k_cache_gather.h"
#include "oracle/k_cache_insert.h"
#include "properties/random_values.h"

namespace mlacheck {

using kernels::Device;

namespace {

constexpr uint8_t kLensPoison = 0x7F;  // int32 0x7F7F7F7F around cu_seq_lens
constexpr uint8_t kKeyPoison = 0x7F;   // bf16 0x7F7F around the round trip's keys

std::string str(int64_t x) { return std::to_string(x); }
std::string hex(const uint8_t* b) {
  char s[16];
  std::snprintf(s, sizeof s, "%02x%02x%02x%02x", b[3], b[2], b[1], b[0]);
  return std::string("0x") + s;
}

struct Staged {
  Buffer cache, table, cu, dst_k, dst_scale;
  std::vector<int32_t> cu_host;

  explicit Staged(const KCacheGatherCase& c)
      : cache("kv_cache", View(DType::kU8, {c.num_blocks(), c.block_stride()}, {c.block_stride(), 1}, 4 * c.cache_lead),
              8, 0),
        table("block_table", View(DType::kI32, {c.B(), c.table_cols}, {c.table_row_stride(), 1}, 4 * c.table_lead),
              4 * c.table_row_pad + 8, 0),
        cu("cu_seq_lens", View::contiguous(DType::kI32, {c.B() + 1}, 4), 8, kLensPoison),
        dst_k("dst_k", View(DType::kU8, {c.rows(), c.D}, {c.dst_row_stride(), 1}, c.dst_lead * c.dst_row_stride()), 16, 0),
        dst_scale("dst_scale", View::contiguous(DType::kF32, {c.rows()}, 4 * c.scale_lead), 8, 0),
        cu_host(c.cu_seq_lens()) {
    std::mt19937_64 rng(c.seed);
    // Every byte of the cache, its padding and lead included, and what the outputs held before.
    for (int64_t at = 0; at < cache.size(); ++at) cache.bytes()[at] = static_cast<uint8_t>(rng());
    for (int64_t at = 0; at < dst_k.size(); ++at) dst_k.bytes()[at] = static_cast<uint8_t>(rng());
    for (int64_t at = 0; at < dst_scale.size(); ++at) dst_scale.bytes()[at] = static_cast<uint8_t>(rng());
    // The table from its buffer's first entry: padding, unused columns and lead as the case says,
    // and the entries past the last row's W too.
    const std::vector<int32_t> entries = c.table_entries();
    std::memcpy(table.bytes(), entries.data(), 4 * entries.size());
    for (int64_t at = static_cast<int64_t>(4 * entries.size()); at + 4 <= table.size(); at += 4) {
      std::memcpy(table.bytes() + at, &entries[static_cast<size_t>(at / 4) % entries.size()], 4);
    }
    for (int64_t b = 0; b <= c.B(); ++b) cu.put<int32_t>({b}, cu_host[static_cast<size_t>(b)]);
  }
  oracle::KCacheGatherInputs oracle_inputs(const KCacheGatherCase& c) {
    oracle::PagedIndexerCache p;
    p.blocks = cache.host_tensor();
    p.block_size = c.block_size;
    p.head_dim = c.D;
    return {p, table.host_tensor(), cu.host_tensor()};
  }
};

// Runs the gather in the testbed; the outputs' host bytes then hold the device's.
Verdict run_gather(Device& device, KCacheGatherFn* gather, const KCacheGatherCase& c, Staged& s) {
  Testbed bed(device, c);
  bed.input(s.cache, Content::kNonZero).input(s.table).input(s.cu);
  const int64_t total = c.total();
  if (total > 0) {
    const View& k = s.dst_k.view;
    bed.output(s.dst_k, "dst_k rows", View(DType::kU8, {total, c.D}, {k.stride(0), 1}, k.byte_offset()));
    bed.output(s.dst_scale, "dst_scale rows", View::contiguous(DType::kF32, {total}, s.dst_scale.view.byte_offset()));
  } else {
    bed.input(s.dst_k).input(s.dst_scale);  // no row to write: every byte stays
  }
  return bed.launch([&] {
    gather(device, s.cache.device_tensor(), s.table.device_tensor(), s.cu.device_tensor(), s.dst_k.device_tensor(),
           s.dst_scale.device_tensor(), c.block_size);
  });
}

std::string where(const KCacheGatherCase& c, int64_t t, int64_t b, int64_t p, int64_t block) {
  return "row " + str(t) + " (request " + str(b) + " of " + str(c.B()) + ", token " + str(p) + ": block " + str(block) +
         ", slot " + str(p % c.block_size) + ")";
}

// Row t's codes and scale against want_codes and want_scale; what differs first, or nullopt.
Verdict compare_row(const KCacheGatherCase& c, Staged& s, int64_t t, const uint8_t* want_codes,
                    const uint8_t* want_scale, const std::string& at, const char* whose) {
  const uint8_t* got = s.dst_k.bytes() + s.dst_k.view.byte_offset_of({t, 0});
  for (int64_t d = 0; d < c.D; ++d) {
    if (got[d] != want_codes[d]) {
      return at + ": code " + str(d) + " is " + str(got[d]) + ", " + whose + " " + str(want_codes[d]) + " (of " +
             str(c.D) + " codes)";
    }
  }
  const uint8_t* scale = s.dst_scale.bytes() + s.dst_scale.view.byte_offset_of({t});
  if (std::memcmp(scale, want_scale, 4) != 0) {
    float g = 0, w = 0;
    std::memcpy(&g, scale, 4);
    std::memcpy(&w, want_scale, 4);
    return at + ": scale " + hex(scale) + " (" + std::to_string(g) + "), " + whose + " " + hex(want_scale) + " (" +
           std::to_string(w) + ")";
  }
  return std::nullopt;
}

}  // namespace

Verdict k_cache_gather_equals_oracle(Device& device, KCacheGatherFn* gather, const KCacheGatherCase& c) {
  Staged s(c);
  const std::vector<oracle::GatheredRow> want = oracle::indexer_k_cache_gather(s.oracle_inputs(c));
  if (Verdict v = run_gather(device, gather, c, s)) return v;
  for (int64_t t = 0; t < static_cast<int64_t>(want.size()); ++t) {
    const oracle::GatheredRow& r = want[static_cast<size_t>(t)];
    if (Verdict v = compare_row(c, s, t, r.codes.data(), r.scale, where(c, t, r.request, r.position, r.block),
                                "the cache's")) {
      return v;
    }
  }
  return std::nullopt;
}

Verdict k_cache_gather_inverts_insert(Device& device, KCacheGatherFn* gather, const KCacheGatherCase& c) {
  Staged s(c);
  const int64_t total = c.total();
  // Each row's key, and the slot its token lives in: the insert writes it there.
  Buffer k("k", View::contiguous(DType::kBF16, {total, c.D}, 2 * c.D), 16, kKeyPoison);
  Buffer slots("slot_mapping", View::contiguous(DType::kI32, {total}, 4), 8, kLensPoison);
  std::mt19937_64 rng(c.seed ^ 0x1e5e27ull);
  std::vector<int64_t> block_of(static_cast<size_t>(total));
  for (int64_t b = 0, t = 0; b < c.B(); ++b) {
    for (int64_t p = 0; p < c.seq_lens[static_cast<size_t>(b)]; ++p, ++t) {
      const int32_t block = s.table.host_tensor().at<int32_t>({b, p / c.block_size});
      block_of[static_cast<size_t>(t)] = block;
      slots.put<int32_t>({t}, static_cast<int32_t>(block * c.block_size + p % c.block_size));
      for (int64_t d = 0; d < c.D; ++d) {
        float x = uniform(rng, -1.0f, 1.0f);
        if (x == 0.0f) x = 0.5f;
        k.put<uint16_t>({t, d}, float_to_bf16(std::ldexp(x, c.magnitude_log2)));
      }
    }
  }
  if (total > 0) {
    auto* insert = kernels::registry().find<decltype(kernels::indexer_k_cache_insert)>("indexer_k_cache_insert@ref");
    Testbed bed(device, c);
    bed.input(k, Content::kNonZero).input(slots).output(s.cache);
    if (Verdict v = bed.launch([&] {
          insert(device, k.device_tensor(), slots.device_tensor(), s.cache.device_tensor(), c.block_size, c.ue8m0);
        })) {
      return "the insert (indexer_k_cache_insert@ref) that fills the cache: " + *v;
    }
  }
  if (Verdict v = run_gather(device, gather, c, s)) return v;
  const oracle::ScaleFormat format = c.ue8m0 ? oracle::ScaleFormat::kUe8m0 : oracle::ScaleFormat::kFp32;
  for (int64_t b = 0, t = 0; b < c.B(); ++b) {
    for (int64_t p = 0; p < c.seq_lens[static_cast<size_t>(b)]; ++p, ++t) {
      const oracle::QuantizedKey q = oracle::quantize_indexer_key(k.host_tensor(), t, format);
      uint8_t scale[4];
      std::memcpy(scale, &q.scale, 4);
      if (Verdict v = compare_row(c, s, t, q.codes.data(), scale, where(c, t, b, p, block_of[static_cast<size_t>(t)]),
                                  "the inserted key's")) {
        return *v + (c.ue8m0 ? " (inserted with a ue8m0 scale)" : " (inserted with an fp32 scale)");
      }
    }
  }
  return std::nullopt;
}

void register_k_cache_gather_properties(PropertyRegistry& r) {
  r.add(make_property<KCacheGatherCase>(
      "indexer_k_cache_gather.equals_oracle", "indexer_k_cache_gather",
      "each row below cu_seq_lens[B] holds its token's fp8 codes and scale byte for byte; spare rows, row padding and "
      "the cache unchanged",
      read_case<KCacheGatherCase>, [](Device& device, const std::string& impl, const KCacheGatherCase& c) {
        return k_cache_gather_equals_oracle(device, kernels::registry().find<KCacheGatherFn>(impl), c);
      }));
  r.add(make_property<KCacheGatherCase>(
      "indexer_k_cache_gather.inverts_insert", "indexer_k_cache_gather",
      "keys written into the requests' slots by indexer_k_cache_insert@ref come back: each row the codes and scale "
      "the insert made of its token's key",
      read_case<KCacheGatherCase>, [](Device& device, const std::string& impl, const KCacheGatherCase& c) {
        return k_cache_gather_inverts_insert(device, kernels::registry().find<KCacheGatherFn>(impl), c);
      }));
}

}  // namespace mlacheck
