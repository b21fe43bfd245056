// Generators of mla_decode_impl call sequences and graph replays, and their text form
// (properties/mla_decode_impl_gen.h).
// Why one file past 500 lines: the impl's three case kinds (calls, a replay, an engine sequence)
// are built from one another and share the readers of their sub-cases.
#include "properties/mla_decode_impl_gen.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <sstream>
#include <tuple>

#include "core/error.h"
#include "properties/block_table_gen.h"

namespace mlacheck {

using kernels::MlaDecodeImplConfig;

namespace {

// The words of every key of a formatted case, in order.
std::vector<std::pair<std::string, std::vector<std::string>>> entries_of(const CaseText& t) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  std::istringstream lines(t.format());
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string key, w;
    words >> key;
    std::vector<std::string> values;
    while (words >> w) values.push_back(w);
    out.emplace_back(key, std::move(values));
  }
  return out;
}

// Runs read, rethrowing its mlacheck::Error with where the keys came from.
template <class F>
auto with_context(const std::string& where, F&& read) {
  try {
    return read();
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
}


constexpr int64_t kDim = kernels::kMlaHeadDim;
constexpr int64_t kMaxRows = 65536;                   // the dense rule: batch x q_len x heads query rows
constexpr int64_t kMaxTable = 65535;                  // values of one key in a case file
constexpr int64_t kMaxCacheBytes = int64_t{1} << 28;  // what a case may stage for its cache
// (request, token, head, split) rows of a 256 MiB workspace.
constexpr int64_t kWorkspaceRows = (int64_t{1} << 28) / (4 * kernels::kMlaWorkspaceRow);

// A graph's padded batch and q_len: inside the configuration, its block table one line of a case
// (padded_batch x table_width values) and its query rows within the dense rule's.
int64_t graph_max_batch(const MlaDecodeImplConfig& cfg) {
  return std::min({cfg.max_batch, kMaxTable / cfg.block_table_width, kMaxRows / cfg.heads});
}
int64_t graph_max_q_len(const MlaDecodeImplConfig& cfg, int64_t padded_batch) {
  return std::min(cfg.max_q_len, kMaxRows / (cfg.heads * padded_batch));
}
const char* const kGraphShapeRule =
    "inside the configuration, padded_batch x table_width at most 65535, padded_batch x q_len x heads at most 65536";

}  // namespace

void showValue(const MlaDecodeImplCallsCase& c, std::ostream& os) {
  CaseText t;
  mla_decode_impl_calls_to_text(c, t);
  os << t.format();
}

void showValue(const MlaDecodeImplSequenceCase& c, std::ostream& os) {
  CaseText t;
  mla_decode_impl_sequence_to_text(c, t);
  os << t.format();
}

void showValue(const MlaDecodeImplReplayCase& c, std::ostream& os) {
  CaseText t;
  mla_decode_impl_replay_to_text(c, t);
  os << t.format();
}

MlaDecodeCase MlaDecodeImplReplayCase::step_case(size_t i) const {
  const MlaDecodeImplReplayStep& s = steps.at(i);
  MlaDecodeCase c;
  c.B = padded_batch, c.q_len = q_len, c.H = config.heads, c.page = config.page;
  c.lens = s.lens, c.W = config.block_table_width, c.num_blocks = num_blocks, c.table = s.table;
  c.q_fp8 = config.q_dtype == DType::kFP8E4M3, c.kv_fp8 = kv_fp8;
  c.base_scale = base_scale, c.q_scale = q_scale, c.k_scale = k_scale;
  c.poison = poison, c.zero_rows = s.zero_rows, c.seed = s.seed, c.warp_size = warp_size, c.shuffled = shuffled;
  return c;
}

// ---- text ----------------------------------------------------------------------------------------

void mla_decode_impl_config_to_text(const MlaDecodeImplConfig& c, CaseText& out) {
  out.set("max_batch", c.max_batch).set("max_q_len", c.max_q_len).set("heads", c.heads);
  out.set("max_splits", c.max_splits).set("table_width", c.block_table_width).set("page", c.page);
  out.set("graph_q_dtype", c.q_dtype == DType::kFP8E4M3 ? "fp8" : "bf16");
}

