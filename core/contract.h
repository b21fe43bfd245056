// Contracts: what an implementation under test accepts, when that is narrower than the op's spec.
//
// Real kernels are narrower than docs/ops: a contiguous [rows, k] output, k up to what their shared
// memory holds, lengths already clamped to >= 0, finite inputs. A contract says so, in a few lines
// of text a C author writes beside the kernel, one clause per line (or separated by ';'):
//
//   k <= 2048                 a bound on a quantity: NAME <= N, NAME >= N, NAME = N, NAME in [A, B];
//   next_n in [1, 2]          N may also name another quantity ("seq_lens >= next_n")
//   out contiguous            a tensor's layout: contiguous, padded-rows (unit inner stride,
//   logits padded-rows        row padding allowed) or strided (anything the spec allows)
//   seq_lens rank 1           a tensor's rank, where the op allows two
//   q dtype bf16              a tensor's element types, where the op allows several
//   finite                    inputs hold no NaN or +-inf
//   lengths one-of decode-1d  any case key of the op, bounded or limited to some of its words
//   precision p bf16          how the implementation computes, where the op's comparison depends on
//                             it: an operand of its products (contract_terms) rounded to tf32 or
//                             bf16 (fp32: the default); not a limit on cases, the oracle's slack
//                             follows it (docs/ops.md section 7)
//   padding any               what the implementation leaves to its caller, where the op's check
//                             depends on it (pack_decode: the padding slots' values, which the
//                             caller masks); not a limit on cases, the check skips that part
//
// The names are the op's terms (contract_terms(op) lists them) or the keys of its case files. A
// contract compiles to limits on case keys, which the case readers (harness/case_text.h) apply
// while they draw: generators and fuzz decoders draw only inside the contract, and a case file
// outside it is refused with OutsideContract, never run as a failure.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace mlacheck {

// A case lies outside the implementation's contract: it is not run against it (or run only by a
// contract probe, and reported apart).
class OutsideContract : public Error {
 public:
  explicit OutsideContract(const std::string& what) : Error(what) {}
};

// One bound of a limit: a number (an integer, or a real for a real key: "softmax_scale >= 0.07"),
// or the value of another key of the same case.
struct LimitBound {
  std::optional<int64_t> value;
  std::optional<double> real;  // a bound that is no integer; only real keys take it
  std::string key;             // not empty: the bound is that key's value
  bool set() const { return value.has_value() || real.has_value() || !key.empty(); }
};

// A limit on one case key. The key matches itself and any prefixed form of it ("c0.heads" for
// "heads": the sub-cases of stateful ops); a key ending in '*' matches every key it begins
// ("values_*"). Integer values (each value of a list) lie in [lo, hi]; words lie in words (when
// not empty); floats are finite (when finite).
struct KeyLimit {
  std::string key;
  LimitBound lo, hi;
  std::vector<std::string> words;
  bool finite = false;
  bool matches(std::string_view case_key) const;
};

struct Contract {
  std::string op;
  std::vector<std::string> clauses;  // as declared, one per clause, normalized ("k in [1, 2048]")
  std::vector<KeyLimit> limits;
  std::map<std::string, std::string> precision;  // operand -> a format of precision_unit, as declared
  std::map<std::string, std::string> declared;   // a declaration term -> its word ("padding" -> "any")
  bool empty() const { return limits.empty(); }
  // The limits on case_key, in declaration order (several clauses may bound one key).
  std::vector<const KeyLimit*> limits_on(std::string_view case_key) const;
  // "k <= 2048; out contiguous", or "the whole spec" when empty.
  std::string describe() const;
};

// The unit roundoff of a declared precision format (`precision OPERAND FORMAT`): 0 for fp32, whose
// rounding every slack allows, 2^-11 for tf32, 2^-8 for bf16, 2^-4 for fp8 (e4m3's relative part),
// 2^-13 for fp22 (an accumulator keeping 13 fraction bits, as Hopper's fp8 tensor cores do).
double precision_unit(const std::string& format);

// Parses a contract for op. Throws mlacheck::Error with one line naming the clause and what is
// wrong: an unknown name or layout, an empty range ("k in [10, 5]"), a word the key does not take.
Contract parse_contract(const std::string& op, std::string_view text);

// The op's contract terms, each as a clause shape ("k <= N", "out contiguous|padded-rows|strided",
// "seq_lens rank 1|2", "finite"), for `mlacheck list`.
std::vector<std::string> contract_terms(const std::string& op);
// The same terms, each with what it means in case keys or in words (a declaration's relaxation):
// one line each in `mlacheck list --contract-terms`.
std::vector<std::pair<std::string, std::string>> contract_term_lines(const std::string& op);

// The case keys the op's terms stand for (for the catalogue test: each must be a key the op's case
// readers read).
std::vector<std::string> contract_term_keys(const std::string& op);

}  // namespace mlacheck
