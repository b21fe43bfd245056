// Properties of the indexer's K-cache insert (properties/k_cache_insert_properties.h).
#include "properties/k_cache_insert_properties.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "core/compare.h"
#include "core/fp16.h"
#include "core/reserved_buffer.h"
#include "harness/testbed.h"
#include "kernels/registry.h"
#include "oracle/k_cache_insert.h"
#include "properties/random_values.h"

namespace mlacheck {

using kernels::Device;

namespace {

constexpr uint8_t kKeyPoison = 0x7F;   // bf16 0x7F7F, 3.4e38: a read past a key row spoils its amax
constexpr uint8_t kSlotPoison = 0x7F;  // int32 0x7F7F7F7F around the slot mapping

std::string str(int64_t x) { return std::to_string(x); }

// Key value (i, d) of the staged k, decoded from its bf16 bytes.
float key_value(const Buffer& k, int64_t i, int64_t d) {
  uint16_t bits = 0;
  std::memcpy(&bits, k.host.data() + k.view.byte_offset_of({i, d}), 2);
  return bf16_to_float(bits);
}

// The cache: past 256 MiB (far slots) reserved memory with the case's blocks backed and writable
// (core/reserved_buffer.h), so a write anywhere else faults and a read anywhere else is seen.
Buffer stage_cache(const KCacheInsertCase& c) {
  const View view(DType::kU8, {c.cache_blocks(), c.block_stride()}, {c.block_stride(), 1}, 4 * c.cache_lead);
  if (c.block_base == 0) return Buffer("kv_cache", view, 8, 0);
  return Buffer::reserved("kv_cache", view, {c.own_bytes()}, 0, /*writable=*/true);
}

// A copy of the staged cache's bytes, laid out as the cache (a reserved one's backed range only):
// what the oracle writes into.
class CacheCopy {
 public:
  CacheCopy(const Buffer& cache, const KCacheInsertCase& c) {
    if (c.block_base == 0) {  // dense
      dense_.assign(cache.bytes(), cache.bytes() + cache.size());
      return;
    }
    lazy_ = std::make_unique<LazyBytes>(cache.size());
    const ByteSpan own = c.own_bytes();
    lazy_->open(own.begin, own.end);
    std::memcpy(lazy_->data() + own.begin, cache.bytes() + own.begin, static_cast<size_t>(own.size()));
  }
  uint8_t* data() { return lazy_ ? lazy_->data() : dense_.data(); }

 private:
  std::vector<uint8_t> dense_;
  std::unique_ptr<LazyBytes> lazy_;
};

struct Staged {
  Buffer k, slots, cache;
  std::vector<int32_t> mapping;

