// A case schema: each field of an op's case described once (its key, its type, its range, how the
// generator draws it), in one function template over a visitor,
//
//   template <class V> void fields(V& v, MyCase& c) {
//     v.integer("tokens", c.T, 1, 64, Favor{1, 2, 64});
//     v.flag("ue8m0", c.ue8m0);
//     v.permutation("slot_order", c.order, c.capacity());
//     v.list("padding", c.padding, c.T, 0, 1);
//     v.rule(c.T <= c.capacity(), "the cache has a slot for every token");
//     v.schedule(c);  // seed, warp, shuffled (harness/schedule.h)
//   }
//
// from which the three things a case needs follow (read_case, write_case, draw_case below):
//   - CaseReader: the case-file reader. Each value is read within its range (a range may depend on
//     the fields before it, which are read by then) and each rule is checked, so a hand-edited file
//     gets one line naming the key; over a drawing CaseText it is also the fuzz input decoder, and
//     within a contract it reads inside the contract's limits.
//   - CaseWriter: the case-file writer, the same keys in the same order.
//   - CaseDrawer: the RapidCheck generator. Each value is drawn within its range (its favourites
//     half the time when it has some), the rules asserted (a drawn case that breaks one is a bug of
//     the schema's draws, thrown as an Error).
// Prefer fields every value of whose range makes a case (a permutation rather than a list with a
// "distinct" rule): the fuzzers decode bytes through the reader, and a rule refuses what it breaks.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "core/error.h"
#include "harness/case_text.h"
#include "harness/schedule.h"

namespace mlacheck {

// Values the generator draws half the time (those inside the field's range), the rest uniform.
struct Favor {
  std::vector<int64_t> values;
  Favor() = default;
  Favor(std::initializer_list<int64_t> v) : values(v) {}
};

class CaseReader {
 public:
  explicit CaseReader(const CaseText& t) : t_(t) {}
  template <class Int>
  void integer(const char* key, Int& v, int64_t lo, int64_t hi, const Favor& = {}) {
    v = static_cast<Int>(t_.integer(key, lo, hi));
  }
  void flag(const char* key, bool& v) { v = t_.flag(key); }
  template <class Enum>
  void choice(const char* key, Enum& v, std::initializer_list<const char*> names) {
    v = static_cast<Enum>(t_.choice(key, names));
  }
  template <class Int>
  void list(const char* key, std::vector<Int>& v, int64_t count, int64_t lo, int64_t hi) {
    v = t_.list_exactly<Int>(key, lo, hi, static_cast<size_t>(count));
  }
  void permutation(const char* key, std::vector<int>& v, int64_t n) { v = t_.permutation(key, n); }
  void schedule(CaseSchedule& s, SeedKey seed = SeedKey::kWritten) { read_schedule(s, t_, "", seed); }
  void rule(bool holds, const std::string& why) { MLA_REQUIRE(holds, why); }

 private:
  const CaseText& t_;
};

class CaseWriter {
 public:
  explicit CaseWriter(CaseText& out) : out_(out) {}
  template <class Int>
  void integer(const char* key, Int& v, int64_t, int64_t, const Favor& = {}) {
    out_.set(key, static_cast<int64_t>(v));
  }
  void flag(const char* key, bool& v) { out_.set(key, v); }
  template <class Enum>
  void choice(const char* key, Enum& v, std::initializer_list<const char*> names) {
    out_.set(key, names.begin()[static_cast<size_t>(v)]);
  }
  template <class Int>
  void list(const char* key, std::vector<Int>& v, int64_t, int64_t, int64_t) {
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
  template <class Int>
  void integer(const char*, Int& v, int64_t lo, int64_t hi, const Favor& favor = {}) {
    std::vector<int64_t> inside;
    for (int64_t f : favor.values) {
      if (f >= lo && f <= hi) inside.push_back(f);
    }
    if (!inside.empty() && *rc::gen::arbitrary<bool>()) {
      v = static_cast<Int>(*rc::gen::elementOf(inside));
    } else {
      v = static_cast<Int>(*rc::gen::inRange<int64_t>(lo, hi + 1));
    }
  }
  void flag(const char*, bool& v) { v = *rc::gen::arbitrary<bool>(); }
  template <class Enum>
  void choice(const char*, Enum& v, std::initializer_list<const char*> names) {
    v = static_cast<Enum>(*rc::gen::inRange<int>(0, static_cast<int>(names.size())));
  }
  // Each value uniform in [lo, hi].
  template <class Int>
  void list(const char*, std::vector<Int>& v, int64_t count, int64_t lo, int64_t hi) {
    v.clear();
    for (int64_t i = 0; i < count; ++i) v.push_back(static_cast<Int>(*rc::gen::inRange<int64_t>(lo, hi + 1)));
  }
  // A uniform permutation of 0..n-1 (a Lehmer code: position i takes one of the n - i left).
  void permutation(const char*, std::vector<int>& v, int64_t n) {
    std::vector<int> left(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) left[static_cast<size_t>(i)] = static_cast<int>(i);
    v.clear();
    for (int64_t i = 0; i < n; ++i) {
      const size_t j = static_cast<size_t>(*rc::gen::inRange<int64_t>(0, n - i));
      v.push_back(left[j]);
      left.erase(left.begin() + static_cast<std::ptrdiff_t>(j));
    }
  }
  void schedule(CaseSchedule& s, SeedKey seed = SeedKey::kWritten) {
    if (seed == SeedKey::kWritten) s.seed = *rc::gen::arbitrary<uint64_t>();
    s.warp_size = *rc::gen::element(32, 64);
    s.shuffled = *rc::gen::arbitrary<bool>();
  }
  void rule(bool holds, const std::string& why) {
    MLA_REQUIRE(holds, "a drawn case breaks its schema's rule (a bug of the schema's draws): ", why);
  }
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
template <class Case>
rc::Gen<Case> draw_case() {
  return rc::gen::exec([] {
    Case c;
    CaseDrawer d;
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
