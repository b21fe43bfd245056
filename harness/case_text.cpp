// The case text format (harness/case_text.h).
//
// Over 500 lines, on purpose: this is one class, and its three parts share private machinery. The
// store and the text format, the typed readers, and the contract narrowing all go through the
// drawing codec (Codec, draw_if_missing: a reader over a drawing CaseText draws the value it is
// asked for), which is a template over each reader's draw and would otherwise have to sit in the
// public header.
#include "harness/case_text.h"

#include <cerrno>
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <optional>

#include "core/error.h"
#include "harness/case_bytes.h"

namespace mlacheck {

// The byte side of a drawing or encoding CaseText.
struct CaseText::Codec {
  enum Mode { kDecode, kEncode } mode;
  std::string input;  // kDecode: the bytes (reader views them)
  ByteReader reader{std::string_view()};
  ByteWriter writer;
  std::set<std::string> asked;    // keys has() decided on
  std::set<std::string> present;  // kDecode: of those, the ones drawn present (drawn when read)
  std::set<std::string> written;  // kEncode: keys whose values' bytes are written
};

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

std::string real_word(double v);  // below: the shortest decimal that reads back as v

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
      const size_t start = i;
      while (i < line.size() && line[i] != ' ' && line[i] != '\t') {
        if (line[i] <= ' ' || line[i] > '~') {
          // Name the key when the byte sits in its values (the key itself may be what is broken).
          const std::string where = words.empty() || !valid_key(words[0]) ? "" : " in a value of '" + words[0] + "'";
          MLA_REQUIRE(false, "case line ", line_no, ": byte 0x", std::hex, int(static_cast<unsigned char>(line[i])),
                      std::dec, where, " is not printable ASCII");
        }
        ++i;
      }
      words.push_back(line.substr(start, i - start));
    }
    if (words.empty()) continue;
    const std::string key = words[0];
    MLA_REQUIRE(valid_key(key), "case line ", line_no, ": '", key.substr(0, 64),
                "' is not a key (lowercase letters, digits, '_', '.', '-')");
    MLA_REQUIRE(c.find(key) == nullptr, "case line ", line_no, ": key '", key, "' appears twice (first on line ",
                c.line_of(key), ")");
    for (size_t w = 1; w < words.size(); ++w) {
      MLA_REQUIRE(words[w].size() <= 200, "case line ", line_no, ": a value of '", key, "' is over 200 characters");
    }
    MLA_REQUIRE(words.size() <= 1u << 16, "case line ", line_no, ": '", key, "' has over 65536 values");
    c.entries_.emplace_back(key, std::vector<std::string>(words.begin() + 1, words.end()));
    c.lines_[key] = line_no;
  }
  return c;
}

bool CaseText::names_a_property(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos) continue;
    line.remove_prefix(first);
    if (line.rfind("property", 0) == 0 && (line.size() == 8 || line[8] == ' ' || line[8] == '\t' ||
                                           line[8] == '\r' || line[8] == '#')) {
      return true;
    }
  }
  return false;
}

size_t CaseText::line_of(const std::string& key) const {
  const auto it = lines_.find(key);
  return it == lines_.end() ? 0 : it->second;
}

namespace {

// Whether a and b differ by at most one edit (a letter changed, added, dropped, or two swapped).
bool one_edit_apart(const std::string& a, const std::string& b) {
  if (a == b) return false;
  if (a.size() == b.size()) {
    std::vector<size_t> diff;
    for (size_t i = 0; i < a.size() && diff.size() <= 2; ++i) {
      if (a[i] != b[i]) diff.push_back(i);
    }
    return diff.size() == 1 ||
           (diff.size() == 2 && diff[1] == diff[0] + 1 && a[diff[0]] == b[diff[1]] && a[diff[1]] == b[diff[0]]);
  }
  const std::string& l = a.size() > b.size() ? a : b;
  const std::string& s = a.size() > b.size() ? b : a;
  if (l.size() != s.size() + 1) return false;
  size_t i = 0;
  while (i < s.size() && s[i] == l[i]) ++i;
  return l.compare(i + 1, std::string::npos, s, i, std::string::npos) == 0;
}

}  // namespace

