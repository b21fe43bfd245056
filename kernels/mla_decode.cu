// Dense split-KV MLA decode (docs/ops.md 5): the split kernel and the merge kernel, one source for every backend.
//
// Split (stage 1): grid (head groups * B * q_len, 1, num_splits), 256 threads (64 per head quad when
// H < 16, so no quad idles). Block (x, z) takes
// request b, query token t, heads [16 g, 16 g + 16) and split z; it computes its key range from the
// device's seq_lens, decodes q of its 16 heads into shared memory once (fp32, zero past H), and
// walks the range in tiles of 32 keys, each key decoded once into shared memory (16-byte loads when
// the cache is 16-byte aligned). Per tile:
//   scores: thread = (d-slice 0..7, key quad 0..7, head quad 0..3) holds a 4-key x 4-head register
//     tile and walks its slice of the 576 dims four floats at a time (the 8 slices of a key quad
//     read 32 consecutive floats: one 16-byte load per thread, no bank conflict), so 8 shared loads
//     feed 64 FMAs; the 8 slices then reduce-scatter their tiles with 14 shuffles;
//   softmax: 16 threads per head update the head's running max (online softmax) and turn the
//     scores into probabilities;
//   values: thread = (column group 0..63, head quad 0..3) owns 4 heads x 8 of the 512 value columns
//     and the 4 heads' running sums (two 16-byte loads of V and one of the 4 probabilities feed 32
//     FMAs).
// Shared memory: q [16][580] + keys [32][580] + probabilities [32][16] fp32 = 113408 bytes, so two
// blocks fit an H200 SM. Its rows of 580 floats put consecutive keys on different bank groups.
// Heads past H in the last group skip the arithmetic (only whole quads of 4 are computed).
//
// Merge (stage 2): grid ceil(B * q_len * H / 4), 128 threads: 32 threads per (b, t, h), 16 columns
// each, read the splits' rows of 513 floats (coalesced), skip empty splits (lse -inf) and combine
// the rest by log-sum-exp. A NaN lse (a NaN key) propagates, so a bad page never vanishes.
#include <cmath>

#include "core/backend/simt.h"
#include "kernels/mla_decode.h"

