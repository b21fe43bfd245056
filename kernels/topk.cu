// Top-k per row (docs/ops.md 3): radix selection over order-preserving keys, one algorithm per row-length
// class (fill, short, long, split), for any k and for the k = 2048 fast path.
//
// Selection, most significant 8-bit digit first: a pass counts, in a shared histogram, the digits of
// the elements still tied with the threshold (those whose higher digits equal the threshold's), and
// a block-wide scan from the top finds the digit holding the need-th largest of them. Elements in
// higher digits are in the top k, those in lower ones are out; only the tied ones go on. Once they fit
// in shared memory they are gathered there (the ones already above are emitted on the way), so long
// rows are streamed from global memory only until the threshold narrows. The last pass writes the
// elements above the threshold and as many equal to it as are still needed: exactly k slots.
//
// Ties: an element's rank is its key with its inverted column index below it (64 bits, eight
// digits), so equal values rank lower index first and every rank is distinct. The digits of the
// index run only while values tie across the threshold; the selection is then the same set on every
// launch, whatever the order threads arrive in (docs/ops.md 3 allows any choice; a choice that
// changes between launches is the class `<op>.deterministic` finds). Output slots are still taken
// in arrival order: the set is fixed, its order within the row is not.
#include "core/backend/simt.h"
#include "kernels/topk.h"

