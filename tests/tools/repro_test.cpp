// Tests of tools/repro.h: `mlacheck repro` on a passing case, on a case that fails against a wrong
// implementation registered for the test, and on malformed input (exit 2, one line): case files
// recognised by content with errors naming the line and key, special and oversize files refused by
// type and size, cases past the memory budget refused before allocating.
#include "tools/repro.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/pack_decode_glue.h"
#include "harness/memory_budget.h"
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

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string write_text(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// A regression file opens with a comment header, as corpus/regressions/ do.
const char* kHeader =
    "# R9 - a made-up bug, for the test\n#      its description runs on\n# Caught by: the property below\n\n";

// Regression files are case files by their content, whatever their first line: a mistake in a
// hand-edited one is told with its line and key, not as "not a case file".
TEST(Repro, ACaseFileIsRecognisedByContentAndItsErrorsNameTheLineAndKey) {
  const std::string good = read_text(write_case("content.case"));
  const std::string body = good.substr(good.find('\n') + 1);  // without the "# mlacheck case" line
  const Outcome ok = repro({write_text("regression.case", kHeader + body)});
  EXPECT_EQ(ok.status, 0) << ok.out << ok.err;
  // Line numbers count the header's 4 lines; "property" is line 5.
  const auto line_of = [&](const std::string& key) {
    const std::string text = kHeader + body;
    const size_t at = text.find("\n" + key + " ");
    return 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at) + 1, '\n');
  };
  const std::vector<std::pair<std::string, std::string>> bad = {
      {kHeader + body + "topk 4\n", "key 'topk' appears twice (first on line " + std::to_string(line_of("topk")) + ")"},
      {kHeader + std::string(body).replace(body.find("decode_lens 2 1"), 15, "decode_lens 2"),  // a truncated list
       "case line " + std::to_string(line_of("decode_lens")) + ": 'decode_lens' has 1 values, needs 2"},
      {kHeader + std::string(body).replace(body.find("heads 2"), 7, "heads two"),
       "case line " + std::to_string(line_of("heads")) + ": 'heads' is 'two', not an integer"},
      {kHeader + std::string(body).replace(body.find("\nseed "), 6, "\nsede "),
       "case: key 'seed' is missing (line " + std::to_string(line_of("seed")) + " has 'sede': misspelt?)"},
      {kHeader + std::string(body).replace(body.find("heads 2"), 7, "heads 2\xc3\xa9"),
       "case line " + std::to_string(line_of("heads")) + ": byte 0xc3 in a value of 'heads' is not printable ASCII"},
  };
  for (const auto& [text, want] : bad) {
    const Outcome o = repro({write_text("edited.case", text)});
    EXPECT_EQ(o.status, 2) << want << ": " << o.out << o.err;
    EXPECT_EQ(lines(o.err), 1) << o.err;
    EXPECT_NE(o.err.find(want), std::string::npos) << "want: " << want << "\ngot: " << o.err;
    EXPECT_EQ(o.err.find("not a case file"), std::string::npos) << o.err;
  }
  // Case lines without a property line say so.
  const Outcome none = repro({write_text("noproperty.case", "# a note\nk 1\nseq_lens 1 2\n")});
  EXPECT_EQ(none.status, 2);
  EXPECT_NE(none.err.find("without a 'property' line"), std::string::npos) << none.err;
}