std::string CaseText::locate(const std::string& message) const {
  static const std::string prefix = "case: ";
  if (message.rfind(prefix, 0) != 0) return message;
  // A missing key next to a key no reader asked for, one letter apart: a misspelling in the file.
  static const std::string missing = "case: key '";
  if (message.rfind(missing, 0) == 0) {
    const size_t close = message.find('\'', missing.size());
    const std::string key = close == std::string::npos ? "" : message.substr(missing.size(), close - missing.size());
    for (const auto& [k, line] : lines_) {
      if (!read_.count(k) && one_edit_apart(k, key)) {
        return message + " (line " + std::to_string(line) + " has '" + k + "': misspelt?)";
      }
    }
    return message;
  }
  const size_t open = message.find('\'', prefix.size());
  if (open == std::string::npos) return message;
  const size_t close = message.find('\'', open + 1);
  if (close == std::string::npos) return message;
  const size_t line = line_of(message.substr(open + 1, close - open - 1));
  if (line == 0) return message;
  return "case line " + std::to_string(line) + ": " + message.substr(prefix.size());
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
CaseText& CaseText::set_real(const std::string& key, double value) { return set_words(key, {real_word(value)}); }

const std::vector<std::string>* CaseText::find(const std::string& key) const {
  for (const auto& e : entries_) {
    if (e.first == key) return &e.second;
  }
  return nullptr;
}

CaseText CaseText::decoding(std::string_view bytes) {
  CaseText c;
  c.codec_ = std::make_shared<Codec>();
  c.codec_->mode = Codec::kDecode;
  c.codec_->input.assign(bytes.data(), bytes.size());
  c.codec_->reader = ByteReader(c.codec_->input);
  return c;
}

CaseText CaseText::encoding(std::string_view text) {
  CaseText c = parse(text);
  c.codec_ = std::make_shared<Codec>();
  c.codec_->mode = Codec::kEncode;
  return c;
}

bool CaseText::drawing() const { return codec_ && codec_->mode == Codec::kDecode; }
size_t CaseText::bytes_drawn() const { return drawing() ? codec_->reader.consumed() : 0; }
void CaseText::stop_drawing() {
  if (drawing()) codec_.reset();
}
std::string CaseText::encoded_bytes() const {
  return codec_ && codec_->mode == Codec::kEncode ? codec_->writer.bytes() : std::string();
}

int64_t CaseText::code(int64_t v, int64_t lo, int64_t hi) const {
  if (drawing()) return codec_->reader.in_range(lo, hi);
  if (codec_) codec_->writer.in_range(v, lo, hi);
  return v;
}

template <class Draw>
bool CaseText::draw_if_missing(const std::string& key, Draw draw) const {
  if (!drawing() || find(key) != nullptr) return false;
  // A key has() decided absent stays missing, as it would be in the text.
  if (codec_->asked.count(key) && !codec_->present.count(key)) return false;
  std::vector<std::string> words = draw(codec_->reader);
  entries_.emplace_back(key, std::move(words));
  return true;
}

bool CaseText::first_encode(const std::string& key) const {
  return codec_ && codec_->mode == Codec::kEncode && codec_->written.insert(key).second;
}

size_t CaseText::draw_count(size_t max_count, bool exact) const {
  return exact ? max_count : static_cast<size_t>(codec_->reader.compact() % (uint64_t{max_count} + 1));
}
void CaseText::encode_count(size_t count, size_t, bool exact) const {
  if (!exact) codec_->writer.compact(count);
}
void CaseText::require_count(const std::string& key, size_t n, size_t count, bool exact) const {
  if (exact) {
    MLA_REQUIRE(n == count, "case: '", key, "' has ", n, " values, needs ", count);
  } else {
    MLA_REQUIRE(n <= count, "case: '", key, "' has ", n, " values, at most ", count, " allowed");
  }
}

// has() draws or writes one flag per key, the first time it is asked about a key no reader has read.
bool CaseText::has(const std::string& key) const {
  const bool present = find(key) != nullptr;
  if (!codec_) return present;
  if (codec_->mode == Codec::kEncode) {
    if (!codec_->written.count(key) && codec_->asked.insert(key).second) codec_->writer.compact(present ? 1 : 0);
    return present;
  }
  if (present) return true;
  if (codec_->asked.insert(key).second && codec_->reader.compact() % 2 == 1) codec_->present.insert(key);
  return codec_->present.count(key) != 0;
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
  MLA_REQUIRE(!drawing() || find(key) != nullptr, "case: '", key,
              "' takes a free word, which fuzz input bytes cannot give (read it with choice())");
  const auto& v = values(key);
  MLA_REQUIRE(v.size() == 1, "case: '", key, "' needs one value, has ", v.size());
  return v[0];
}

namespace {

int index_of(const std::string& key, const std::string& w, const std::vector<const char*>& allowed) {
  std::string names;
  for (size_t i = 0; i < allowed.size(); ++i) {
    if (w == allowed[i]) return static_cast<int>(i);
    names += (i ? ", " : "") + std::string(allowed[i]);
  }
  throw Error("case: '" + key + "' is '" + w + "', not one of " + names);
}

std::string integer_word(int64_t v) { return std::to_string(v); }
// The shortest decimal that reads back as the same double (17 digits always do).
std::string real_word(double v) {
  char buf[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v || std::isnan(v)) break;
  }
  return buf;
}

// A real word: strtod over the whole word. Overflow is refused; a subnormal (ERANGE with a non-zero
// result) is a real like any other.
double parse_real(const std::string& key, const std::string& w) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(w.c_str(), &end);
  MLA_REQUIRE(!w.empty() && *end == '\0' && (errno != ERANGE || (v != 0 && std::isfinite(v))), "case: '", key,
              "' is '", w, "', not a real number");
  return v;
}

}  // namespace

