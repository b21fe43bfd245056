// Cases of the MLA impl's call sequences (mla_decode_impl): an impl configuration, eager calls on
// it (each a dense MLA decode case of properties/mla_decode_gen.h with its own batch, views and
// scales), graph replay steps (lengths growing past the capture's, new block tables and q, padding
// rows), an engine's sequence of calls, captures and replays. Each case is described once, by its
// schema (the fields() below, harness/case_schema.h), a call's keys by the dense case's schema
// under a prefix ("c0.batch ..."): the generators, the case-file readers (also the fuzz decoders)
// and the writers all follow from them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <rapidcheck.h>

#include "kernels/mla_decode_impl.h"
#include "harness/case_schema.h"
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
  // Not a case key: the roundings the impl under test declares (its contract's precision clauses),
  // handed on to every step's dense case.
  oracle::MlaPrecision precision;

  // Step i as a dense MLA decode case: contiguous views over the graph buffers' shapes, the graph's
  // cache and scales.
  MlaDecodeCase step_case(size_t i) const;
  friend void showValue(const MlaDecodeImplReplayCase& c, std::ostream& os);
};

// The cases with the roundings an impl declares set in every dense call and step they hold (its
// contract's precision clauses: docs/ops.md 7, "Declared precision").
void declare_precision(MlaDecodeImplCallsCase& c, const oracle::MlaPrecision& u);
void declare_precision(MlaDecodeImplReplayCase& c, const oracle::MlaPrecision& u);

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
void declare_precision(MlaDecodeImplSequenceCase& c, const oracle::MlaPrecision& u);

// ---- the schemas ---------------------------------------------------------------------------------

// (request, token, head, split) rows of a 256 MiB workspace.
constexpr int64_t kMlaWorkspaceRows = kMlaMaxCacheBytes / (4 * kernels::kMlaWorkspaceRow);

// The generator's draws (mla_decode_impl_gen.cpp). Configurations: for calls, heads 1..8,
// max_batch 1..4, max_q_len 1..4 or 8, max_splits 1, 2, 8, 16 or 64 (fewer where the workspace
// would pass 1024 rows), table widths 1..40 and the dense generator's pages; for non-uniform
// lengths the same with max_batch and max_q_len of 2 or more; for a sequence heads 1..4, pages 2,
// 8 or 53 with tables of about 64 tokens, max batch 3, max q_len 2.
kernels::MlaDecodeImplConfig draw_mla_calls_config();
kernels::MlaDecodeImplConfig draw_mla_nonuniform_config();
kernels::MlaDecodeImplConfig draw_mla_sequence_config();
// 2..8 query lengths in [1, max_q_len], the first and last differing.
std::vector<int32_t> draw_mla_nonuniform_query_lens(const kernels::MlaDecodeImplConfig& cfg);
// A graph case's shape: tables of about 5, 70, 320 or 640 tokens, padded batch 1..4, q_len 1..8
// (at most 8 (request, token) programs, 4 for 320, 2 for 640), the configuration around them, and
// how many requests are live (the rest are padding rows).
struct MlaReplayDraw {
  kernels::MlaDecodeImplConfig config;
  int64_t padded_batch = 1, q_len = 1, live = 0;
};
MlaReplayDraw draw_mla_replay();
// A step's lengths: 0 past `live` (padding rows), up to max_len (and the first request at max_len
// when long), around the middle's 32-key tile edge now and then.
std::vector<int32_t> draw_mla_step_lens(int64_t padded_batch, int64_t live, int64_t max_len);
// A block table for those lengths from properties/block_table_gen.h (shuffled, shared, garbage).
std::vector<int32_t> draw_mla_step_table(const std::vector<int32_t>& lens, int64_t W, int64_t page);