namespace mlacheck::kernels::MLA_BACKEND_NS {
namespace {

constexpr int kThreads = 256;
constexpr int kTileKeys = 32;
constexpr int kGroupHeads = 16;
constexpr int kPitch = kMlaHeadDim + 4;
constexpr int kSlices = 8;                                  // lanes sharing one dot product
constexpr int kKeyQuads = kTileKeys / 4;                    // 8
constexpr int kHeadQuads = kGroupHeads / 4;                 // 4
constexpr int kDimSteps = kMlaHeadDim / (4 * kSlices);      // 18 float4 steps per slice
constexpr int kColumnGroups = kMlaValueDim / 8;             // 64 threads per head quad for values
constexpr int kSoftmaxLanes = kThreads / kGroupHeads;       // 16 threads per head
constexpr int kKeysPerSoftmaxLane = kTileKeys / kSoftmaxLanes;
static_assert(kSlices * kKeyQuads * kHeadQuads == kThreads, "score layout covers the block");
static_assert(kColumnGroups * kHeadQuads == kThreads, "value layout covers the block");
static_assert(kDimSteps * 4 * kSlices == kMlaHeadDim, "slices cover the head dimension");
static_assert(kKeysPerSoftmaxLane == 2, "softmax lanes take two keys each");

constexpr int64_t kQAt = 0;
constexpr int64_t kKeyAt = kQAt + int64_t(kGroupHeads) * kPitch;
constexpr int64_t kProbAt = kKeyAt + int64_t(kTileKeys) * kPitch;
constexpr int64_t kSplitSharedFloats = kProbAt + int64_t(kTileKeys) * kGroupHeads;
static_assert(kSplitSharedFloats * 4 <= 112 * 1024, "two split blocks fit an SM");

constexpr int kMergeThreads = 128;
constexpr int kMergeHeads = 4;
constexpr int kMergeLanes = kMergeThreads / kMergeHeads;     // 32 threads per head
constexpr int kMergeColumns = kMlaValueDim / kMergeLanes;    // 16 columns per thread

// 64 threads per head quad of a group: 256 from H = 16 on; fewer heads leave no idle quads.
constexpr int split_threads(int heads) { return heads >= kGroupHeads ? kThreads : (heads + 3) / 4 * 64; }
static_assert(kThreads == kHeadQuads * 64, "a head quad is 64 threads in every layout");

MLA_DEVICE float negative_infinity() { return bits_float(0xFF800000u); }
MLA_DEVICE float quiet_nan() { return bits_float(0x7FC00000u); }
MLA_DEVICE float max_of(float a, float b) { return b > a ? b : a; }

struct alignas(16) Bytes16 {
  uint32_t word[4];
};

// One step of the slices' reduce-scatter (compile-time indices keep dot in registers): a lane keeps
// the half of dot[0, 2 kHalf) that its bit kMask selects, plus its partner's copy of that half. Two
// floats travel per 64-bit shuffle (two 32-bit shuffles on a GPU, half the collectives on the host).
template <int kMask, int kHalf>
MLA_DEVICE void reduce_scatter_step(float* dot, int slice) {
  const bool upper = (slice & kMask) != 0;
  for (int e = 0; e < kHalf; e += 2) {
    // Select values, not indices: a runtime index would put dot in local memory.
    const float keep0 = upper ? dot[e + kHalf] : dot[e], keep1 = upper ? dot[e + kHalf + 1] : dot[e + 1];
    const float send0 = upper ? dot[e] : dot[e + kHalf], send1 = upper ? dot[e + 1] : dot[e + kHalf + 1];
    const uint64_t got = simt::shfl_xor(uint64_t(float_bits(send0)) | uint64_t(float_bits(send1)) << 32, kMask);
    dot[e] = keep0 + bits_float(static_cast<uint32_t>(got));
    dot[e + 1] = keep1 + bits_float(static_cast<uint32_t>(got >> 32));
  }
}

// Key (row) s of the tile lives at element key_at[s] of the cache (-1: a page outside the cache).
// Decodes the tile's n keys into shared rows of kPitch floats; a bad page gives NaN.
template <bool kFp8, bool kVector>
MLA_DEVICE void stage_keys(const MlaDecodeParams& p, const simt::shared_array<float>& smem,
                           const simt::shared_array<int64_t>& key_at, int n) {
  const int tid = static_cast<int>(simt::thread_idx().x), threads = static_cast<int>(simt::block_dim().x);
  if (kVector) {
    constexpr int kPerChunk = kFp8 ? 16 : 8;  // elements per 16 bytes
    constexpr int kChunks = kMlaHeadDim / kPerChunk;
    const uint8_t* base = static_cast<const uint8_t*>(p.kv);
    for (int i = tid; i < n * kChunks; i += threads) {
      const int s = i / kChunks, d = (i - s * kChunks) * kPerChunk;
      const int64_t at = key_at[s];
      float v[kPerChunk];
      if (at < 0) {
        for (int e = 0; e < kPerChunk; ++e) v[e] = quiet_nan();
      } else {
        const Bytes16 w = *reinterpret_cast<const Bytes16*>(base + (at + d) * (kFp8 ? 1 : 2));
        for (int e = 0; e < kPerChunk; ++e) {
          v[e] = kFp8 ? simt::fp8_e4m3_to_float(static_cast<uint8_t>(w.word[e / 4] >> (8 * (e % 4))))
                      : simt::bf16_to_float(static_cast<uint16_t>(w.word[e / 2] >> (16 * (e % 2))));
        }
      }
      for (int e = 0; e < kPerChunk; e += 4) {
        simt::store4(smem, kKeyAt + int64_t(s) * kPitch + d + e, {v[e], v[e + 1], v[e + 2], v[e + 3]});
      }
    }
  } else {
    for (int i = tid; i < n * kMlaHeadDim; i += threads) {
      const int s = i / kMlaHeadDim, d = i - s * kMlaHeadDim;
      const int64_t at = key_at[s];
      float v = quiet_nan();
      if (at >= 0) {
        v = kFp8 ? simt::fp8_e4m3_to_float(static_cast<const uint8_t*>(p.kv)[at + d])
                 : simt::bf16_to_float(static_cast<const uint16_t*>(p.kv)[at + d]);
      }
      smem[kKeyAt + int64_t(s) * kPitch + d] = v;
    }
  }
}

// One program: request b, token t, heads [h0, h0 + 16) (those below H), split blockIdx.z.
// kVariant: bit 0 fp8 keys (else bf16), bit 1 16-byte key loads, bit 2 the seeded bug O2, bit 3
// the seeded bug W3 (one template argument, because a comma would split MLA_LAUNCH's arguments).
constexpr int kFp8Keys = 1, kVectorKeys = 2, kO2Variant = 4, kW3Variant = 8;
template <int kVariant>
MLA_KERNEL void mla_decode_split_kernel(MlaDecodeParams p) {
  constexpr bool kFp8 = (kVariant & kFp8Keys) != 0, kVector = (kVariant & kVectorKeys) != 0;
  constexpr bool kO2 = (kVariant & kO2Variant) != 0, kW3 = (kVariant & kW3Variant) != 0;
  MLA_DYNAMIC_SHARED(float, smem);
  MLA_SHARED(int64_t, key_at, kTileKeys);
  MLA_SHARED(float, rescale, kGroupHeads);
  MLA_SHARED(float, final_max, kGroupHeads);
  const int tid = static_cast<int>(simt::thread_idx().x), threads = static_cast<int>(simt::block_dim().x);
  const int groups = (p.heads + kGroupHeads - 1) / kGroupHeads;
  const int x = static_cast<int>(simt::block_idx().x), split = static_cast<int>(simt::block_idx().z);
  const int row = x / groups, h0 = (x - row * groups) * kGroupHeads;  // row = b * q_len + t
  const int b = row / p.q_len, t = row - b * p.q_len;
  const int group_heads = p.heads - h0 < kGroupHeads ? p.heads - h0 : kGroupHeads;
  const int quads = (group_heads + 3) / 4;

  // Bounds from the device's seq_lens (a replayed graph sees the current lengths), clamped to the
  // keys the table can name.
  int64_t len = int64_t(p.seq_lens[b]) - p.q_len + t + 1;
  const int64_t table_keys = int64_t(p.block_table_width) * p.page;
  len = len < 0 ? 0 : (len > table_keys ? table_keys : len);
  const int64_t chunk = (len + p.num_splits - 1) / p.num_splits;
  const int64_t first = int64_t(split) * chunk < len ? int64_t(split) * chunk : len;
  const int begin = static_cast<int>(first), end = static_cast<int>(first + chunk < len ? first + chunk : len);

  // Head h's row of this split: workspace[b, t, h0 + h, split, :].
  const int64_t head_step = int64_t(p.num_splits) * kMlaWorkspaceRow;
  float* out = p.workspace + (int64_t(row) * p.heads + h0) * head_step + int64_t(split) * kMlaWorkspaceRow;
  if (begin >= end) {  // the same for every thread: no barrier is skipped by some only
    for (int i = tid; i < group_heads * kMlaWorkspaceRow; i += threads) {
      const int h = i / kMlaWorkspaceRow, c = i - h * kMlaWorkspaceRow;
      out[h * head_step + c] = c == kMlaValueDim ? negative_infinity() : 0.0f;
    }
    return;
  }

  const int64_t q_row = (int64_t(row) * p.heads + h0) * kMlaHeadDim;
  for (int i = tid; i < quads * 4 * kMlaHeadDim; i += threads) {
    const int h = i / kMlaHeadDim, d = i - h * kMlaHeadDim;
    float v = 0.0f;
    if (h < group_heads) {
      const int64_t at = q_row + int64_t(h) * kMlaHeadDim + d;
      v = p.q_fp8 ? simt::fp8_e4m3_to_float(static_cast<const uint8_t*>(p.q)[at])
                  : simt::bf16_to_float(static_cast<const uint16_t*>(p.q)[at]);
    }
    smem[kQAt + int64_t(h) * kPitch + d] = v;
  }

  // Score layout.
  const int slice = tid % kSlices, key_quad = (tid / kSlices) % kKeyQuads, score_quad = tid / (kSlices * kKeyQuads);
  // Softmax layout: this thread's head and its running max (the same in all 16 lanes).
  const int soft_head = tid / kSoftmaxLanes, soft_lane = tid % kSoftmaxLanes;
  float run_max = negative_infinity();
  // Value layout: 4 heads x columns [4 c, 4 c + 4) and [256 + 4 c, 256 + 4 c + 4), and the 4 heads'
  // running sums of probabilities (each value thread adds the probabilities it reads anyway, so the
  // softmax needs no sum reduction).
  const int column_group = tid % kColumnGroups, value_quad = tid / kColumnGroups;
  float acc[4][8] = {};
  float run_sum[4] = {};

  const int32_t* table_row = p.block_table + int64_t(b) * p.block_table_stride;
  for (int k0 = begin; k0 < end; k0 += kTileKeys) {
    const int n = end - k0 < kTileKeys ? end - k0 : kTileKeys;
    if (tid < (kO2 ? kTileKeys : n)) {
      const int key = k0 + tid;
      const int32_t page_id = table_row[key / p.page];
      const int slot = key - (key / p.page) * p.page;
      if (page_id < 0 || page_id >= p.num_blocks) {
        key_at[tid] = -1;
      } else if (kW3) {
        key_at[tid] = static_cast<int32_t>(static_cast<uint32_t>(page_id) * static_cast<uint32_t>(p.kv_block_stride) +
                                           static_cast<uint32_t>(slot) * static_cast<uint32_t>(p.kv_token_stride));
      } else {
        key_at[tid] = int64_t(page_id) * p.kv_block_stride + int64_t(slot) * p.kv_token_stride;
      }
    }
    simt::sync_threads();
    stage_keys<kFp8, kVector>(p, smem, key_at, n);
    simt::sync_threads();

    // Scores of keys 4 key_quad + i and heads 4 score_quad + j over this slice's dims.
    float dot[16] = {};
    if (score_quad < quads && key_quad * 4 < n) {  // key quads past the tile's keys are masked below
      for (int step = 0; step < kDimSteps; ++step) {
        const int d = step * 4 * kSlices + slice * 4;
        simt::Float4 k[4];
        for (int i = 0; i < 4; ++i) k[i] = simt::load4(smem, kKeyAt + int64_t(key_quad * 4 + i) * kPitch + d);
        for (int j = 0; j < 4; ++j) {
          const simt::Float4 q = simt::load4(smem, kQAt + int64_t(score_quad * 4 + j) * kPitch + d);
          for (int i = 0; i < 4; ++i) {
            float a = dot[i * 4 + j];
            a += q.x * k[i].x;
            a += q.y * k[i].y;
            a += q.z * k[i].z;
            a += q.w * k[i].w;
            dot[i * 4 + j] = a;
          }
        }
      }
    }
    // Reduce-scatter over the 8 slices: slice s ends with the sums of values 2 s and 2 s + 1.
    reduce_scatter_step<4, 8>(dot, slice);
    reduce_scatter_step<2, 4>(dot, slice);
    reduce_scatter_step<1, 2>(dot, slice);
    for (int e = 0; e < 2; ++e) {
      const int v = slice * 2 + e, key = key_quad * 4 + v / 4, head = score_quad * 4 + v % 4;
      smem[kProbAt + key * kGroupHeads + head] = key < n ? dot[e] * p.softmax_scale : negative_infinity();
    }
    simt::sync_threads();

    // Online softmax of head soft_head over the tile's keys soft_lane and soft_lane + 16: the new
    // running max, the factor that rescales what came before, and the probabilities.
    {
      float s[kKeysPerSoftmaxLane];
      float tile_max = negative_infinity();
      for (int e = 0; e < kKeysPerSoftmaxLane; ++e) {
        s[e] = smem[kProbAt + (soft_lane + e * kSoftmaxLanes) * kGroupHeads + soft_head];
        tile_max = max_of(tile_max, s[e]);
      }
      for (int mask = kSoftmaxLanes / 2; mask >= 1; mask /= 2) tile_max = max_of(tile_max, simt::shfl_xor(tile_max, mask));
      const float new_max = max_of(run_max, tile_max);
      const float base = new_max == negative_infinity() ? 0.0f : new_max;  // no -inf - -inf
      for (int e = 0; e < kKeysPerSoftmaxLane; ++e) {
        smem[kProbAt + (soft_lane + e * kSoftmaxLanes) * kGroupHeads + soft_head] = expf(s[e] - base);
      }
      if (soft_lane == 0) rescale[soft_head] = expf(run_max - base);  // 0 before the first key
      run_max = new_max;
    }
    simt::sync_threads();

    if (value_quad < quads) {
      for (int j = 0; j < 4; ++j) {
        const float alpha = rescale[value_quad * 4 + j];
        run_sum[j] *= alpha;
        for (int c = 0; c < 8; ++c) acc[j][c] *= alpha;
      }
      for (int s = 0; s < n; ++s) {
        const simt::Float4 prob = simt::load4(smem, kProbAt + s * kGroupHeads + value_quad * 4);
        const simt::Float4 v0 = simt::load4(smem, kKeyAt + int64_t(s) * kPitch + 4 * column_group);
        const simt::Float4 v1 = simt::load4(smem, kKeyAt + int64_t(s) * kPitch + kMlaValueDim / 2 + 4 * column_group);
        const float pj[4] = {prob.x, prob.y, prob.z, prob.w};
        for (int j = 0; j < 4; ++j) {
          run_sum[j] += pj[j];
          acc[j][0] += pj[j] * v0.x;
          acc[j][1] += pj[j] * v0.y;
          acc[j][2] += pj[j] * v0.z;
          acc[j][3] += pj[j] * v0.w;
          acc[j][4] += pj[j] * v1.x;
          acc[j][5] += pj[j] * v1.y;
          acc[j][6] += pj[j] * v1.z;
          acc[j][7] += pj[j] * v1.w;
        }
      }
    }
    simt::sync_threads();  // the next tile overwrites keys, probabilities and key_at
  }

  if (soft_lane == 0) final_max[soft_head] = run_max;
  simt::sync_threads();
  if (value_quad < quads) {
    for (int j = 0; j < 4; ++j) {
      const int h = value_quad * 4 + j;
      if (h >= group_heads) break;
      const float l = run_sum[j];
      float* o = out + h * head_step;
      for (int c = 0; c < 4; ++c) {
        o[4 * column_group + c] = acc[j][c] / l;
        o[kMlaValueDim / 2 + 4 * column_group + c] = acc[j][4 + c] / l;
      }
      if (column_group == 0) o[kMlaValueDim] = final_max[h] + logf(l);
    }
  }
}

// The largest lse of a (b, t, h)'s splits (its workspace rows w); NaN wins, so a NaN split is never
// dropped; -inf when no split holds a key.
MLA_DEVICE float largest_split_lse(const float* w, int num_splits) {
  float m = negative_infinity();
  for (int s = 0; s < num_splits; ++s) {
    const float x = w[int64_t(s) * kMlaWorkspaceRow + kMlaValueDim];
    if (x != x || x > m) m = x;
    if (m != m) break;
  }
  return m;
}

// One (b, t, h) per 32 threads: merges the splits' rows of workspace[b, t, h, :, :]. kBug is
// MlaDecodeBug::kNone but for a seeded variant (kernels/mutants/).
template <MlaDecodeBug kBug>
MLA_KERNEL void mla_decode_merge_kernel(MlaDecodeParams p) {
  const int tid = static_cast<int>(simt::thread_idx().x);
  const int64_t rows = int64_t(p.batch) * p.q_len * p.heads;
  const int64_t r = int64_t(simt::block_idx().x) * kMergeHeads + tid / kMergeLanes;  // (b * q_len + t) * H + h
  if (r >= rows) return;  // no barriers below
  const int lane = tid % kMergeLanes;
  const float* w = p.workspace + r * p.num_splits * kMlaWorkspaceRow;
  const float m = largest_split_lse(w, p.num_splits);
  uint16_t* o = p.o + r * kMlaValueDim;
  if (kBug != MlaDecodeBug::kT5MergeNoEmptyRow && m == negative_infinity()) {  // no key at all: o = 0, lse = -inf
    for (int c = 0; c < kMergeColumns; ++c) o[lane + c * kMergeLanes] = 0;
    if (lane == 0) p.lse[r] = negative_infinity();
    return;
  }
  float sum = 0.0f, acc[kMergeColumns] = {};
  for (int s = 0; s < p.num_splits; ++s) {
    const float* split = w + int64_t(s) * kMlaWorkspaceRow;
    const float x = split[kMlaValueDim];
    if (x == negative_infinity()) continue;  // an empty split: its values are not read
    const float weight = expf(x - m);
    sum += weight;
    for (int c = 0; c < kMergeColumns; ++c) acc[c] += weight * split[lane + c * kMergeLanes];
  }
  const float scale = p.output_scale / sum;
  for (int c = 0; c < kMergeColumns; ++c) o[lane + c * kMergeLanes] = simt::float_to_bf16(acc[c] * scale);
  if (lane == 0) p.lse[r] = m + logf(sum);
}

// D4 (MlaDecodeBug::kD4MergeInArrivalOrder, a seeded variant): one (b, t, h) per block; warp w
// takes the splits w, w + 4, ... and adds each one's weight and weighted values into shared sums
// with float atomics, so the sums' order, and their rounding, is the order the warps arrive in.
MLA_KERNEL void mla_decode_merge_arrival_kernel(MlaDecodeParams p) {
  MLA_SHARED(float, acc, kMlaValueDim);
  MLA_SHARED(float, total, 1);
  const int tid = static_cast<int>(simt::thread_idx().x);
  const int64_t r = simt::block_idx().x;  // (b * q_len + t) * H + h
  const float* w = p.workspace + r * p.num_splits * kMlaWorkspaceRow;
  const float m = largest_split_lse(w, p.num_splits);
  uint16_t* o = p.o + r * kMlaValueDim;
  if (m == negative_infinity()) {  // the same for every thread of the block: no barrier is skipped
    for (int c = tid; c < kMlaValueDim; c += kMergeThreads) o[c] = 0;
    if (tid == 0) p.lse[r] = negative_infinity();
    return;
  }
  for (int c = tid; c < kMlaValueDim; c += kMergeThreads) acc[c] = 0.0f;
  if (tid == 0) total[0] = 0.0f;
  simt::sync_threads();
  const int warp = tid / 32, lane = tid % 32;
  for (int s = warp; s < p.num_splits; s += kMergeThreads / 32) {
    const float* split = w + int64_t(s) * kMlaWorkspaceRow;
    const float x = split[kMlaValueDim];
    if (x == negative_infinity()) continue;
    const float weight = expf(x - m);
    if (lane == 0) simt::atomic_add(total.data(), weight);
    for (int c = lane; c < kMlaValueDim; c += 32) simt::atomic_add(acc.data() + c, weight * split[c]);
  }
  simt::sync_threads();
  const float sum = total[0];
  const float scale = p.output_scale / sum;
  for (int c = tid; c < kMlaValueDim; c += kMergeThreads) o[c] = simt::float_to_bf16(acc[c] * scale);
  if (tid == 0) p.lse[r] = m + logf(sum);
}

}  // namespace

void launch_mla_decode_split(const MlaDecodeParams& p, void* stream) {
  launch_mla_decode_split_seeded(p, MlaDecodeBug::kNone, stream);
}

void launch_mla_decode_split_seeded(const MlaDecodeParams& p, MlaDecodeBug bug, void* stream) {
  if (p.batch == 0 || p.heads == 0) return;
  const int64_t groups = (p.heads + kGroupHeads - 1) / kGroupHeads;
  const simt::LaunchConfig config{{static_cast<unsigned>(groups * p.batch * p.q_len), 1, static_cast<unsigned>(p.num_splits)},
                                  {static_cast<unsigned>(split_threads(p.heads))},
                                  static_cast<std::size_t>(kSplitSharedFloats * 4),
                                  static_cast<simt::Stream>(stream)};
  // 16-byte key loads need the cache, every block and every token 16-byte aligned.
  const int64_t es = p.kv_fp8 ? 1 : 2;
  const bool vector = reinterpret_cast<std::uintptr_t>(p.kv) % 16 == 0 && (p.kv_block_stride * es) % 16 == 0 &&
                      (p.kv_token_stride * es) % 16 == 0;
  if (bug == MlaDecodeBug::kO2TablePastTile) {
    if (p.kv_fp8 && vector) {
      MLA_LAUNCH(mla_decode_split_kernel<kO2Variant | kFp8Keys | kVectorKeys>, config, p);
    } else if (p.kv_fp8) {
      MLA_LAUNCH(mla_decode_split_kernel<kO2Variant | kFp8Keys>, config, p);
    } else if (vector) {
      MLA_LAUNCH(mla_decode_split_kernel<kO2Variant | kVectorKeys>, config, p);
    } else {
      MLA_LAUNCH(mla_decode_split_kernel<kO2Variant>, config, p);
    }
  } else if (bug == MlaDecodeBug::kW3KeyOffsetIn32Bits) {
    if (p.kv_fp8 && vector) {
      MLA_LAUNCH(mla_decode_split_kernel<kW3Variant | kFp8Keys | kVectorKeys>, config, p);
    } else if (p.kv_fp8) {
      MLA_LAUNCH(mla_decode_split_kernel<kW3Variant | kFp8Keys>, config, p);
    } else if (vector) {
      MLA_LAUNCH(mla_decode_split_kernel<kW3Variant | kVectorKeys>, config, p);
    } else {
      MLA_LAUNCH(mla_decode_split_kernel<kW3Variant>, config, p);
    }
  } else if (p.kv_fp8 && vector) {
    MLA_LAUNCH(mla_decode_split_kernel<kFp8Keys | kVectorKeys>, config, p);
  } else if (p.kv_fp8) {
    MLA_LAUNCH(mla_decode_split_kernel<kFp8Keys>, config, p);
  } else if (vector) {
    MLA_LAUNCH(mla_decode_split_kernel<kVectorKeys>, config, p);
  } else {
    MLA_LAUNCH(mla_decode_split_kernel<0>, config, p);
  }
}

void launch_mla_decode_merge(const MlaDecodeParams& p, void* stream) {
  launch_mla_decode_merge_seeded(p, MlaDecodeBug::kNone, stream);
}

void launch_mla_decode_merge_seeded(const MlaDecodeParams& p, MlaDecodeBug bug, void* stream) {
  const int64_t rows = int64_t(p.batch) * p.q_len * p.heads;
  if (rows == 0) return;
  const simt::LaunchConfig config{{static_cast<unsigned>((rows + kMergeHeads - 1) / kMergeHeads)},
                                  {kMergeThreads},
                                  0,
                                  static_cast<simt::Stream>(stream)};
  if (bug == MlaDecodeBug::kT5MergeNoEmptyRow) {
    MLA_LAUNCH(mla_decode_merge_kernel<MlaDecodeBug::kT5MergeNoEmptyRow>, config, p);
  } else if (bug == MlaDecodeBug::kD4MergeInArrivalOrder) {
    const simt::LaunchConfig per_row{{static_cast<unsigned>(rows)}, {kMergeThreads}, 0, static_cast<simt::Stream>(stream)};
    MLA_LAUNCH(mla_decode_merge_arrival_kernel, per_row, p);
  } else {
    MLA_LAUNCH(mla_decode_merge_kernel<MlaDecodeBug::kNone>, config, p);
  }
}

}  // namespace mlacheck::kernels::MLA_BACKEND_NS
