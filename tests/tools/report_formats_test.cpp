// Tests of tools/report_formats.h: escaping, a JUnit file that python3's XML parser (expat, strict
// about well-formedness) reads back with the counts written, a SARIF file with the keys SARIF 2.1.0
// requires, source locations taken from sanitizer stacks, and `mutants --format junit` giving one
// test case per variant.
#include "tools/report_formats.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tools/mutants_command.h"

namespace mlacheck::report {
namespace {

namespace fs = std::filesystem;

// Text that has broken many writers: markup, quotes, line ends, a control character, a byte that
// is not UTF-8, a truncated sequence, CDATA's end, and valid non-ASCII text.
const std::string kNasty = std::string("a<b>&c \"q\" 'a' ]]> line\nnext\ttab \x01 \xff \xe2\x82 ok \xc3\xa9\xe2\x82\xac");

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// Runs a python3 script on file; its output, or nullopt when python3 is not there.
std::optional<std::string> python(const std::string& script, const fs::path& file) {
  if (std::system("python3 -c 'pass' >/dev/null 2>&1") != 0) return std::nullopt;
  // A folder per test: ctest runs the tests of this file at the same time.
  const fs::path dir = fs::path(::testing::TempDir()) /
                       ("report_formats_py_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  fs::create_directories(dir);
  std::ofstream(dir / "check.py") << script;
  const fs::path out = dir / "out.txt";
  const std::string cmd = "python3 '" + (dir / "check.py").string() + "' '" + file.string() + "' > '" + out.string() + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  return "rc " + std::to_string(rc) + "\n" + slurp(out);
}

TEST(ReportFormats, TextIsEscapedAndAlwaysValidUtf8) {
  EXPECT_EQ(xml_escape("a<b>&\"'"), "a&lt;b&gt;&amp;\"'");
  EXPECT_EQ(xml_escape("a<b>&\"'\n", true), "a&lt;b&gt;&amp;&quot;&apos;&#10;");
  EXPECT_EQ(xml_escape(std::string("x\x01y", 3)), "x\\x01y");
  EXPECT_EQ(valid_utf8("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(valid_utf8("\xff\xe2\x82"), "\\xFF\\xE2\\x82");
  EXPECT_EQ(valid_utf8("\xc0\xaf"), "\\xC0\\xAF");          // overlong '/'
  EXPECT_EQ(valid_utf8("\xed\xa0\x80"), "\\xED\\xA0\\x80");  // a surrogate
  EXPECT_EQ(json_quote(std::string("a\"\\\n\x01\xff", 6)), "\"a\\\"\\\\\\n\\u0001\\\\xFF\"");
  EXPECT_EQ(path_uri("cases/a b#1.case"), "cases/a%20b%231.case");
  EXPECT_EQ(path_uri("/src/x.cpp"), "file:///src/x.cpp");
}

std::vector<TestSuite> sample_suites() {
  TestSuite s;
  s.name = "mlacheck check topk_decode@ref";
  s.timestamp = "2025-01-31T12:00:00";
  s.properties = {{"backend", "host"}, {"odd", kNasty}};
  using O = TestCase::Outcome;
  s.cases.push_back({"topk_decode.rows_admissible", "topk_decode", O::kPassed, 1.5, "", "", "", ""});
  s.cases.push_back({"topk_decode.equals_oracle", "topk_decode", O::kFailed, 0.25, "row 3: " + kNasty,
                     "property violation", "property topk_decode.equals_oracle\nrows 4\n", "out " + kNasty});
  s.cases.push_back({kNasty, "", O::kError, 0, "cannot read", "malformed", "", ""});
  s.cases.push_back({"skipped one", "topk_decode", O::kSkipped, 0, "not judged: " + kNasty, "", "", ""});
  TestSuite empty;
  empty.name = "nothing";
  return {s, empty};
}

TEST(ReportFormats, JUnitIsReadByAStrictXmlParserWithItsCounts) {
  const fs::path file = fs::path(::testing::TempDir()) / "report_formats_junit.xml";
  {
    std::ofstream out(file);
    write_junit(out, "mlacheck check", sample_suites());
  }
  const auto got = python(R"(import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == 'testsuites', root.tag
for s in root.iter('testsuite'):
    cases = s.findall('testcase')
    assert int(s.get('tests')) == len(cases)
    assert int(s.get('failures')) == sum(1 for c in cases if c.find('failure') is not None)
    assert int(s.get('errors')) == sum(1 for c in cases if c.find('error') is not None)
    assert int(s.get('skipped')) == sum(1 for c in cases if c.find('skipped') is not None)
    for c in cases:
        assert c.get('name') and c.get('classname') and float(c.get('time')) >= 0
        print('case', c.get('classname'), '|', 'failure' if c.find('failure') is not None else 'error' if c.find('error') is not None else 'skipped' if c.find('skipped') is not None else 'passed')
f = root.find('.//failure')
print('message', repr(f.get('message')))
print('type', f.get('type'))
print('body', repr(f.text))
print('total', root.get('tests'), root.get('failures'), root.get('errors'), root.get('skipped'))
)",
                          file);
  if (!got) GTEST_SKIP() << "skipped: no python3";
  EXPECT_EQ(got->rfind("rc 0\n", 0), 0u) << *got << slurp(file);
  EXPECT_NE(got->find("case topk_decode | passed\ncase topk_decode | failure\n"
                      "case mlacheck check topk_decode@ref | error\ncase topk_decode | skipped\n"),
            std::string::npos)
      << *got;
  // The message keeps its line end and tab; the bytes XML cannot carry come back as escapes.
  EXPECT_NE(got->find("message 'row 3: a<b>&c \"q\" \\'a\\' ]]> line\\nnext\\ttab \\\\x01 \\\\xFF \\\\xE2\\\\x82 ok "
                      "\xc3\xa9\xe2\x82\xac'"),
            std::string::npos)
      << *got;
  EXPECT_NE(got->find("type property violation\nbody 'property topk_decode.equals_oracle\\nrows 4\\n'"), std::string::npos)
      << *got;
  EXPECT_NE(got->find("total 4 1 1 1"), std::string::npos) << *got;
}

TEST(ReportFormats, SourceLocationsComeFromTheFirstProjectFrame) {
  const std::string asan =
      "==1==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x6020 at pc 0x55 bp 0x7f\n"
      "    #0 0x55 in __asan_memcpy /llvm-project/compiler-rt/lib/asan/asan_interceptors.cpp:22:3\n"
      "    #1 0x5a in std::vector<int>::at(unsigned long) const /usr/include/c++/12/bits/stl_vector.h:1124:2\n"
      "    #2 0x56 in mlacheck::kernels::pack_rows(int, float const*) /src/kernels/pack.cpp:10:7\n"
      "    #3 0x57 in LLVMFuzzerTestOneInput /src/fuzz/harness.cpp:40\n";
  const auto loc = first_source_location(asan);
  ASSERT_TRUE(loc.has_value());
  EXPECT_EQ(loc->file, "/src/kernels/pack.cpp");
  EXPECT_EQ(loc->line, 10);
  EXPECT_EQ(loc->column, 7);
  EXPECT_EQ(loc->function, "mlacheck::kernels::pack_rows(int, float const*)");
  const auto ub = first_source_location("/src/kernels/topk.cpp:88:15: runtime error: signed integer overflow: 1 + 2\n");
  ASSERT_TRUE(ub.has_value());
  EXPECT_EQ(ub->file, "/src/kernels/topk.cpp");
  EXPECT_EQ(ub->line, 88);
  // Frames without a file (a stripped binary), and a violation's verdict, name no place.
  EXPECT_FALSE(first_source_location("    #0 0x55 in f (/bin/x+0x12)\n==mlacheck== verdict: row 3\n").has_value());
  EXPECT_EQ(finding_rule("topk_decode.rows_admissible", "anything"), "topk_decode.rows_admissible");
  EXPECT_EQ(finding_rule("", "==1==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x6020 at pc 0x55"),
            "AddressSanitizer: heap-buffer-overflow");
  EXPECT_EQ(finding_rule("", "ERROR: libFuzzer: timeout after 60 seconds"), "libFuzzer: timeout");
  EXPECT_EQ(finding_rule("", "x.cpp:3:4: runtime error: signed integer overflow: 1 + 2"),
            "UndefinedBehaviorSanitizer: signed integer overflow");
  EXPECT_EQ(finding_rule("", "crash at f < g"), "crash");
}

TEST(ReportFormats, SarifHasTheRequiredKeysAndTheFindings) {
  SarifRun run;
  run.tool_version = "0.1.0";
  run.source_root = "/src";
  run.command_line = "mlacheck fuzz --target topk_decode --format sarif";
  Finding a;
  a.rule = finding_rule("", "ERROR: AddressSanitizer: heap-buffer-overflow on address 0x1");
  a.verdict = "ERROR: AddressSanitizer: heap-buffer-overflow on address 0x1 at pc 0x2 " + kNasty;
  a.target = "topk_decode", a.impl = "topk_decode@ref", a.backend = "host";
  a.case_file = "mlacheck-fuzz/topk_decode/cases/topk-0a1b.case";
  a.raw_input = "mlacheck-fuzz/topk_decode/crashes/crash-12";
  a.key = "0a1b";
  a.location = SourceLocation{"/src/kernels/pack.cpp", "pack_rows(int)", 10, 7};
  Finding b = a;
  b.rule = "topk_decode.rows_admissible";
  b.verdict = "row 4: index 9 out of [0, 7)";
  b.location.reset();
  b.case_file = "/abs/cases/rows admissible.case";
  run.findings = {a, b, b};
  const fs::path file = fs::path(::testing::TempDir()) / "report_formats.sarif";
  {
    std::ofstream out(file);
    write_sarif(out, run);
  }
  const auto got = python(R"(import sys, json
log = json.load(open(sys.argv[1], encoding='utf-8'))
assert log['version'] == '2.1.0' and 'sarif-2.1.0' in log['$schema']
run, = log['runs']
driver = run['tool']['driver']
assert driver['name'] == 'mlacheck'
ids = [r['id'] for r in driver['rules']]
assert len(ids) == len(set(ids))
for r in run['results']:
    assert r['level'] == 'error' and r['message']['text']
    assert ids[r['ruleIndex']] == r['ruleId']
    loc = r['locations'][0]['physicalLocation']
    print('result', r['ruleId'], '|', loc['artifactLocation']['uri'], loc['artifactLocation'].get('uriBaseId'),
          loc.get('region', {}).get('startLine'), '|', r['properties']['caseFile'])
print('root', run['originalUriBaseIds']['SRCROOT']['uri'])
print('rules', len(ids))
)",
                          file);
  if (!got) GTEST_SKIP() << "skipped: no python3";
  EXPECT_EQ(got->rfind("rc 0\n", 0), 0u) << *got << slurp(file);
  EXPECT_NE(got->find("result AddressSanitizer: heap-buffer-overflow | kernels/pack.cpp SRCROOT 10 | "
                      "mlacheck-fuzz/topk_decode/cases/topk-0a1b.case\n"),
            std::string::npos)
      << *got;
  EXPECT_NE(got->find("result topk_decode.rows_admissible | file:///abs/cases/rows%20admissible.case None None | "
                      "/abs/cases/rows admissible.case\n"),
            std::string::npos)
      << *got;
  EXPECT_NE(got->find("root file:///src/\nrules 2\n"), std::string::npos) << *got;
}

// The acceptance check of the issue: a JUnit file from `mutants` read by a JUnit parser, one test
// case per variant (R4 is killed: a pass; a seeded bug that survives would be a failure).
TEST(ReportFormats, MutantsJUnitHasOneTestCasePerVariant) {
  std::ostringstream out, err;
  const int status = run_mutants_command({"--only", "R4", "--only", "U1", "--budget", "30", "--format", "junit"}, out, err);
  ASSERT_EQ(status, 0) << out.str() << err.str();
  EXPECT_EQ(err.str(), "");  // no progress lines mixed into a machine-read run
  const fs::path file = fs::path(::testing::TempDir()) / "mutants.xml";
  std::ofstream(file) << out.str();
  const auto got = python(R"(import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
for c in root.iter('testcase'):
    print('variant', c.get('name'), c.get('classname'), 'failure' if c.find('failure') is not None else 'passed')
print('tests', root.get('tests'), 'failures', root.get('failures'))
)",
                          file);
  if (!got) GTEST_SKIP() << "skipped: no python3";
  EXPECT_EQ(got->rfind("rc 0\n", 0), 0u) << *got << out.str();
  EXPECT_NE(got->find("variant topk_decode@R4 topk_decode passed\n"), std::string::npos) << *got;
  EXPECT_NE(got->find("variant decode_metadata@U1 decode_metadata passed\n"), std::string::npos) << *got;
  EXPECT_NE(got->find("tests 2 failures 0"), std::string::npos) << *got;
}

}  // namespace
}  // namespace mlacheck::report
