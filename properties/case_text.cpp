// The case text format (properties/case_text.h).
#include "properties/case_text.h"

#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace mlacheck {

namespace {

bool valid_key(const std::string& key) {
  if (key.empty() || key.size() > 64) return false;
  for (char ch : key) {
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-')) return false;
  }
  return true;
}

bool valid_word(const std::string& w) {
  if (w.empty() || w.size() > 200) return false;
  for (char ch : w) {
    if (ch <= ' ' || ch > '~' || ch == '#') return false;
  }
  return true;
}

// strtoll/strtoull over the whole word (decimal, or hex after 0x), or false.
bool parse_signed(const std::string& w, int64_t& out) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(w.c_str(), &end, 0);
  if (w.empty() || *end != '\0' || errno == ERANGE) return false;
  // Leading zeros would read as octal: refuse "010" rather than guess.
  const size_t digits = (w[0] == '-' || w[0] == '+') ? 1 : 0;
  if (w.size() > digits + 1 && w[digits] == '0' && w[digits + 1] != 'x' && w[digits + 1] != 'X') return false;
  out = v;
  return true;
}

}  // namespace

CaseText CaseText::parse(std::string_view text) {
  CaseText c;
  size_t line_no = 0, pos = 0;
  MLA_REQUIRE(text.size() <= (1u << 22), "case: ", text.size(), " bytes is too long for a case file (4 MiB at most)");
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string line(text.substr(pos, end - pos));
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::vector<std::string> words;
    size_t i = 0;
    while (i < line.size()) {
      const char ch = line[i];
      if (ch == ' ' || ch == '\t') {
        ++i;
        continue;
      }
      MLA_REQUIRE(ch > ' ' && ch <= '~', "case line ", line_no, ": byte 0x", std::hex, int(static_cast<unsigned char>(ch)),
                  std::dec, " is not printable ASCII");
      const size_t start = i;
      while (i < line.size() && line[i] != ' ' && line[i] != '\t') {
        MLA_REQUIRE(line[i] > ' ' && line[i] <= '~', "case line ", line_no, ": byte 0x", std::hex,
                    int(static_cast<unsigned char>(line[i])), std::dec, " is not printable ASCII");
        ++i;
      }
      words.push_back(line.substr(start, i - start));
    }
    if (words.empty()) continue;
    const std::string key = words[0];
    MLA_REQUIRE(valid_key(key), "case line ", line_no, ": '", key.substr(0, 64),
                "' is not a key (lowercase letters, digits, '_', '.', '-')");
    MLA_REQUIRE(!c.has(key), "case line ", line_no, ": key '", key, "' appears twice");
    for (size_t w = 1; w < words.size(); ++w) {
      MLA_REQUIRE(words[w].size() <= 200, "case line ", line_no, ": a value of '", key, "' is over 200 characters");
    }
    MLA_REQUIRE(words.size() <= 1u << 16, "case line ", line_no, ": '", key, "' has over 65536 values");
    c.entries_.emplace_back(key, std::vector<std::string>(words.begin() + 1, words.end()));
  }
  return c;
}

std::string CaseText::format() const {
  std::string out = "# mlacheck case: run it with `mlacheck repro FILE`\n";
  for (const auto& [key, values] : entries_) {
    out += key;
    for (const std::string& v : values) out += " " + v;
    out += "\n";
  }
  return out;
}

CaseText& CaseText::set_words(const std::string& key, std::vector<std::string> words) {
  MLA_REQUIRE(valid_key(key), "case: '", key, "' is not a key");
  for (const std::string& w : words) MLA_REQUIRE(valid_word(w), "case: '", key, "' value '", w, "' is not a word");
  for (auto& [k, v] : entries_) {
    if (k == key) {
      v = std::move(words);
      return *this;
    }
  }
  entries_.emplace_back(key, std::move(words));
  return *this;
}

CaseText& CaseText::set(const std::string& key, const std::string& word) { return set_words(key, {word}); }
CaseText& CaseText::set(const std::string& key, int64_t value) { return set_words(key, {std::to_string(value)}); }
CaseText& CaseText::set(const std::string& key, uint64_t value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, value);
  return set_words(key, {buf});
}
CaseText& CaseText::set_real(const std::string& key, double value) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", value);
  return set_words(key, {buf});
}

bool CaseText::has(const std::string& key) const {
  for (const auto& e : entries_) {
    if (e.first == key) return true;
  }
  return false;
}

const std::vector<std::string>& CaseText::values(const std::string& key) const {
  for (const auto& e : entries_) {
    if (e.first == key) {
      read_.insert(key);
      return e.second;
    }
  }
  throw Error("case: key '" + key + "' is missing");
}

const std::string& CaseText::word(const std::string& key) const {
  const auto& v = values(key);
  MLA_REQUIRE(v.size() == 1, "case: '", key, "' needs one value, has ", v.size());
  return v[0];
}

int CaseText::choice(const std::string& key, std::initializer_list<const char*> allowed) const {
  const std::string& w = word(key);
  int i = 0;
  std::string names;
  for (const char* a : allowed) {
    if (w == a) return i;
    names += (i++ ? ", " : "") + std::string(a);
  }
  throw Error("case: '" + key + "' is '" + w + "', not one of " + names);
}

int64_t CaseText::integer(const std::string& key, int64_t lo, int64_t hi) const {
  const std::string& w = word(key);
  int64_t v = 0;
  MLA_REQUIRE(parse_signed(w, v), "case: '", key, "' is '", w, "', not an integer");
  MLA_REQUIRE(v >= lo && v <= hi, "case: '", key, "' is ", v, ", outside [", lo, ", ", hi, "]");
  return v;
}

uint64_t CaseText::unsigned_integer(const std::string& key) const {
  const std::string& w = word(key);
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(w.c_str(), &end, 0);
  MLA_REQUIRE(!w.empty() && w[0] != '-' && *end == '\0' && errno != ERANGE, "case: '", key, "' is '", w,
              "', not an unsigned 64-bit integer");
  return v;
}

double CaseText::real(const std::string& key) const {
  const std::string& w = word(key);
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(w.c_str(), &end);
  MLA_REQUIRE(*end == '\0' && errno != ERANGE, "case: '", key, "' is '", w, "', not a real number");
  return v;
}

const std::vector<std::string>& CaseText::words(const std::string& key, size_t max_count) const {
  const auto& v = values(key);
  MLA_REQUIRE(v.size() <= max_count, "case: '", key, "' has ", v.size(), " values, at most ", max_count, " allowed");
  return v;
}

std::vector<int64_t> CaseText::integers(const std::string& key, int64_t lo, int64_t hi, size_t max_count) const {
  std::vector<int64_t> out;
  size_t i = 0;
  for (const std::string& w : words(key, max_count)) {
    int64_t v = 0;
    MLA_REQUIRE(parse_signed(w, v), "case: '", key, "' value ", i, " is '", w, "', not an integer");
    MLA_REQUIRE(v >= lo && v <= hi, "case: '", key, "' value ", i, " is ", v, ", outside [", lo, ", ", hi, "]");
    out.push_back(v);
    ++i;
  }
  return out;
}

void CaseText::expect_all_read() const {
  for (const auto& e : entries_) {
    MLA_REQUIRE(read_.count(e.first), "case: unknown key '", e.first, "' (misspelt, or for another property?)");
  }
}

}  // namespace mlacheck
