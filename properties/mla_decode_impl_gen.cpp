// mla_decode_impl cases: the generator's draws and the helpers the schemas read with
// (properties/mla_decode_impl_gen.h).
#include "properties/mla_decode_impl_gen.h"

#include <algorithm>

#include "core/error.h"
#include "properties/block_table_gen.h"

namespace mlacheck {

using kernels::MlaDecodeImplConfig;

void showValue(const MlaDecodeImplCallsCase& c, std::ostream& os) { show_case(c, os); }
void showValue(const MlaDecodeImplSequenceCase& c, std::ostream& os) { show_case(c, os); }
void showValue(const MlaDecodeImplReplayCase& c, std::ostream& os) { show_case(c, os); }

MlaDecodeCase MlaDecodeImplReplayCase::step_case(size_t i) const {
  const MlaDecodeImplReplayStep& s = steps.at(i);
  MlaDecodeCase c;
  c.B = padded_batch, c.q_len = q_len, c.H = config.heads, c.page = config.page;
  c.lens = s.lens, c.W = config.block_table_width, c.num_blocks = num_blocks, c.table = s.table;
  c.q_fp8 = config.q_dtype == DType::kFP8E4M3, c.kv_fp8 = kv_fp8;
  c.base_scale = base_scale, c.q_scale = q_scale, c.k_scale = k_scale;
  c.poison = poison, c.zero_rows = s.zero_rows, c.seed = s.seed, c.warp_size = warp_size, c.shuffled = shuffled;
  c.precision = precision;
  return c;
}

void declare_precision(MlaDecodeImplCallsCase& c, const oracle::MlaPrecision& u) {
  for (MlaDecodeCase& call : c.calls) call.precision = u;
}

void declare_precision(MlaDecodeImplReplayCase& c, const oracle::MlaPrecision& u) { c.precision = u; }

void declare_precision(MlaDecodeImplSequenceCase& c, const oracle::MlaPrecision& u) {
  c.shape.precision = u;  // graph() copies it into every replay's case
  for (MlaDecodeImplCommand& m : c.commands) m.eager.precision = u;
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

MlaDecodeFamily mla_impl_call_family(const MlaDecodeImplConfig& cfg) {
  MlaDecodeFamily f;
  f.max_batch = cfg.max_batch, f.max_q_len = cfg.max_q_len, f.heads = cfg.heads;
  f.size = gen::MlaDecodeSize::kLight;
  return f;
}

std::string mla_step_problem(const MlaDecodeImplReplayCase& c, size_t i, const std::string& key_prefix) {
  try {
    CaseText t;
    mla_decode_to_text(c.step_case(i), t);
    mla_decode_from_text(t);
    return "";
  } catch (const Error& e) {
    return "step " + key_prefix + ": " + e.what();
  }
}

// ---- text ----------------------------------------------------------------------------------------

void mla_decode_impl_calls_to_text(const MlaDecodeImplCallsCase& c, CaseText& out) { write_case(c, out); }
MlaDecodeImplCallsCase mla_decode_impl_calls_from_text(const CaseText& t) {
  return read_case<MlaDecodeImplCallsCase>(t);
}
void mla_decode_impl_nonuniform_to_text(const MlaDecodeImplNonUniformCase& c, CaseText& out) { write_case(c, out); }
MlaDecodeImplNonUniformCase mla_decode_impl_nonuniform_from_text(const CaseText& t) {
  return read_case<MlaDecodeImplNonUniformCase>(t);
}
void mla_decode_impl_replay_to_text(const MlaDecodeImplReplayCase& c, CaseText& out) { write_case(c, out); }
MlaDecodeImplReplayCase mla_decode_impl_replay_from_text(const CaseText& t) {
  return read_case<MlaDecodeImplReplayCase>(t);
}
void mla_decode_impl_sequence_to_text(const MlaDecodeImplSequenceCase& c, CaseText& out) { write_case(c, out); }
MlaDecodeImplSequenceCase mla_decode_impl_sequence_from_text(const CaseText& t) {
  return read_case<MlaDecodeImplSequenceCase>(t);
}

// ---- the generator's draws -----------------------------------------------------------------------

namespace {

// At most 1024 (request, token, head, split) rows of workspace (2 MiB): a call arms and checks all
// of it, and a case of 64 splits over 4 x 8 x 8 rows would spend its time poisoning 33 MB.
void limit_workspace(MlaDecodeImplConfig& c) {
  while (c.max_batch * c.max_q_len * c.heads * c.max_splits > 1024 && c.max_splits > 1) c.max_splits /= 2;
}

int64_t draw_page() { return *rc::gen::element<int64_t>(1, 2, 3, 16, 53, 61, 64, 69); }

}  // namespace

MlaDecodeImplConfig draw_mla_calls_config() {
  MlaDecodeImplConfig c;
  c.max_batch = *rc::gen::inRange(1, 5);
  c.max_q_len = *rc::gen::weightedOneOf<int64_t>({{6, rc::gen::inRange<int64_t>(1, 5)}, {1, rc::gen::just<int64_t>(8)}});
  c.heads = *rc::gen::inRange(1, 9);
  c.max_splits = *rc::gen::element<int64_t>(1, 2, 8, 16, kernels::kMlaMaxSplits);
  c.page = draw_page();
  c.block_table_width = *rc::gen::inRange(1, 41);
  limit_workspace(c);
  return c;
}

MlaDecodeImplConfig draw_mla_nonuniform_config() {
  MlaDecodeImplConfig c = draw_mla_calls_config();
  c.max_batch = std::max<int64_t>(2, c.max_batch), c.max_q_len = std::max<int64_t>(2, c.max_q_len);
  limit_workspace(c);
  return c;
}

MlaDecodeImplConfig draw_mla_sequence_config() {
  MlaDecodeImplConfig c;
  c.heads = *rc::gen::inRange(1, 5);
  c.page = *rc::gen::element<int64_t>(2, 8, 53);
  c.block_table_width = (64 + c.page - 1) / c.page;  // about 64 tokens
  c.max_batch = 3, c.max_q_len = 2, c.max_splits = 8;
  return c;
}

std::vector<int32_t> draw_mla_nonuniform_query_lens(const MlaDecodeImplConfig& cfg) {
  const int64_t B = *rc::gen::inRange<int64_t>(2, std::min<int64_t>(8, cfg.max_batch) + 1);
  std::vector<int32_t> lens = *rc::gen::container<std::vector<int32_t>>(
      static_cast<size_t>(B), rc::gen::inRange<int32_t>(1, static_cast<int32_t>(cfg.max_q_len) + 1));
  if (lens.front() == lens.back()) lens.back() = lens.front() % static_cast<int32_t>(cfg.max_q_len) + 1;
  return lens;
}

MlaReplayDraw draw_mla_replay() {
  MlaReplayDraw d;
  // 640: past 2 x 256 keys, so the capture's split count is more than one even on the host (and a
  // capture that chose it for its own short lengths differs from an eager launch); then at most 2
  // (request, token) programs.
  const int64_t max_len = *rc::gen::weightedElement<int64_t>({{2, 5}, {3, 70}, {3, 320}, {1, 640}});
  const int64_t programs = max_len == 640 ? 2 : max_len == 320 ? 4 : 8;
  d.padded_batch = *rc::gen::inRange<int64_t>(1, std::min<int64_t>(4, programs) + 1);
  d.q_len = *rc::gen::inRange<int64_t>(1, std::max<int64_t>(2, programs / d.padded_batch + 1));
  MlaDecodeImplConfig& c = d.config;
  c.heads = *rc::gen::inRange(1, 5);
  c.max_batch = d.padded_batch + *rc::gen::inRange(0, 2);
  c.max_q_len = std::min<int64_t>(d.q_len + *rc::gen::inRange(0, 2), kernels::kMlaMaxQueryLen);
  c.max_splits = *rc::gen::element<int64_t>(1, 8, 16, kernels::kMlaMaxSplits);
  c.page = draw_page();
  c.block_table_width = (max_len + c.page - 1) / c.page;
  limit_workspace(c);
  d.live = *rc::gen::inRange<int64_t>(0, d.padded_batch + 1);
  return d;
}

std::vector<int32_t> draw_mla_step_lens(int64_t padded_batch, int64_t live, int64_t max_len) {
  std::vector<int32_t> lens(static_cast<size_t>(padded_batch), 0);  // rows past `live` are graph padding
  for (int64_t b = 0; b < live; ++b) {
    lens[static_cast<size_t>(b)] = *rc::gen::weightedOneOf<int32_t>(
        {{3, rc::gen::inRange(0, static_cast<int>(max_len) + 1)},
         {1, rc::gen::map(rc::gen::element(-1, 0, 1), [max_len](int d) {  // by value: shrinking runs it later
            return static_cast<int32_t>(std::clamp<int64_t>(max_len / 2 / 32 * 32 + d, 0, max_len));
          })}});
  }
  if (live > 0 && max_len > 4) lens[0] = static_cast<int32_t>(max_len);  // as long as the table holds
  return lens;
}

std::vector<int32_t> draw_mla_step_table(const std::vector<int32_t>& lens, int64_t W, int64_t page) {
  std::vector<int64_t> needed;
  for (int32_t l : lens) needed.push_back((l + page - 1) / page);
  return (*gen::paged_block_table(needed, W)).table;
}

namespace gen {

rc::Gen<MlaDecodeImplCallsCase> mla_decode_impl_calls_case() { return draw_case<MlaDecodeImplCallsCase>(); }
rc::Gen<MlaDecodeImplReplayCase> mla_decode_impl_replay_case() { return draw_case<MlaDecodeImplReplayCase>(); }
rc::Gen<MlaDecodeImplSequenceCase> mla_decode_impl_sequence_case() { return draw_case<MlaDecodeImplSequenceCase>(); }
rc::Gen<MlaDecodeImplNonUniformCase> mla_decode_impl_nonuniform_case() {
  return draw_case<MlaDecodeImplNonUniformCase>();
}

}  // namespace gen
}  // namespace mlacheck
