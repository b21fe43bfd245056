// Sparse MLA decode over FlashMLA's fp8_ds_mla cache (docs/ops.md 4), one source for every backend.
//
// Work split. Grid (ceil(h / 16) head groups, s_q, b); a block of 256 threads owns 16 heads of one
// query token (b, s) and walks the first topk_length[b] entries of indices[b, s, :] in tiles of 32
// with an online softmax, so a row of 2048 entries is one pass over its keys per head group. The
// 16 x 512 fp32 output accumulator lives in registers (4 heads x 8 columns per thread); the running
// max and sum of each head are replicated in the 16 threads that do its softmax.
//
// Dynamic shared memory (kSparseMlaSharedBytes, fp32): q of the 16 heads [16][576] (decoded once;
// heads past h are zero), the tile's decoded keys [32][576], probabilities [16][32], per-head
// rescale factors and final max / sum, and the tile's four latent scales per key.
//
// Per tile of 32 entries:
//   1. 32 threads read an index each, validate it (0 <= slot < num_blocks * page, inside the row's
//      length) and fetch its token's 16 scale bytes; a tile without a valid entry is skipped;
//   2. the block decodes the valid keys with 16-byte global loads (656 = 41 x 16: 32 chunks of 16
//      fp8 codes, 1 of scales, 8 of rope), fp8 x tile scale and bf16 rope to fp32; invalid keys are
//      never read and never used;
//   3. scores: a thread is one of 8 lanes along the head dimension of a 4-head x 4-key register
//      tile (8 x 32 tiles = 256 threads); lane l sums dims 32 i + 4 l .. + 3 (i < 18) with 16-byte
//      shared loads, 8 loads feeding 64 FMAs, then a reduce-scatter across the 8 lanes (shuffles
//      4, 2, 1: 14 shuffles) leaves each lane two finished scores; invalid entries score -inf;
//   4. softmax: 16 threads per head, two keys each: the tile's max, the new running max m,
//      p = exp(s - m), the rescale factor exp(m_old - m) and the running sum (width-16 butterflies);
//   5. output: a thread is one of 4 head slots x 64 column lanes and owns heads slot + 4 j and
//      columns 4 lane .. + 3 and 256 + 4 lane .. + 3; it rescales, then for each valid key adds
//      p x V with two 16-byte shared loads of V and four broadcast loads of p per 32 FMAs.
// At the end: lse = m + ln(sum) and out = acc / sum, times 1 / (1 + exp(sink - lse)) with a sink;
// a head whose row had no valid entry gets out = 0 and lse = +inf. Index arithmetic per entry is
// 32-bit (one division by the page size per entry, none in the inner loops); byte offsets are
// 64-bit. No warp-size assumption: every shuffle stays inside an aligned group of 8 or 16 lanes.
#include <cmath>

#include "core/backend/simt.h"
#include "kernels/sparse_mla.h"