MlaDecodeImplConfig mla_decode_impl_config_from_text(const CaseText& t) {
  MlaDecodeImplConfig c;
  c.max_batch = t.integer("max_batch", 1, 1024);
  c.max_q_len = t.integer("max_q_len", 1, kernels::kMlaMaxQueryLen);
  // A workspace of at most 256 MiB: heads and then max_splits leave room for each other.
  const char* const workspace = "max_batch x max_q_len x heads x max_splits gives a workspace of at most 256 MiB";
  c.heads = with_reason(workspace, [&] {
    return t.integer("heads", 1, std::min<int64_t>(128, kWorkspaceRows / (c.max_batch * c.max_q_len)));
  });
  c.max_splits = with_reason(workspace, [&] {
    return t.integer("max_splits", 1,
                     std::min<int64_t>(kernels::kMlaMaxSplits, kWorkspaceRows / (c.max_batch * c.max_q_len * c.heads)));
  });
  // A graph's block table row holds table_width values, one line of a case at most.
  c.block_table_width = with_reason("max_batch x table_width is at most 2^24, table_width at most 65535", [&] {
    return t.integer("table_width", 1, std::min<int64_t>(kMaxTable, (int64_t{1} << 24) / c.max_batch));
  });
  c.page = t.integer("page", 1, 1024);
  c.q_dtype = t.choice("graph_q_dtype", {"bf16", "fp8"}) == 1 ? DType::kFP8E4M3 : DType::kBF16;
  MLA_REQUIRE(4 * kernels::mla_decode_workspace_floats(c.max_batch, c.max_q_len, c.heads, c.max_splits) <=
                  (int64_t{1} << 28),
              "case: max_batch x max_q_len x heads x max_splits gives a workspace over 256 MiB");
  MLA_REQUIRE(c.max_batch * c.block_table_width <= (1 << 24), "case: max_batch x table_width is over 2^24");
  return c;
}

void mla_decode_to_text_prefixed(const MlaDecodeCase& c, const std::string& prefix, CaseText& out) {
  CaseText sub;
  mla_decode_to_text(c, sub);
  for (auto& [key, words] : entries_of(sub)) out.set_words(prefix + key, std::move(words));
}

void mla_decode_impl_calls_to_text(const MlaDecodeImplCallsCase& c, CaseText& out) {
  mla_decode_impl_config_to_text(c.config, out);
  out.set("calls", static_cast<int64_t>(c.calls.size()));
  for (size_t i = 0; i < c.calls.size(); ++i) {
    mla_decode_to_text_prefixed(c.calls[i], "c" + std::to_string(i) + ".", out);
  }
}

MlaDecodeImplCallsCase mla_decode_impl_calls_from_text(const CaseText& t) {
  MlaDecodeImplCallsCase c;
  c.config = mla_decode_impl_config_from_text(t);
  const int64_t n = t.integer("calls", 1, 16);
  // Each call has the configuration's heads and a batch and q_len inside it.
  const MlaDecodeTextLimits fits{c.config.max_batch, c.config.max_q_len, c.config.heads};
  for (int64_t i = 0; i < n; ++i) {
    const std::string p = "c" + std::to_string(i) + ".";
    MlaDecodeCase call = mla_decode_from_text(t, p, fits);
    MLA_REQUIRE(call.H == c.config.heads, "case: ", p, "heads is ", call.H, ", not the configuration's ",
                c.config.heads);
    MLA_REQUIRE(call.B <= c.config.max_batch, "case: ", p, "batch ", call.B, " is past max_batch ", c.config.max_batch);
    MLA_REQUIRE(call.q_len <= c.config.max_q_len, "case: ", p, "q_len ", call.q_len, " is past max_q_len ",
                c.config.max_q_len);
    c.calls.push_back(std::move(call));
  }
  return c;
}

