// A case as text: everything needed to rerun one check, as a short file that diffs well and
// round-trips. The format, by example:
//
//   # mlacheck case: run it with `mlacheck repro FILE`
//   property topk_decode.rows_admissible     <- the check (mlacheck repro --list shows them)
//   impl topk_decode@ref                     <- the implementation it ran on
//   backend host                             <- where it ran (repro --backend overrides)
//   lengths decode-2d                        <- the rest belongs to the property's case
//   k 7
//   seq_lens 3 0 12 -1
//   patterns few-values nan distinct distinct
//   seed 1234
//
// One "key value..." per line, split at spaces; '#' starts a comment to the end of its line; blank
// lines are ignored. A key appears once. Values are words (no spaces), integers (decimal, or hex
// with 0x) and reals (printed with enough digits to read back the same double). A list may be empty
// (the key alone). Keys keep the order they were set in, so a printed case reads top to bottom.
//
// Parsing never crashes: a malformed file, a missing or unknown key, an integer out of its range all
// throw mlacheck::Error with one line naming the line or key.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mlacheck {

class CaseText {
 public:
  // Throws mlacheck::Error "case line N: ..." for a line that is not "key value...", a key that is
  // not [a-z0-9_.-]+ or appears twice, or text that is not printable ASCII.
  static CaseText parse(std::string_view text);
  // The file: a comment line, then one line per key in the order set.
  std::string format() const;

  CaseText& set(const std::string& key, const std::string& word);
  CaseText& set(const std::string& key, const char* word) { return set(key, std::string(word)); }
  CaseText& set(const std::string& key, int64_t value);
  CaseText& set(const std::string& key, uint64_t value);  // printed in hex: seeds
  CaseText& set(const std::string& key, int value) { return set(key, static_cast<int64_t>(value)); }
  CaseText& set(const std::string& key, bool value) { return set(key, static_cast<int64_t>(value)); }
  CaseText& set_real(const std::string& key, double value);
  template <class Int>
  CaseText& set_list(const std::string& key, const std::vector<Int>& values) {
    std::vector<std::string> words;
    for (Int v : values) words.push_back(std::to_string(static_cast<int64_t>(v)));
    return set_words(key, std::move(words));
  }
  CaseText& set_words(const std::string& key, std::vector<std::string> words);

  bool has(const std::string& key) const;
  // The readers throw mlacheck::Error naming the key when it is missing or its value is not what
  // they read; each marks the key as read (see expect_all_read).
  const std::string& word(const std::string& key) const;
  // The position of the key's word in `allowed`.
  int choice(const std::string& key, std::initializer_list<const char*> allowed) const;
  int64_t integer(const std::string& key, int64_t lo, int64_t hi) const;
  uint64_t unsigned_integer(const std::string& key) const;
  bool flag(const std::string& key) const { return integer(key, 0, 1) != 0; }
  double real(const std::string& key) const;
  const std::vector<std::string>& words(const std::string& key, size_t max_count) const;
  std::vector<int64_t> integers(const std::string& key, int64_t lo, int64_t hi, size_t max_count) const;
  template <class Int>
  std::vector<Int> list(const std::string& key, int64_t lo, int64_t hi, size_t max_count) const {
    std::vector<Int> out;
    for (int64_t v : integers(key, lo, hi, max_count)) out.push_back(static_cast<Int>(v));
    return out;
  }
  // Throws mlacheck::Error naming the first key no reader asked for: a misspelt key in a
  // hand-edited case must not be ignored silently.
  void expect_all_read() const;

  bool operator==(const CaseText& o) const { return entries_ == o.entries_; }

 private:
  const std::vector<std::string>& values(const std::string& key) const;
  std::vector<std::pair<std::string, std::vector<std::string>>> entries_;
  mutable std::set<std::string> read_;
};

}  // namespace mlacheck