// Inputs that are not regular files, or too large, are refused by type or size before any read, in
// one line and at once (a FIFO would block, /dev/zero never ends, a directory read as 0 bytes
// decoded to a passing case).
TEST(Repro, SpecialFilesAndOversizeFilesAreRefusedBeforeReading) {
  const std::string fifo = ::testing::TempDir() + "repro_test.fifo";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string big = write_text("big.case", std::string(5u << 20, '#'));
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"/dev/zero", "--target", "topk_decode"}, "/dev/zero: a character device, not a regular file"},
      {{::testing::TempDir(), "--target", "topk_decode"}, ": a directory, not a regular file"},
      {{::testing::TempDir()}, ": a directory, not a regular file"},
      {{fifo, "--target", "topk_decode"}, fifo + ": a FIFO (named pipe), not a regular file"},
      {{big}, big + ": 5.0 MiB (5242880 bytes), over the 4.0 MiB limit of an input file"},
  };
  for (const auto& [args, want] : refused) {
    const auto start = std::chrono::steady_clock::now();
    const Outcome o = repro(args);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0) << args[0];
    EXPECT_EQ(o.status, 2) << args[0] << ": " << o.out << o.err;
    EXPECT_EQ(lines(o.err), 1) << o.err;
    EXPECT_NE(o.err.find(want), std::string::npos) << "want: " << want << "\ngot: " << o.err;
    EXPECT_EQ(o.out, "");
  }
  ::unlink(fifo.c_str());
}

// A top-k case of 127 x 2^20 or 4096 x 32768 logits is refused by the default budget (at most
// 2 GiB) with the figures, before its buffers are made, within a second; --max-mb (here its
// setter) decides.
TEST(Repro, ACasePastTheMemoryBudgetIsRefusedWithTheFigureBeforeAllocating) {
  const auto topk_case = [](int64_t rows, int64_t cols) {
    std::string seq = "seq_lens", patterns = "patterns";
    for (int64_t r = 0; r < rows; ++r) seq += " 7", patterns += " distinct";
    return "property topk_decode.rows_admissible\nimpl topk_decode@ref\nbackend host\nlengths decode-2d\nk 13\n"
           "next_n 1\nrows " + std::to_string(rows) + "\ncols " + std::to_string(cols) + "\n" + seq +
           "\nlogits_lead 0\nlogits_row_pad 0\nlogits_col_stride 1\nout_row_pad 0\nout_rows_before 0\n"
           "out_rows_after 0\nindex_lead 0\n" + patterns + "\nseed 0x0\nwarp 32\nshuffled 0\n";
  };
  set_case_memory_budget_bytes(0);  // the default
  for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{127, 1 << 20}, {4096, 32768}}) {
    const auto start = std::chrono::steady_clock::now();
    const Outcome o = repro({write_text("huge_topk.case", topk_case(rows, cols))});
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
    EXPECT_EQ(o.status, 2) << o.out << o.err;
    EXPECT_EQ(lines(o.err), 1) << o.err;
    EXPECT_NE(o.err.find("the case needs at least 3.5 GiB of memory (buffer 'logits' stages 5"), std::string::npos)
        << o.err;
    EXPECT_NE(o.err.find("over the memory budget of"), std::string::npos) << o.err;
  }
  // A small budget refuses a small case the same way; a large enough one runs it.
  const std::string small = write_text("small_topk.case", topk_case(4, 4096));
  set_case_memory_budget_bytes(int64_t{256} << 10);
  const Outcome refused = repro({small});
  EXPECT_EQ(refused.status, 2) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("over the memory budget of 256.0 KiB"), std::string::npos) << refused.err;
  set_case_memory_budget_bytes(int64_t{8} << 20);
  const Outcome ran = repro({small});
  EXPECT_EQ(ran.status, 0) << ran.out << ran.err;
  // A case that records the memory it took (max_mb, written by check and mutants when it is past
  // the budget) runs with that budget; --max-mb given holds instead, and the refusal names it.
  const std::string recorded = write_text("recorded_topk.case", topk_case(16, 4096) + "max_mb 8\n");
  set_case_memory_budget_bytes(int64_t{256} << 10);
  const Outcome raised = repro({recorded});
  EXPECT_EQ(raised.status, 0) << raised.out << raised.err;
  EXPECT_EQ(case_memory_budget_bytes(), int64_t{256} << 10) << "restored after the case";
  const Outcome held = repro({recorded, "--max-mb", "1"});
  EXPECT_EQ(held.status, 2) << held.out << held.err;
  EXPECT_NE(held.err.find("over the memory budget of 1.0 MiB (--max-mb raises it)"), std::string::npos) << held.err;
  set_case_memory_budget_bytes(0);
}

}  // namespace
}  // namespace mlacheck
