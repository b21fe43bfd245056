// JUnit XML, JSON text and SARIF 2.1.0 writers (tools/report_formats.h).
#include "tools/report_formats.h"

#include "core/json_text.h"

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <map>
#include <ostream>
#include <sstream>

namespace mlacheck::report {

namespace {

std::string number(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v < 0 ? 0.0 : v);
  return buf;
}

}  // namespace

std::string xml_escape(const std::string& s, bool attribute) {
  std::string out;
  out.reserve(s.size() + 16);
  for (size_t i = 0; i < s.size();) {
    const auto [cp, n] = text::decode_utf8_at(s, i);
    if (n == 0) {
      out += text::hex_byte(static_cast<unsigned char>(s[i++]));
      continue;
    }
    // XML 1.0 characters: tab, line feed, carriage return, U+0020..U+D7FF, U+E000..U+FFFD, U+10000 up.
    const bool allowed = cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
                         (cp >= 0xE000 && cp <= 0xFFFD) || cp >= 0x10000;
    if (!allowed) {
      for (size_t k = 0; k < n; ++k) out += text::hex_byte(static_cast<unsigned char>(s[i + k]));
    } else if (cp == '&') {
      out += "&amp;";
    } else if (cp == '<') {
      out += "&lt;";
    } else if (cp == '>') {
      out += "&gt;";
    } else if (attribute && cp == '"') {
      out += "&quot;";
    } else if (attribute && cp == '\'') {
      out += "&apos;";
    } else if (cp == '\r' || (attribute && (cp == '\n' || cp == '\t'))) {
      out += "&#" + std::to_string(cp) + ";";  // kept as they are, not normalised to a space
    } else {
      out.append(s, i, n);
    }
    i += n;
  }
  return out;
}

std::string junit_timestamp() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

void write_junit(std::ostream& out, const std::string& name, const std::vector<TestSuite>& suites) {
  using O = TestCase::Outcome;
  struct Counts {
    size_t tests = 0, failures = 0, errors = 0, skipped = 0;
    double seconds = 0;
  };
  const auto count = [](const TestSuite& s) {
    Counts c;
    for (const TestCase& t : s.cases) {
      ++c.tests;
      c.failures += t.outcome == O::kFailed;
      c.errors += t.outcome == O::kError;
      c.skipped += t.outcome == O::kSkipped;
      c.seconds += t.seconds;
    }
    if (s.seconds > 0) c.seconds = s.seconds;
    return c;
  };
  const auto counts_attrs = [](const Counts& c) {
    return " tests=\"" + std::to_string(c.tests) + "\" failures=\"" + std::to_string(c.failures) + "\" errors=\"" +
           std::to_string(c.errors) + "\" skipped=\"" + std::to_string(c.skipped) + "\" time=\"" +
           number(c.seconds, 3) + "\"";
  };
  Counts all;
  for (const TestSuite& s : suites) {
    const Counts c = count(s);
    all.tests += c.tests, all.failures += c.failures, all.errors += c.errors, all.skipped += c.skipped;
    all.seconds += c.seconds;
  }
  const auto attr = [](const std::string& s) { return xml_escape(s, true); };
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << "<testsuites name=\"" << attr(name) << "\"" << counts_attrs(all) << ">\n";
  for (size_t si = 0; si < suites.size(); ++si) {
    const TestSuite& s = suites[si];
    out << "  <testsuite name=\"" << attr(s.name) << "\" id=\"" << si << "\"" << counts_attrs(count(s));
    if (!s.timestamp.empty()) out << " timestamp=\"" << attr(s.timestamp) << "\"";
    out << ">\n";
    if (!s.properties.empty()) {
      out << "    <properties>\n";
      for (const auto& [k, v] : s.properties) {
        out << "      <property name=\"" << attr(k) << "\" value=\"" << attr(v) << "\"/>\n";
      }
      out << "    </properties>\n";
    }
    for (const TestCase& t : s.cases) {
      out << "    <testcase name=\"" << attr(t.name) << "\" classname=\"" << attr(t.classname.empty() ? s.name : t.classname)
          << "\" time=\"" << number(t.seconds, 3) << "\"";
      if (t.outcome == O::kPassed && t.output.empty()) {
        out << "/>\n";
        continue;
      }
      out << ">\n";
      if (t.outcome == O::kSkipped) {
        out << "      <skipped message=\"" << attr(t.message) << "\"/>\n";
      } else if (t.outcome == O::kFailed || t.outcome == O::kError) {
        const char* tag = t.outcome == O::kFailed ? "failure" : "error";
        out << "      <" << tag << " message=\"" << attr(t.message) << "\"";
        if (!t.type.empty()) out << " type=\"" << attr(t.type) << "\"";
        out << ">" << xml_escape(t.details.empty() ? t.message : t.details) << "</" << tag << ">\n";
      }
      if (!t.output.empty()) out << "      <system-out>" << xml_escape(t.output) << "</system-out>\n";
      out << "    </testcase>\n";
    }
    out << "  </testsuite>\n";
  }
  out << "</testsuites>\n";
}

