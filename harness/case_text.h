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
//
// Fuzz inputs. The readers below are also the decoder of fuzz input bytes: a CaseText made by
// decoding(bytes) answers every reader asking for a key it does not hold by drawing a value from the
// bytes (harness/case_bytes.h) inside the reader's range, and sets the key. A parse function run
// over it therefore yields a case within the ranges its readers state, and the CaseText afterwards
// is that case's text. A list whose length the case fixes is read with a *_exactly reader (its
// length is not drawn); a list of up to max_count values draws its length. A CaseText made by
// encoding(text) reads the text as usual and appends each value's bytes: those bytes decode back to
// the same case, which is how readable regression cases seed the fuzzers. Free-form words cannot be
// drawn; readers of fuzzable cases use choice(), choices() and the numeric readers.
//
// Contracts. A CaseText may carry the contract of the implementation it is read for (within(),
// core/contract.h). Every reader then narrows its range by the contract's limits on its key: a
// drawing CaseText draws only inside the contract (so a fuzzer never starves on refusals), an
// encoding one encodes inside it, and a value read from text that the spec allows but the contract
// does not is refused with OutsideContract ("case: 'k' is 9000, outside the contract's k <= 8192").
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/contract.h"
#include "core/error.h"

namespace mlacheck {

class ByteReader;  // harness/case_bytes.h

class CaseText {
 public:
  // Throws mlacheck::Error "case line N: ..." for a line that is not "key value...", a key that is
  // not [a-z0-9_.-]+ or appears twice, or text that is not printable ASCII (naming the key when the
  // byte is in its values). Comment lines and blank lines may come anywhere, the first line too.
  static CaseText parse(std::string_view text);
  // Whether text names a property: a line (comments aside) whose first word is "property". Such text
  // is meant as a case file, whatever its first line, and its parse errors are worth reporting; a
  // raw fuzz input practically never holds one.
  static bool names_a_property(std::string_view text);
  // A reader's message "case: ... 'key' ..." with the line that key was read from: "case line 12:
  // 'seq_lens' has 3 values, needs 4". Other messages (a missing key, a key that did not come from
  // parsed text) pass unchanged.
  std::string locate(const std::string& message) const;
  // The line of text key was parsed from, or 0.
  size_t line_of(const std::string& key) const;
  // The file: a comment line, then one line per key in the order set.
  std::string format() const;

  // A case that draws every key it is asked for and does not hold from bytes (see the top).
  static CaseText decoding(std::string_view bytes);
  // Reads text as parse() would, and records the bytes that decode to each value read.
  static CaseText encoding(std::string_view text);
  // Drawing: whether this CaseText draws from bytes, and how many it consumed so far. stop_drawing()
  // makes it an ordinary case: a key not set by then is missing.
  bool drawing() const;
  size_t bytes_drawn() const;
  void stop_drawing();
  // Encoding: the bytes recorded so far (empty unless made by encoding()).
  std::string encoded_bytes() const;
  // Appends v's bytes to the encoding (nothing unless encoding), or draws one from the input and
  // returns it (v otherwise): for a value chosen outside the readers, such as the property.
  int64_t code(int64_t v, int64_t lo, int64_t hi) const;

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
  // Floats as floats_exactly reads them back: nan, inf, -inf or 9 significant digits.
  CaseText& set_floats(const std::string& key, const std::vector<float>& values);

  // Whether the key is set. When drawing (and the key is not set), a drawn flag decides, once per
  // key, so an optional key is present in some inputs and absent in others.
  bool has(const std::string& key) const;
  // The readers throw mlacheck::Error naming the key when it is missing or its value is not what
  // they read; each marks the key as read (see expect_all_read).
  const std::string& word(const std::string& key) const;
  // The position of the key's word in `allowed`.
  int choice(const std::string& key, std::initializer_list<const char*> allowed) const;
  int64_t integer(const std::string& key, int64_t lo, int64_t hi) const;
  // A multiple of step in [lo, hi] (step > 0).
  int64_t multiple(const std::string& key, int64_t step, int64_t lo, int64_t hi) const;
  // One of the values allowed (a warp size of 32 or 64, say).
  int64_t one_of(const std::string& key, std::initializer_list<int64_t> allowed) const;
  uint64_t unsigned_integer(const std::string& key) const;
  bool flag(const std::string& key) const { return integer(key, 0, 1) != 0; }
  double real(const std::string& key) const;
  // A finite real in [lo, hi]. Drawn: a drawn real outside the range (or not finite) folds into it.
  double real(const std::string& key, double lo, double hi) const;
  // Free words (not drawable: a drawing CaseText refuses them).
  const std::vector<std::string>& words(const std::string& key, size_t max_count) const;
  // Up to max_count words of allowed, as their positions in it.
  std::vector<int> choices(const std::string& key, const std::vector<const char*>& allowed, size_t max_count) const;
  std::vector<int> choices_exactly(const std::string& key, const std::vector<const char*>& allowed, size_t count) const;
  std::vector<double> reals(const std::string& key, size_t max_count) const;
  // Up to max_count floats: nan, inf, -inf or a real that rounds to a finite float. A drawn real
  // past the float range folds into it; each is rounded to a float.
  std::vector<float> floats(const std::string& key, size_t max_count) const;
  std::vector<float> floats_exactly(const std::string& key, size_t count) const;
  // How many values the list under key holds, in [lo, hi]: drawn when drawing (for a reader of
  // exactly that many to read next), otherwise the text's own count, refused outside [lo, hi].
  size_t list_length(const std::string& key, size_t lo, size_t hi) const;
  // A permutation of 0..n-1 (drawn as a Lehmer code, so every input gives one).
  std::vector<int> permutation(const std::string& key, int64_t n) const;
  std::vector<int64_t> integers(const std::string& key, int64_t lo, int64_t hi, size_t max_count) const;
  // Exactly count values (the case fixes the length: one per request, say).
  std::vector<int64_t> integers_exactly(const std::string& key, int64_t lo, int64_t hi, size_t count) const;
  template <class Int>
  std::vector<Int> list_exactly(const std::string& key, int64_t lo, int64_t hi, size_t count) const {
    std::vector<Int> out;
    for (int64_t v : integers_exactly(key, lo, hi, count)) out.push_back(static_cast<Int>(v));
    return out;
  }
  // Exactly lo.size() integers, value i in [lo[i], hi] (the ends of ranges whose starts are lo).
  std::vector<int64_t> integers_from(const std::string& key, const std::vector<int64_t>& lo, int64_t hi) const;
  // Exactly lo.size() integers, value i in [lo[i], hi[i]] (a block table: read columns are pages,
  // the others any garbage).
  std::vector<int64_t> integers_within(const std::string& key, const std::vector<int64_t>& lo,
                                       const std::vector<int64_t>& hi) const;
  template <class Int>
  std::vector<Int> list(const std::string& key, int64_t lo, int64_t hi, size_t max_count) const {
    std::vector<Int> out;
    for (int64_t v : integers(key, lo, hi, max_count)) out.push_back(static_cast<Int>(v));
    return out;
  }
  // Throws mlacheck::Error naming the first key no reader asked for: a misspelt key in a
  // hand-edited case must not be ignored silently.
  void expect_all_read() const;

