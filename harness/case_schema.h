// A case schema: each field of an op's case described once (its key, its type, its range, how the
// generator draws it), in one function template over a visitor,
//
//   template <class V> void fields(V& v, MyCase& c) {
//     v.integer("tokens", c.T, 1, 64, Favor{1, 2, 64});            // favourites, else uniform
//     v.list("decode_lens", c.lens, Length{1, 256}, 0, 16, [&] { return draw_lens(); });
//     v.integer("next_n", c.next_n, longest(c), 16, UpTo{longest(c) + 1});
//     v.permutation("slot_order", c.order, c.capacity());         // a range may use fields above it
//     v.named("dtype", c.dtype, {{"fp32", DType::kF32}, {"bf16", DType::kBF16}});
//     v.rule(c.row_elements() <= 4096, "row_shape: at most 4096 elements");
//     v.schedule(c);                                              // seed, warp, shuffled
//   }
//
// from which the three things a case needs follow (read_case, write_case, draw_case below):
//   - CaseReader: the case-file reader. Each value is read within its range (a range may depend on
//     the fields before it, which are read by then) and each rule is checked, so a hand-edited file
//     gets one line naming the key; over a drawing CaseText it is also the fuzz input decoder, and
//     within a contract it reads inside the contract's limits.
//   - CaseWriter: the case-file writer, the same keys in the same order.
//   - CaseDrawer: the RapidCheck generator. Each value is drawn the way its field says: uniform in
//     its range, its favourites half the time (Favor), uniform up to a bound (UpTo), or by a draw of
//     its own (a callable: the generator's knowledge of what breaks kernels, which a reader does
//     not need). The rules are asserted: a drawn case that breaks one is a bug of the schema's
//     draws, thrown as an Error.
// Prefer fields every value of whose range makes a case (a permutation rather than a list with a
// "distinct" rule, a range that starts at what the fields before it need): the fuzzers decode
// bytes through the reader, and a rule refuses what it breaks.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <rapidcheck.h>

#include "core/error.h"
#include "harness/case_text.h"
#include "harness/schedule.h"

namespace mlacheck {

// How the generator draws an integer: its favourites half the time (those inside the field's
// range), the rest uniform.
struct Favor {
  std::vector<int64_t> values;
  Favor() = default;
  Favor(std::initializer_list<int64_t> v) : values(v) {}
};
// Uniform in [lo, min(hi, bound)]: a field whose range is wide for hand-written and fuzzed cases
// but whose small values are the ones worth generating.
struct UpTo {
  int64_t bound;
};
// A list's length range: [lo, hi] read from the case, drawn uniform in [lo, min(hi, draw_hi)].
struct Length {
  int64_t lo, hi, draw_hi = 8;
};

class CaseReader {
 public:
  explicit CaseReader(const CaseText& t) : t_(t) {}
  template <class Int, class How = Favor>
  void integer(const char* key, Int& v, int64_t lo, int64_t hi, const How& = {}) {
    v = static_cast<Int>(t_.integer(key, lo, hi));
  }
  void flag(const char* key, bool& v) { v = t_.flag(key); }
  template <class Enum>
  void choice(const char* key, Enum& v, std::initializer_list<const char*> names) {
    v = static_cast<Enum>(t_.choice(key, names));
  }
  // A value of T by its name (a dtype, say).
  template <class T>
  void named(const char* key, T& v, const std::vector<std::pair<const char*, T>>& names) {
    std::vector<const char*> words;
    for (const auto& n : names) words.push_back(n.first);
    v = names[static_cast<size_t>(t_.choices_exactly(key, words, 1).front())].second;
  }
  template <class Int, class Draw = std::nullptr_t>
  void list(const char* key, std::vector<Int>& v, int64_t count, int64_t lo, int64_t hi, const Draw& = nullptr) {
    v = t_.list_exactly<Int>(key, lo, hi, static_cast<size_t>(count));
  }
  template <class Int, class Draw = std::nullptr_t>
  void list(const char* key, std::vector<Int>& v, const Length& n, int64_t lo, int64_t hi, const Draw& = nullptr) {
    v = t_.list_exactly<Int>(key, lo, hi, t_.list_length(key, static_cast<size_t>(n.lo), static_cast<size_t>(n.hi)));
  }
  // lo.size() values, value i in [lo[i], hi] (a block table: the columns a request reads hold
  // pages, the others anything).
  template <class Int, class Draw = std::nullptr_t>
  void list_from(const char* key, std::vector<Int>& v, const std::vector<int64_t>& lo, int64_t hi, const Draw& = nullptr) {
    v.clear();
    for (int64_t x : t_.integers_from(key, lo, hi)) v.push_back(static_cast<Int>(x));
  }
  void permutation(const char* key, std::vector<int>& v, int64_t n) { v = t_.permutation(key, n); }
  void schedule(CaseSchedule& s, SeedKey seed = SeedKey::kWritten) { read_schedule(s, t_, "", seed); }
  void rule(bool holds, const std::string& why) { MLA_REQUIRE(holds, "case: ", why); }