void mla_decode_impl_nonuniform_to_text(const MlaDecodeImplNonUniformCase& c, CaseText& out) {
  mla_decode_impl_config_to_text(c.config, out);
  out.set_list("query_lens", c.query_lens);
  out.set_list("seq_lens", c.seq_lens);
}

MlaDecodeImplNonUniformCase mla_decode_impl_nonuniform_from_text(const CaseText& t) {
  MlaDecodeImplNonUniformCase c;
  c.config = mla_decode_impl_config_from_text(t);
  MLA_REQUIRE(c.config.max_q_len >= 2 && c.config.max_batch >= 2, "case: max_q_len ", c.config.max_q_len,
              " and max_batch ", c.config.max_batch, ": two requests with different query lengths need both >= 2");
  const size_t B = t.list_length("query_lens", 2, static_cast<size_t>(std::min<int64_t>(64, c.config.max_batch)));
  c.query_lens = t.list_exactly<int32_t>("query_lens", 1, c.config.max_q_len, B);
  // The last length differs from the first, whatever the others are.
  MLA_REQUIRE(c.query_lens.front() != c.query_lens.back(), "case: query_lens ", c.query_lens.front(), " ... ",
              c.query_lens.back(), " must differ at the first and last request");
  c.seq_lens = t.list_exactly<int32_t>("seq_lens", 0,
                                       std::min<int64_t>(c.config.block_table_width * c.config.page, kMlaMaxCaseKeys), B);
  return c;
}

namespace {

// The graphs' shared keys (every graph of the case has the same cache and schedule).
void graph_shape_to_text(const MlaDecodeImplReplayCase& c, CaseText& out) {
  mla_decode_impl_config_to_text(c.config, out);
  out.set("num_blocks", c.num_blocks).set("kv_dtype", c.kv_fp8 ? "fp8" : "bf16");
  out.set("poison", int64_t{c.poison}).set("warp", int64_t{c.warp_size}).set("shuffled", c.shuffled);
}
// All but num_blocks, which is read after the steps that read its pages (graph_num_blocks_from_text).
MlaDecodeImplReplayCase graph_shape_from_text(const CaseText& t) {
  MlaDecodeImplReplayCase c;
  c.config = mla_decode_impl_config_from_text(t);
  c.kv_fp8 = t.choice("kv_dtype", {"bf16", "fp8"}) == 1;
  c.poison = static_cast<uint8_t>(t.integer("poison", 0, 255));
  c.warp_size = static_cast<int>(t.one_of("warp", {32, 64}));
  c.shuffled = t.flag("shuffled");
  return c;
}

// The highest page a graph step reads, and where (for a refusal's message).
struct PageRead {
  int64_t page = -1;
  std::string where;
};

// The graphs' cache: every page a step reads inside it, at most 256 MiB.
void graph_num_blocks_from_text(const CaseText& t, MlaDecodeImplReplayCase& c, const PageRead& top) {
  const int64_t max_blocks = std::min<int64_t>(65536, kMaxCacheBytes / ((c.kv_fp8 ? 1 : 2) * c.config.page * kDim));
  c.num_blocks = with_reason(top.where + "a cache of page x 576 elements a block is at most 256 MiB", [&] {
    return t.integer("num_blocks", std::max<int64_t>(1, top.page + 1), max_blocks);
  });
}

void scales_to_text(const MlaDecodeImplReplayCase& c, const std::string& p, CaseText& out) {
  out.set_real(p + "base_scale", c.base_scale).set_real(p + "q_scale", c.q_scale).set_real(p + "k_scale", c.k_scale);
}
void scales_from_text(const CaseText& t, const std::string& p, MlaDecodeImplReplayCase& c) {
  mla_decode_scales_from_text(t, p, c.base_scale, c.q_scale, c.k_scale);
}

void step_to_text(const MlaDecodeImplReplayStep& s, const std::string& p, CaseText& out) {
  out.set_list(p + "seq_lens", s.lens).set_list(p + "block_table", s.table);
  out.set(p + "seed", s.seed).set(p + "zero_rows", s.zero_rows);
}
// A step of graph c (its padded_batch and table width): lengths the table holds, a page >= 0 in
// each column a request reads (top: the highest so far, for num_blocks), anything in the others.
MlaDecodeImplReplayStep step_from_text(const CaseText& t, const std::string& p, const MlaDecodeImplReplayCase& c,
                                       PageRead& top) {
  MlaDecodeImplReplayStep s;
  const int64_t W = c.config.block_table_width, page = c.config.page;
  s.lens = with_reason("a request's pages must fit the graph's table_width, and it has at most 65536 keys", [&] {
    return t.list_exactly<int32_t>(p + "seq_lens", 0, std::min<int64_t>(kMlaMaxCaseKeys, W * page),
                                   static_cast<size_t>(c.padded_batch));
  });
  std::vector<int64_t> lows(static_cast<size_t>(c.padded_batch * W), INT32_MIN);
  for (int64_t b = 0; b < c.padded_batch; ++b) {
    const int64_t needed = (s.lens[static_cast<size_t>(b)] + page - 1) / page;
    for (int64_t w = 0; w < needed; ++w) lows[static_cast<size_t>(b * W + w)] = 0;
  }
  for (int64_t v : t.integers_from(p + "block_table", lows, INT32_MAX)) s.table.push_back(static_cast<int32_t>(v));
  for (size_t i = 0; i < lows.size(); ++i) {
    if (lows[i] == 0 && s.table[i] > top.page) {
      top.page = s.table[i];
      top.where = p + "block_table value " + std::to_string(i) + " reads page " + std::to_string(s.table[i]) + "; ";
    }
  }
  s.seed = t.unsigned_integer(p + "seed");
  s.zero_rows = t.flag(p + "zero_rows");
  return s;
}

// Step i of graph c checked as a dense case over the graph's cache with c's scales (lengths the
// table holds, pages inside the cache, scales, the cache's size): what the reads above ensure.
void check_step(const MlaDecodeImplReplayCase& c, size_t i, const std::string& p) {
  CaseText sub;
  mla_decode_to_text(c.step_case(i), sub);
  with_context("step " + p, [&] { return mla_decode_from_text(sub); });
}

}  // namespace

