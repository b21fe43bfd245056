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
// More kinds of field: multiple (a multiple of a step), one_of (one of a few integers),
// unsigned_integer (any uint64, a seed), real (a
// finite double), floats and choices (lists of floats and of named values, their length fixed by the
// case), present (an optional group of keys: whether the text holds it), prefixed (a nested case's
// fields under a key prefix, "s0." say) and bespoke (a field the kinds above cannot say, read,
// written and drawn by three functions of its own: keep it for the odd one). An op whose readers
// differ by family (a property that reads only decode cases, say) passes its family as an extra
// argument: fields(v, c, family), read_case<Case>(t, family), draw_case<Case>(odds, family).
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
// How the generator draws a real: one of these values (each inside the field's range).
struct Among {
  std::vector<double> values;
  Among(std::initializer_list<double> v) : values(v) {}
};

// The key prefix every visitor shares: prefixed(p, f) runs f with p before every key it names, so
// a nested case's fields (a step of a sequence, a call of an impl) are written once too.
class SchemaKeys {
 public:
  template <class F>
  void prefixed(const std::string& p, F&& f) {
    const std::string saved = prefix_;
    prefix_ += p;
    try {
      f();
    } catch (...) {
      prefix_ = saved;
      throw;
    }
    prefix_ = saved;
  }
  const std::string& prefix() const { return prefix_; }

 protected:
  std::string key(const std::string& k) const { return prefix_ + k; }

 private:
  std::string prefix_;
};

class CaseReader : public SchemaKeys {
 public:
  explicit CaseReader(const CaseText& t) : t_(t) {}
  template <class Int, class How = Favor>
  void integer(const std::string& k, Int& v, int64_t lo, int64_t hi, const How& = {}) {
    v = static_cast<Int>(t_.integer(key(k), lo, hi));
  }
  // A multiple of step in [lo, hi].
  template <class Int, class How = Favor>
  void multiple(const std::string& k, Int& v, int64_t step, int64_t lo, int64_t hi, const How& = {}) {
    v = static_cast<Int>(t_.multiple(key(k), step, lo, hi));
  }
  template <class Int>
  void one_of(const std::string& k, Int& v, std::initializer_list<int64_t> allowed) {
    v = static_cast<Int>(t_.one_of(key(k), allowed));
  }
  // A finite real in [lo, hi].
  template <class How = Among>
  void real(const std::string& k, double& v, double lo, double hi, const How& = {0.0}) {
    v = t_.real(key(k), lo, hi);
  }
  void flag(const std::string& k, bool& v) { v = t_.flag(key(k)); }
  // Any uint64 (a seed of its own, printed in hex).
  void unsigned_integer(const std::string& k, uint64_t& v) { v = t_.unsigned_integer(key(k)); }
  // Enum(i) named names[i]; drawn uniform unless the field has a draw of its own (a callable
  // returning the Enum: a weighted choice).
  template <class Enum, class Draw = std::nullptr_t>
  void choice(const std::string& k, Enum& v, std::initializer_list<const char*> names, const Draw& = nullptr) {
    v = static_cast<Enum>(t_.choice(key(k), names));
  }
  // A value of T by its name (a dtype, say); drawn uniform unless the field has a draw of its own.
  template <class T, class Draw = std::nullptr_t>
  void named(const std::string& k, T& v, const std::vector<std::pair<const char*, T>>& names, const Draw& = nullptr) {
    std::vector<const char*> words;
    for (const auto& n : names) words.push_back(n.first);
    v = names[static_cast<size_t>(t_.choices_exactly(key(k), words, 1).front())].second;
  }
  // count values of Enum by their names (names[i] names Enum(i)).
  template <class Enum, class Draw = std::nullptr_t>
  void choices(const std::string& k, std::vector<Enum>& v, int64_t count, const std::vector<const char*>& names,
               const Draw& = nullptr) {
    v.clear();
    for (int i : t_.choices_exactly(key(k), names, static_cast<size_t>(count))) v.push_back(static_cast<Enum>(i));
  }
  // count floats (nan, inf, -inf or finite).
  template <class Draw = std::nullptr_t>
  void floats(const std::string& k, std::vector<float>& v, int64_t count, const Draw& = nullptr) {
    v = t_.floats_exactly(key(k), static_cast<size_t>(count));
  }
  template <class Int, class Draw = std::nullptr_t>
  void list(const std::string& k, std::vector<Int>& v, int64_t count, int64_t lo, int64_t hi, const Draw& = nullptr) {
    v = t_.list_exactly<Int>(key(k), lo, hi, static_cast<size_t>(count));
  }
  template <class Int, class Draw = std::nullptr_t>
  void list(const std::string& k, std::vector<Int>& v, const Length& n, int64_t lo, int64_t hi, const Draw& = nullptr) {
    v = t_.list_exactly<Int>(key(k), lo, hi,
                             t_.list_length(key(k), static_cast<size_t>(n.lo), static_cast<size_t>(n.hi)));
  }
  // lo.size() values, value i in [lo[i], hi] (a block table: the columns a request reads hold
  // pages, the others anything).
  template <class Int, class Draw = std::nullptr_t>
  void list_from(const std::string& k, std::vector<Int>& v, const std::vector<int64_t>& lo, int64_t hi,
                 const Draw& = nullptr) {
    v.clear();
    for (int64_t x : t_.integers_from(key(k), lo, hi)) v.push_back(static_cast<Int>(x));
  }
  void permutation(const std::string& k, std::vector<int>& v, int64_t n) { v = t_.permutation(key(k), n); }
  // Whether the optional group under key is there: the text's answer (has is the writer's).
  bool present(const std::string& k, bool /*has*/) { return t_.has(key(k)); }
  // A field of its own: read(text, prefixed key) reads it.
  template <class Read, class Write, class Draw>
  void bespoke(const std::string& k, const Read& read, const Write&, const Draw&) {
    read(t_, key(k));
  }
  void schedule(CaseSchedule& s, SeedKey seed = SeedKey::kWritten) { read_schedule(s, t_, prefix(), seed); }
  void rule(bool holds, const std::string& why) { MLA_REQUIRE(holds, "case: ", why); }