// The configuration's keys: a workspace of at most 256 MiB (heads and max_splits are read inside
// it), max_batch x table_width at most 2^24 and table_width at most 65535 (a graph's block table row
// is one line of a case). draw: the generator's configuration, drawn whole with max_batch (each
// kind of case draws its own); graph_q_dtype is drawn uniform.
template <class V, class Draw>
void config_fields(V& v, kernels::MlaDecodeImplConfig& c, const Draw& draw) {
  kernels::MlaDecodeImplConfig d;
  v.integer("max_batch", c.max_batch, 1, 1024, [&] {
    d = draw();
    return d.max_batch;
  });
  v.integer("max_q_len", c.max_q_len, 1, kernels::kMlaMaxQueryLen, [&] { return d.max_q_len; });
  const char* const workspace = "max_batch x max_q_len x heads x max_splits gives a workspace of at most 256 MiB";
  with_reason(workspace, [&] {
    v.integer("heads", c.heads, 1, std::min<int64_t>(128, kMlaWorkspaceRows / (c.max_batch * c.max_q_len)),
              [&] { return d.heads; });
  });
  with_reason(workspace, [&] {
    v.integer("max_splits", c.max_splits, 1,
              std::min<int64_t>(kernels::kMlaMaxSplits, kMlaWorkspaceRows / (c.max_batch * c.max_q_len * c.heads)),
              [&] { return d.max_splits; });
  });
  with_reason("max_batch x table_width is at most 2^24, table_width at most 65535", [&] {
    v.integer("table_width", c.block_table_width, 1, std::min<int64_t>(kMlaMaxTable, (int64_t{1} << 24) / c.max_batch),
              [&] { return d.block_table_width; });
  });
  v.integer("page", c.page, 1, 1024, [&] { return d.page; });
  v.named("graph_q_dtype", c.q_dtype, {{"bf16", DType::kBF16}, {"fp8", DType::kFP8E4M3}});
}

// The family of a call on an impl of this configuration: its heads, a batch and q_len inside it,
// drawn light (a light dense case fitted to it).
MlaDecodeFamily mla_impl_call_family(const kernels::MlaDecodeImplConfig& cfg);

// The graphs' shared keys (every graph of a case has the same cache and schedule) but num_blocks,
// which is read after the steps that read its pages (mla_graph_num_blocks_fields).
template <class V, class Draw>
void mla_graph_fields(V& v, MlaDecodeImplReplayCase& c, const Draw& draw_config) {
  config_fields(v, c.config, draw_config);
  v.choice("kv_dtype", c.kv_fp8, {"bf16", "fp8"});
  v.integer("poison", c.poison, 0, 255, [] { return *rc::gen::element<int64_t>(0xFF, 0x7F); });
  v.one_of("warp", c.warp_size, {32, 64});
  v.flag("shuffled", c.shuffled);
}
// A graph's padded_batch and q_len: inside the configuration, its block table one line of a case
// (padded_batch x table_width values) and its query rows within the dense rule's.
template <class V, class DrawBatch, class DrawQLen>
void mla_graph_shape_fields(V& v, const kernels::MlaDecodeImplConfig& cfg, int64_t& padded_batch, int64_t& q_len,
                            const DrawBatch& draw_batch, const DrawQLen& draw_q_len) {
  const char* const rule =
      "inside the configuration, padded_batch x table_width at most 65535, padded_batch x q_len x heads at most 65536";
  with_reason(rule, [&] {
    v.integer("padded_batch", padded_batch, 1,
              std::min({cfg.max_batch, kMlaMaxTable / cfg.block_table_width, kMlaMaxRows / cfg.heads}), draw_batch);
  });
  with_reason(rule, [&] {
    v.integer("q_len", q_len, 1, std::min(cfg.max_q_len, kMlaMaxRows / (cfg.heads * padded_batch)), draw_q_len);
  });
}
// The graphs' cache: every page a step reads (top) inside it, at most 256 MiB; drawn with room for
// any table of `batch` rows the block table generator makes (every needed page and 3 spare).
template <class V>
void mla_graph_num_blocks_fields(V& v, MlaDecodeImplReplayCase& c, const MlaPageRead& top, int64_t batch) {
  const int64_t bytes = (c.kv_fp8 ? 1 : 2) * c.config.page * kernels::kMlaHeadDim;
  with_reason(top.where + "a cache of page x 576 elements a block is at most 256 MiB", [&] {
    v.integer("num_blocks", c.num_blocks, std::max<int64_t>(1, top.page + 1),
              std::min<int64_t>(65536, kMlaMaxCacheBytes / bytes),
              [&] { return batch * c.config.block_table_width + 3; });
  });
}