void mla_decode_impl_replay_to_text(const MlaDecodeImplReplayCase& c, CaseText& out) {
  graph_shape_to_text(c, out);
  out.set("padded_batch", c.padded_batch).set("q_len", c.q_len);
  scales_to_text(c, "", out);
  out.set("steps", static_cast<int64_t>(c.steps.size()));
  for (size_t i = 0; i < c.steps.size(); ++i) step_to_text(c.steps[i], "s" + std::to_string(i) + ".", out);
}

MlaDecodeImplReplayCase mla_decode_impl_replay_from_text(const CaseText& t) {
  MlaDecodeImplReplayCase c = graph_shape_from_text(t);
  c.padded_batch =
      with_reason(kGraphShapeRule, [&] { return t.integer("padded_batch", 1, graph_max_batch(c.config)); });
  c.q_len = with_reason(kGraphShapeRule, [&] { return t.integer("q_len", 1, graph_max_q_len(c.config, c.padded_batch)); });
  scales_from_text(t, "", c);
  const int64_t n = t.integer("steps", 1, 8);
  PageRead top;
  for (int64_t i = 0; i < n; ++i) c.steps.push_back(step_from_text(t, "s" + std::to_string(i) + ".", c, top));
  graph_num_blocks_from_text(t, c, top);
  for (size_t i = 0; i < c.steps.size(); ++i) check_step(c, i, "s" + std::to_string(i) + ".");
  return c;
}

MlaDecodeImplReplayCase MlaDecodeImplSequenceCase::graph(const MlaDecodeImplCommand& replay) const {
  MlaDecodeImplReplayCase c = shape;
  c.padded_batch = replay.padded_batch, c.q_len = replay.q_len;
  c.steps = {replay.step};
  for (const MlaDecodeImplCommand& m : commands) {
    if (&m == &replay) break;
    if (m.kind == MlaDecodeImplCommand::kCapture && m.padded_batch == c.padded_batch && m.q_len == c.q_len) {
      c.base_scale = m.base_scale, c.q_scale = m.q_scale, c.k_scale = m.k_scale;
    }
  }
  return c;
}

