// Reports CI systems read: JUnit XML (one test case per property, variant or case file, for
// `check`, `mutants` and `repro --all` with --format junit), JSON text, and SARIF 2.1.0 (the
// findings of `fuzz`: each one's case file, verdict and, when a stack names it, the source line).
// The writers take plain records, not the commands' own results, so they are tested on their own
// (tests/tools/report_formats_test.cpp). Any text goes in: what is not valid UTF-8, and control
// characters XML 1.0 cannot carry, is written as visible escapes ("\x01"), so a strict parser
// always accepts the file.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/json_text.h"

namespace mlacheck::report {

// valid_utf8 and json_quote (core/json_text.h), for the reports.
using text::json_quote;
using text::valid_utf8;

// s escaped for XML 1.0 text (attribute: also quotes, and tabs and line ends as character
// references, so they survive attribute normalisation). Valid UTF-8; control characters XML 1.0
// forbids become "\xHH".
std::string xml_escape(const std::string& s, bool attribute = false);

// One JUnit test case: a property of one implementation, a seeded-bug variant, a case file.
struct TestCase {
  enum class Outcome { kPassed, kFailed, kError, kSkipped };
  std::string name, classname;
  Outcome outcome = Outcome::kPassed;
  double seconds = 0;
  std::string message;  // one line: the verdict (failure, error) or why it was skipped
  std::string type;     // the failure's kind ("property violation", "crashed", "survived")
  std::string details;  // the body of <failure> / <error>: the case to rerun, say
  std::string output;   // <system-out>: what the command printed for it
};

struct TestSuite {
  std::string name;
  std::string timestamp;  // ISO 8601 ("2025-01-31T12:00:00"), or "" for none
  double seconds = 0;     // 0: the sum of the cases' times
  std::vector<std::pair<std::string, std::string>> properties;  // <properties>: backend, budget, ...
  std::vector<TestCase> cases;
};

// The suites as one JUnit XML document (<testsuites> with counts, the form Jenkins, GitLab and
// GitHub's test reporters read).
void write_junit(std::ostream& out, const std::string& name, const std::vector<TestSuite>& suites);

// The current time as JUnit's timestamp, in UTC.
std::string junit_timestamp();

// Where a finding happened in source: a file (as the stack printed it), line and column (0: not
// known), and the function.
struct SourceLocation {
  std::string file, function;
  int line = 0, column = 0;
};

// The first frame of a sanitizer or libFuzzer stack in log ("    #3 0x55 in f(int) /src/x.cpp:10:5")
// that names a file with a line and is project code (not the sanitizer runtime, libFuzzer, libc or
// the C++ library), or nothing.
std::optional<SourceLocation> first_source_location(const std::string& log);

// One finding of a fuzz campaign.
struct Finding {
  std::string rule;      // what deduplicates it, stable: the property, or the sanitizer's kind
  std::string verdict;   // one line: the violation's verdict or the sanitizer's summary
  std::string target, impl, backend;
  std::string case_file;  // the readable case (mlacheck repro runs it), "" when none was written
  std::string raw_input;  // the raw fuzz input
  std::string key;        // the campaign's key of it (hex), for fingerprints
  std::optional<SourceLocation> location;  // in the kernel or harness, when a stack named it
};

// A finding's rule: its property when it is a property violation, else the kind a sanitizer or
// libFuzzer names in summary, without addresses and numbers ("AddressSanitizer: heap-buffer-overflow",
// "libFuzzer: timeout", "UndefinedBehaviorSanitizer: signed integer overflow"), else "crash".
std::string finding_rule(const std::string& property, const std::string& summary);

struct SarifRun {
  std::string tool_version;  // mlacheck's
  std::string source_root;   // absolute; files under it are written relative to it (%SRCROOT%)
  std::string command_line;
  bool successful = true;    // the campaign ran to its end (findings or not)
  std::vector<Finding> findings;
};

// A SARIF 2.1.0 log with one run: one result per finding (ruleId, level "error", message, its
// kernel location when known, else the case file, with the case file as a related location), and
// one rule per distinct ruleId.
void write_sarif(std::ostream& out, const SarifRun& run);

// A path as a URI reference: relative paths stay relative, absolute ones become file:// URIs;
// characters outside RFC 3986's unreserved set and '/' are percent-encoded.
std::string path_uri(const std::string& path);

}  // namespace mlacheck::report
