// RapidCheck generators for the MLA impl's call sequences (mla_decode_impl): an impl configuration,
// eager calls on it (each a dense MLA decode case of properties/mla_decode_gen.h with its own batch,
// views and scales), graph replay steps (lengths growing past the capture's, new block tables and
// q, padding rows), and their text form (harness/case_text.h).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "kernels/mla_decode_impl.h"
#include "harness/case_text.h"
#include "properties/mla_decode_gen.h"

namespace mlacheck {

// One impl and a sequence of eager calls on it. Each call is a dense MLA decode case whose heads are
// the configuration's and whose batch and q_len fit it; its num_splits and workspace_extra are not
// used (the impl picks the split count and owns the workspace).
struct MlaDecodeImplCallsCase {
  kernels::MlaDecodeImplConfig config;
  std::vector<MlaDecodeCase> calls;

  friend void showValue(const MlaDecodeImplCallsCase& c, std::ostream& os);
};

// One eager call whose requests do not all have the same query length (vLLM #41778, docs/bugs.md K2):
// q holds their T tokens as [T, 1, H, 576], block_table and seq_lens the B requests' rows (inside
// buffers of T rows, as an engine's are), host_query_lens the lengths. The impl must refuse it.
struct MlaDecodeImplNonUniformCase {
  kernels::MlaDecodeImplConfig config;
  std::vector<int32_t> query_lens;  // B >= 2 lengths in [1, max_q_len], not all equal
  std::vector<int32_t> seq_lens;    // B lengths in [0, table_width x page]
};

// One graph: captured for padded_batch x q_len over a cache of num_blocks pages (the configuration's
// page and table width) with fixed scales, then replayed after each step is written into the impl's
// graph buffers and the cache. Step 0 is what the buffers hold at capture (short sequences).
struct MlaDecodeImplReplayStep {
  std::vector<int32_t> lens;   // [padded_batch]: 0 for padding rows
  std::vector<int32_t> table;  // [padded_batch, table_width]
  uint64_t seed = 0;           // q and the cache's keys of this step
  bool zero_rows = false;
};
struct MlaDecodeImplReplayCase {
  kernels::MlaDecodeImplConfig config;
  int64_t padded_batch = 1, q_len = 1, num_blocks = 1;
  bool kv_fp8 = false;
  double base_scale = 1.0, q_scale = 1.0, k_scale = 1.0;
  uint8_t poison = 0xFF;
  int warp_size = 32;
  bool shuffled = false;
  std::vector<MlaDecodeImplReplayStep> steps;

  // Step i as a dense MLA decode case: contiguous views over the graph buffers' shapes, the graph's
  // cache and scales.
  MlaDecodeCase step_case(size_t i) const;
  friend void showValue(const MlaDecodeImplReplayCase& c, std::ostream& os);
};

// An engine's life on one impl: eager calls, captures and replays in an order (what the rc::state
// test ran, as a case). shape holds the configuration and the graphs' cache (its padded_batch,
// q_len, scales and steps are unused); a replay replays the latest capture of its padded_batch and
// q_len, with that capture's scales.
struct MlaDecodeImplCommand {
  enum Kind { kEager, kCapture, kReplay } kind = kEager;
  MlaDecodeCase eager;                                // kEager: the call
  int64_t padded_batch = 1, q_len = 1;                // kCapture, kReplay: the graph
  double base_scale = 1.0, q_scale = 1.0, k_scale = 1.0;  // kCapture
  MlaDecodeImplReplayStep step;                       // kReplay: written into the buffers first
};
struct MlaDecodeImplSequenceCase {
  MlaDecodeImplReplayCase shape;
  std::vector<MlaDecodeImplCommand> commands;