void mla_decode_impl_sequence_to_text(const MlaDecodeImplSequenceCase& c, CaseText& out) {
  graph_shape_to_text(c.shape, out);
  out.set("commands", static_cast<int64_t>(c.commands.size()));
  for (size_t i = 0; i < c.commands.size(); ++i) {
    const MlaDecodeImplCommand& m = c.commands[i];
    const std::string p = "m" + std::to_string(i) + ".";
    out.set(p + "command", m.kind == MlaDecodeImplCommand::kEager     ? "eager"
                           : m.kind == MlaDecodeImplCommand::kCapture ? "capture"
                                                                      : "replay");
    if (m.kind == MlaDecodeImplCommand::kEager) {
      mla_decode_to_text_prefixed(m.eager, p, out);
      continue;
    }
    out.set(p + "padded_batch", m.padded_batch).set(p + "q_len", m.q_len);
    if (m.kind == MlaDecodeImplCommand::kCapture) {
      MlaDecodeImplReplayCase scales;
      scales.base_scale = m.base_scale, scales.q_scale = m.q_scale, scales.k_scale = m.k_scale;
      scales_to_text(scales, p, out);
    } else {
      step_to_text(m.step, p, out);
    }
  }
}

MlaDecodeImplSequenceCase mla_decode_impl_sequence_from_text(const CaseText& t) {
  MlaDecodeImplSequenceCase c;
  c.shape = graph_shape_from_text(t);
  const kernels::MlaDecodeImplConfig& cfg = c.shape.config;
  const MlaDecodeTextLimits fits{cfg.max_batch, cfg.max_q_len, cfg.heads};
  const int64_t n = t.integer("commands", 0, 64);
  std::map<int64_t, std::vector<int64_t>> captured;  // padded_batch -> its q_lens captured so far, ascending
  PageRead top;
  std::vector<std::string> replays;  // the replays' prefixes, in order
  for (int64_t i = 0; i < n; ++i) {
    const std::string p = "m" + std::to_string(i) + ".";
    MlaDecodeImplCommand m;
    // A replay only once something is captured.
    m.kind = static_cast<MlaDecodeImplCommand::Kind>(
        captured.empty() ? with_reason("no graph is captured yet to replay",
                                   [&] { return t.choice(p + "command", {"eager", "capture"}); })
                         : t.choice(p + "command", {"eager", "capture", "replay"}));
    if (m.kind == MlaDecodeImplCommand::kEager) {
      m.eager = mla_decode_from_text(t, p, fits);
      MLA_REQUIRE(m.eager.H == cfg.heads && m.eager.B <= cfg.max_batch && m.eager.q_len <= cfg.max_q_len, "case: ", p,
                  "heads, batch or q_len do not fit the configuration");
      c.commands.push_back(std::move(m));
      continue;
    }
    if (m.kind == MlaDecodeImplCommand::kCapture) {
      m.padded_batch =
          with_reason(kGraphShapeRule, [&] { return t.integer(p + "padded_batch", 1, graph_max_batch(cfg)); });
      m.q_len =
          with_reason(kGraphShapeRule, [&] { return t.integer(p + "q_len", 1, graph_max_q_len(cfg, m.padded_batch)); });
      MlaDecodeImplReplayCase scales = c.shape;
      scales_from_text(t, p, scales);
      m.base_scale = scales.base_scale, m.q_scale = scales.q_scale, m.k_scale = scales.k_scale;
      // As the dense case checks its launch scales: each, and the softmax scale, a normal float with room.
      const double lo = std::ldexp(1.0, -120), hi = std::ldexp(1.0, 120);
      for (const double v : {m.base_scale, m.q_scale, m.k_scale, m.base_scale * m.q_scale * m.k_scale}) {
        MLA_REQUIRE(std::isfinite(v) && v >= lo && v <= hi, "case: ", p, "scales give ", v, ", not in [2^-120, 2^120]");
      }
      std::vector<int64_t>& q_lens = captured[m.padded_batch];
      if (!std::binary_search(q_lens.begin(), q_lens.end(), m.q_len)) {
        q_lens.insert(std::upper_bound(q_lens.begin(), q_lens.end(), m.q_len), m.q_len);
      }
      c.commands.push_back(std::move(m));
      continue;
    }
    // A replay: padded_batch, then q_len, one of a graph captured before.
    const auto pick = [&](const std::string& key, const std::vector<int64_t>& values) {
      std::vector<std::string> words;
      for (int64_t v : values) words.push_back(std::to_string(v));
      std::vector<const char*> allowed;
      for (const std::string& w : words) allowed.push_back(w.c_str());
      return with_reason("a replay replays a graph an earlier command captured",
                     [&] { return values[static_cast<size_t>(t.choices_exactly(key, allowed, 1)[0])]; });
    };
    std::vector<int64_t> batches;
    for (const auto& [batch, q_lens] : captured) batches.push_back(batch);
    m.padded_batch = pick(p + "padded_batch", batches);
    m.q_len = pick(p + "q_len", captured.at(m.padded_batch));
    c.commands.push_back(m);
    m.step = step_from_text(t, p, c.graph(c.commands.back()), top);
    c.commands.back() = std::move(m);
    replays.push_back(p);
  }
  graph_num_blocks_from_text(t, c.shape, top);
  size_t r = 0;
  for (const MlaDecodeImplCommand& m : c.commands) {
    if (m.kind == MlaDecodeImplCommand::kReplay) check_step(c.graph(m), 0, replays[r++]);
  }
  return c;
}