 private:
  const CaseText& t_;
};

class CaseWriter {
 public:
  explicit CaseWriter(CaseText& out) : out_(out) {}
  template <class Int, class How = Favor>
  void integer(const char* key, Int& v, int64_t, int64_t, const How& = {}) {
    out_.set(key, static_cast<int64_t>(v));
  }
  void flag(const char* key, bool& v) { out_.set(key, v); }
  template <class Enum>
  void choice(const char* key, Enum& v, std::initializer_list<const char*> names) {
    out_.set(key, names.begin()[static_cast<size_t>(v)]);
  }
  template <class T>
  void named(const char* key, T& v, const std::vector<std::pair<const char*, T>>& names) {
    for (const auto& n : names) {
      if (n.second == v) {
        out_.set(key, n.first);
        return;
      }
    }
    throw Error(std::string("case: '") + key + "' holds a value without a name");
  }
  template <class Int, class Count, class Draw = std::nullptr_t>
  void list(const char* key, std::vector<Int>& v, const Count&, int64_t, int64_t, const Draw& = nullptr) {
    out_.set_list(key, v);
  }
  template <class Int, class Draw = std::nullptr_t>
  void list_from(const char* key, std::vector<Int>& v, const std::vector<int64_t>&, int64_t, const Draw& = nullptr) {
    out_.set_list(key, v);
  }
  void permutation(const char* key, std::vector<int>& v, int64_t) { out_.set_list(key, v); }
  void schedule(CaseSchedule& s, SeedKey seed = SeedKey::kWritten) { write_schedule(s, out_, "", seed); }
  void rule(bool, const std::string&) {}