  explicit Staged(const KCacheInsertCase& c)
      : k("k", View(DType::kBF16, {c.T, c.D}, {c.D + c.k_row_pad, 1}, 2 * c.k_lead * (c.D + c.k_row_pad)), 16,
          kKeyPoison),
        slots("slot_mapping", View::contiguous(DType::kI32, {c.T}, 4), 8, kSlotPoison),
        cache(stage_cache(c)),
        mapping(c.slot_mapping()) {
    std::mt19937_64 rng(c.seed);
    for (int64_t i = 0; i < c.T; ++i) {
      const bool zero = c.zero_keys && rng() % 4 == 0;
      for (int64_t d = 0; d < c.D; ++d) {
        float x = uniform(rng, -1.0f, 1.0f);
        if (x == 0.0f) x = 0.5f;  // a key is all zero only when the case says so
        k.put<uint16_t>({i, d}, float_to_bf16(zero ? 0.0f : std::ldexp(x, c.magnitude_log2)));
      }
      slots.put<int32_t>({i}, mapping[static_cast<size_t>(i)]);
    }
    // What the other slots hold (a far cache: its backed blocks; every other byte is unbacked).
    const ByteSpan fill = c.block_base == 0 ? ByteSpan{0, cache.size()} : c.own_bytes();
    for (int64_t at = fill.begin; at < fill.end; ++at) cache.bytes()[at] = static_cast<uint8_t>(rng());
  }
  oracle::PagedIndexerCache oracle_cache(uint8_t* bytes, const KCacheInsertCase& c) const {
    oracle::PagedIndexerCache p;
    p.blocks = HostTensor(bytes, cache.view);
    p.block_size = c.block_size;
    p.head_dim = c.D;
    return p;
  }
};

View codes_view(const KCacheInsertCase& c, int64_t slot, int64_t lead) {
  return View::contiguous(DType::kU8, {c.D}, lead + (slot / c.block_size) * c.block_stride() + (slot % c.block_size) * c.D);
}
View scale_view(const KCacheInsertCase& c, int64_t slot, int64_t lead) {
  return View::contiguous(DType::kU8, {4}, lead + (slot / c.block_size) * c.block_stride() + c.block_size * c.D +
                                               4 * (slot % c.block_size));
}

// Runs the insert in the testbed; the cache's host bytes then hold the device's.
Verdict run_insert(Device& device, KCacheInsertFn* insert, const KCacheInsertCase& c, Staged& s) {
  Testbed bed(device, c);
  bed.input(s.k, c.zero_keys ? Content::kAny : Content::kNonZero).input(s.slots);
  const int64_t lead = s.cache.view.byte_offset();
  for (int32_t slot : s.mapping) {
    if (slot < 0) continue;
    bed.output(s.cache, "slot " + str(slot) + " codes", codes_view(c, slot, lead));
    bed.output(s.cache, "slot " + str(slot) + " scale", scale_view(c, slot, lead));
  }
  if (std::all_of(s.mapping.begin(), s.mapping.end(), [](int32_t x) { return x < 0; })) bed.input(s.cache);
  return bed.launch([&] {
    insert(device, s.k.device_tensor(), s.slots.device_tensor(), s.cache.device_tensor(), c.block_size, c.ue8m0);
  });
}

oracle::ScaleFormat format(const KCacheInsertCase& c) {
  return c.ue8m0 ? oracle::ScaleFormat::kUe8m0 : oracle::ScaleFormat::kFp32;
}

}  // namespace

Verdict k_cache_insert_equals_oracle(Device& device, KCacheInsertFn* insert, const KCacheInsertCase& c) {
  Staged s(c);
  CacheCopy want(s.cache, c);
  oracle::indexer_k_cache_insert({s.k.host_tensor(), s.slots.host_tensor(), format(c)}, s.oracle_cache(want.data(), c));
  if (Verdict v = run_insert(device, insert, c, s)) return v;
  const int64_t lead = s.cache.view.byte_offset();
  for (int64_t i = 0; i < c.T; ++i) {
    const int32_t slot = s.mapping[static_cast<size_t>(i)];
    if (slot < 0) continue;
    const std::string where = "token " + str(i) + " (slot " + str(slot) + ": block " + str(slot / c.block_size) +
                              ", slot " + str(slot % c.block_size) + ")";
    const int64_t at = codes_view(c, slot, lead).byte_offset();
    for (int64_t d = 0; d < c.D; ++d) {
      const uint8_t got = s.cache.bytes()[at + d], exp = want.data()[at + d];
      if (got != exp) {
        return where + ": code " + str(d) + " is " + str(got) + ", the oracle's " + str(exp) + " (of " + str(c.D) +
               " codes)";
      }
    }
    float got = 0, exp = 0;
    const int64_t sat = scale_view(c, slot, lead).byte_offset();
    std::memcpy(&got, s.cache.bytes() + sat, 4);
    std::memcpy(&exp, want.data() + sat, 4);
    if (std::memcmp(&got, &exp, 4) != 0) {
      // The value and its bits (an fp32 scale's): the two may be an ulp apart.
      const auto text = [](float f) {
        char bits[16];
        std::snprintf(bits, sizeof bits, "0x%08x", float_bits(f));
        return value_text(f) + " (" + bits + ")";
      };
      return where + ": scale " + text(got) + ", the oracle's " + text(exp) + (c.ue8m0 ? " (ue8m0)" : " (fp32)");
    }
  }
  return std::nullopt;
}

Verdict k_cache_insert_reader_gets_the_keys(Device& device, KCacheInsertFn* insert, const KCacheInsertCase& c) {
  Staged s(c);
  if (Verdict v = run_insert(device, insert, c, s)) return v;
  const oracle::PagedIndexerCache read = s.oracle_cache(s.cache.bytes(), c);
  for (int64_t i = 0; i < c.T; ++i) {
    const int32_t slot = s.mapping[static_cast<size_t>(i)];
    if (slot < 0) continue;
    const std::vector<double> got = oracle::read_indexer_key(read, slot);
    float amax = 0;
    for (int64_t d = 0; d < c.D; ++d) amax = std::max(amax, std::fabs(key_value(s.k, i, d)));
    // The widest scale the spec allows (ue8m0 rounds up to at most twice fp32's), then half an
    // e4m3 step: 2^-4 of the value for normals, 2^-10 of the scale for subnormals.
    const double scale = 2.0 * std::max(amax, 1e-4f) / 448.0;
    for (int64_t d = 0; d < c.D; ++d) {
      const double x = key_value(s.k, i, d);
      const double bound = std::max(std::fabs(x) * 0x1p-4, scale * 0x1p-10) * (1 + 1e-6);
      if (!(std::fabs(got[static_cast<size_t>(d)] - x) <= bound)) {
        return "token " + str(i) + " read back from slot " + str(slot) + " in the reader's layout: value " + str(d) +
               " is " + std::to_string(got[static_cast<size_t>(d)]) + ", the key's " + std::to_string(x) +
               " (more than fp8 rounding apart)";
      }
    }
  }
  return std::nullopt;
}

void register_k_cache_insert_properties(PropertyRegistry& r) {
  r.add(make_property<KCacheInsertCase>(
      "indexer_k_cache_insert.equals_oracle", "indexer_k_cache_insert",
      "each token's slot holds the oracle's fp8 codes and scale byte for byte; no other byte of the cache changes",
      read_case<KCacheInsertCase>, [](Device& device, const std::string& impl, const KCacheInsertCase& c) {
        return k_cache_insert_equals_oracle(device, kernels::registry().find<KCacheInsertFn>(impl), c);
      }));
  r.add(make_property<KCacheInsertCase>(
      "indexer_k_cache_insert.far_slots", "indexer_k_cache_insert",
      "slots written past byte 2^31 or 2^32 of an 8 GiB cache, only the case's blocks backed: the oracle's codes and scales, nothing else written",
      k_cache_insert_far_from_text, [](Device& device, const std::string& impl, const KCacheInsertCase& c) {
        return k_cache_insert_equals_oracle(device, kernels::registry().find<KCacheInsertFn>(impl), c);
      }));
  r.add(make_property<KCacheInsertCase>(
      "indexer_k_cache_insert.reader_gets_the_keys", "indexer_k_cache_insert",
      "each token read back in the paged reader's block-flat layout is its key within fp8 rounding",
      read_case<KCacheInsertCase>, [](Device& device, const std::string& impl, const KCacheInsertCase& c) {
        return k_cache_insert_reader_gets_the_keys(device, kernels::registry().find<KCacheInsertFn>(impl), c);
      }));
}

}  // namespace mlacheck