// ---- generators ----------------------------------------------------------------------------------

namespace gen {
namespace {

// At most 1024 (request, token, head, split) rows of workspace (2 MiB): a call arms and checks all
// of it, and a case of 64 splits over 4 x 8 x 8 rows would spend its time poisoning 33 MB.
void limit_workspace(MlaDecodeImplConfig& c) {
  while (c.max_batch * c.max_q_len * c.heads * c.max_splits > 1024 && c.max_splits > 1) c.max_splits /= 2;
}

}  // namespace

rc::Gen<MlaDecodeImplConfig> mla_decode_impl_config() {
  return rc::gen::exec([] {
    MlaDecodeImplConfig c;
    c.max_batch = *rc::gen::inRange(1, 5);
    c.max_q_len =
        *rc::gen::weightedOneOf<int64_t>({{6, rc::gen::inRange<int64_t>(1, 5)}, {1, rc::gen::just<int64_t>(8)}});
    c.heads = *rc::gen::inRange(1, 9);
    c.max_splits = *rc::gen::element<int64_t>(1, 2, 8, 16, kernels::kMlaMaxSplits);
    c.page = *rc::gen::element<int64_t>(1, 2, 3, 16, 53, 61, 64, 69);
    c.block_table_width = *rc::gen::inRange(1, 41);
    c.q_dtype = *rc::gen::arbitrary<bool>() ? DType::kFP8E4M3 : DType::kBF16;
    limit_workspace(c);
    return c;
  });
}

rc::Gen<MlaDecodeCase> mla_decode_impl_call(const MlaDecodeImplConfig& config) {
  return rc::gen::exec([config] {
    MlaDecodeCase c = *mla_decode_case(MlaDecodeSize::kLight);
    // Fewer requests, tokens and at most as many head quads as the generator chose: no more work.
    c.H = config.heads;
    c.q_len = std::min(c.q_len, config.max_q_len);
    if (c.B > config.max_batch) {
      c.B = config.max_batch;
      c.lens.resize(static_cast<size_t>(c.B));
      fill_mla_decode_block_table(c);
    }
    return c;
  });
}

rc::Gen<MlaDecodeImplCallsCase> mla_decode_impl_calls_case() {
  return rc::gen::exec([] {
    MlaDecodeImplCallsCase c;
    c.config = *mla_decode_impl_config();
    c.calls = *rc::gen::container<std::vector<MlaDecodeCase>>(static_cast<size_t>(*rc::gen::inRange(2, 4)),
                                                             mla_decode_impl_call(c.config));
    return c;
  });
}

rc::Gen<MlaDecodeImplReplayStep> mla_decode_impl_replay_step(const MlaDecodeImplReplayCase& c, int64_t live,
                                                             int64_t max_len) {
  const int64_t B = c.padded_batch, W = c.config.block_table_width, page = c.config.page;
  return rc::gen::exec([B, W, page, live, max_len] {
    MlaDecodeImplReplayStep s;
    s.lens.assign(static_cast<size_t>(B), 0);  // rows past `live` are graph padding
    for (int64_t b = 0; b < live; ++b) {
      s.lens[static_cast<size_t>(b)] = *rc::gen::weightedOneOf<int32_t>(
          {{3, rc::gen::inRange(0, static_cast<int>(max_len) + 1)},
           {1, rc::gen::map(rc::gen::element(-1, 0, 1), [max_len](int d) {  // by value: shrinking runs it later
              return static_cast<int32_t>(std::clamp<int64_t>(max_len / 2 / 32 * 32 + d, 0, max_len));
            })}});
    }
    if (live > 0 && max_len > 4) s.lens[0] = static_cast<int32_t>(max_len);  // as long as the table holds
    std::vector<int64_t> needed;
    for (int32_t l : s.lens) needed.push_back((l + page - 1) / page);
    s.table = (*paged_block_table(needed, W)).table;
    s.seed = *rc::gen::arbitrary<uint64_t>();
    s.zero_rows = *rc::gen::inRange(0, 4) == 0;
    return s;
  });
}

rc::Gen<MlaDecodeImplReplayCase> mla_decode_impl_replay_case() {
  return rc::gen::exec([] {
    MlaDecodeImplReplayCase c;
    // 640: past 2 x 256 keys, so the capture's split count is more than one even on the host (and a
    // capture that chose it for its own short lengths differs from an eager launch); then at most 2
    // (request, token) programs.
    const int64_t max_len = *rc::gen::weightedOneOf<int64_t>(
        {{2, rc::gen::just<int64_t>(5)}, {3, rc::gen::just<int64_t>(70)}, {3, rc::gen::just<int64_t>(320)},
         {1, rc::gen::just<int64_t>(640)}});
    const int64_t programs = max_len == 640 ? 2 : max_len == 320 ? 4 : 8;
    c.padded_batch = *rc::gen::inRange<int64_t>(1, std::min<int64_t>(4, programs) + 1);
    c.q_len = *rc::gen::inRange<int64_t>(1, std::max<int64_t>(2, programs / c.padded_batch + 1));
    c.config.heads = *rc::gen::inRange(1, 5);
    c.config.max_batch = c.padded_batch + *rc::gen::inRange(0, 2);
    c.config.max_q_len = std::min<int64_t>(c.q_len + *rc::gen::inRange(0, 2), kernels::kMlaMaxQueryLen);
    c.config.max_splits = *rc::gen::element<int64_t>(1, 8, 16, kernels::kMlaMaxSplits);
    c.config.page = *rc::gen::element<int64_t>(1, 2, 3, 16, 53, 61, 64, 69);
    c.config.block_table_width = (max_len + c.config.page - 1) / c.config.page;
    c.config.q_dtype = *rc::gen::arbitrary<bool>() ? DType::kFP8E4M3 : DType::kBF16;
    limit_workspace(c.config);
    // Room for any table the block table generator makes: every needed page and 3 spare.
    c.num_blocks = c.padded_batch * c.config.block_table_width + 3;
    c.kv_fp8 = *rc::gen::arbitrary<bool>();
    c.base_scale = *rc::gen::element(1.0 / std::sqrt(192.0), 0.5);
    c.q_scale = *rc::gen::element(1.0, 0.25, 0.8123);
    c.k_scale = *rc::gen::element(1.0, 1.5, 0.0625);
    c.poison = *rc::gen::element<uint8_t>(0xFF, 0x7F);
    c.warp_size = *rc::gen::element(32, 64);
    c.shuffled = *rc::gen::arbitrary<bool>();
    const int64_t live = *rc::gen::inRange<int64_t>(0, c.padded_batch + 1);
    const int64_t W_tokens = c.config.block_table_width * c.config.page;
    c.steps.push_back(*mla_decode_impl_replay_step(c, live, std::min<int64_t>(4, W_tokens)));  // at capture
    const int later = *rc::gen::weightedOneOf<int>({{3, rc::gen::just(1)}, {1, rc::gen::just(2)}});
    for (int i = 0; i < later; ++i) c.steps.push_back(*mla_decode_impl_replay_step(c, live, W_tokens));
    return c;
  });
}

rc::Gen<MlaDecodeImplSequenceCase> mla_decode_impl_sequence_case() {
  return rc::gen::exec([] {
    MlaDecodeImplSequenceCase c;
    kernels::MlaDecodeImplConfig& cfg = c.shape.config;
    cfg.heads = *rc::gen::inRange(1, 5);
    cfg.page = *rc::gen::element<int64_t>(2, 8, 53);
    cfg.block_table_width = (64 + cfg.page - 1) / cfg.page;  // about 64 tokens
    cfg.max_batch = 3, cfg.max_q_len = 2, cfg.max_splits = 8;
    cfg.q_dtype = *rc::gen::arbitrary<bool>() ? DType::kFP8E4M3 : DType::kBF16;
    c.shape.num_blocks = cfg.max_batch * cfg.block_table_width + 3;  // any generated table fits
    c.shape.kv_fp8 = *rc::gen::arbitrary<bool>();
    c.shape.poison = *rc::gen::element<uint8_t>(0xFF, 0x7F);
    c.shape.warp_size = *rc::gen::element(32, 64);
    c.shape.shuffled = *rc::gen::arbitrary<bool>();
    std::vector<std::pair<int64_t, int64_t>> captured;  // distinct (padded_batch, q_len) so far
    const int n = *rc::gen::inRange(1, 13);
    for (int i = 0; i < n; ++i) {
      MlaDecodeImplCommand m;
      m.kind = static_cast<MlaDecodeImplCommand::Kind>(*rc::gen::weightedOneOf<int>(
          {{2, rc::gen::just(0)}, {1, rc::gen::just(1)}, {captured.empty() ? 0 : 3, rc::gen::just(2)}}));
      if (m.kind == MlaDecodeImplCommand::kEager) {
        m.eager = *mla_decode_impl_call(cfg);
      } else if (m.kind == MlaDecodeImplCommand::kCapture) {
        m.padded_batch = *rc::gen::inRange<int64_t>(1, cfg.max_batch + 1);
        m.q_len = *rc::gen::inRange<int64_t>(1, cfg.max_q_len + 1);
        m.base_scale = *rc::gen::element(0.0721, 0.5);
        m.q_scale = *rc::gen::element(1.0, 0.25);
        m.k_scale = *rc::gen::element(1.0, 2.0);
        if (std::find(captured.begin(), captured.end(), std::pair{m.padded_batch, m.q_len}) == captured.end()) {
          captured.emplace_back(m.padded_batch, m.q_len);
        }
      } else {
        std::tie(m.padded_batch, m.q_len) = captured[*rc::gen::inRange<size_t>(0, captured.size())];
        MlaDecodeImplReplayCase g = c.shape;
        g.padded_batch = m.padded_batch, g.q_len = m.q_len;
        m.step = *mla_decode_impl_replay_step(g, *rc::gen::inRange<int64_t>(0, m.padded_batch + 1),
                                              cfg.block_table_width * cfg.page);
      }
      c.commands.push_back(std::move(m));
    }
    return c;
  });
}

}  // namespace gen
}  // namespace mlacheck