std::optional<SourceLocation> first_source_location(const std::string& log) {
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::string where, function;
    // UBSan names the place first: "/src/x.cpp:10:5: runtime error: ...".
    const size_t rt = line.find(": runtime error: ");
    if (rt != std::string::npos) {
      where = line.substr(0, rt);
    } else {
      // A stack frame: "    #3 0x55d4 in f(int) const /src/x.cpp:10:5" (the file is the last word).
      const size_t hash = line.find_first_not_of(' ');
      const size_t in = line.find(" in ");
      if (hash == std::string::npos || line[hash] != '#' || in == std::string::npos) continue;
      const size_t last = line.find_last_of(' ');
      if (last <= in + 3) continue;
      where = line.substr(last + 1);
      function = line.substr(in + 4, last - in - 4);
    }
    // where is "path:line" or "path:line:column".
    SourceLocation loc;
    loc.function = function;
    const auto digits = [](const std::string& s) {
      return !s.empty() && s.size() < 9 && s.find_first_not_of("0123456789") == std::string::npos;
    };
    size_t c1 = where.rfind(':');
    if (c1 == std::string::npos || !digits(where.substr(c1 + 1))) continue;
    const size_t c2 = c1 == 0 ? std::string::npos : where.rfind(':', c1 - 1);
    if (c2 != std::string::npos && digits(where.substr(c2 + 1, c1 - c2 - 1))) {
      loc.line = std::stoi(where.substr(c2 + 1, c1 - c2 - 1));
      loc.column = std::stoi(where.substr(c1 + 1));
      c1 = c2;
    } else {
      loc.line = std::stoi(where.substr(c1 + 1));
    }
    loc.file = where.substr(0, c1);
    if (loc.file.empty() || loc.line <= 0) continue;
    // Not project code: the sanitizer runtime, libFuzzer, libc, the C++ library, system headers.
    bool foreign = false;
    for (const char* f : {"__sanitizer", "__asan", "__ubsan", "__msan", "__interceptor", "fuzzer::", "compiler-rt",
                          "/usr/include/", "/usr/lib/", "libc", "llvm-project"}) {
      foreign = foreign || loc.file.find(f) != std::string::npos || function.find(f) != std::string::npos;
    }
    if (function.rfind("std::", 0) == 0 || function.rfind("__", 0) == 0 || foreign) continue;
    return loc;
  }
  return std::nullopt;
}

std::string finding_rule(const std::string& property, const std::string& summary) {
  if (!property.empty()) return property;
  std::string tool, rest;
  if (const size_t e = summary.find("ERROR: "); e != std::string::npos) {
    rest = summary.substr(e + 7);
    const size_t colon = rest.find(": ");
    if (colon == std::string::npos) return "crash";
    tool = rest.substr(0, colon);
    rest = rest.substr(colon + 2);
  } else if (const size_t r = summary.find("runtime error: "); r != std::string::npos) {
    tool = "UndefinedBehaviorSanitizer";
    rest = summary.substr(r + 15);
  } else {
    return "crash";
  }
  // The kind: the words before the first that is an address, a number or a place ("on", "at", ...).
  std::string kind;
  std::istringstream words(rest.substr(0, rest.find(':')));
  for (std::string w; words >> w;) {
    if (w == "on" || w == "at" || w == "after" || w == "in" || w == "from" || w[0] == '(' ||
        w.find_first_of("0123456789") != std::string::npos) {
      break;
    }
    kind += (kind.empty() ? "" : " ") + w;
  }
  return valid_utf8(tool + (kind.empty() ? "" : ": " + kind));
}