  // The graph a replay command replays, with it as its one step (the scales of the latest capture
  // before it of its padded_batch and q_len). replay must be one of commands.
  MlaDecodeImplReplayCase graph(const MlaDecodeImplCommand& replay) const;
  friend void showValue(const MlaDecodeImplSequenceCase& c, std::ostream& os);
};

// The configuration's keys (max_batch, max_q_len, heads, max_splits, table_width, page, graph_q_dtype).
void mla_decode_impl_config_to_text(const kernels::MlaDecodeImplConfig& c, CaseText& out);
// The inverse, range-checked: a workspace of at most 256 MiB (heads and max_splits are read inside
// it), max_batch x table_width at most 2^24 and table_width at most 65535 (a graph's block table row
// is one line of a case).
kernels::MlaDecodeImplConfig mla_decode_impl_config_from_text(const CaseText& t);

// A dense MLA decode case as keys with a prefix ("c0.batch ..."); mla_decode_from_text(t, prefix)
// reads it back.
void mla_decode_to_text_prefixed(const MlaDecodeCase& c, const std::string& prefix, CaseText& out);

// The calls case: the configuration, `calls N`, then each call's keys prefixed "c<i>.".
void mla_decode_impl_calls_to_text(const MlaDecodeImplCallsCase& c, CaseText& out);
// The inverse: 1..16 calls, each valid as a dense case (mla_decode_from_text with the prefix), with
// the configuration's heads, a batch and q_len inside the configuration.
MlaDecodeImplCallsCase mla_decode_impl_calls_from_text(const CaseText& t);
void mla_decode_impl_nonuniform_to_text(const MlaDecodeImplNonUniformCase& c, CaseText& out);
MlaDecodeImplNonUniformCase mla_decode_impl_nonuniform_from_text(const CaseText& t);

// The replay case: the configuration, the graph's keys, `steps N`, then s<i>.seq_lens, s<i>.block_table,
// s<i>.seed, s<i>.zero_rows.
void mla_decode_impl_replay_to_text(const MlaDecodeImplReplayCase& c, CaseText& out);
// The inverse: padded_batch and q_len inside the configuration, 1..8 steps, each step valid as a
// dense case over the graph's cache (every page a request reads inside it, lengths the table holds).
// num_blocks is read after the steps (its range starts past the highest page they read).
MlaDecodeImplReplayCase mla_decode_impl_replay_from_text(const CaseText& t);

// The sequence case: the configuration and the graphs' cache keys, `commands N`, then for each
// m<i>.command eager (and the call's keys prefixed m<i>.), capture (m<i>.padded_batch, m<i>.q_len,
// m<i>.base_scale, ...) or replay (m<i>.padded_batch, m<i>.q_len and the step's keys).
void mla_decode_impl_sequence_to_text(const MlaDecodeImplSequenceCase& c, CaseText& out);
// The inverse: 0..64 commands, each replay after a capture of its graph (a replay's command,
// padded_batch and q_len are read as choices among what was captured before), every call and step
// valid; num_blocks is read after the commands.
MlaDecodeImplSequenceCase mla_decode_impl_sequence_from_text(const CaseText& t);

namespace gen {

// Configurations for eager calls: heads 1..8, max_batch 1..4, max_q_len 1..4 or 8, max_splits 1, 2,
// 8, 16 or 64 (fewer where the workspace would pass 1024 rows), table widths and pages of every size
// the dense generator uses, bf16 or fp8 graph q.
rc::Gen<kernels::MlaDecodeImplConfig> mla_decode_impl_config();
// A call for config: a light dense case (properties/mla_decode_gen.h) fitted to it.
rc::Gen<MlaDecodeCase> mla_decode_impl_call(const kernels::MlaDecodeImplConfig& config);
// A configuration and 2..3 calls (scales differ between calls most of the time).
rc::Gen<MlaDecodeImplCallsCase> mla_decode_impl_calls_case();

// A replay step for a graph of c's shape: padding rows past `live`, lengths up to max_len (and
// the first request at max_len when long), a block table from properties/block_table_gen.h.
rc::Gen<MlaDecodeImplReplayStep> mla_decode_impl_replay_step(const MlaDecodeImplReplayCase& c, int64_t live,
                                                             int64_t max_len);
// A graph case: pages 1, 2, 3, 16, 53, 61, 64, 69, tables holding about 5, 70, 320 or 640 tokens
// (640: more than one split), padded batch 1..4 with 0..padded_batch live requests, q_len 1..8 (at
// most 8 (request, token) programs, 4 for 320, 2 for 640), bf16 or fp8 q and cache; step 0 with
// lengths up to 4, then 1 (sometimes 2) steps up to what the table holds.
rc::Gen<MlaDecodeImplReplayCase> mla_decode_impl_replay_case();

// An engine's sequence: heads 1..4, pages 2, 8 or 53 with tables of about 64 tokens, max batch 3,
// max q_len 2; 1..12 commands (eager calls, captures of any padded batch and q_len, replays of a
// captured graph with 0..padded_batch live requests).
rc::Gen<MlaDecodeImplSequenceCase> mla_decode_impl_sequence_case();

}  // namespace gen
}  // namespace mlacheck