// A step of graph g (its padded_batch and table width): lengths the table holds, a page >= 0 in
// each column a request reads (top: the highest so far, for num_blocks), anything in the others.
// draw_lens: the generator's lengths; the table is drawn from properties/block_table_gen.h.
template <class V, class DrawLens>
void mla_step_fields(V& v, MlaDecodeImplReplayStep& s, const MlaDecodeImplReplayCase& g, MlaPageRead& top,
                     const DrawLens& draw_lens) {
  const int64_t W = g.config.block_table_width, page = g.config.page;
  with_reason("a request's pages must fit the graph's table_width, and it has at most 65536 keys", [&] {
    v.list("seq_lens", s.lens, g.padded_batch, 0, std::min(kMlaMaxCaseKeys, W * page), draw_lens);
  });
  v.list_from("block_table", s.table, mla_table_lows(s.lens, W, page), INT32_MAX,
              [&] { return draw_mla_step_table(s.lens, W, page); });
  note_highest_page(top, s.lens, s.table, W, page, v.prefix());
  v.unsigned_integer("seed", s.seed);
  v.integer("zero_rows", s.zero_rows, 0, 1, [] { return *rc::gen::inRange(0, 4) == 0; });  // a flag, 1 drawn 1 in 4
}
// "" when step i of graph c reads as a dense case over the graph's cache with c's scales (lengths
// the table holds, pages inside the cache, scales, the cache's size: what the reads ensure), else
// why not.
std::string mla_step_problem(const MlaDecodeImplReplayCase& c, size_t i, const std::string& key_prefix);

// A sequence command's kind: eager, capture, or (once a graph is captured) replay; drawn 2 : 1 : 3.
template <class V>
void mla_command_kind_field(V& v, MlaDecodeImplCommand& m, bool any_captured) {
  using Kind = MlaDecodeImplCommand::Kind;
  const auto draw = [any_captured] {
    return static_cast<Kind>(*rc::gen::weightedElement<int>({{2, 0}, {1, 1}, {any_captured ? 3 : 0, 2}}));
  };
  if (any_captured) {
    v.choice("command", m.kind, {"eager", "capture", "replay"}, draw);
  } else {
    with_reason("no graph is captured yet to replay", [&] { v.choice("command", m.kind, {"eager", "capture"}, draw); });
  }
}
// A replay's padded_batch or q_len: one of the values captured before, read as a choice among them.
template <class V>
void mla_captured_field(V& v, const char* key, int64_t& value, const std::vector<int64_t>& captured) {
  std::vector<std::string> words;
  for (int64_t x : captured) words.push_back(std::to_string(x));
  std::vector<std::pair<const char*, int64_t>> names;
  for (size_t i = 0; i < words.size(); ++i) names.emplace_back(words[i].c_str(), captured[i]);
  with_reason("a replay replays a graph an earlier command captured", [&] { v.named(key, value, names); });
}

// The calls case: the configuration, `calls N` (1..16), then each call's keys prefixed "c<i>.".
template <class V>
void fields(V& v, MlaDecodeImplCallsCase& c) {
  config_fields(v, c.config, draw_mla_calls_config);
  int64_t n = static_cast<int64_t>(c.calls.size());
  v.integer("calls", n, 1, 16, [] { return *rc::gen::inRange(2, 4); });
  c.calls.resize(static_cast<size_t>(n));
  const MlaDecodeFamily call = mla_impl_call_family(c.config);
  for (size_t i = 0; i < c.calls.size(); ++i) {
    v.prefixed("c" + std::to_string(i) + ".", [&] { fields(v, c.calls[i], call); });
  }
}

// The non-uniform case: the configuration (max_batch and max_q_len both 2 or more), query_lens
// (2..64 of them, the first and last differing) and one seq_len a request.
template <class V>
void fields(V& v, MlaDecodeImplNonUniformCase& c) {
  config_fields(v, c.config, draw_mla_nonuniform_config);
  const kernels::MlaDecodeImplConfig& cfg = c.config;
  v.rule(cfg.max_q_len >= 2 && cfg.max_batch >= 2,
         "max_q_len " + std::to_string(cfg.max_q_len) + " and max_batch " + std::to_string(cfg.max_batch) +
             ": two requests with different query lengths need both >= 2");
  v.list("query_lens", c.query_lens, Length{2, std::min<int64_t>(64, cfg.max_batch)}, 1, cfg.max_q_len,
         [&] { return draw_mla_nonuniform_query_lens(cfg); });
  v.rule(c.query_lens.front() != c.query_lens.back(), "query_lens " + std::to_string(c.query_lens.front()) + " ... " +
                                                          std::to_string(c.query_lens.back()) +
                                                          " must differ at the first and last request");
  v.list("seq_lens", c.seq_lens, static_cast<int64_t>(c.query_lens.size()), 0,
         std::min(cfg.block_table_width * cfg.page, kMlaMaxCaseKeys));
}