int CaseText::choice(const std::string& key, std::initializer_list<const char*> allowed) const {
  const std::vector<const char*> names(allowed);
  MLA_REQUIRE(!names.empty(), "case: '", key, "' has no allowed words");
  const std::vector<int> ok = permitted(key, names);  // the contract's words; drawn and encoded among them
  const int64_t last = static_cast<int64_t>(ok.size()) - 1;
  draw_if_missing(key, [&](ByteReader& r) {
    return std::vector<std::string>{names[static_cast<size_t>(ok[static_cast<size_t>(r.in_range(0, last))])]};
  });
  const int i = index_of(key, word(key), names);
  const auto at = std::find(ok.begin(), ok.end(), i);
  if (at == ok.end()) throw OutsideContract("case: '" + key + "' is '" + names[static_cast<size_t>(i)] + "', which the contract does not allow");
  if (first_encode(key)) codec_->writer.in_range(at - ok.begin(), 0, last);
  return i;
}

namespace {

// The value of a bound: a number, or the integer value of another key of the case (a sub-case key
// "c0.seq_lens" looks for "c0.next_n" first).
std::optional<int64_t> bound_value(const LimitBound& b, const std::string& key,
                                   const std::function<const std::vector<std::string>*(const std::string&)>& lookup) {
  if (b.value) return b.value;
  if (b.key.empty()) return std::nullopt;
  const size_t dot = key.rfind('.');
  const std::vector<std::string>* v = dot == std::string::npos ? nullptr : lookup(key.substr(0, dot + 1) + b.key);
  if (v == nullptr) v = lookup(b.key);
  int64_t x = 0;
  MLA_REQUIRE(v != nullptr && v->size() == 1 && parse_signed((*v)[0], x), "case: the contract bounds '", key,
              "' by '", b.key, "', which the case does not hold (as one integer) before it");
  return x;
}

std::string rule_text(const KeyLimit& l, const std::optional<int64_t>& lo, const std::optional<int64_t>& hi) {
  std::string s = l.key;
  if (lo && hi) return s + (*lo == *hi ? " = " + std::to_string(*lo) : " in [" + std::to_string(*lo) + ", " + std::to_string(*hi) + "]");
  if (lo) return s + " >= " + (l.lo.key.empty() ? std::to_string(*lo) : l.lo.key + " (" + std::to_string(*lo) + ")");
  return s + " <= " + (l.hi.key.empty() ? std::to_string(*hi) : l.hi.key + " (" + std::to_string(*hi) + ")");
}

}  // namespace

int64_t CaseText::integer(const std::string& key, int64_t lo, int64_t hi) const {
  MLA_REQUIRE(lo <= hi, "case: '", key, "' has an empty range [", lo, ", ", hi, "]");
  const Narrowed n = narrow(key, lo, hi);
  draw_if_missing(key, [&](ByteReader& r) { return std::vector<std::string>{integer_word(draw_in(r, n))}; });
  const std::string& w = word(key);
  int64_t v = 0;
  MLA_REQUIRE(parse_signed(w, v), "case: '", key, "' is '", w, "', not an integer");
  MLA_REQUIRE(v >= lo && v <= hi, "case: '", key, "' is ", v, ", outside [", lo, ", ", hi, "]");
  require_within(key, v, n);
  if (first_encode(key)) encode_in(v, n);
  return v;
}

