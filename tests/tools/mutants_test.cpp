// Tests of tools/mutants_command.h: every seeded-bug variant names a check of its op; the matrix
// kills R4 and reports which check did; a variant that is in fact correct survives (exit 1); bad
// usage is one line and exit 2.
#include "tools/mutants_command.h"

#include <set>

#include <gtest/gtest.h>

#include "kernels/mutants/bugs.h"

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/read_fence.h"
#include "kernels/mutants/mutants.h"
#include "kernels/registry.h"
#include "kernels/topk_glue.h"
#include "properties/property_registry.h"
#include "tools/suite_runner.h"

namespace mlacheck {
namespace {

struct Outcome {
  int status;
  std::string out, err;
};
Outcome run(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int status = run_mutants_command(args, out, err);
  return {status, out.str(), err.str()};
}

TEST(Mutants, EveryVariantNamesAPropertyOfItsOp) {
  const std::vector<std::string> variants = seeded_variants();
  ASSERT_FALSE(variants.empty());
  for (const std::string& v : variants) {
    const PropertyEntry& p = property_registry().find(named_check_of(v));
    EXPECT_EQ(p.op, v.substr(0, v.find('@'))) << v << " names " << p.name;
    EXPECT_FALSE(p.ref_only) << v << " names a ref-only property, which never runs on a variant";
  }
}

// The bugs tables (kernels/<family>_bugs.def, read by kernels/mutants/bugs.h) and the registry name
// the same variants: a variant registered without a row has no named check, a row without a
// variant names a bug nothing seeds. The read variants are the three of docs/bugs.md's "reads".
TEST(Mutants, TheBugsTablesAndTheRegistryNameTheSameVariants) {
  std::set<std::string> rows, reads;
  for (const kernels::SeededBug& b : kernels::seeded_bugs()) {
    EXPECT_TRUE(rows.insert(b.variant).second) << b.variant << " has two rows";
    if (b.needs_read_fence) reads.insert(b.variant);
  }
  const std::vector<std::string> variants = seeded_variants();
  EXPECT_EQ(rows, std::set<std::string>(variants.begin(), variants.end()));
  EXPECT_EQ(reads, (std::set<std::string>{"paged_mqa_logits@O1", "mla_decode@O2", "sparse_mla_decode@O3"}));
}

TEST(Mutants, R4IsKilledAndTheMatrixSaysByWhat) {
  const Outcome r = run({"--only", "R4", "--budget", "30", "--format", "json"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("\"variant\": \"topk_decode@R4\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"killed\": true"), std::string::npos) << r.out;
  // The first kill may come from any of topk_decode's properties (far rows take k = 2048 too); the
  // named check kills it as well.
  EXPECT_NE(r.out.find("\"check\": \"topk_decode."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"named_check\": \"topk_decode.rows_admissible\""), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"named_result\": \"survived\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fast k=2048 path"), std::string::npos) << r.out;
}

// The matrix must be able to say SURVIVED: the correct top-k registered under a bug's name.
// A survivor's line counts what ran and, apart, what did not (T1's Triton twin survived a loaded
// CI run with its killing regression beyond the interpreter's reach, said nowhere).
TEST(Mutants, ASurvivorSaysWhatItDidNotRun) {
  SuiteResult r;
  r.cases_run = 83;
  EXPECT_EQ(survivor_text(r), "83 cases run, none failed");
  r.beyond_reach = 131;
  r.beyond_reach_why = "regressions: T1.case: beyond the Triton interpreter's reach: predicted 26.5 s past 25.0 s";
  r.outside_contract = 2;
  EXPECT_EQ(survivor_text(r), "83 cases run, none failed; 131 not run (regressions: T1.case: beyond the Triton "
                              "interpreter's reach: predicted 26.5 s past 25.0 s); 2 seed or regression cases "
                              "outside the contract");
}

TEST(Mutants, ACorrectImplementationUnderABugNameSurvives) {
  static const bool registered = [] {
    kernels::registry().add({"topk_decode", "Z9", "test only: the correct top-k under a bug id"},
                            &kernels::topk_per_row_decode);
    return true;
  }();
  (void)registered;
  const Outcome r = run({"--only", "Z9", "--budget", "3", "--cases", "2"});
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("topk_decode@Z9  SURVIVED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 of 1 killed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" cases run, none failed"), std::string::npos) << r.out;
}

// A variant this build cannot run is counted apart, never folded into the killed: alone, it is
// no clean run. (O1 reads past a view, which only the sanitizer build's read fence sees.)
TEST(Mutants, AVariantThisBuildCannotRunIsCountedApartAndAloneIsNoPass) {
  const Outcome r = run({"--only", "O1", "--budget", "2", "--cases", "2"});
  if (ReadFence::available()) {
    EXPECT_NE(r.out.find("1 of 1 killed"), std::string::npos) << r.out << r.err;
    return;
  }
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("0 of 0 runnable killed; 1 not run here (below: each needs another build or backend)"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not run: paged_mqa_logits@O1: a read past a view, which only the read fence sees"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NO RUN: no variant could run"), std::string::npos) << r.out;
}

TEST(Mutants, BadUsageIsOneLineAndExitTwo) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--budget", "soon"}, {"--format", "xml"}, {"--only", "Q7"}, {"--frobnicate", "1"},
        {"--budget"}, {"--backend", "tpu"}, {"--corpus", "/nonexistent"}}) {
    const Outcome r = run(args);
    EXPECT_EQ(r.status, 2) << args[0];
    EXPECT_EQ(r.out, "") << args[0];
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("mlacheck mutants: ", 0), 0u) << r.err;
  }
}

}  // namespace
}  // namespace mlacheck