// The replay case: the graphs' keys, padded_batch and q_len inside the configuration, the scales,
// `steps N` (1..8), then each step's keys prefixed "s<i>." (each valid as a dense case over the
// graph's cache), num_blocks last (its range starts past the highest page the steps read).
template <class V>
void fields(V& v, MlaDecodeImplReplayCase& c) {
  MlaReplayDraw d;  // the generator's graph, drawn whole with the configuration
  mla_graph_fields(v, c, [&] {
    d = draw_mla_replay();
    return d.config;
  });
  mla_graph_shape_fields(v, c.config, c.padded_batch, c.q_len, [&] { return d.padded_batch; }, [&] { return d.q_len; });
  mla_scale_fields(v, c.base_scale, c.q_scale, c.k_scale, Among{1.0 / std::sqrt(192.0), 0.5}, Among{1.0, 0.25, 0.8123},
                   Among{1.0, 1.5, 0.0625});
  // Step 0 (at capture) with lengths up to 4, then 1 (sometimes 2) steps up to what the table holds.
  int64_t n = static_cast<int64_t>(c.steps.size());
  v.integer("steps", n, 1, 8, [] { return *rc::gen::weightedElement<int64_t>({{3, 2}, {1, 3}}); });
  c.steps.resize(static_cast<size_t>(n));
  const int64_t tokens = c.config.block_table_width * c.config.page;
  MlaPageRead top;
  for (size_t i = 0; i < c.steps.size(); ++i) {
    v.prefixed("s" + std::to_string(i) + ".", [&] {
      mla_step_fields(v, c.steps[i], c, top, [&] {
        return draw_mla_step_lens(c.padded_batch, d.live, i == 0 ? std::min<int64_t>(4, tokens) : tokens);
      });
    });
  }
  mla_graph_num_blocks_fields(v, c, top, c.padded_batch);
  for (size_t i = 0; i < c.steps.size(); ++i) {
    const std::string problem = mla_step_problem(c, i, "s" + std::to_string(i) + ".");
    v.rule(problem.empty(), problem);
  }
}

// The sequence case: the graphs' keys, `commands N` (0..64), then for each m<i>.command eager (and
// the call's keys prefixed m<i>.), capture (m<i>.padded_batch, m<i>.q_len, m<i>.base_scale, ...) or
// replay (m<i>.padded_batch and m<i>.q_len, read as choices among what was captured before, and the
// step's keys); num_blocks is read after the commands.
template <class V>
void fields(V& v, MlaDecodeImplSequenceCase& c) {
  mla_graph_fields(v, c.shape, draw_mla_sequence_config);
  const kernels::MlaDecodeImplConfig& cfg = c.shape.config;
  const MlaDecodeFamily call = mla_impl_call_family(cfg);
  int64_t n = static_cast<int64_t>(c.commands.size());
  v.integer("commands", n, 0, 64, [] { return *rc::gen::inRange(1, 13); });
  c.commands.resize(static_cast<size_t>(n));
  std::map<int64_t, std::vector<int64_t>> captured;  // padded_batch -> its q_lens captured so far, ascending
  MlaPageRead top;
  for (size_t i = 0; i < c.commands.size(); ++i) {
    MlaDecodeImplCommand& m = c.commands[i];
    v.prefixed("m" + std::to_string(i) + ".", [&] {
      mla_command_kind_field(v, m, !captured.empty());
      if (m.kind == MlaDecodeImplCommand::kEager) {
        fields(v, m.eager, call);
      } else if (m.kind == MlaDecodeImplCommand::kCapture) {
        mla_graph_shape_fields(
            v, cfg, m.padded_batch, m.q_len, [&] { return *rc::gen::inRange<int64_t>(1, cfg.max_batch + 1); },
            [&] { return *rc::gen::inRange<int64_t>(1, cfg.max_q_len + 1); });
        mla_scale_fields(v, m.base_scale, m.q_scale, m.k_scale, Among{0.0721, 0.5}, Among{1.0, 0.25}, Among{1.0, 2.0});
        std::vector<int64_t>& q_lens = captured[m.padded_batch];
        if (!std::binary_search(q_lens.begin(), q_lens.end(), m.q_len)) {
          q_lens.insert(std::upper_bound(q_lens.begin(), q_lens.end(), m.q_len), m.q_len);
        }
      } else {
        // A replay: padded_batch, then q_len, one of a graph captured before.
        std::vector<int64_t> batches;
        for (const auto& [batch, q_lens] : captured) batches.push_back(batch);
        mla_captured_field(v, "padded_batch", m.padded_batch, batches);
        mla_captured_field(v, "q_len", m.q_len, captured.at(m.padded_batch));
        mla_step_fields(v, m.step, c.graph(m), top, [&] {
          return draw_mla_step_lens(m.padded_batch, *rc::gen::inRange<int64_t>(0, m.padded_batch + 1),
                                    cfg.block_table_width * cfg.page);
        });
      }
    });
  }
  mla_graph_num_blocks_fields(v, c.shape, top, cfg.max_batch);
  for (size_t i = 0; i < c.commands.size(); ++i) {
    if (c.commands[i].kind != MlaDecodeImplCommand::kReplay) continue;
    const std::string problem = mla_step_problem(c.graph(c.commands[i]), 0, "m" + std::to_string(i) + ".");
    v.rule(problem.empty(), problem);
  }
}