namespace mlacheck::kernels::MLA_BACKEND_NS {
namespace {

constexpr int kHeads = kSparseMlaHeadsPerBlock;
constexpr int kTile = kSparseMlaTileKeys;
constexpr int kThreads = kSparseMlaThreads;
constexpr int kDim = kSparseMlaHeadDim;
constexpr int kLatent = kSparseMlaLatent;
constexpr int kLatentChunks = kLatent / 16;      // 16 fp8 codes per 16-byte chunk
constexpr int kRopeChunks = kSparseMlaRope / 8;  // 8 bf16 per chunk
constexpr int kChunksPerKey = kLatentChunks + kRopeChunks;
constexpr int kScaleByte = kLatent;      // the four fp32 tile scales
constexpr int kRopeByte = kLatent + 16;  // the 64 bf16 rope values
// Score phase: 8 lanes along the head dimension x (4 heads x 4 keys) register tiles.
constexpr int kDLanes = 8;
constexpr int kScoreHeads = 4, kScoreKeys = 4;
constexpr int kHeadQuads = kHeads / kScoreHeads;  // head h = quad + 4 j
constexpr int kKeyOcts = kTile / kScoreKeys;      // key t = oct + 8 i
// Softmax phase: 16 threads per head, 2 keys each.
constexpr int kSoftmaxLanes = kThreads / kHeads;
// Output phase: 4 head slots x 64 column lanes, 4 heads x 8 columns each.
constexpr int kHeadSlots = 4;
constexpr int kColLanes = kThreads / kHeadSlots;
constexpr int kOutHeads = kHeads / kHeadSlots;
static_assert(kThreads == kDLanes * kHeadQuads * kKeyOcts, "score tiles cover the block");
static_assert(kDim % (4 * kDLanes) == 0, "every lane takes whole float4s");
static_assert(kSoftmaxLanes * 2 == kTile && kSoftmaxLanes == 16, "two keys per softmax thread");
static_assert(kColLanes * 8 == kLatent && kHeadSlots == kScoreHeads, "output columns cover V");

// 16 bytes of global memory, for one vector load.
struct alignas(16) Bytes16 {
  uint32_t word[4];
};
MLA_DEVICE Bytes16 load16(const uint8_t* p) { return *reinterpret_cast<const Bytes16*>(p); }


MLA_DEVICE float negative_infinity() { return bits_float(0xFF800000u); }
MLA_DEVICE float positive_infinity() { return bits_float(0x7F800000u); }
MLA_DEVICE float max_f(float a, float b) { return a > b ? a : b; }

// The block's dynamic shared memory as kSparseMlaSharedBytes lays it out, carved from one array so
// every access stays bounds-checked on the host backend.
struct Smem {
  simt::shared_array<float> s;
  static constexpr int64_t kQ = 0;
  static constexpr int64_t kK = kQ + int64_t(kHeads) * kDim;
  static constexpr int64_t kP = kK + int64_t(kTile) * kDim;
  static constexpr int64_t kAlpha = kP + kHeads * kTile;
  static constexpr int64_t kMax = kAlpha + kHeads;
  static constexpr int64_t kSum = kMax + kHeads;
  static constexpr int64_t kScale = kSum + kHeads;
  static constexpr int64_t kEnd = kScale + kTile * 4;
  static_assert(4 * kEnd == kSparseMlaSharedBytes, "layout matches the launch's byte count");