 private:
  const CaseText& t_;
};

class CaseWriter : public SchemaKeys {
 public:
  explicit CaseWriter(CaseText& out) : out_(out) {}
  template <class Int, class How = Favor>
  void integer(const std::string& k, Int& v, int64_t, int64_t, const How& = {}) {
    out_.set(key(k), static_cast<int64_t>(v));
  }
  template <class Int, class How = Favor>
  void multiple(const std::string& k, Int& v, int64_t, int64_t, int64_t, const How& = {}) {
    out_.set(key(k), static_cast<int64_t>(v));
  }
  template <class Int>
  void one_of(const std::string& k, Int& v, std::initializer_list<int64_t>) {
    out_.set(key(k), static_cast<int64_t>(v));
  }
  template <class How = Among>
  void real(const std::string& k, double& v, double, double, const How& = {0.0}) {
    out_.set_real(key(k), v);
  }
  void flag(const std::string& k, bool& v) { out_.set(key(k), v); }
  void unsigned_integer(const std::string& k, uint64_t& v) { out_.set(key(k), v); }
  template <class Enum, class Draw = std::nullptr_t>
  void choice(const std::string& k, Enum& v, std::initializer_list<const char*> names, const Draw& = nullptr) {
    out_.set(key(k), names.begin()[static_cast<size_t>(v)]);
  }
  template <class T, class Draw = std::nullptr_t>
  void named(const std::string& k, T& v, const std::vector<std::pair<const char*, T>>& names, const Draw& = nullptr) {
    for (const auto& n : names) {
      if (n.second == v) {
        out_.set(key(k), n.first);
        return;
      }
    }
    throw Error("case: '" + key(k) + "' holds a value without a name");
  }
  template <class Enum, class Draw = std::nullptr_t>
  void choices(const std::string& k, std::vector<Enum>& v, int64_t, const std::vector<const char*>& names,
               const Draw& = nullptr) {
    std::vector<std::string> words;
    for (Enum e : v) words.push_back(names[static_cast<size_t>(e)]);
    out_.set_words(key(k), std::move(words));
  }
  template <class Draw = std::nullptr_t>
  void floats(const std::string& k, std::vector<float>& v, int64_t, const Draw& = nullptr) {
    out_.set_floats(key(k), v);
  }
  template <class Int, class Count, class Draw = std::nullptr_t>
  void list(const std::string& k, std::vector<Int>& v, const Count&, int64_t, int64_t, const Draw& = nullptr) {
    out_.set_list(key(k), v);
  }
  template <class Int, class Draw = std::nullptr_t>
  void list_from(const std::string& k, std::vector<Int>& v, const std::vector<int64_t>&, int64_t,
                 const Draw& = nullptr) {
    out_.set_list(key(k), v);
  }
  void permutation(const std::string& k, std::vector<int>& v, int64_t) { out_.set_list(key(k), v); }
  bool present(const std::string&, bool has) { return has; }
  template <class Read, class Write, class Draw>
  void bespoke(const std::string& k, const Read&, const Write& write, const Draw&) {
    write(out_, key(k));
  }
  void schedule(CaseSchedule& s, SeedKey seed = SeedKey::kWritten) { write_schedule(s, out_, prefix(), seed); }
  void rule(bool, const std::string&) {}