int64_t CaseText::multiple(const std::string& key, int64_t step, int64_t lo, int64_t hi) const {
  MLA_REQUIRE(step > 0, "case: '", key, "' needs a positive step, not ", step);
  MLA_REQUIRE(lo <= hi, "case: '", key, "' has an empty range [", lo, ", ", hi, "]");
  // The multiples of step in [lo, hi] (narrowed by the contract) are step * [first, last].
  Narrowed n = narrow(key, lo, hi);
  if (!n.among.empty()) {  // the one-of values that are multiples of step
    n.among.erase(std::remove_if(n.among.begin(), n.among.end(), [&](int64_t a) { return a % step != 0; }), n.among.end());
    if (n.among.empty()) {
      throw OutsideContract("case: '" + key + "' has no multiple of " + std::to_string(step) + " within the contract's " + n.rule);
    }
  }
  const int64_t first = n.lo >= 0 ? (n.lo + step - 1) / step : -((-n.lo) / step);
  const int64_t last = n.hi >= 0 ? n.hi / step : -((-n.hi + step - 1) / step);
  if (first > last && !n.rule.empty()) {
    throw OutsideContract("case: '" + key + "' has no multiple of " + std::to_string(step) + " within the contract's " + n.rule);
  }
  MLA_REQUIRE(first <= last, "case: '", key, "' has no multiple of ", step, " in [", lo, ", ", hi, "]");
  draw_if_missing(key, [&](ByteReader& r) {
    return std::vector<std::string>{integer_word(n.among.empty() ? step * r.in_range(first, last) : draw_in(r, n))};
  });
  const std::string& w = word(key);
  int64_t v = 0;
  MLA_REQUIRE(parse_signed(w, v), "case: '", key, "' is '", w, "', not an integer");
  MLA_REQUIRE(v >= lo && v <= hi, "case: '", key, "' is ", v, ", outside [", lo, ", ", hi, "]");
  MLA_REQUIRE(v % step == 0, "case: '", key, "' is ", v, ", not a multiple of ", step);
  require_within(key, v, n);
  if (first_encode(key)) {
    if (n.among.empty()) {
      codec_->writer.in_range(v / step, first, last);
    } else {
      encode_in(v, n);
    }
  }
  return v;
}

int64_t CaseText::one_of(const std::string& key, std::initializer_list<int64_t> allowed) const {
  const std::vector<int64_t> all(allowed);
  MLA_REQUIRE(!all.empty(), "case: '", key, "' has no allowed values");
  const Narrowed n = narrow(key, *std::min_element(all.begin(), all.end()), *std::max_element(all.begin(), all.end()));
  std::vector<int64_t> values;  // drawn and encoded among the contract's
  for (int64_t a : all) {
    const bool listed = n.among.empty() || std::binary_search(n.among.begin(), n.among.end(), a);
    if (a >= n.lo && a <= n.hi && listed) values.push_back(a);
  }
  if (values.empty()) throw OutsideContract("case: '" + key + "': none of its values is within the contract's " + n.rule);
  draw_if_missing(key, [&](ByteReader& r) {
    return std::vector<std::string>{integer_word(values[static_cast<size_t>(r.in_range(0, static_cast<int64_t>(values.size()) - 1))])};
  });
  const std::string& w = word(key);
  int64_t v = 0;
  MLA_REQUIRE(parse_signed(w, v), "case: '", key, "' is '", w, "', not an integer");
  if (std::find(all.begin(), all.end(), v) == all.end()) {
    std::string names;
    for (int64_t a : all) names += (names.empty() ? "" : ", ") + integer_word(a);
    throw Error("case: '" + key + "' is " + w + ", not one of " + names);
  }
  require_within(key, v, n);
  const auto at = std::find(values.begin(), values.end(), v);
  if (first_encode(key)) codec_->writer.in_range(at - values.begin(), 0, static_cast<int64_t>(values.size()) - 1);
  return v;
}

uint64_t CaseText::unsigned_integer(const std::string& key) const {
  draw_if_missing(key, [&](ByteReader& r) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%" PRIx64, r.compact());
    return std::vector<std::string>{buf};
  });
  const std::string& w = word(key);
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(w.c_str(), &end, 0);
  MLA_REQUIRE(!w.empty() && w[0] != '-' && *end == '\0' && errno != ERANGE, "case: '", key, "' is '", w,
              "', not an unsigned 64-bit integer");
  if (first_encode(key)) codec_->writer.compact(v);
  return v;
}

double CaseText::real(const std::string& key) const {
  draw_if_missing(key, [&](ByteReader& r) {
    return std::vector<std::string>{real_word(r.real())};
  });
  const double v = parse_real(key, word(key));
  if (first_encode(key)) codec_->writer.real(v);
  return v;
}