 private:
  CaseText& out_;
};

// Draws inside rc::gen::exec (or a RapidCheck property).
class CaseDrawer {
 public:
  template <class Int, class How = Favor>
  void integer(const char* key, Int& v, int64_t lo, int64_t hi, const How& how = {}) {
    int64_t x = 0;
    if constexpr (std::is_same_v<How, Favor>) {
      std::vector<int64_t> inside;
      for (int64_t f : how.values) {
        if (f >= lo && f <= hi) inside.push_back(f);
      }
      x = !inside.empty() && *rc::gen::arbitrary<bool>() ? *rc::gen::elementOf(inside) : uniform(lo, hi);
    } else if constexpr (std::is_same_v<How, UpTo>) {
      x = uniform(lo, std::max(lo, std::min(hi, how.bound)));
    } else {
      x = static_cast<int64_t>(how());
    }
    within(key, x, lo, hi);
    v = static_cast<Int>(x);
  }
  void flag(const char*, bool& v) { v = *rc::gen::arbitrary<bool>(); }
  template <class Enum>
  void choice(const char*, Enum& v, std::initializer_list<const char*> names) {
    v = static_cast<Enum>(*rc::gen::inRange<int>(0, static_cast<int>(names.size())));
  }
  template <class T>
  void named(const char*, T& v, const std::vector<std::pair<const char*, T>>& names) {
    v = names[static_cast<size_t>(*rc::gen::inRange<size_t>(0, names.size()))].second;
  }
  // count values, each uniform in [lo, hi] unless the field has a draw of its own (a callable
  // returning the whole list); a Length draws the count first.
  template <class Int, class Draw = std::nullptr_t>
  void list(const char* key, std::vector<Int>& v, int64_t count, int64_t lo, int64_t hi, const Draw& draw = nullptr) {
    if constexpr (std::is_same_v<Draw, std::nullptr_t>) {
      v.clear();
      for (int64_t i = 0; i < count; ++i) v.push_back(static_cast<Int>(uniform(lo, hi)));
    } else {
      v = draw();
    }
    MLA_REQUIRE(static_cast<int64_t>(v.size()) == count, "case schema: the draw of '", key, "' gave ", v.size(),
                " values, the field holds ", count);
    for (Int x : v) within(key, static_cast<int64_t>(x), lo, hi);
  }
  template <class Int, class Draw = std::nullptr_t>
  void list(const char* key, std::vector<Int>& v, const Length& n, int64_t lo, int64_t hi, const Draw& draw = nullptr) {
    if constexpr (std::is_same_v<Draw, std::nullptr_t>) {
      list(key, v, uniform(n.lo, std::max(n.lo, std::min(n.hi, n.draw_hi))), lo, hi);
    } else {
      v = draw();
      MLA_REQUIRE(static_cast<int64_t>(v.size()) >= n.lo && static_cast<int64_t>(v.size()) <= n.hi,
                  "case schema: the draw of '", key, "' gave ", v.size(), " values, outside [", n.lo, ", ", n.hi, "]");
      for (Int x : v) within(key, static_cast<int64_t>(x), lo, hi);
    }
  }
  template <class Int, class Draw = std::nullptr_t>
  void list_from(const char* key, std::vector<Int>& v, const std::vector<int64_t>& lo, int64_t hi,
                 const Draw& draw = nullptr) {
    if constexpr (std::is_same_v<Draw, std::nullptr_t>) {
      v.clear();
      for (int64_t l : lo) v.push_back(static_cast<Int>(uniform(l, hi)));
    } else {
      v = draw();
    }
    MLA_REQUIRE(v.size() == lo.size(), "case schema: the draw of '", key, "' gave ", v.size(), " values, the field holds ",
                lo.size());
    for (size_t i = 0; i < v.size(); ++i) within(key, static_cast<int64_t>(v[i]), lo[i], hi);
  }
  // A uniform permutation of 0..n-1 (a Lehmer code: position i takes one of the n - i left).
  void permutation(const char*, std::vector<int>& v, int64_t n) {
    std::vector<int> left(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) left[static_cast<size_t>(i)] = static_cast<int>(i);
    v.clear();
    for (int64_t i = 0; i < n; ++i) {
      const size_t j = static_cast<size_t>(uniform(0, n - i - 1));
      v.push_back(left[j]);
      left.erase(left.begin() + static_cast<std::ptrdiff_t>(j));
    }
  }
  // The shared fields; how often a drawn case is shuffled is the op's to say (ShuffleOdds).
  void schedule(CaseSchedule& s, SeedKey seed = SeedKey::kWritten) { schedule(s, shuffled_in_4_, seed); }
  void schedule(CaseSchedule& s, int shuffled_in_4, SeedKey seed = SeedKey::kWritten) {
    if (seed == SeedKey::kWritten) s.seed = *rc::gen::arbitrary<uint64_t>();
    s.warp_size = *rc::gen::element(32, 64);
    s.shuffled = *rc::gen::weightedElement<bool>({{shuffled_in_4, true}, {4 - shuffled_in_4, false}});
  }
  void rule(bool holds, const std::string& why) {
    MLA_REQUIRE(holds, "a drawn case breaks its schema's rule (a bug of the schema's draws): ", why);
  }
  // Draws shuffled cases this many times in 4 (2 unless set).
  CaseDrawer& shuffled_in_4(int n) {
    shuffled_in_4_ = n;
    return *this;
  }

 private:
  static int64_t uniform(int64_t lo, int64_t hi) { return *rc::gen::inRange<int64_t>(lo, hi + 1); }
  static void within(const char* key, int64_t x, int64_t lo, int64_t hi) {
    MLA_REQUIRE(x >= lo && x <= hi, "case schema: the draw of '", key, "' gave ", x, ", outside its range [", lo, ", ",
                hi, "] (a bug of the schema's draws)");
  }
  int shuffled_in_4_ = 2;
};

// The case in a case file's keys (fields(CaseReader&, Case&) found by argument-dependent lookup).
template <class Case>
Case read_case(const CaseText& t) {
  Case c;
  CaseReader r(t);
  fields(r, c);
  return c;
}
template <class Case>
void write_case(const Case& c, CaseText& out) {
  Case copy = c;  // the visitor takes fields by reference; the writer only reads them
  CaseWriter w(out);
  fields(w, copy);
}
// The generator; shuffled_in_4: how many drawn cases in 4 run the host's threads shuffled (ops
// whose kernels synchronise between threads draw 3).
template <class Case>
rc::Gen<Case> draw_case(int shuffled_in_4 = 2) {
  return rc::gen::exec([shuffled_in_4] {
    Case c;
    CaseDrawer d;
    d.shuffled_in_4(shuffled_in_4);
    fields(d, c);
    return c;
  });
}
// What RapidCheck prints for a case: its case-file keys.
template <class Case>
void show_case(const Case& c, std::ostream& os) {
  CaseText t;
  write_case(c, t);
  os << t.format();
}

}  // namespace mlacheck