std::string path_uri(const std::string& path) {
  std::string out = !path.empty() && path[0] == '/' ? "file://" : "";
  for (unsigned char c : path) {
    const bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                      c == '.' || c == '_' || c == '~' || c == '/';
    if (keep) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

void write_sarif(std::ostream& out, const SarifRun& run) {
  const auto q = [](const std::string& s) { return json_quote(s); };
  std::string root = run.source_root;
  if (!root.empty() && root.back() != '/') root += '/';
  // A file under the source root is written relative to it (%SRCROOT%), any other as it is.
  const auto artifact = [&](const std::string& file) {
    if (!root.empty() && root.size() > 1 && file.rfind(root, 0) == 0) {
      return "{\"uri\": " + q(path_uri(file.substr(root.size()))) + ", \"uriBaseId\": \"SRCROOT\"}";
    }
    return "{\"uri\": " + q(path_uri(file)) + "}";
  };
  std::map<std::string, std::string> rules;  // id -> a finding's verdict, for its description
  for (const Finding& f : run.findings) rules.emplace(f.rule.empty() ? "crash" : f.rule, f.verdict);
  std::map<std::string, size_t> rule_index;
  out << "{\n  \"$schema\": \"https://json.schemastore.org/sarif-2.1.0.json\",\n  \"version\": \"2.1.0\",\n"
      << "  \"runs\": [{\n    \"tool\": {\"driver\": {\"name\": \"mlacheck\", \"version\": " << q(run.tool_version)
      << ",\n      \"rules\": [";
  size_t i = 0;
  for (const auto& [id, verdict] : rules) {
    rule_index[id] = i;
    const bool property = id.find(": ") == std::string::npos && id != "crash";
    out << (i++ ? ",\n" : "\n") << "        {\"id\": " << q(id) << ", \"shortDescription\": {\"text\": "
        << q(property ? "property " + id + " is violated" : id) << "}, \"defaultConfiguration\": {\"level\": \"error\"}}";
  }
  out << "\n      ]}},\n";
  if (!root.empty()) {
    out << "    \"originalUriBaseIds\": {\"SRCROOT\": {\"uri\": " << q(path_uri(root)) << "}},\n";
  }
  out << "    \"invocations\": [{\"executionSuccessful\": " << (run.successful ? "true" : "false")
      << ", \"commandLine\": " << q(run.command_line) << "}],\n    \"results\": [";
  for (size_t k = 0; k < run.findings.size(); ++k) {
    const Finding& f = run.findings[k];
    const std::string id = f.rule.empty() ? "crash" : f.rule;
    out << (k ? ",\n" : "\n") << "      {\"ruleId\": " << q(id) << ", \"ruleIndex\": " << rule_index[id]
        << ", \"level\": \"error\",\n        \"message\": {\"text\": "
        << q(f.verdict + (f.case_file.empty() ? "" : " (rerun: mlacheck repro " + f.case_file + ")")) << "},\n";
    // The primary location: the kernel's line when a stack named it, else the case file.
    std::string primary;
    if (f.location) {
      primary = "{\"physicalLocation\": {\"artifactLocation\": " + artifact(f.location->file) +
                ", \"region\": {\"startLine\": " + std::to_string(f.location->line) +
                (f.location->column > 0 ? ", \"startColumn\": " + std::to_string(f.location->column) : "") + "}}" +
                (f.location->function.empty() ? "" : ", \"logicalLocations\": [{\"fullyQualifiedName\": " +
                                                         q(f.location->function) + ", \"kind\": \"function\"}]") +
                "}";
    } else if (!f.case_file.empty() || !f.raw_input.empty()) {
      primary = "{\"physicalLocation\": {\"artifactLocation\": " + artifact(f.case_file.empty() ? f.raw_input : f.case_file) +
                "}, \"message\": {\"text\": \"the case that fails\"}}";
    }
    if (!primary.empty()) out << "        \"locations\": [" << primary << "],\n";
    std::vector<std::string> related;
    if (f.location && !f.case_file.empty()) {
      related.push_back("{\"id\": 1, \"physicalLocation\": {\"artifactLocation\": " + artifact(f.case_file) +
                        "}, \"message\": {\"text\": \"the case file (mlacheck repro runs it)\"}}");
    }
    if (!f.raw_input.empty()) {
      related.push_back("{\"id\": " + std::to_string(related.size() + 1) + ", \"physicalLocation\": {\"artifactLocation\": " +
                        artifact(f.raw_input) + "}, \"message\": {\"text\": \"the raw fuzz input\"}}");
    }
    if (!related.empty()) {
      out << "        \"relatedLocations\": [";
      for (size_t r = 0; r < related.size(); ++r) out << (r ? ", " : "") << related[r];
      out << "],\n";
    }
    if (!f.key.empty()) out << "        \"partialFingerprints\": {\"mlacheckFindingKey/v1\": " << q(f.key) << "},\n";
    out << "        \"properties\": {\"target\": " << q(f.target) << ", \"impl\": " << q(f.impl)
        << ", \"backend\": " << q(f.backend) << ", \"verdict\": " << q(f.verdict) << ", \"caseFile\": " << q(f.case_file)
        << ", \"rawInput\": " << q(f.raw_input) << "}}";
  }
  out << (run.findings.empty() ? "]\n" : "\n    ]\n") << "  }]\n}\n";
}

}  // namespace mlacheck::report