double CaseText::real(const std::string& key, double spec_lo, double spec_hi) const {
  MLA_REQUIRE(std::isfinite(spec_lo) && std::isfinite(spec_hi) && spec_lo <= spec_hi, "case: '", key, "' has a bad range");
  // A contract's bounds on a real key ("k_scale = 1", "softmax_scale <= 2") narrow the range: drawn
  // inside it, and a case file outside it refused.
  double lo = spec_lo, hi = spec_hi;
  std::string rule;
  if (contract_) {
    const auto lookup = [this](const std::string& k) { return find(k); };
    for (const KeyLimit* l : contract_->limits_on(key)) {
      if (!l->words.empty()) {
        throw Error("case: the contract's '" + l->key + " one-of' cannot limit '" + key + "', a real: bound it instead");
      }
      if (!l->lo.set() && !l->hi.set()) continue;
      if (l->lo.real || l->hi.real) {  // a real bound ("softmax_scale >= 0.07")
        if (l->lo.real) lo = std::max(lo, *l->lo.real);
        if (l->hi.real) hi = std::min(hi, *l->hi.real);
        rule += (rule.empty() ? "" : ", ") + l->key + (l->lo.real ? " >= " + real_word(*l->lo.real) : "") +
                (l->lo.real && l->hi.real ? "," : "") + (l->hi.real ? " <= " + real_word(*l->hi.real) : "");
        continue;
      }
      const std::optional<int64_t> a = bound_value(l->lo, key, lookup), b = bound_value(l->hi, key, lookup);
      if (a) lo = std::max(lo, static_cast<double>(*a));
      if (b) hi = std::min(hi, static_cast<double>(*b));
      rule += (rule.empty() ? "" : ", ") + rule_text(*l, a, b);
    }
    if (lo > hi) {
      throw OutsideContract("case: '" + key + "' must lie in [" + real_word(spec_lo) + ", " + real_word(spec_hi) +
                            "] and within the contract's " + rule + ": no value does");
    }
  }
  draw_if_missing(key, [&](ByteReader& r) {
    double v = r.real();
    if (!(std::isfinite(v) && v >= lo && v <= hi)) {
      const double a = std::isfinite(v) ? std::fabs(v) : 0.0;
      v = std::min(hi, std::max(lo, lo + (hi - lo) * (a - std::floor(a))));
    }
    return std::vector<std::string>{real_word(v)};
  });
  const double v = parse_real(key, word(key));
  MLA_REQUIRE(std::isfinite(v) && v >= spec_lo && v <= spec_hi, "case: '", key, "' is ", word(key), ", outside [",
              spec_lo, ", ", spec_hi, "]");
  if (v < lo || v > hi) throw OutsideContract("case: '" + key + "' is " + word(key) + ", outside the contract's " + rule);
  if (first_encode(key)) codec_->writer.real(v);
  return v;
}

const std::vector<std::string>& CaseText::words(const std::string& key, size_t max_count) const {
  MLA_REQUIRE(!drawing() || find(key) != nullptr, "case: '", key,
              "' takes free words, which fuzz input bytes cannot give (read it with choices())");
  const auto& v = values(key);
  MLA_REQUIRE(v.size() <= max_count, "case: '", key, "' has ", v.size(), " values, at most ", max_count, " allowed");
  return v;
}

std::vector<int64_t> CaseText::integers(const std::string& key, int64_t lo, int64_t hi, size_t max_count) const {
  return read_integers(key, lo, hi, max_count, false);
}
std::vector<int64_t> CaseText::integers_exactly(const std::string& key, int64_t lo, int64_t hi, size_t count) const {
  return read_integers(key, lo, hi, count, true);
}

std::vector<int64_t> CaseText::read_integers(const std::string& key, int64_t lo, int64_t hi, size_t count,
                                             bool exact) const {
  MLA_REQUIRE(lo <= hi, "case: '", key, "' has an empty range [", lo, ", ", hi, "]");
  const Narrowed n = narrow(key, lo, hi);
  draw_if_missing(key, [&](ByteReader& r) {
    std::vector<std::string> w(draw_count(count, exact));
    for (auto& x : w) x = integer_word(draw_in(r, n));
    return w;
  });
  const auto& words = values(key);
  require_count(key, words.size(), count, exact);
  std::vector<int64_t> out;
  size_t i = 0;
  for (const std::string& w : words) {
    int64_t v = 0;
    MLA_REQUIRE(parse_signed(w, v), "case: '", key, "' value ", i, " is '", w, "', not an integer");
    MLA_REQUIRE(v >= lo && v <= hi, "case: '", key, "' value ", i, " is ", v, ", outside [", lo, ", ", hi, "]");
    require_within(key, v, n, " value " + std::to_string(i));
    out.push_back(v);
    ++i;
  }
  if (first_encode(key)) {
    encode_count(out.size(), count, exact);
    for (int64_t v : out) encode_in(v, n);
  }
  return out;
}

std::vector<int64_t> CaseText::integers_from(const std::string& key, const std::vector<int64_t>& lo, int64_t hi) const {
  return integers_within(key, lo, std::vector<int64_t>(lo.size(), hi));
}