  // Reads every later value within contract (nullptr, or an empty contract: the whole spec).
  CaseText& within(std::shared_ptr<const Contract> contract);
  // Whether the contract lets key take v, or the word w (true without a contract or a limit on key):
  // for a property that runs a variant of the case it read (the cache moved, another mode), which
  // is no case of the implementation when its contract excludes it.
  bool admits(const std::string& key, int64_t v) const;
  bool admits(const std::string& key, const std::string& w) const;
  const Contract* contract() const { return contract_.get(); }

  bool operator==(const CaseText& o) const { return entries_ == o.entries_; }

 private:
  struct Codec;
  // [lo, hi] narrowed by the contract's limits on key, with the limits' rule for messages. Throws
  // OutsideContract when nothing of [lo, hi] is inside the contract.
  struct Narrowed {
    int64_t lo, hi;
    std::string rule;  // "" when the contract does not limit key
    // Not empty: the only values a `KEY one-of N ...` clause lets key take (sorted, in [lo, hi]).
    std::vector<int64_t> among;
  };
  Narrowed narrow(const std::string& key, int64_t lo, int64_t hi) const;
  // A value of n drawn from r (among its values when it has them, else in [lo, hi]), and its
  // encoding, the draw's inverse.
  static int64_t draw_in(ByteReader& r, const Narrowed& n);
  void encode_in(int64_t v, const Narrowed& n) const;
  // Throws OutsideContract unless v (in the spec's range) lies in n.
  void require_within(const std::string& key, int64_t v, const Narrowed& n, const std::string& which = "") const;
  // The positions of allowed the contract lets key take (all of them without a limit).
  std::vector<int> permitted(const std::string& key, const std::vector<const char*>& allowed) const;
  bool finite_only(const std::string& key) const;
  const std::vector<std::string>& values(const std::string& key) const;
  const std::vector<std::string>* find(const std::string& key) const;
  // Drawing and the key is not set: draws its values with draw(reader) and sets them.
  template <class Draw>
  bool draw_if_missing(const std::string& key, Draw draw) const;
  bool first_encode(const std::string& key) const;  // encoding, and key's bytes are not written yet
  // The length of a list read with at most max_count values (exact: count itself, not drawn).
  size_t draw_count(size_t max_count, bool exact) const;
  void encode_count(size_t count, size_t max_count, bool exact) const;
  void require_count(const std::string& key, size_t n, size_t count, bool exact) const;
  std::vector<int64_t> read_integers(const std::string& key, int64_t lo, int64_t hi, size_t count, bool exact) const;
  std::vector<int> read_choices(const std::string& key, const std::vector<const char*>& allowed, size_t count,
                                bool exact) const;
  std::vector<float> read_floats(const std::string& key, size_t count, bool exact) const;
  // Mutable: a drawing CaseText sets the keys its readers ask for.
  mutable std::vector<std::pair<std::string, std::vector<std::string>>> entries_;
  std::shared_ptr<Codec> codec_;
  mutable std::set<std::string> read_;
  std::map<std::string, size_t> lines_;  // parse(): each key's line
  std::shared_ptr<const Contract> contract_;
};

// Runs read(); a refusal for a value outside its range gets why (the rule the range stands for)
// appended: "'num_blocks' is 9, outside [12, 64] (block_table reads page 11)". Other refusals (a
// missing key, a list of the wrong length) pass unchanged.
template <class F>
auto with_reason(const std::string& why, F&& read) {
  try {
    return read();
  } catch (const OutsideContract&) {
    throw;  // a contract's refusal says its own rule
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const char* range : {", outside [", "has an empty range", ", not one of ", ", not a multiple of "}) {
      if (what.find(range) != std::string::npos) throw Error(what + " (" + why + ")");
    }
    throw;
  }
}

}  // namespace mlacheck
