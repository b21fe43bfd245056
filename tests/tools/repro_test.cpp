// Tests of tools/repro.h: `mlacheck repro` on a passing case, on a case that fails against a wrong
// implementation registered for the test, and on malformed input (exit 2, one line).
#include "tools/repro.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/pack_decode_glue.h"
#include "kernels/registry.h"
#include "properties/decode_step_properties.h"

namespace mlacheck {
namespace {

using namespace kernels;

// The decode step with vLLM #42072's bug: after the correct run, one more top-k row lands in the
// shared buffer's row T, a prefill token's.
class RowsPastTheTokens : public IndexerDecodeStep {
 public:
  using IndexerDecodeStep::IndexerDecodeStep;
  IndexerDecodeStepResult run(const IndexerDecodeStepInputs& in) override {
    IndexerDecodeStepResult r = IndexerDecodeStep::run(in);
    const int64_t T = r.num_decode_tokens, k = limits().topk;
    if (in.topk_buffer.view.size(0) > T && T > 0) {
      auto row = [&](const DeviceTensor& t, int64_t i) {
        return DeviceTensor{t.base, View(DType::kI32, {1, k}, t.view.strides(), t.view.byte_offset() + i * t.view.stride(0) * 4)};
      };
      copy_rows(device_, row(in.topk_global, 0), row(in.topk_buffer, T));
    }
    return r;
  }
};

void register_wrong_step_once() {
  static const bool done = [] {
    registry().add({"indexer_decode_step", "test-rows-past-T", "test only: writes one top-k row past the tokens"},
                   +[](Device& d, const IndexerDecodeStepLimits& l) -> std::unique_ptr<IndexerDecodeStep> {
                     return std::make_unique<RowsPastTheTokens>(d, l);
                   });
    return true;
  }();
  (void)done;
}

// A small case with prefill rows after the tokens, written to a file.
std::string write_case(const std::string& name, const std::string& extra_lines = "") {
  DecodeStepEngine e;
  e.next_n = 2, e.H = 2, e.D = 16, e.k = 3, e.block_size = 4, e.max_requests = 2, e.max_tokens = 4;
  e.max_len = 12, e.W = 3, e.max_context_len = 12;
  DecodeStepCase c;
  c.decode_lens = {2, 1}, c.seq_lens = {12, 5}, c.max_context_len = 12, c.prefill_rows = 2, c.seed = 5;
  CaseText t = case_header("indexer_decode_step.equals_oracle", "indexer_decode_step@ref");
  decode_step_to_text(e, c, t);
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << t.format() << extra_lines;
  return path;
}

struct Outcome {
  int status;
  std::string out, err;
};
Outcome repro(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int status = run_repro_command(args, out, err);
  return {status, out.str(), err.str()};
}

int lines(const std::string& s) {
  int n = 0;
  for (char ch : s) n += ch == '\n';
  return n;
}

TEST(Repro, ACaseThatHoldsPassesWithExitZero) {
  const Outcome o = repro({write_case("holds.case")});
  EXPECT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("indexer_decode_step.equals_oracle on indexer_decode_step@ref (host)"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("PASS"), std::string::npos) << o.out;
  EXPECT_EQ(o.err, "");
}

TEST(Repro, TheSameCaseOnAWrongImplementationFailsWithTheVerdict) {
  register_wrong_step_once();
  const Outcome o = repro({write_case("wrong.case"), "--impl", "indexer_decode_step@test-rows-past-T"});
  EXPECT_EQ(o.status, 1) << o.out << o.err;
  EXPECT_NE(o.out.find("FAIL  guard of topk_buffer"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("decode rows"), std::string::npos) << o.out;  // the view, with coordinates
  EXPECT_EQ(o.err, "");
}

TEST(Repro, MalformedInputIsOneLineAndExitTwo) {
  const std::string good = write_case("good.case");
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"/nonexistent/x.case"},
      {good, "other.case"},
      {good, "--impl"},
      {good, "--bogus"},
      {good, "--backend", "tpu"},
      {good, "--backend", "cuda"},  // no GPU in CI; with one, this case passes (skipped below)
      {good, "--impl", "indexer_decode_step@nope"},
      {good, "--impl", "topk_decode@ref"},
      {write_case("extra.case", "sede 1\n")},
      {write_case("twice.case", "topk 4\n")},
      {write_case("garbage.case", "\x01\x02\n")},
  };
  for (const auto& args : bad) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    if (args.size() == 3 && args[2] == "cuda" && device_usable(Backend::kCuda)) continue;
    const Outcome o = repro(args);
    EXPECT_EQ(o.status, 2) << joined << ": " << o.out << o.err;
    EXPECT_EQ(lines(o.err), 1) << joined << ": " << o.err;
    EXPECT_EQ(o.out, "") << joined;
  }
  // An unknown property.
  std::string text;
  {
    std::ifstream in(good);
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  const std::string path = ::testing::TempDir() + "unknown.case";
  std::ofstream(path) << std::string(text).replace(text.find("equals_oracle"), 13, "frobnicates");
  const Outcome o = repro({path});
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.err.find("no property called 'indexer_decode_step.frobnicates'"), std::string::npos) << o.err;
}

}  // namespace
}  // namespace mlacheck