std::vector<int64_t> CaseText::integers_within(const std::string& key, const std::vector<int64_t>& lo,
                                               const std::vector<int64_t>& hi) const {
  MLA_REQUIRE(lo.size() == hi.size(), "case: '", key, "' has ", lo.size(), " lower and ", hi.size(), " upper bounds");
  std::vector<Narrowed> n;
  for (size_t i = 0; i < lo.size(); ++i) {
    MLA_REQUIRE(lo[i] <= hi[i], "case: '", key, "' value ", i, " has an empty range [", lo[i], ", ", hi[i], "]");
    n.push_back(narrow(key, lo[i], hi[i]));
  }
  draw_if_missing(key, [&](ByteReader& r) {
    std::vector<std::string> w;
    for (size_t i = 0; i < lo.size(); ++i) w.push_back(integer_word(draw_in(r, n[i])));
    return w;
  });
  const auto& v = values(key);
  MLA_REQUIRE(v.size() == lo.size(), "case: '", key, "' has ", v.size(), " values, needs ", lo.size());
  std::vector<int64_t> out;
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t x = 0;
    MLA_REQUIRE(parse_signed(v[i], x), "case: '", key, "' value ", i, " is '", v[i], "', not an integer");
    MLA_REQUIRE(x >= lo[i] && x <= hi[i], "case: '", key, "' value ", i, " is ", x, ", outside [", lo[i], ", ", hi[i],
                "]");
    require_within(key, x, n[i], " value " + std::to_string(i));
    out.push_back(x);
  }
  if (first_encode(key)) {
    for (size_t i = 0; i < out.size(); ++i) encode_in(out[i], n[i]);
  }
  return out;
}

std::vector<int> CaseText::choices(const std::string& key, const std::vector<const char*>& allowed,
                                   size_t max_count) const {
  return read_choices(key, allowed, max_count, false);
}
std::vector<int> CaseText::choices_exactly(const std::string& key, const std::vector<const char*>& allowed,
                                           size_t count) const {
  return read_choices(key, allowed, count, true);
}

std::vector<int> CaseText::read_choices(const std::string& key, const std::vector<const char*>& allowed, size_t count,
                                        bool exact) const {
  MLA_REQUIRE(!allowed.empty(), "case: '", key, "' has no allowed words");
  const std::vector<int> ok = permitted(key, allowed);  // the contract's words; drawn and encoded among them
  const int64_t last = static_cast<int64_t>(ok.size()) - 1;
  draw_if_missing(key, [&](ByteReader& r) {
    std::vector<std::string> w(draw_count(count, exact));
    for (auto& x : w) x = allowed[static_cast<size_t>(ok[static_cast<size_t>(r.in_range(0, last))])];
    return w;
  });
  const auto& v = values(key);
  require_count(key, v.size(), count, exact);
  std::vector<int> out;
  for (const std::string& w : v) {
    out.push_back(index_of(key, w, allowed));
    if (std::find(ok.begin(), ok.end(), out.back()) == ok.end()) {
      throw OutsideContract("case: '" + key + "' holds '" + w + "', which the contract does not allow");
    }
  }
  if (first_encode(key)) {
    encode_count(out.size(), count, exact);
    for (int i : out) codec_->writer.in_range(std::find(ok.begin(), ok.end(), i) - ok.begin(), 0, last);
  }
  return out;
}

std::vector<double> CaseText::reals(const std::string& key, size_t max_count) const {
  draw_if_missing(key, [&](ByteReader& r) {
    std::vector<std::string> w(draw_count(max_count, false));
    for (auto& x : w) x = real_word(r.real());
    return w;
  });
  const auto& v = values(key);
  MLA_REQUIRE(v.size() <= max_count, "case: '", key, "' has ", v.size(), " values, at most ", max_count, " allowed");
  std::vector<double> out;
  for (const std::string& w : v) out.push_back(parse_real(key, w));
  if (first_encode(key)) {
    encode_count(out.size(), max_count, false);
    for (double x : out) codec_->writer.real(x);
  }
  return out;
}

namespace {

constexpr double kFloatLimit = 3.4028235677973366e38;  // FLT_MAX plus half an ulp: what rounds to a finite float

std::string float_word(float x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(x));  // 9 digits read back the same float
  return buf;
}

}  // namespace

std::vector<float> CaseText::floats(const std::string& key, size_t max_count) const {
  return read_floats(key, max_count, false);
}
std::vector<float> CaseText::floats_exactly(const std::string& key, size_t count) const {
  return read_floats(key, count, true);
}