 private:
  CaseText& out_;
};

// Draws inside rc::gen::exec (or a RapidCheck property).
class CaseDrawer : public SchemaKeys {
 public:
  template <class Int, class How = Favor>
  void integer(const std::string& key, Int& v, int64_t lo, int64_t hi, const How& how = {}) {
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
  // A multiple of step: the favourites, bound and draw of integer() are in multiples (Favor{0, 2}
  // with step 16 favours 0 and 32), a callable's draw is the value itself.
  template <class Int, class How = Favor>
  void multiple(const std::string& key, Int& v, int64_t step, int64_t lo, int64_t hi, const How& how = {}) {
    const int64_t first = (lo + step - 1) / step, last = hi / step;  // lo >= 0
    int64_t x = 0;
    if constexpr (std::is_same_v<How, Favor> || std::is_same_v<How, UpTo>) {
      integer(key, x, first, last, how);
      x *= step;
    } else {
      x = static_cast<int64_t>(how());
    }
    within(key, x, lo, hi);
    MLA_REQUIRE(x % step == 0, "case schema: the draw of '", key, "' gave ", x, ", not a multiple of ", step);
    v = static_cast<Int>(x);
  }
  template <class Int>
  void one_of(const std::string&, Int& v, std::initializer_list<int64_t> allowed) {
    v = static_cast<Int>(*rc::gen::elementOf(std::vector<int64_t>(allowed)));
  }
  // Among: one of its values; a callable: its value; either must lie in [lo, hi].
  template <class How = Among>
  void real(const std::string& key, double& v, double lo, double hi, const How& how = {0.0}) {
    if constexpr (std::is_same_v<How, Among>) {
      v = *rc::gen::elementOf(how.values);
    } else {
      v = static_cast<double>(how());
    }
    MLA_REQUIRE(v >= lo && v <= hi, "case schema: the draw of '", key, "' gave ", v, ", outside its range [", lo, ", ",
                hi, "] (a bug of the schema's draws)");
  }
  void flag(const std::string&, bool& v) { v = *rc::gen::arbitrary<bool>(); }
  void unsigned_integer(const std::string&, uint64_t& v) { v = *rc::gen::arbitrary<uint64_t>(); }
  template <class Enum, class Draw = std::nullptr_t>
  void choice(const std::string& key, Enum& v, std::initializer_list<const char*> names, const Draw& draw = nullptr) {
    if constexpr (std::is_same_v<Draw, std::nullptr_t>) {
      v = static_cast<Enum>(*rc::gen::inRange<int>(0, static_cast<int>(names.size())));
    } else {
      v = draw();
      within(key, static_cast<int64_t>(v), 0, static_cast<int64_t>(names.size()) - 1);
    }
  }
  template <class T, class Draw = std::nullptr_t>
  void named(const std::string& key, T& v, const std::vector<std::pair<const char*, T>>& names,
             const Draw& draw = nullptr) {
    if constexpr (std::is_same_v<Draw, std::nullptr_t>) {
      v = names[static_cast<size_t>(*rc::gen::inRange<size_t>(0, names.size()))].second;
    } else {
      v = draw();
      bool named = false;
      for (const auto& n : names) named = named || n.second == v;
      MLA_REQUIRE(named, "case schema: the draw of '", key, "' gave a value without a name (a bug of the schema's draws)");
    }
  }
  // count names, each uniform unless the field has a draw of its own (returning the whole list).
  template <class Enum, class Draw = std::nullptr_t>
  void choices(const std::string& key, std::vector<Enum>& v, int64_t count, const std::vector<const char*>& names,
               const Draw& draw = nullptr) {
    if constexpr (std::is_same_v<Draw, std::nullptr_t>) {
      v.clear();
      for (int64_t i = 0; i < count; ++i) v.push_back(static_cast<Enum>(uniform(0, static_cast<int64_t>(names.size()) - 1)));
    } else {
      v = draw();
    }
    MLA_REQUIRE(static_cast<int64_t>(v.size()) == count, "case schema: the draw of '", key, "' gave ", v.size(),
                " values, the field holds ", count);
  }
  // count floats: uniform in [-1, 1] unless the field has a draw of its own.
  template <class Draw = std::nullptr_t>
  void floats(const std::string& key, std::vector<float>& v, int64_t count, const Draw& draw = nullptr) {
    if constexpr (std::is_same_v<Draw, std::nullptr_t>) {
      v.clear();
      for (int64_t i = 0; i < count; ++i) v.push_back(static_cast<float>(uniform(-1000, 1000)) / 1000.0f);
    } else {
      v = draw();
    }
    MLA_REQUIRE(static_cast<int64_t>(v.size()) == count, "case schema: the draw of '", key, "' gave ", v.size(),
                " values, the field holds ", count);
  }
  // count values, each uniform in [lo, hi] unless the field has a draw of its own (a callable
  // returning the whole list); a Length draws the count first.
  template <class Int, class Draw = std::nullptr_t>
  void list(const std::string& key, std::vector<Int>& v, int64_t count, int64_t lo, int64_t hi,
            const Draw& draw = nullptr) {
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
  void list(const std::string& key, std::vector<Int>& v, const Length& n, int64_t lo, int64_t hi,
            const Draw& draw = nullptr) {
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
  void list_from(const std::string& key, std::vector<Int>& v, const std::vector<int64_t>& lo, int64_t hi,
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
  void permutation(const std::string&, std::vector<int>& v, int64_t n) {
    std::vector<int> left(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) left[static_cast<size_t>(i)] = static_cast<int>(i);
    v.clear();
    for (int64_t i = 0; i < n; ++i) {
      const size_t j = static_cast<size_t>(uniform(0, n - i - 1));
      v.push_back(left[j]);
      left.erase(left.begin() + static_cast<std::ptrdiff_t>(j));
    }
  }
  // The generator decides whether an optional group is drawn: has, the case's own answer so far.
  bool present(const std::string&, bool has) { return has; }
  template <class Read, class Write, class Draw>
  void bespoke(const std::string&, const Read&, const Write&, const Draw& draw) {
    draw();
  }
  // The shared fields; how often a drawn case is shuffled is the op's to say (draw_case's shuffled_in_4).
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
  static void within(const std::string& key, int64_t x, int64_t lo, int64_t hi) {
    MLA_REQUIRE(x >= lo && x <= hi, "case schema: the draw of '", key, "' gave ", x, ", outside its range [", lo, ", ",
                hi, "] (a bug of the schema's draws)");
  }
  int shuffled_in_4_ = 2;
};

// The case in a case file's keys (fields(CaseReader&, Case&) found by argument-dependent lookup).
// extra: what fields() takes after the case (an op's family), passed on.
template <class Case, class... Extra>
Case read_case(const CaseText& t, const Extra&... extra) {
  Case c;
  CaseReader r(t);
  fields(r, c, extra...);
  return c;
}
template <class Case, class... Extra>
void write_case(const Case& c, CaseText& out, const Extra&... extra) {
  Case copy = c;  // the visitor takes fields by reference; the writer only reads them
  CaseWriter w(out);
  fields(w, copy, extra...);
}
// The generator; shuffled_in_4: how many drawn cases in 4 run the host's threads shuffled (ops
// whose kernels synchronise between threads draw 3).
template <class Case, class... Extra>
rc::Gen<Case> draw_case(int shuffled_in_4 = 2, Extra... extra) {
  return rc::gen::exec([shuffled_in_4, extra...] {
    Case c;
    CaseDrawer d;
    d.shuffled_in_4(shuffled_in_4);
    fields(d, c, extra...);
    return c;
  });
}
// What RapidCheck prints for a case: its case-file keys.
template <class Case, class... Extra>
void show_case(const Case& c, std::ostream& os, const Extra&... extra) {
  CaseText t;
  write_case(c, t, extra...);
  os << t.format();
}

}  // namespace mlacheck