  MLA_DEVICE static int64_t q_at(int h, int d) { return kQ + int64_t(h) * kDim + d; }
  MLA_DEVICE static int64_t key_at(int t, int d) { return kK + int64_t(t) * kDim + d; }
  MLA_DEVICE simt::shared_array<float>::reference p(int h, int t) const { return s[kP + h * kTile + t]; }
  MLA_DEVICE simt::shared_array<float>::reference alpha(int h) const { return s[kAlpha + h]; }
  MLA_DEVICE simt::shared_array<float>::reference max(int h) const { return s[kMax + h]; }
  MLA_DEVICE simt::shared_array<float>::reference sum(int h) const { return s[kSum + h]; }
  MLA_DEVICE simt::shared_array<float>::reference scale(int t, int i) const { return s[kScale + t * 4 + i]; }
};

// One round of the score reduce-scatter: lanes whose `offset` bit is set keep the upper half of
// v[0, 2 kHalf) and send the lower half to their partner, which keeps the lower half; each adds
// what it receives, so after rounds 4, 2, 1 lane l holds the finished sums of v[2 l] and v[2 l + 1].
template <int kHalf>
MLA_DEVICE void reduce_scatter_round(float* v, int offset, bool upper) {
  for (int e = 0; e < kHalf; ++e) {
    const float send = upper ? v[e] : v[e + kHalf];
    const float keep = upper ? v[e + kHalf] : v[e];
    v[e] = keep + simt::shfl_xor(send, offset);
  }
}

template <SparseMlaBug kBug>
MLA_KERNEL void sparse_mla_decode_kernel(SparseMlaParams p) {
  MLA_DYNAMIC_SHARED(float, smem);
  MLA_SHARED(int64_t, token_at, kTile);  // byte offset of the tile's key t in kv, -1: invalid
  const Smem sm{smem};
  const int tid = static_cast<int>(simt::thread_idx().x);
  const int h0 = static_cast<int>(simt::block_idx().x) * kHeads;
  const int s = static_cast<int>(simt::block_idx().y), b = static_cast<int>(simt::block_idx().z);
  const int group_heads = p.heads - h0 < kHeads ? p.heads - h0 : kHeads;  // >= 1
  const int64_t row = int64_t(b) * p.s_q + s;
  const int32_t* indices = p.indices + row * p.topk;
  int n = p.topk;  // entries of the row that count; the glue cannot see topk_length, so clamp
  if (p.topk_length != nullptr) {
    const int32_t len = p.topk_length[b];
    n = len < 0 ? 0 : (len < p.topk ? len : p.topk);
  }
  const int64_t num_slots = int64_t(p.num_blocks) * p.page;

  // q of the group's heads, decoded once; heads past h are zero.
  const uint16_t* q = p.q + (row * p.heads + h0) * kDim;
  for (int i = tid; i < kHeads * kDim; i += kThreads) {
    const int h = i / kDim;
    sm.s[Smem::kQ + i] = h < group_heads ? simt::bf16_to_float(q[i]) : 0.0f;
  }

  // Score phase roles: lane along d, head quad, key oct; heads quad + 4 j for j < score_heads.
  const int d_lane = tid % kDLanes, quad = (tid / kDLanes) % kHeadQuads, oct = tid / (kDLanes * kHeadQuads);
  const int score_heads = group_heads > quad ? (group_heads - quad + kHeadQuads - 1) / kHeadQuads : 0;
  // Softmax phase roles: head sh, keys su and su + 16.
  const int sh = tid / kSoftmaxLanes, su = tid % kSoftmaxLanes;
  const bool softmax_active = sh < group_heads;
  float m_run = negative_infinity(), l_run = 0.0f;
  // Output phase roles: heads slot + 4 j for j < out_heads, columns 4 lane.. and 256 + 4 lane...
  const int slot = tid / kColLanes, col = 4 * (tid % kColLanes);
  const int out_heads = group_heads > slot ? (group_heads - slot + kHeadSlots - 1) / kHeadSlots : 0;
  float acc[kOutHeads][8] = {};

  // The row's tiles, ceil(n / kTile). H1 counts them as (n - 1) / kTile + 1 in unsigned 64-bit
  // arithmetic: the same for every n > 0, and 2^59 tiles of nothing for an empty row.
  // H2 does the same in unsigned 32-bit: 2^27 tiles.
  const uint64_t tiles = kBug == SparseMlaBug::kH1TilesOfAnEmptyRow     ? uint64_t(int64_t(n) - 1) / kTile + 1
                         : kBug == SparseMlaBug::kH2TilesOfAnEmptyRow32 ? uint64_t(uint32_t(n - 1) / kTile + 1)
                                                                        : uint64_t(n + kTile - 1) / kTile;
  for (uint64_t tile = 0; tile < tiles; ++tile) {
    const int64_t t0 = int64_t(tile) * kTile;
    simt::sync_threads();  // the previous tile's readers of token_at, keys and p are done
    if (tid < kTile) {
      int64_t at = -1;
      if (t0 + tid < n) {
        const int32_t slot_id = indices[t0 + tid];
        const bool valid = slot_id >= 0 && slot_id < num_slots;
        if (kBug == SparseMlaBug::kO3ScalesBeforeSlotCheck) {
          const int32_t block = slot_id / p.page;
          const int64_t unchecked = block * p.kv_block_stride + int64_t(slot_id - block * p.page) * p.kv_token_stride;
          const Bytes16 sc = load16(p.kv + unchecked + kScaleByte);
          for (int i = 0; i < 4; ++i) sm.scale(tid, i) = valid ? bits_float(sc.word[i]) : 0.0f;
        }
        if (valid) {
          const int32_t block = slot_id / p.page;
          if (kBug == SparseMlaBug::kW2SlotOffsetIn32Bits) {
            at = static_cast<int32_t>(static_cast<uint32_t>(block) * static_cast<uint32_t>(p.kv_block_stride) +
                                      static_cast<uint32_t>(slot_id - block * p.page) *
                                          static_cast<uint32_t>(p.kv_token_stride));
          } else {
            at = block * p.kv_block_stride + int64_t(slot_id - block * p.page) * p.kv_token_stride;
          }
        }
      }
      token_at[tid] = at;
      if (at >= 0) {
        const Bytes16 sc = load16(p.kv + at + kScaleByte);
        for (int i = 0; i < 4; ++i) sm.scale(tid, i) = bits_float(sc.word[i]);
      }
    }
    simt::sync_threads();
    bool any_valid = false;
    for (int t = 0; t < kTile; ++t) any_valid |= token_at[t] >= 0;
    if (!any_valid) continue;  // the same for every thread: barriers stay uniform

    for (int c = tid; c < kTile * kChunksPerKey; c += kThreads) {
      const int t = c / kChunksPerKey, chunk = c - t * kChunksPerKey;
      const int64_t at = token_at[t];
      if (at < 0) continue;
      if (chunk < kLatentChunks) {
        const Bytes16 v = load16(p.kv + at + 16 * chunk);
        const float scale = sm.scale(t, chunk / (kSparseMlaScaleTile / 16));
        for (int w = 0; w < 4; ++w) {
          const uint32_t codes = v.word[w];
          simt::store4(sm.s, Smem::key_at(t, 16 * chunk + 4 * w),
                       {simt::fp8_e4m3_to_float(static_cast<uint8_t>(codes)) * scale,
                        simt::fp8_e4m3_to_float(static_cast<uint8_t>(codes >> 8)) * scale,
                        simt::fp8_e4m3_to_float(static_cast<uint8_t>(codes >> 16)) * scale,
                        simt::fp8_e4m3_to_float(static_cast<uint8_t>(codes >> 24)) * scale});
        }
      } else {
        const int r = chunk - kLatentChunks;
        const Bytes16 v = load16(p.kv + at + kRopeByte + 16 * r);
        for (int w = 0; w < 4; w += 2) {
          simt::store4(sm.s, Smem::key_at(t, kLatent + 8 * r + 2 * w),
                       {simt::bf16_to_float(static_cast<uint16_t>(v.word[w])),
                        simt::bf16_to_float(static_cast<uint16_t>(v.word[w] >> 16)),
                        simt::bf16_to_float(static_cast<uint16_t>(v.word[w + 1])),
                        simt::bf16_to_float(static_cast<uint16_t>(v.word[w + 1] >> 16))});
        }
      }
    }
    if (kBug != SparseMlaBug::kD2NoBarrierAfterStaging) simt::sync_threads();  // the keys are staged

    // Scores: acc over this lane's dims of heads quad + 4 j and keys oct + 8 i.
    float partial[kScoreHeads * kScoreKeys] = {};
    if (score_heads > 0) {
      for (int d = 4 * d_lane; d < kDim; d += 4 * kDLanes) {
        simt::Float4 k[kScoreKeys];
        for (int i = 0; i < kScoreKeys; ++i) k[i] = simt::load4(sm.s, Smem::key_at(oct + kKeyOcts * i, d));
        for (int j = 0; j < kScoreHeads; ++j) {
          if (j >= score_heads) break;
          const simt::Float4 qv = simt::load4(sm.s, Smem::q_at(quad + kHeadQuads * j, d));
          for (int i = 0; i < kScoreKeys; ++i) {
            float a = partial[j * kScoreKeys + i];
            a += qv.x * k[i].x;
            a += qv.y * k[i].y;
            a += qv.z * k[i].z;
            a += qv.w * k[i].w;
            partial[j * kScoreKeys + i] = a;
          }
        }
      }
    }
    reduce_scatter_round<8>(partial, 4, (d_lane & 4) != 0);
    reduce_scatter_round<4>(partial, 2, (d_lane & 2) != 0);
    reduce_scatter_round<2>(partial, 1, (d_lane & 1) != 0);
    {
      const int j = d_lane / 2;  // partial[e] is flattened entry 2 d_lane + e = j * 4 + key i
      if (j < score_heads) {
        for (int e = 0; e < 2; ++e) {
          const int t = oct + kKeyOcts * (2 * (d_lane % 2) + e);
          sm.p(quad + kHeadQuads * j, t) = token_at[t] >= 0 ? p.softmax_scale * partial[e] : negative_infinity();
        }
      }
    }
    simt::sync_threads();

    // Online softmax of head sh over keys su and su + 16.
    {
      const float s0 = softmax_active ? sm.p(sh, su) : negative_infinity();
      const float s1 = softmax_active ? sm.p(sh, su + kSoftmaxLanes) : negative_infinity();
      float tile_max = max_f(s0, s1);
      for (int offset = kSoftmaxLanes / 2; offset > 0; offset /= 2)
        tile_max = max_f(tile_max, simt::shfl_xor(tile_max, offset));
      const float m_new = max_f(m_run, tile_max);
      float p0 = 0.0f, p1 = 0.0f, alpha = 1.0f;  // nothing valid yet: no change
      if (m_new != negative_infinity()) {
        p0 = expf(s0 - m_new);
        p1 = expf(s1 - m_new);
        alpha = expf(m_run - m_new);  // 0 for the first tile with a valid key
      }
      float tile_sum = p0 + p1;
      for (int offset = kSoftmaxLanes / 2; offset > 0; offset /= 2) tile_sum += simt::shfl_xor(tile_sum, offset);
      l_run = l_run * alpha + tile_sum;
      m_run = m_new;
      if (softmax_active) {
        sm.p(sh, su) = p0;
        sm.p(sh, su + kSoftmaxLanes) = p1;
        if (su == 0) sm.alpha(sh) = alpha;
      }
    }
    simt::sync_threads();

    // Output: rescale, then add p x V over the tile's valid keys.
    for (int j = 0; j < kOutHeads; ++j) {
      if (j >= out_heads) break;
      const float alpha = sm.alpha(slot + kHeadSlots * j);
      for (int c = 0; c < 8; ++c) acc[j][c] *= alpha;
    }
    for (int t = 0; t < kTile && out_heads > 0; ++t) {
      if (token_at[t] < 0) continue;  // p = 0, and its key was never staged
      const simt::Float4 v0 = simt::load4(sm.s, Smem::key_at(t, col)), v1 = simt::load4(sm.s, Smem::key_at(t, kLatent / 2 + col));
      for (int j = 0; j < kOutHeads; ++j) {
        if (j >= out_heads) break;
        const float pj = sm.p(slot + kHeadSlots * j, t);
        acc[j][0] += pj * v0.x;
        acc[j][1] += pj * v0.y;
        acc[j][2] += pj * v0.z;
        acc[j][3] += pj * v0.w;
        acc[j][4] += pj * v1.x;
        acc[j][5] += pj * v1.y;
        acc[j][6] += pj * v1.z;
        acc[j][7] += pj * v1.w;
      }
    }
  }

  // The final max and sum have arrays of their own, so the last tile's readers need no barrier.
  if (softmax_active && su == 0) {
    sm.max(sh) = m_run;
    sm.sum(sh) = l_run;
  }
  simt::sync_threads();
  for (int j = 0; j < kOutHeads; ++j) {
    if (j >= out_heads) break;
    const int h = slot + kHeadSlots * j, head = h0 + h;
    const float m = sm.max(h), l = sm.sum(h);
    float lse = positive_infinity(), factor = 0.0f;  // no valid entry: out = 0, lse = +inf
    if (m != negative_infinity()) {
      lse = m + logf(l);
      factor = 1.0f / l;
      if (p.attn_sink != nullptr) factor *= 1.0f / (1.0f + expf(p.attn_sink[head] - lse));
    }
    uint16_t* out = p.out + (row * p.heads + head) * kLatent;
    for (int c = 0; c < 4; ++c) {
      out[col + c] = simt::float_to_bf16(acc[j][c] * factor);
      out[kLatent / 2 + col + c] = simt::float_to_bf16(acc[j][4 + c] * factor);
    }
    if (col == 0) p.lse[(int64_t(b) * p.heads + head) * p.s_q + s] = lse;
  }
}

}  // namespace

void launch_sparse_mla_decode(const SparseMlaParams& p, void* stream) {
  launch_sparse_mla_decode_seeded(p, SparseMlaBug::kNone, stream);
}

void launch_sparse_mla_decode_seeded(const SparseMlaParams& p, SparseMlaBug bug, void* stream) {
  if (p.batch == 0 || p.s_q == 0 || p.heads == 0) return;
  const unsigned groups = static_cast<unsigned>((p.heads + kHeads - 1) / kHeads);
  const simt::LaunchConfig config{{groups, static_cast<unsigned>(p.s_q), static_cast<unsigned>(p.batch)},
                                  {kThreads},
                                  static_cast<std::size_t>(kSparseMlaSharedBytes),
                                  static_cast<simt::Stream>(stream)};
  if (bug == SparseMlaBug::kO3ScalesBeforeSlotCheck) {
    MLA_LAUNCH(sparse_mla_decode_kernel<SparseMlaBug::kO3ScalesBeforeSlotCheck>, config, p);
  } else if (bug == SparseMlaBug::kH1TilesOfAnEmptyRow) {
    MLA_LAUNCH(sparse_mla_decode_kernel<SparseMlaBug::kH1TilesOfAnEmptyRow>, config, p);
  } else if (bug == SparseMlaBug::kH2TilesOfAnEmptyRow32) {
    MLA_LAUNCH(sparse_mla_decode_kernel<SparseMlaBug::kH2TilesOfAnEmptyRow32>, config, p);
  } else if (bug == SparseMlaBug::kD2NoBarrierAfterStaging) {
    MLA_LAUNCH(sparse_mla_decode_kernel<SparseMlaBug::kD2NoBarrierAfterStaging>, config, p);
  } else if (bug == SparseMlaBug::kW2SlotOffsetIn32Bits) {
    MLA_LAUNCH(sparse_mla_decode_kernel<SparseMlaBug::kW2SlotOffsetIn32Bits>, config, p);
  } else {
    MLA_LAUNCH(sparse_mla_decode_kernel<SparseMlaBug::kNone>, config, p);
  }
}

}  // namespace mlacheck::kernels::MLA_BACKEND_NS