namespace mlacheck::kernels::MLA_BACKEND_NS {
namespace {

// 256 threads: enough to stream a row on a GPU; the host backend's cost grows with threads times
// barriers, and a selection has about 4 barriers and 5 shuffles per digit.
constexpr int kThreads = 256;
constexpr int kDigitBits = 8;
constexpr int kBins = 1 << kDigitBits;
constexpr int kKeyDigits = 32 / kDigitBits;
constexpr int kRankDigits = 64 / kDigitBits;  // key digits, then the inverted index's
constexpr int kBinsPerThread = kBins / kThreads;
static_assert(kBins % kThreads == 0, "each thread owns whole bins of the histogram");
constexpr int kPoolCapacity = kTopkShortRowMaxLen;

// Larger float, larger key: positives get the sign bit set, negatives have every bit flipped. -inf is
// an ordinary (lowest) key; NaNs land above +inf or below -inf, which keeps their rows well-formed.
MLA_DEVICE uint32_t order_key(float x) {
  // A union, not core/hd.h's memcpy: hipcc 5.2 refuses memcpy in device code. GCC, Clang and nvcc all
  // define reading the other member.
  union {
    float f;
    uint32_t u;
  } pun{x};
  const uint32_t bits = pun.u;
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// How a selection orders elements of equal value. kLowestIndex is production; kArrival is the seeded
// variant D3 (after ATOM #1832): equal values rank alike and the tie slots go to whichever thread
// comes first.
enum class Ties { kLowestIndex, kArrival };

// What the last radix pass of a long row (longer than the pool: streamed, then maybe pooled) does
// with NaN keys. kRanked is production: a NaN is a key like any other (above +inf, or below -inf
// for a negative NaN). kDroppedOnPrefill is the seeded variant N1: on long prefill rows a NaN key is
// skipped there, as a `key == key` test would skip it, so its slot is never written.
enum class NanKeys { kRanked, kDroppedOnPrefill };

MLA_DEVICE bool nan_key(uint32_t key) { return key > 0xFF800000u || key < 0x007FFFFFu; }

// An element's rank: its key, then (kLowestIndex) its inverted index, so a lower index ranks higher.
template <Ties kTies>
MLA_DEVICE uint64_t rank_of(uint32_t key, int32_t index) {
  return (uint64_t(key) << 32) | (kTies == Ties::kLowestIndex ? ~static_cast<uint32_t>(index) : 0u);
}

// counters[]: output slots taken above the threshold, equal-to-threshold elements seen, pool size.
enum Counter { kAboveSlots = 0, kEqualSeen, kPoolSize, kCounterCount };

// The block's shared memory. The pool holds candidates as keys [0, capacity) then indices.
struct Smem {
  simt::shared_array<unsigned> hist;
  simt::shared_array<unsigned> warp_totals;
  simt::shared_array<int> found;  // digit, count above it, count in it
  simt::shared_array<int> counters;
  simt::shared_array<uint32_t> pool;
  int pool_capacity;
  MLA_DEVICE simt::shared_array<uint32_t>::reference pool_key(int i) const { return pool[static_cast<std::size_t>(i)]; }
  MLA_DEVICE simt::shared_array<uint32_t>::reference pool_index(int i) const { return pool[static_cast<std::size_t>(pool_capacity + i)]; }
};

// ---- what a selection reads --------------------------------------------------------------------

// A row of logits in global memory; element i is column base + i of the row.
struct LogitsSource {
  const float* row;
  int64_t stride;
  int32_t base;
  MLA_DEVICE uint32_t key(int i) const { return order_key(row[int64_t(i) * stride]); }
  MLA_DEVICE int32_t index(int i) const { return base + i; }
};
// A row's candidates left in the workspace by the split blocks.
struct WorkspaceSource {
  const uint32_t* keys;
  const int32_t* indices;
  MLA_DEVICE uint32_t key(int i) const { return keys[i]; }
  MLA_DEVICE int32_t index(int i) const { return indices[i]; }
};
struct PoolSource {
  Smem s;
  MLA_DEVICE uint32_t key(int i) const { return s.pool_key(i); }
  MLA_DEVICE int32_t index(int i) const { return static_cast<int32_t>(s.pool_index(i)); }
};

// ---- where a selection writes: slot in [0, k), each exactly once ------------------------------

struct GlobalEmit {  // the general path: straight into the output row
  int32_t* out;
  MLA_DEVICE void operator()(int slot, int32_t index, uint32_t) const { out[slot] = index; }
};
struct StagedEmit {  // the fast path: into shared memory, written out coalesced at the end
  simt::shared_array<int32_t> staged;
  MLA_DEVICE void operator()(int slot, int32_t index, uint32_t) const {
    staged[static_cast<std::size_t>(slot)] = index;
  }
};
struct WorkspaceEmit {  // a split block: the chunk's candidates, with their keys for the merge
  uint32_t* keys;
  int32_t* indices;
  MLA_DEVICE void operator()(int slot, int32_t index, uint32_t key) const {
    keys[slot] = key;
    indices[slot] = index;
  }
};

// ---- block-wide steps --------------------------------------------------------------------------

MLA_DEVICE int thread_rank() { return static_cast<int>(simt::thread_idx().x); }

MLA_DEVICE void count_event(const TopkParams& p, int event) {
  if (p.row_class_counts != nullptr && thread_rank() == 0) simt::atomic_add(&p.row_class_counts[event], 1);
}

// Inclusive prefix sum of one value per thread, in thread order (one barrier).
MLA_DEVICE unsigned block_inclusive_sum(unsigned v, const Smem& s) {
  const int lane = simt::lane_id(), warp = simt::warp_id(), width = simt::warp_size();
  for (int offset = 1; offset < width; offset *= 2) {
    const unsigned up = simt::shfl(v, lane >= offset ? lane - offset : lane);
    if (lane >= offset) v += up;
  }
  if (lane == width - 1) s.warp_totals[static_cast<std::size_t>(warp)] = v;
  simt::sync_threads();
  for (int w = 0; w < warp; ++w) v += s.warp_totals[static_cast<std::size_t>(w)];
  return v;
}

struct ThresholdDigit {
  int digit;  // the digit holding the need-th largest counted element
  int above;  // counted elements in higher digits (< need)
  int count;  // counted elements with this digit (above + count >= need)
};

// Scans the histogram from the top digit down. Thread t owns the kBinsPerThread digits just below
// kBins - t * kBinsPerThread, so a scan in thread order counts from the largest keys.
MLA_DEVICE ThresholdDigit find_threshold_digit(const Smem& s, int need) {
  const int top = kBins - thread_rank() * kBinsPerThread;
  unsigned mine = 0;
  for (int j = 1; j <= kBinsPerThread; ++j) mine += s.hist[static_cast<std::size_t>(top - j)];
  const unsigned through = block_inclusive_sum(mine, s);
  unsigned above = through - mine;
  if (above < unsigned(need) && unsigned(need) <= through) {  // exactly one thread
    for (int j = 1; j <= kBinsPerThread; ++j) {
      const unsigned c = s.hist[static_cast<std::size_t>(top - j)];
      if (above + c >= unsigned(need)) {
        s.found[0] = top - j;
        s.found[1] = static_cast<int>(above);
        s.found[2] = static_cast<int>(c);
        break;
      }
      above += c;
    }
  }
  simt::sync_threads();
  return ThresholdDigit{s.found[0], s.found[1], s.found[2]};
}

template <Ties kTies, class Source>
MLA_DEVICE void count_digits(const Source& src, int n, uint64_t prefix, uint64_t mask, int shift, const Smem& s) {
  for (int i = thread_rank(); i < n; i += kThreads) {
    const uint64_t rank = rank_of<kTies>(src.key(i), src.index(i));
    if ((rank & mask) == prefix) simt::atomic_add(&s.hist[(rank >> shift) & (kBins - 1)], 1u);
  }
}

// Copies src[0, n) into the pool (short rows, small merges); the caller synchronises.
template <class Source>
MLA_DEVICE void load_pool(const Source& src, int n, const Smem& s) {
  for (int i = thread_rank(); i < n; i += kThreads) {
    s.pool_key(i) = src.key(i);
    s.pool_index(i) = static_cast<uint32_t>(src.index(i));
  }
}

// Emits the elements above the threshold prefix and pools the ones tied with it.
template <Ties kTies, class Source, class Emit>
MLA_DEVICE void gather_tied(const Source& src, int n, uint64_t prefix, uint64_t mask, const Smem& s, const Emit& emit) {
  for (int i = thread_rank(); i < n; i += kThreads) {
    const uint32_t key = src.key(i);
    const int32_t index = src.index(i);
    const uint64_t masked = rank_of<kTies>(key, index) & mask;
    if (masked > prefix) {
      emit(simt::atomic_add(&s.counters[kAboveSlots], 1), index, key);
    } else if (masked == prefix) {
      const int at = simt::atomic_add(&s.counters[kPoolSize], 1);
      s.pool_key(at) = key;
      s.pool_index(at) = static_cast<uint32_t>(index);
    }
  }
}

// The last pass: above the threshold take the next slot; equal to it, take one of the `need` slots
// left at the end while any remain. With kLowestIndex every element equal to the threshold is
// needed (ranks are distinct); with kArrival, the first `need` to arrive are taken.
template <Ties kTies, class Source, class Emit>
MLA_DEVICE void emit_selected(const Source& src, int n, uint64_t prefix, uint64_t mask, int k, int need,
                              const Smem& s, const Emit& emit, bool drop_nan = false) {
  for (int i = thread_rank(); i < n; i += kThreads) {
    const uint32_t key = src.key(i);
    const int32_t index = src.index(i);
    if (drop_nan && nan_key(key)) continue;
    const uint64_t masked = rank_of<kTies>(key, index) & mask;
    if (masked > prefix) {
      emit(simt::atomic_add(&s.counters[kAboveSlots], 1), index, key);
    } else if (masked == prefix) {
      const int e = simt::atomic_add(&s.counters[kEqualSeen], 1);
      if (e < need) emit(k - need + e, index, key);
    }
  }
}

// The k largest of n > k elements, each handed to emit with its own slot in [0, k). pooled: the
// caller has loaded the n elements into the pool (and synchronised); else they are read from src.
template <Ties kTies, NanKeys kNan, class Source, class Emit>
MLA_DEVICE void radix_select(const TopkParams& p, const Source& src, int n, int k, bool pooled, const Smem& s,
                             const Emit& emit) {
  // kArrival ranks carry no index bits: only the key's digits can separate them.
  constexpr int kDigits = kTies == Ties::kLowestIndex ? kRankDigits : kKeyDigits;
  if (thread_rank() == 0) {  // published by the first pass's barrier
    s.counters[kAboveSlots] = 0;
    s.counters[kEqualSeen] = 0;
    s.counters[kPoolSize] = 0;
  }
  const PoolSource pool{s};
  int pool_n = pooled ? n : 0;
  uint64_t prefix = 0, mask = 0;  // the threshold rank's digits found so far
  int need = k;                   // how many of the elements tied with prefix are still to take
  int digit = 0;
  for (; digit < kDigits; ++digit) {
    const int shift = 64 - kDigitBits * (digit + 1);
    if (digit >= kKeyDigits && (uint32_t(p.cols - 1) >> shift) == 0) {
      // Every index (a column, below cols) is below 2^shift, so this digit of every inverted index is
      // all ones: a pass would count every tied element in its top bin.
      prefix |= uint64_t(kBins - 1) << shift;
      mask |= uint64_t(kBins - 1) << shift;
      continue;
    }
    for (int b = thread_rank(); b < kBins; b += kThreads) s.hist[static_cast<std::size_t>(b)] = 0;
    simt::sync_threads();
    if (pooled) count_digits<kTies>(pool, pool_n, prefix, mask, shift, s);
    else count_digits<kTies>(src, n, prefix, mask, shift, s);
    simt::sync_threads();
    const ThresholdDigit t = find_threshold_digit(s, need);
    prefix |= uint64_t(t.digit) << shift;
    mask |= uint64_t(kBins - 1) << shift;
    need -= t.above;
    if (t.count == need) break;  // every tied element is taken: later digits cannot change that
    if (!pooled && t.count <= s.pool_capacity && digit + 1 < kDigits) {
      gather_tied<kTies>(src, n, prefix, mask, s, emit);
      simt::sync_threads();
      pool_n = s.counters[kPoolSize];
      pooled = true;
    }
  }
  const bool drop_nan = kNan == NanKeys::kDroppedOnPrefill && p.lengths == TopkRowLengths::kPrefill && n > kPoolCapacity;
  if (pooled) emit_selected<kTies>(pool, pool_n, prefix, mask, k, need, s, emit, drop_nan);
  else emit_selected<kTies>(src, n, prefix, mask, k, need, s, emit, drop_nan);
  if (!pooled) count_event(p, kTopkStreamedSelect);
  if (digit < kKeyDigits - 1) count_event(p, kTopkEarlyExit);
}

// Selects from src: in shared memory when the n elements fit the pool, else streamed.
template <Ties kTies, NanKeys kNan, class Source, class Emit>
MLA_DEVICE void select_topk(const TopkParams& p, const Source& src, int n, int k, const Smem& s, const Emit& emit) {
  const bool fits = n <= s.pool_capacity;
  if (fits) {
    load_pool(src, n, s);
    simt::sync_threads();
  }
  radix_select<kTies, kNan>(p, src, n, k, fits, s, emit);
}

struct RowSpan {
  int32_t start;
  int32_t n;
};

// Row r's first column and length (docs/ops.md 3), clamped to the view's columns.
MLA_DEVICE RowSpan row_span(const TopkParams& p, int row) {
  int64_t start = 0, end = 0;
  switch (p.lengths) {
    case TopkRowLengths::kDecode1D:
      end = int64_t(p.seq_lens[row / p.next_n]) - p.next_n + row % p.next_n + 1;
      break;
    case TopkRowLengths::kDecode2D:
      end = p.seq_lens[row];
      break;
    case TopkRowLengths::kPrefill:
      start = p.ks[row];
      end = p.ke[row];
      break;
  }
  start = start < 0 ? 0 : (start > p.cols ? p.cols : start);
  end = end < start ? start : (end > p.cols ? p.cols : end);
  return RowSpan{static_cast<int32_t>(start), static_cast<int32_t>(end - start)};
}

// Where a row's first element lies: kWide is production, row x row stride in 64 bits; kInt32 is
// the seeded W5, the product in int32 (as a kernel taking `int row, int stride` computes it): right
// below 2^31 elements, 8 GiB of fp32 logits, and negative past it.
enum class RowOffset { kWide, kInt32 };

template <RowOffset kOffset>
MLA_DEVICE LogitsSource logits_of(const TopkParams& p, int row, RowSpan span) {
  const int64_t at = kOffset == RowOffset::kInt32
                         ? int64_t(int32_t(uint32_t(row) * uint32_t(p.logits_row_stride)))  // two's complement wrap
                         : int64_t(row) * p.logits_row_stride;
  return LogitsSource{p.logits + at + int64_t(span.start) * p.logits_col_stride, p.logits_col_stride, 0};
}

// A row with n > k, by its length class.
template <Ties kTies, RowOffset kOffset, NanKeys kNan, class Emit>
MLA_DEVICE void select_row(const TopkParams& p, int row, RowSpan span, int k, const Smem& s, const Emit& emit) {
  if (span.n > kTopkSplitRowMinLen) {
    count_event(p, kTopkSplitRow);
    const int64_t at = int64_t(row) * p.workspace_row_stride;
    const WorkspaceSource candidates{p.workspace_keys + at, p.workspace_indices + at};
    select_topk<kTies, kNan>(p, candidates, topk_split_candidates(span.n, k), k, s, emit);
  } else {
    count_event(p, span.n <= kTopkShortRowMaxLen ? kTopkShortRow : kTopkLongRow);
    select_topk<kTies, kNan>(p, logits_of<kOffset>(p, row, span), span.n, k, s, emit);
  }
}

// One block per row: every row of the output view is written whole, no other row is touched.
// kStaticK > 0: the fast path for that k, with the row's result staged in shared memory.
template <int kStaticK, Ties kTies, RowOffset kOffset, NanKeys kNan>
MLA_KERNEL void topk_rows_kernel(TopkParams p, int pool_capacity) {
  MLA_SHARED(unsigned, hist, kBins);
  MLA_SHARED(unsigned, warp_totals, simt::kMaxWarpsPerBlock);
  MLA_SHARED(int, found, 3);
  MLA_SHARED(int, counters, kCounterCount);
  MLA_SHARED(int32_t, staged, kStaticK > 0 ? kStaticK : 1);
  MLA_DYNAMIC_SHARED(uint32_t, pool);
  const Smem s{hist, warp_totals, found, counters, pool, pool_capacity};
  const int row = static_cast<int>(simt::block_idx().x);
  const int k = kStaticK > 0 ? kStaticK : p.k;
  const RowSpan span = row_span(p, row);
  int32_t* out = p.out + int64_t(row) * p.out_row_stride;
  if (span.n <= k) {  // nothing to select: [0, n) then -1
    for (int i = thread_rank(); i < k; i += kThreads) out[i] = i < span.n ? i : -1;
    count_event(p, kTopkFillRow);
    return;
  }
  if constexpr (kStaticK > 0) {
    select_row<kTies, kOffset, kNan>(p, row, span, k, s, StagedEmit{staged});
    simt::sync_threads();
    for (int i = thread_rank(); i < kStaticK; i += kThreads) out[i] = staged[static_cast<std::size_t>(i)];
  } else {
    select_row<kTies, kOffset, kNan>(p, row, span, k, s, GlobalEmit{out});
  }
}

// Very long rows, first step: block (r, c) leaves the top k of chunk c of row r in the workspace,
// at c * min(chunk, k), as (key, column) pairs; a chunk of at most k elements is copied whole.
template <int kStaticK, Ties kTies, RowOffset kOffset, NanKeys kNan>
MLA_KERNEL void topk_split_kernel(TopkParams p, int pool_capacity) {
  MLA_SHARED(unsigned, hist, kBins);
  MLA_SHARED(unsigned, warp_totals, simt::kMaxWarpsPerBlock);
  MLA_SHARED(int, found, 3);
  MLA_SHARED(int, counters, kCounterCount);
  MLA_DYNAMIC_SHARED(uint32_t, pool);
  const Smem s{hist, warp_totals, found, counters, pool, pool_capacity};
  const int row = static_cast<int>(simt::block_idx().x), chunk_id = static_cast<int>(simt::block_idx().y);
  const int k = kStaticK > 0 ? kStaticK : p.k;
  const RowSpan span = row_span(p, row);
  if (span.n <= k || span.n <= kTopkSplitRowMinLen || chunk_id >= topk_num_splits(span.n)) return;
  const int chunk = topk_split_chunk_len(span.n);
  const int begin = chunk_id * chunk, len = span.n - begin < chunk ? span.n - begin : chunk;
  const int64_t at = int64_t(row) * p.workspace_row_stride + int64_t(chunk_id) * (chunk < k ? chunk : k);
  const WorkspaceEmit emit{p.workspace_keys + at, p.workspace_indices + at};
  LogitsSource src = logits_of<kOffset>(p, row, span);
  src.row += int64_t(begin) * src.stride;
  src.base = begin;
  if (len <= k) {
    for (int i = thread_rank(); i < len; i += kThreads) emit(i, src.index(i), src.key(i));
    return;
  }
  select_topk<kTies, kNan>(p, src, len, k, s, emit);
}

template <int kStaticK, Ties kTies = Ties::kLowestIndex, RowOffset kOffset = RowOffset::kWide,
          NanKeys kNan = NanKeys::kRanked>
void launch(const TopkParams& p, void* stream) {
  if (p.rows == 0) return;
  const int pool_capacity = p.cols < kPoolCapacity ? p.cols : kPoolCapacity;
  const std::size_t pool_bytes = 2 * sizeof(uint32_t) * static_cast<std::size_t>(pool_capacity);
  const auto s = static_cast<simt::Stream>(stream);
  const int k = kStaticK > 0 ? kStaticK : p.k;
  // Graph-safe: the grid depends on shapes only; blocks of rows that are not very long exit at once.
  if (p.cols > kTopkSplitRowMinLen && p.cols > k) {
    const simt::LaunchConfig split{{unsigned(p.rows), unsigned(kTopkMaxSplits)}, {kThreads}, pool_bytes, s};
    MLA_LAUNCH((topk_split_kernel<kStaticK, kTies, kOffset, kNan>), split, p, pool_capacity);
  }
  const simt::LaunchConfig rows{{unsigned(p.rows)}, {kThreads}, pool_bytes, s};
  MLA_LAUNCH((topk_rows_kernel<kStaticK, kTies, kOffset, kNan>), rows, p, pool_capacity);
}

}  // namespace

void topk_per_row(const TopkParams& p, void* stream) { launch<0>(p, stream); }
void topk_per_row_k2048(const TopkParams& p, void* stream) { launch<kTopkFastK>(p, stream); }
void topk_per_row_ties_by_arrival(const TopkParams& p, bool fast_path, void* stream) {
  if (fast_path) launch<kTopkFastK, Ties::kArrival>(p, stream);
  else launch<0, Ties::kArrival>(p, stream);
}
void topk_per_row_row_offset_in_32_bits(const TopkParams& p, bool fast_path, void* stream) {
  if (fast_path) launch<kTopkFastK, Ties::kLowestIndex, RowOffset::kInt32>(p, stream);
  else launch<0, Ties::kLowestIndex, RowOffset::kInt32>(p, stream);
}
void topk_per_row_nan_dropped_on_prefill(const TopkParams& p, bool fast_path, void* stream) {
  if (fast_path) launch<kTopkFastK, Ties::kLowestIndex, RowOffset::kWide, NanKeys::kDroppedOnPrefill>(p, stream);
  else launch<0, Ties::kLowestIndex, RowOffset::kWide, NanKeys::kDroppedOnPrefill>(p, stream);
}

}  // namespace mlacheck::kernels::MLA_BACKEND_NS