std::vector<float> CaseText::read_floats(const std::string& key, size_t count, bool exact) const {
  const bool finite = finite_only(key);
  draw_if_missing(key, [&](ByteReader& r) {
    std::vector<std::string> w(draw_count(count, exact));
    for (auto& x : w) {
      double v = r.real();
      if (std::isfinite(v) && std::fabs(v) >= kFloatLimit) v = std::fmod(v, 3.4e38);
      if (finite && !std::isfinite(v)) v = 0;  // the contract says inputs are finite
      x = float_word(static_cast<float>(v));
    }
    return w;
  });
  const auto& v = values(key);
  require_count(key, v.size(), count, exact);
  std::vector<float> out;
  for (const std::string& w : v) {
    const double x = parse_real(key, w);
    MLA_REQUIRE(!std::isfinite(x) || std::fabs(x) < kFloatLimit, "case: '", key, "' holds '", w, "', not a float");
    if (finite && !std::isfinite(x)) throw OutsideContract("case: '" + key + "' holds '" + w + "', and the contract says inputs are finite");
    out.push_back(static_cast<float>(x));
  }
  if (first_encode(key)) {
    encode_count(out.size(), count, exact);
    for (float x : out) codec_->writer.real(static_cast<double>(x));
  }
  return out;
}

size_t CaseText::list_length(const std::string& key, size_t lo, size_t hi) const {
  if (drawing() && find(key) == nullptr) return static_cast<size_t>(code(0, static_cast<int64_t>(lo), static_cast<int64_t>(hi)));
  const size_t n = values(key).size();
  MLA_REQUIRE(n >= lo && n <= hi, "case: '", key, "' has ", n, " values, needs ", lo, " to ", hi);
  code(static_cast<int64_t>(n), static_cast<int64_t>(lo), static_cast<int64_t>(hi));  // the bytes of the draw
  return n;
}

CaseText& CaseText::set_floats(const std::string& key, const std::vector<float>& values) {
  std::vector<std::string> words;
  for (float x : values) words.push_back(float_word(x));
  return set_words(key, std::move(words));
}

std::vector<int> CaseText::permutation(const std::string& key, int64_t n) const {
  MLA_REQUIRE(n >= 0 && n <= (1 << 16), "case: '", key, "' asks for a permutation of ", n, " elements");
  draw_if_missing(key, [&](ByteReader& r) {
    std::vector<int64_t> pool(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) pool[static_cast<size_t>(i)] = i;
    std::vector<std::string> w;
    while (!pool.empty()) {  // a Lehmer code: each step picks one of the elements left
      const auto j = static_cast<size_t>(r.in_range(0, static_cast<int64_t>(pool.size()) - 1));
      w.push_back(integer_word(pool[j]));
      pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(j));
    }
    return w;
  });
  const auto& v = values(key);
  MLA_REQUIRE(static_cast<int64_t>(v.size()) == n, "case: '", key, "' has ", v.size(), " values, a permutation of ",
              n, " needs ", n);
  std::vector<int> out;
  std::vector<char> seen(static_cast<size_t>(n), 0);
  for (const std::string& w : v) {
    int64_t x = 0;
    MLA_REQUIRE(parse_signed(w, x) && x >= 0 && x < n && !seen[static_cast<size_t>(x)], "case: '", key,
                "' is not a permutation of 0..", n - 1, " (at '", w, "')");
    seen[static_cast<size_t>(x)] = 1;
    out.push_back(static_cast<int>(x));
  }
  if (first_encode(key)) {
    std::vector<int> pool(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) pool[static_cast<size_t>(i)] = i;
    for (int x : out) {
      const auto at = std::find(pool.begin(), pool.end(), x);
      codec_->writer.in_range(at - pool.begin(), 0, static_cast<int64_t>(pool.size()) - 1);
      pool.erase(at);
    }
  }
  return out;
}

// ---- contracts --------------------------------------------------------------------------------

CaseText& CaseText::within(std::shared_ptr<const Contract> contract) {
  contract_ = contract && !contract->empty() ? std::move(contract) : nullptr;
  return *this;
}


bool CaseText::admits(const std::string& key, int64_t v) const {
  try {
    const Narrowed n = narrow(key, v, v);
    return n.among.empty() || n.among.front() == v;
  } catch (const OutsideContract&) {
    return false;
  }
}

bool CaseText::admits(const std::string& key, const std::string& w) const {
  if (!contract_) return true;
  for (const KeyLimit* l : contract_->limits_on(key)) {
    if (!l->words.empty() && std::find(l->words.begin(), l->words.end(), w) == l->words.end()) return false;
  }
  return true;
}

