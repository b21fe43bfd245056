// The wire formats between a row's children and the parent (tools/suite_wire.h): every field of a
// result, its findings and its tally come back as they went, newlines and empty fields included;
// text of another shape is refused, never half read.
#include "tools/suite_wire.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace mlacheck {
namespace {

SuiteFinding finding(const std::string& property, int index) {
  SuiteFinding f;
  f.stage = "properties";
  f.check = property;
  f.verdict = "2 of 9 rows invalid;\nfirst: row 0";
  f.seconds = 1.5 + index;
  f.case_text = "property " + property + "\nimpl topk_decode@R4\n";
  f.random_property = index % 2 ? property : "";
  f.random_index = index;
  f.property = property;
  return f;
}

void expect_same(const SuiteFinding& a, const SuiteFinding& b) {
  EXPECT_EQ(a.stage, b.stage);
  EXPECT_EQ(a.check, b.check);
  EXPECT_EQ(a.verdict, b.verdict);
  EXPECT_DOUBLE_EQ(a.seconds, b.seconds);
  EXPECT_EQ(a.case_text, b.case_text);
  EXPECT_EQ(a.random_property, b.random_property);
  EXPECT_EQ(a.random_index, b.random_index);
  EXPECT_EQ(a.property, b.property);
}

TEST(SuiteWire, AResultComesBackFieldForField) {
  SuiteResult r;
  r.failed = true;
  r.first = finding("topk_decode.far_rows", -1);
  r.more = {finding("topk_decode.rows_admissible", 3), finding("topk_decode.deterministic", 4)};
  r.cases_run = 42;
  r.named_result = "first kill";
  r.named_verdict = "a verdict\nof two lines";
  r.false_positives = 2;
  r.false_positive = "topk_decode.far_rows: on @ref too";
  r.false_positive_case = "property topk_decode.far_rows\n";
  r.outside_contract = 7;
  r.probe_cases = 5, r.probe_failures = 1;
  r.probe_first.check = "topk_decode.rows_admissible";
  r.probe_first.verdict = "outside";
  r.probe_first.case_text = "k 4096\n";
  r.beyond_reach = 3;
  r.beyond_reach_why = "a call predicted at 40 s";
  r.tally["topk_decode.far_rows"] = PropertyTally{3, 0, ""};
  r.tally["topk_decode.rows_admissible"] = PropertyTally{0, 12, "reserved memory\tnot lent\non cuda"};
  const std::string line = suite_wire::serialize(r);
  EXPECT_EQ(line.find('\n'), std::string::npos) << "the pipe carries one line";
  SuiteResult back;
  ASSERT_TRUE(suite_wire::deserialize(line, back));
  EXPECT_TRUE(back.failed);
  expect_same(back.first, r.first);
  ASSERT_EQ(back.more.size(), 2u);
  expect_same(back.more[0], r.more[0]);
  expect_same(back.more[1], r.more[1]);
  EXPECT_EQ(back.cases_run, 42);
  EXPECT_EQ(back.named_result, r.named_result);
  EXPECT_EQ(back.named_verdict, r.named_verdict);
  EXPECT_EQ(back.false_positives, 2);
  EXPECT_EQ(back.false_positive, r.false_positive);
  EXPECT_EQ(back.false_positive_case, r.false_positive_case);
  EXPECT_EQ(back.outside_contract, 7);
  EXPECT_EQ(back.probe_cases, 5);
  EXPECT_EQ(back.probe_failures, 1);
  EXPECT_EQ(back.probe_first.stage, "probe");
  EXPECT_EQ(back.probe_first.check, r.probe_first.check);
  EXPECT_EQ(back.probe_first.verdict, r.probe_first.verdict);
  EXPECT_EQ(back.probe_first.case_text, r.probe_first.case_text);
  EXPECT_EQ(back.beyond_reach, 3);
  EXPECT_EQ(back.beyond_reach_why, r.beyond_reach_why);
  ASSERT_EQ(back.tally.size(), 2u);
  EXPECT_EQ(back.tally["topk_decode.far_rows"].cases, 3);
  EXPECT_EQ(back.tally["topk_decode.rows_admissible"].not_taken, 12);
  // A tally's reason loses its tabs and newlines (the progress file's head is one tab-split line).
  EXPECT_EQ(back.tally["topk_decode.rows_admissible"].not_taken_why, "reserved memory not lent on cuda");
}

TEST(SuiteWire, APassingResultWithEmptyFieldsComesBackEmpty) {
  SuiteResult r;
  r.cases_run = 9;
  SuiteResult back;
  back.first.verdict = "left over";
  ASSERT_TRUE(suite_wire::deserialize(suite_wire::serialize(r), back));
  EXPECT_FALSE(back.failed);
  EXPECT_EQ(back.cases_run, 9);
  EXPECT_TRUE(back.first.verdict.empty());
  EXPECT_TRUE(back.more.empty());
  EXPECT_TRUE(back.tally.empty());
  EXPECT_TRUE(back.probe_first.stage.empty()) << "no probe failure, no probe stage";
}

// A case that failed on <op>@ref too is a defect of the suite: the row is never a pass (check exits
// 1), though nothing counts against the implementation; it comes back from a child as such.
TEST(SuiteWire, ASuiteDefectIsNeverAPass) {
  SuiteResult r;
  r.cases_run = 9;
  ASSERT_TRUE(r.passed());
  r.false_positives = 1;
  r.false_positive = "topk_decode.rows_admissible: on @ref too";
  EXPECT_TRUE(r.suite_defect());
  EXPECT_FALSE(r.passed());
  EXPECT_FALSE(r.failed);
  SuiteResult back;
  ASSERT_TRUE(suite_wire::deserialize(suite_wire::serialize(r), back));
  EXPECT_TRUE(back.suite_defect());
  EXPECT_FALSE(back.passed());
}

TEST(SuiteWire, TextOfAnotherShapeIsRefused) {
  SuiteResult back;
  EXPECT_FALSE(suite_wire::deserialize("", back));
  EXPECT_FALSE(suite_wire::deserialize("a child's other message", back));
  std::string line = suite_wire::serialize(SuiteResult{});
  EXPECT_FALSE(suite_wire::deserialize(line.substr(0, line.rfind('\x1f')), back)) << "a field short";
  EXPECT_FALSE(suite_wire::deserialize("other-result" + line.substr(12), back)) << "not a suite result";
  SuiteFinding f;
  EXPECT_FALSE(suite_wire::unpack_finding("stage\x1c" "check", f));
  EXPECT_TRUE(suite_wire::unpack_tally("name\x1c" "1").empty()) << "a tally item of two fields";
}

TEST(SuiteWire, AFindingWithAnEmptyFirstFieldComesBack) {
  SuiteFinding f = finding("topk_decode.far_rows", 2);
  f.stage.clear();
  SuiteFinding back;
  ASSERT_TRUE(suite_wire::unpack_finding(suite_wire::pack_finding(f), back));
  expect_same(back, f);
}

TEST(SuiteWire, TheFoundFileKeepsEachFindingOnItsLine) {
  const std::string path = (std::filesystem::path(::testing::TempDir()) / "suite_wire_found").string();
  {
    std::ofstream out(path, std::ios::trunc);
    out << suite_wire::found_line(finding("topk_decode.far_rows", 1)) << '\n';
    out << "a line the child did not finish\n";
    out << suite_wire::found_line(finding("topk_decode.deterministic", 2)) << '\n';
  }
  const std::vector<SuiteFinding> found = suite_wire::read_found(path);
  ASSERT_EQ(found.size(), 2u);
  expect_same(found[0], finding("topk_decode.far_rows", 1));
  expect_same(found[1], finding("topk_decode.deterministic", 2));
  EXPECT_TRUE(suite_wire::read_found(path + ".missing").empty());
}

TEST(SuiteWire, SplitKeepsEmptyFields) {
  EXPECT_EQ(suite_wire::split_on("", ','), std::vector<std::string>{""});
  EXPECT_EQ(suite_wire::split_on("a,,b,", ','), (std::vector<std::string>{"a", "", "b", ""}));
}

// A property's tally keeps one reason for the cases it did not take: the first, unless a reason
// that is not a contract refusal comes later (the cuda far properties of a Python callable: the
// reserved memory it is not lent is why none ran, not the first case's value outside the contract).
TEST(SuiteWire, ATallyPrefersAReasonThatIsNotTheContracts) {
  PropertyTally t;
  t.add_not_taken(1, "case: 'head_dim' is 4, outside the contract's head_dim = 128");
  t.add_not_taken(3, "a Python callable can be lent only mlacheck's cudaMalloc buffers (x): reserved device memory is not lent on cuda");
  t.add_not_taken(1, "case: 'head_dim' is 7, outside the contract's head_dim = 128");
  EXPECT_EQ(t.not_taken, 5);
  EXPECT_EQ(t.not_taken_why.find("a Python callable can be lent only"), 0u) << t.not_taken_why;
  PropertyTally first;
  first.add_not_taken(2, "beyond the Triton interpreter's reach: x");
  first.add_not_taken(1, "reserved device memory is not lent on cuda");
  EXPECT_EQ(first.not_taken, 3);
  EXPECT_EQ(first.not_taken_why, "beyond the Triton interpreter's reach: x");
  PropertyTally contract_only;
  contract_only.add_not_taken(1, "case: 'k' is 9000, outside the contract's k <= 8192");
  contract_only.add_not_taken(1, "case: 'k' is 9001, outside the contract's k <= 8192");
  EXPECT_EQ(contract_only.not_taken_why, "case: 'k' is 9000, outside the contract's k <= 8192");
}

}  // namespace
}  // namespace mlacheck
