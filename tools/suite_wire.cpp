// The wire formats of a row's children (tools/suite_wire.h).
#include "tools/suite_wire.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>

namespace mlacheck::suite_wire {

namespace {

constexpr char kSep = '\x1f', kNewline = '\x1e', kItem = '\x1d', kField = '\x1c';

std::string pack_findings(const std::vector<SuiteFinding>& list) {
  std::string s;
  for (size_t i = 0; i < list.size(); ++i) s += (i ? std::string(1, kItem) : "") + pack_finding(list[i]);
  return s;
}

std::vector<SuiteFinding> unpack_findings(const std::string& s) {
  std::vector<SuiteFinding> out;
  if (s.empty()) return out;
  for (const std::string& item : split_on(s, kItem)) {
    SuiteFinding f;
    if (unpack_finding(item, f)) out.push_back(std::move(f));
  }
  return out;
}

}  // namespace

std::vector<std::string> split_on(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == sep) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

std::string pack_finding(const SuiteFinding& f) {
  std::string s;
  bool first = true;  // not s.empty(): a field may be empty
  for (const std::string& x : {f.stage, f.check, f.verdict, std::to_string(f.seconds), f.case_text, f.random_property,
                               std::to_string(f.random_index), f.property}) {
    s += (first ? "" : std::string(1, kField)) + x;
    first = false;
  }
  return s;
}

bool unpack_finding(const std::string& s, SuiteFinding& f) {
  const std::vector<std::string> x = split_on(s, kField);
  if (x.size() != 8) return false;
  f = SuiteFinding{x[0], x[1], x[2], std::atof(x[3].c_str()), x[4], x[5], std::atoi(x[6].c_str()), x[7]};
  return true;
}

std::string pack_tally(const std::map<std::string, PropertyTally>& tally) {
  std::string s;
  for (const auto& [name, t] : tally) {
    std::string why = t.not_taken_why;
    std::replace(why.begin(), why.end(), '\n', ' ');
    std::replace(why.begin(), why.end(), '\t', ' ');  // the progress file's head is split on tabs
    s += (s.empty() ? "" : std::string(1, kItem)) + name + kField + std::to_string(t.cases) + kField +
         std::to_string(t.not_taken) + kField + why;
  }
  return s;
}

std::map<std::string, PropertyTally> unpack_tally(const std::string& s) {
  std::map<std::string, PropertyTally> out;
  if (s.empty()) return out;
  for (const std::string& item : split_on(s, kItem)) {
    const std::vector<std::string> x = split_on(item, kField);
    if (x.size() == 4) out[x[0]] = PropertyTally{std::atoi(x[1].c_str()), std::atoi(x[2].c_str()), x[3]};
  }
  return out;
}

std::string serialize(const SuiteResult& r) {
  std::string s = "suite-result";
  for (const std::string& f : {std::string(r.failed ? "1" : "0"), r.first.stage, r.first.check, r.first.verdict,
                               std::to_string(r.first.seconds), std::to_string(r.cases_run), r.named_result,
                               r.named_verdict, r.first.case_text, std::to_string(r.false_positives),
                               r.false_positive, r.false_positive_case, std::to_string(r.outside_contract),
                               std::to_string(r.probe_cases), std::to_string(r.probe_failures), r.probe_first.check,
                               r.probe_first.verdict, r.probe_first.case_text, r.first.random_property,
                               std::to_string(r.first.random_index), std::to_string(r.beyond_reach),
                               r.beyond_reach_why, r.first.property, pack_findings(r.more), pack_tally(r.tally)}) {
    std::string field = f;
    std::replace(field.begin(), field.end(), '\n', kNewline);  // the pipe carries one line
    s += kSep + field;
  }
  return s;
}

bool deserialize(const std::string& s, SuiteResult& r) {
  std::vector<std::string> f;
  std::string cur;
  for (char c : s) {
    if (c == kSep) {
      f.push_back(cur), cur.clear();
    } else {
      cur += c == kNewline ? '\n' : c;
    }
  }
  f.push_back(cur);
  if (f.size() != 26 || f[0] != "suite-result") return false;
  r.failed = f[1] == "1";
  r.first.stage = f[2], r.first.check = f[3], r.first.verdict = f[4];
  r.first.seconds = std::atof(f[5].c_str());
  r.cases_run = std::atoi(f[6].c_str());
  r.named_result = f[7], r.named_verdict = f[8], r.first.case_text = f[9];
  r.false_positives = std::atoi(f[10].c_str());
  r.false_positive = f[11], r.false_positive_case = f[12];
  r.outside_contract = std::atoi(f[13].c_str());
  r.probe_cases = std::atoi(f[14].c_str()), r.probe_failures = std::atoi(f[15].c_str());
  r.probe_first.check = f[16], r.probe_first.verdict = f[17], r.probe_first.case_text = f[18];
  if (!r.probe_first.check.empty()) r.probe_first.stage = "probe";
  r.first.random_property = f[19];
  r.first.random_index = std::atoi(f[20].c_str());
  r.beyond_reach = std::atoi(f[21].c_str()), r.beyond_reach_why = f[22];
  r.first.property = f[23];
  r.more = unpack_findings(f[24]);
  r.tally = unpack_tally(f[25]);
  return true;
}

std::string found_line(const SuiteFinding& f) {
  std::string line = pack_finding(f);
  std::replace(line.begin(), line.end(), '\n', kNewline);
  return line;
}

std::vector<SuiteFinding> read_found(const std::string& path) {
  std::vector<SuiteFinding> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::replace(line.begin(), line.end(), kNewline, '\n');
    SuiteFinding f;
    if (unpack_finding(line, f)) out.push_back(std::move(f));
  }
  return out;
}

}  // namespace mlacheck::suite_wire