CaseText::Narrowed CaseText::narrow(const std::string& key, int64_t lo, int64_t hi) const {
  Narrowed n{lo, hi, "", {}};
  if (!contract_) return n;
  const auto lookup = [this](const std::string& k) { return find(k); };
  for (const KeyLimit* l : contract_->limits_on(key)) {
    if (!l->lo.set() && !l->hi.set()) continue;
    MLA_REQUIRE(!l->lo.real && !l->hi.real, "case: the contract bounds '", key,
                "', an integer, by a number that is no integer");
    const std::optional<int64_t> a = bound_value(l->lo, key, lookup), b = bound_value(l->hi, key, lookup);
    if (a) n.lo = std::max(n.lo, *a);
    if (b) n.hi = std::min(n.hi, *b);
    n.rule += (n.rule.empty() ? "" : ", ") + rule_text(*l, a, b);
  }
  if (n.lo > n.hi) {
    throw OutsideContract("case: '" + key + "' must lie in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                          "] and within the contract's " + n.rule + ": no value does");
  }
  // `KEY one-of N ...` on an integer key: the values every such clause lists, inside [lo, hi].
  bool listed = false;
  std::vector<int64_t> among;
  for (const KeyLimit* l : contract_->limits_on(key)) {
    if (l->words.empty()) continue;
    std::vector<int64_t> these;
    for (const std::string& w : l->words) {
      int64_t x = 0;
      MLA_REQUIRE(parse_signed(w, x), "case: the contract's '", l->key, " one-of' names '", w, "', but '", key,
                  "' is an integer");
      if (x >= n.lo && x <= n.hi) these.push_back(x);
    }
    std::sort(these.begin(), these.end());
    if (listed) {
      std::vector<int64_t> both;
      std::set_intersection(among.begin(), among.end(), these.begin(), these.end(), std::back_inserter(both));
      among = both;
    } else {
      among = these, listed = true;
    }
    std::string list;
    for (const std::string& w : l->words) list += " " + w;
    n.rule += (n.rule.empty() ? "" : ", ") + l->key + " one-of" + list;
  }
  if (listed) {
    among.erase(std::unique(among.begin(), among.end()), among.end());
    if (among.empty()) {
      throw OutsideContract("case: '" + key + "' must lie in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                            "] and within the contract's " + n.rule + ": no value does");
    }
    n.among = among;
  }
  return n;
}

int64_t CaseText::draw_in(ByteReader& r, const Narrowed& n) {
  if (n.among.empty()) return r.in_range(n.lo, n.hi);
  return n.among[static_cast<size_t>(r.in_range(0, static_cast<int64_t>(n.among.size()) - 1))];
}

void CaseText::encode_in(int64_t v, const Narrowed& n) const {
  if (n.among.empty()) {
    codec_->writer.in_range(v, n.lo, n.hi);
    return;
  }
  const auto at = std::lower_bound(n.among.begin(), n.among.end(), v);
  codec_->writer.in_range(at - n.among.begin(), 0, static_cast<int64_t>(n.among.size()) - 1);
}

void CaseText::require_within(const std::string& key, int64_t v, const Narrowed& n, const std::string& which) const {
  if (v >= n.lo && v <= n.hi && (n.among.empty() || std::binary_search(n.among.begin(), n.among.end(), v))) return;
  throw OutsideContract("case: '" + key + "'" + which + " is " + std::to_string(v) + ", outside the contract's " +
                        n.rule);
}

std::vector<int> CaseText::permitted(const std::string& key, const std::vector<const char*>& allowed) const {
  std::vector<int> out;
  std::vector<const KeyLimit*> limits;
  if (contract_) {
    for (const KeyLimit* l : contract_->limits_on(key)) {
      if (!l->words.empty()) limits.push_back(l);
    }
  }
  for (size_t i = 0; i < allowed.size(); ++i) {
    const bool ok = std::all_of(limits.begin(), limits.end(), [&](const KeyLimit* l) {
      return std::find(l->words.begin(), l->words.end(), allowed[i]) != l->words.end();
    });
    if (ok) out.push_back(static_cast<int>(i));
  }
  if (out.empty()) {
    std::string names;
    for (const char* a : allowed) names += (names.empty() ? "" : ", ") + std::string(a);
    throw OutsideContract("case: '" + key + "' takes one of " + names + ", and the contract allows none of them");
  }
  return out;
}

bool CaseText::finite_only(const std::string& key) const {
  if (!contract_) return false;
  for (const KeyLimit* l : contract_->limits_on(key)) {
    if (l->finite) return true;
  }
  return false;
}

void CaseText::expect_all_read() const {
  for (const auto& e : entries_) {
    MLA_REQUIRE(read_.count(e.first), "case: unknown key '", e.first, "' (misspelt, or for another property?)");
  }
}

}  // namespace mlacheck
