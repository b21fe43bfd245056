// Tests of kernels/plugin.h: the example plugin's implementations join the registry and hold under
// the properties; its buggy twin is caught; and a plugin that is not one, has another ABI version,
// registers what it cannot, refuses to load, crashes while registering, or whose implementation
// refuses or crashes gives one clear error or a verdict, never a crash of the caller.
#include "kernels/plugin.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "core/backend/isolate.h"
#include "core/error.h"
#include "kernels/registry.h"
#include "kernels/mla_decode_impl.h"
#include "kernels/topk_glue.h"
#include "mlacheck/plugin.h"
#include "harness/case_text.h"
#include "fuzz/fuzz_input.h"
#include "properties/property_registry.h"

namespace mlacheck::kernels {
namespace {

// Each library loads once per process (the registry keeps its names), whatever order tests run in.
const LoadedPlugin& load_once(const std::string& path) {
  static std::map<std::string, LoadedPlugin> loaded;
  const auto it = loaded.find(path);
  if (it != loaded.end()) return it->second;
  return loaded.emplace(path, load_plugin(path)).first->second;
}

// The message of the Error fn throws ("" if none).
template <class Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A top-k decode case: 1-D lengths (so row r has L - next_n + j + 1 candidates: 5 6 2 3 0 1), 3
// requests of 2 rows, k 4, rows of 6 columns, the output rows padded by 3 entries.
CaseText topk_case(const std::string& impl) {
  return CaseText::parse("property topk_decode.rows_admissible\nimpl " + impl +
                         "\nbackend host\nlengths decode-1d\nk 4\nnext_n 2\nrows 6\ncols 6\nseq_lens 6 3 1\n"
                         "logits_lead 0\nlogits_row_pad 0\nlogits_col_stride 1\nout_row_pad 3\nout_rows_before 0\n"
                         "out_rows_after 0\nindex_lead 0\npatterns distinct distinct distinct distinct distinct "
                         "distinct\nseed 0x5\nwarp 32\nshuffled 0\n");
}

TEST(Plugin, TheExampleRegistersItsImplementationsUnderTheirOps) {
  const LoadedPlugin& p = load_once(EXAMPLE_PLUGIN);
  EXPECT_EQ(p.name, "mlacheck example plugin");
  EXPECT_EQ(p.implementations, (std::vector<std::string>{"topk_decode@example", "paged_mqa_logits@example"}));
  // Typed like the built-in entry points, so every property can take them.
  EXPECT_NE(registry().find<decltype(topk_per_row_decode)>("topk_decode@example"), nullptr);
  EXPECT_THROW(registry().find<decltype(topk_per_row_prefill)>("topk_decode@example"), Error);
  bool listed = false;
  for (const ImplementationInfo& i : registry().list()) {
    if (i.qualified() == "topk_decode@example") listed = i.summary.find("plugin mlacheck example plugin") == 0;
  }
  EXPECT_TRUE(listed) << "mlacheck list names the plugin beside each implementation";
}

TEST(Plugin, TheExampleHoldsAndItsBuggyTwinIsCaught) {
  load_once(EXAMPLE_PLUGIN);
  load_once(EXAMPLE_PLUGIN_BUGGY);
  const ReproResult good = run_case_text(topk_case("topk_decode@example"));
  EXPECT_FALSE(good.verdict.has_value()) << *good.verdict;
  const ReproResult bad = run_case_text(topk_case("topk_decode@example_buggy"));
  ASSERT_TRUE(bad.verdict.has_value()) << "the twin writes the short rows' fill into their padding";
  EXPECT_NE(bad.verdict->find("guard of topk_indices_buffer"), std::string::npos) << *bad.verdict;
  EXPECT_NE(bad.verdict->find("column 4 (past the row's 4 columns, in its padding)"), std::string::npos) << *bad.verdict;
  // The same case passes on the reference: the failure is the twin's.
  EXPECT_FALSE(run_case_text(topk_case("topk_decode@ref")).verdict.has_value());
}

TEST(Plugin, WhatIsNotAPluginIsRefusedInOneLine) {
  const std::string missing = error_of([] { load_plugin("/nonexistent/libnothing.so"); });
  EXPECT_NE(missing.find("plugin /nonexistent/libnothing.so: cannot be loaded"), std::string::npos) << missing;
  const std::string text_file = ::testing::TempDir() + "not_a_library.so";
  std::ofstream(text_file) << "this is not a shared library\n";
  EXPECT_NE(error_of([&] { load_plugin(text_file); }).find("cannot be loaded"), std::string::npos);
  const std::string no_symbol = error_of([] { load_plugin(FIXTURE_NO_SYMBOL); });
  EXPECT_NE(no_symbol.find("defines no 'mlacheck_plugin' symbol"), std::string::npos) << no_symbol;
  EXPECT_EQ(no_symbol.find('\n'), std::string::npos);
  // A FIFO or a folder is refused by what it is, at once: dlopen would wait on a FIFO's writer
  // (the isolated probe's 60 s), and the folder's loader message says less.
  const std::string fifo = ::testing::TempDir() + "plugin_fifo.so";
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(error_of([&] { load_plugin_isolated(fifo); }).find("plugin " + fifo + ": is a FIFO, not a shared library file"),
            std::string::npos);
  std::remove(fifo.c_str());
  EXPECT_NE(error_of([] { load_plugin(::testing::TempDir()); }).find(": is a folder, not a shared library file"),
            std::string::npos);
}

TEST(Plugin, AnotherAbiVersionIsRefusedNamingBoth) {
  const std::string e = error_of([] { load_plugin(FIXTURE_WRONG_VERSION); });
  EXPECT_NE(e.find("was built against plugin ABI version " + std::to_string(MLACHECK_PLUGIN_ABI_VERSION + 98)),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("this mlacheck speaks versions 1 to " + std::to_string(MLACHECK_PLUGIN_ABI_VERSION)),
            std::string::npos)
      << e;
}

TEST(Plugin, AMalformedContractRefusesThePluginInOneLine) {
  const std::string empty = error_of([] { load_plugin(FIXTURE_BAD_CONTRACT); });
  EXPECT_NE(empty.find("contract of topk_decode, clause 1 'k in [10, 5]': the range [10, 5] is empty"),
            std::string::npos)
      << empty;
  EXPECT_EQ(empty.find('\n'), std::string::npos);
  const std::string layout = error_of([] { load_plugin(FIXTURE_BAD_LAYOUT); });
  EXPECT_NE(layout.find("clause 2 'out diagonal': unknown layout 'diagonal'"), std::string::npos) << layout;
}

TEST(Plugin, AVersion1PluginCannotDeclareAContractAndSaysWhy) {
  const std::string e = error_of([] { load_plugin(FIXTURE_V1_CONTRACT); });
  EXPECT_NE(e.find("declares plugin ABI version 1, and contracts came with version 2"), std::string::npos) << e;
}

TEST(Plugin, AVersion2PluginCannotAddAStatefulBuilder) {
  const std::string e = error_of([] { load_plugin(FIXTURE_V2_METADATA); });
  EXPECT_NE(e.find("declares plugin ABI version 2, and the stateful decode_metadata came with version 3"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(Plugin, AVersion3PluginCannotAddTheKCacheInsert) {
  const std::string e = error_of([] { load_plugin(FIXTURE_V3_K_CACHE); });
  EXPECT_NE(e.find("declares plugin ABI version 3, and indexer_k_cache_insert came with version 4"), std::string::npos)
      << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(Plugin, AVersion4PluginCannotAddTheKCacheGather) {
  const std::string e = error_of([] { load_plugin(FIXTURE_V4_K_CACHE_GATHER); });
  EXPECT_NE(e.find("declares plugin ABI version 4, and indexer_k_cache_gather came with version 5"), std::string::npos)
      << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

// A stateful object's own allocations are guarded: a write past one is the call's error, with the
// allocation's name; an allocation mlacheck cannot give fails make with the allocator's reason.
TEST(Plugin, AStatefulObjectsOwnAllocationIsGuardedAndABadOneRefused) {
  load_once(FIXTURE_STATEFUL);
  const auto device = make_device(Backend::kHost);
  using Factory = std::unique_ptr<MlaDecodeImpl>(Device&, const MlaDecodeImplConfig&);
  MlaDecodeImplConfig config;
  config.max_batch = 2, config.heads = 1, config.block_table_width = 1;
  const auto impl = registry().find<Factory>("mla_decode_impl@fixture_stray")(*device, config);
  const std::string stray = error_of([&] { impl->forward(MlaDecodeCall{}); });
  EXPECT_EQ(stray.rfind("mla_decode_impl@fixture_stray (plugin fixture) wrote past its own allocation: 1 stray byte", 0), 0)
      << stray;
  EXPECT_NE(stray.find("buffer 'mla_decode_impl@fixture_stray allocation scratch': stray write at byte 64, after the "
                       "allocation"),
            std::string::npos)
      << stray;
  const std::string negative =
      error_of([&] { registry().find<Factory>("mla_decode_impl@fixture_negative")(*device, config); });
  EXPECT_EQ(negative,
            "mla_decode_impl@fixture_negative (plugin fixture) refused to make an impl (returned 1): allocate "
            "'minus one': -1 bytes is outside [0, 2^36]");
}

TEST(Plugin, ADeclaredContractIsKeptAndCasesAreReadWithinIt) {
  load_once(FIXTURE_CONTRACT);
  const auto contract = registry().contract("topk_decode@fixture_contract");
  EXPECT_EQ(contract->describe(), "seq_lens <= 0; seq_lens rank 2; out padded-rows");
  EXPECT_TRUE(registry().contract("topk_decode@ref")->empty());
  // Random cases decoded for it lie inside its contract, and it passes them (every row is empty).
  const FuzzTarget& t = find_fuzz_target("topk_decode");
  int run = 0;
  for (int i = 0; i < 200; ++i) {
    std::string bytes;
    for (int j = 0; j < 64; ++j) bytes.push_back(static_cast<char>((i * 131 + j * 17) % 23));
    FuzzCase fc;
    try {
      fc = decode_fuzz_input(t, bytes, "topk_decode@fixture_contract", "host");
    } catch (const Error&) {
      continue;
    }
    if (fc.property->ref_only) continue;
    EXPECT_EQ(fc.text.word("lengths"), "decode-2d") << fc.text.format();
    for (const std::string& w : fc.text.words("seq_lens", 1 << 20)) EXPECT_LE(std::stoll(w), 0) << fc.text.format();
    const ReproResult r = run_case_text(fc.text);
    EXPECT_TRUE(r.outside.empty()) << r.outside;
    EXPECT_FALSE(r.verdict.has_value()) << *r.verdict << "\n" << fc.text.format();
    ++run;
  }
  EXPECT_GT(run, 50);
  // A case file outside the contract is neither run nor a failure: outside says why.
  const ReproResult outside = run_case_text(topk_case("topk_decode@fixture_contract"));
  EXPECT_FALSE(outside.verdict.has_value());
  EXPECT_NE(outside.outside.find("'lengths' holds 'decode-1d', which the contract does not allow"), std::string::npos)
      << outside.outside;
  // The same case with the contract ignored runs, and fails (its rows are not empty).
  EXPECT_TRUE(run_case_text(topk_case("topk_decode@fixture_contract"), "", "", true).verdict.has_value());
}

TEST(Plugin, ARegistrationThatFailsIsRefusedWithItsReason) {
  const std::string unknown = error_of([] { load_plugin(FIXTURE_UNKNOWN_OP); });
  EXPECT_NE(unknown.find("unknown op 'no_such_op'"), std::string::npos) << unknown;
  const std::string refuses = error_of([] { load_plugin(FIXTURE_REFUSES); });
  EXPECT_NE(refuses.find("refused to load (returned 3)"), std::string::npos) << refuses;
  // A name can be registered once.
  load_once(FIXTURE_GOOD);
  const std::string twice = error_of([] { load_plugin(FIXTURE_GOOD); });
  EXPECT_NE(twice.find("topk_decode@fixture is taken"), std::string::npos) << twice;
}

TEST(Plugin, ACrashWhileRegisteringIsAnErrorNotACrash) {
  const std::string e = error_of([] { load_plugin_isolated(FIXTURE_REGISTER_CRASH); });
  EXPECT_NE(e.find("loading it crashed"), std::string::npos) << e;
  EXPECT_FALSE(registry().contains("topk_decode@fixture_crash"));
}

TEST(Plugin, AnImplementationThatRefusesIsAVerdictWithItsMessage) {
  load_once(FIXTURE_IMPL_ERROR);
  const ReproResult refused = run_case_text(topk_case("topk_decode@fixture_error"));
  ASSERT_TRUE(refused.verdict.has_value());
  EXPECT_EQ(*refused.verdict, "the implementation threw: topk_decode@fixture_error (plugin fixture) refused the call "
                              "(returned 1): fixture: this implementation refuses every call");
}

TEST(Plugin, AnImplementationThatCrashesIsACrashOfTheChildThatRunsIt) {
  IsolationOptions opts;
  const IsolatedOutcome crashed = run_isolated(
      [] {
        load_once(FIXTURE_IMPL_CRASH);
        return run_case_text(topk_case("topk_decode@fixture_crash")).verdict.value_or("");
      },
      opts);
  EXPECT_EQ(crashed.kind, IsolatedOutcome::kCrashed) << crashed.message;
}

TEST(Plugin, AWrongImplementationIsCaughtByTheProperties) {
  // The good fixture returns -1 everywhere: the rows of length > 0 are wrong.
  load_once(FIXTURE_GOOD);
  const ReproResult r = run_case_text(topk_case("topk_decode@fixture"));
  ASSERT_TRUE(r.verdict.has_value());
  EXPECT_NE(r.verdict->find("position 0 holds -1"), std::string::npos) << *r.verdict;
}

TEST(Plugin, PathsComeFromTheEnvironmentSeparatedByColons) {
  ::setenv("MLACHECK_PLUGIN", "/a/libx.so::/b/liby.so:", 1);
  EXPECT_EQ(plugin_paths_from_environment(), (std::vector<std::string>{"/a/libx.so", "/b/liby.so"}));
  ::unsetenv("MLACHECK_PLUGIN");
  EXPECT_TRUE(plugin_paths_from_environment().empty());
}

}  // namespace
}  // namespace mlacheck::kernels