// The cases as case-text keys, appended to out (after its property / impl / backend), and the
// inverses (a value out of its range, or a rule broken, throws mlacheck::Error naming the key).
void mla_decode_impl_calls_to_text(const MlaDecodeImplCallsCase& c, CaseText& out);
MlaDecodeImplCallsCase mla_decode_impl_calls_from_text(const CaseText& t);
void mla_decode_impl_nonuniform_to_text(const MlaDecodeImplNonUniformCase& c, CaseText& out);
MlaDecodeImplNonUniformCase mla_decode_impl_nonuniform_from_text(const CaseText& t);
void mla_decode_impl_replay_to_text(const MlaDecodeImplReplayCase& c, CaseText& out);
MlaDecodeImplReplayCase mla_decode_impl_replay_from_text(const CaseText& t);
void mla_decode_impl_sequence_to_text(const MlaDecodeImplSequenceCase& c, CaseText& out);
MlaDecodeImplSequenceCase mla_decode_impl_sequence_from_text(const CaseText& t);

namespace gen {

// A configuration (heads 1..8, max_batch 1..4, max_q_len 1..4 or 8, max_splits 1, 2, 8, 16 or 64,
// fewer where the workspace would pass 1024 rows; table widths and pages of every size the dense
// generator uses, bf16 or fp8 graph q) and 2..3 calls, each a light dense case fitted to it (scales
// differ between calls most of the time).
rc::Gen<MlaDecodeImplCallsCase> mla_decode_impl_calls_case();
// A graph case: pages 1, 2, 3, 16, 53, 61, 64, 69, tables holding about 5, 70, 320 or 640 tokens
// (640: more than one split), padded batch 1..4 with 0..padded_batch live requests, q_len 1..8 (at
// most 8 (request, token) programs, 4 for 320, 2 for 640), bf16 or fp8 q and cache; step 0 with
// lengths up to 4, then 1 (sometimes 2) steps up to what the table holds.
rc::Gen<MlaDecodeImplReplayCase> mla_decode_impl_replay_case();
// An engine's sequence: heads 1..4, pages 2, 8 or 53 with tables of about 64 tokens, max batch 3,
// max q_len 2; 1..12 commands (eager calls, captures of any padded batch and q_len, replays of a
// captured graph with 0..padded_batch live requests).
rc::Gen<MlaDecodeImplSequenceCase> mla_decode_impl_sequence_case();
// A configuration with max_batch and max_q_len of 2 or more, and 2..8 requests whose query lengths
// differ at the first and last.
rc::Gen<MlaDecodeImplNonUniformCase> mla_decode_impl_nonuniform_case();

}  // namespace gen
}  // namespace mlacheck
