// Contracts: the op terms and the clause parser (core/contract.h).
#include "core/contract.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>

#include "core/ops.h"

namespace mlacheck {

namespace {

// ---- the terms of each op ----------------------------------------------------------------------
//
// A term stands for limits on case keys, written in a small notation: items separated by spaces,
// each `key=N` (the value is N), `key<=N` / `key>=N` (N a number or another key), `key=w1,w2` (the
// key's words), `key:finite` (its floats are finite). Alternatives (a layout's levels, a rank's
// values) are separated by '|', each "name: items".

enum class TermKind { kQuantity, kLayout, kRank, kDtype, kFlag, kPrecision, kDeclaration };

struct Term {
  const char* op;
  const char* name;
  TermKind kind;
  const char* spec;  // kQuantity: the key; kDtype: "key: word word"; kPrecision, kDeclaration: the words; others:
                     // alternatives or items
  const char* note = nullptr;  // what a declaration or flag means, in words (`mlacheck list --contract-terms`)
};

// The formats a precision clause may name, roughest last: the values an implementation's products
// take ("precision p bf16": P is rounded to bf16 before P.V). The oracles' slack follows them
// (docs/ops.md section 7, "Declared precision").
#define MLA_PRECISIONS "fp32 tf32 bf16"
// P alone may also be rounded to fp8 e4m3 (FlashMLA's fp8 dense decode feeds P.V's fp8 tensor-core
// product with P as e4m3): a relative 2^-4, and 2^-10 absolute where e4m3 is subnormal.
#define MLA_P_PRECISIONS "fp32 tf32 bf16 fp8"
// Q.K's accumulator: fp22 (13 fraction bits) is Hopper's fp8 tensor cores', which FlashMLA's fp8 dense
// decode keeps for all 576 dims (docs/ops.md 7).
#define MLA_QK_NOTE "qk is each score q . K as the kernel accumulates it (fp22: 13 fraction bits, as Hopper's fp8 tensor cores keep)"

#define MLA_FINITE_TOPK_NOTE "no NaN, -inf or extreme values in the rows: the finite row patterns only"
#define MLA_SHORT_ROWS_NOTE                                                                              \
  "any-order: a row of n <= k holds each of [0, n) once and -1 elsewhere, in any order (the spec: [0, n) in " \
  "order, then -1), for a caller that reads rows as sets"
#define MLA_TIES_NOTE                                                                                       \
  "any: among values equal to the k-th, a launch may choose differently from the last; a repeated launch is " \
  "judged alone (an admissible top-k), not against the first one's set"

#define MLA_NEG_INF_NOTE                                                                                     \
  "masked: the logits carry -inf past each row's length (the caller's logits kernel writes it), and -inf means " \
  "no candidate: a row with fewer than k values above -inf fills the rest with -1 or -inf indices"

// The words a top-k row pattern may take when inputs are finite (no nan, neg-inf, extremes).
#define MLA_FINITE_TOPK "patterns=distinct,few-values,shared-high-bits,all-equal,signed-zeros,negative,huge,tiny,zeros values_*:finite"

const Term kTerms[] = {
    // the decode metadata builder
    {"decode_metadata", "next_n", TermKind::kQuantity, "next_n"},
    {"decode_metadata", "decode_lens", TermKind::kQuantity, "decode_lens"},
    {"decode_metadata", "seq_lens", TermKind::kQuantity, "seq_lens"},
    {"decode_metadata", "table_width", TermKind::kQuantity, "table_width"},  // the builder's block table columns
    {"decode_metadata", "table_cols", TermKind::kQuantity, "table_cols"},    // the source table's columns
    {"decode_metadata", "block_table", TermKind::kLayout, "contiguous: table_row_pad=0 table_offset=0 | padded-rows:"},
    // top-k per row, decode and prefill
    {"topk_decode", "k", TermKind::kQuantity, "k"},
    {"topk_decode", "rows", TermKind::kQuantity, "rows"},
    {"topk_decode", "cols", TermKind::kQuantity, "cols"},
    {"topk_decode", "next_n", TermKind::kQuantity, "next_n"},
    {"topk_decode", "seq_lens", TermKind::kQuantity, "seq_lens"},
    {"topk_decode", "seq_lens", TermKind::kRank, "1: lengths=decode-1d | 2: lengths=decode-2d"},
    // the row stride of far rows (a kernel that takes stride(0) as a 32-bit int bounds it)
    {"topk_decode", "row_stride", TermKind::kQuantity, "logits_row_stride"},
    {"topk_decode", "logits", TermKind::kLayout,
     "contiguous: logits_row_pad=0 logits_col_stride=1 logits_row_stride=0 | padded-rows: logits_col_stride=1"},
    {"topk_decode", "out", TermKind::kLayout, "contiguous: out_row_pad=0 | padded-rows:"},
    {"topk_decode", "finite", TermKind::kFlag, MLA_FINITE_TOPK, MLA_FINITE_TOPK_NOTE},
    // "short_rows any-order": a row of n <= k may hold [0, n) in any order (a caller reading rows as
    // sets); "ties any": the choice among equal values may change from launch to launch (docs/ops.md 3)
    {"topk_decode", "short_rows", TermKind::kDeclaration, "ordered any-order", MLA_SHORT_ROWS_NOTE},
    {"topk_decode", "ties", TermKind::kDeclaration, "fixed any", MLA_TIES_NOTE},
    {"topk_decode", "neg_inf", TermKind::kDeclaration, "candidate masked", MLA_NEG_INF_NOTE},
    {"topk_prefill", "k", TermKind::kQuantity, "k"},
    {"topk_prefill", "rows", TermKind::kQuantity, "rows"},
    {"topk_prefill", "cols", TermKind::kQuantity, "cols"},
    {"topk_prefill", "ks", TermKind::kQuantity, "ks"},
    {"topk_prefill", "ke", TermKind::kQuantity, "ke"},
    {"topk_prefill", "row_stride", TermKind::kQuantity, "logits_row_stride"},
    {"topk_prefill", "logits", TermKind::kLayout,
     "contiguous: logits_row_pad=0 logits_col_stride=1 logits_row_stride=0 | padded-rows: logits_col_stride=1"},
    {"topk_prefill", "out", TermKind::kLayout, "contiguous: out_row_pad=0 | padded-rows:"},
    {"topk_prefill", "finite", TermKind::kFlag, MLA_FINITE_TOPK, MLA_FINITE_TOPK_NOTE},
    {"topk_prefill", "short_rows", TermKind::kDeclaration, "ordered any-order", MLA_SHORT_ROWS_NOTE},
    {"topk_prefill", "ties", TermKind::kDeclaration, "fixed any", MLA_TIES_NOTE},
    {"topk_prefill", "neg_inf", TermKind::kDeclaration, "candidate masked", MLA_NEG_INF_NOTE},
    // paged indexer logits
    {"paged_mqa_logits", "batch", TermKind::kQuantity, "batch"},
    {"paged_mqa_logits", "next_n", TermKind::kQuantity, "next_n"},
    {"paged_mqa_logits", "heads", TermKind::kQuantity, "heads"},
    {"paged_mqa_logits", "head_dim", TermKind::kQuantity, "head_dim"},
    {"paged_mqa_logits", "block_size", TermKind::kQuantity, "block_size"},
    {"paged_mqa_logits", "max_context_len", TermKind::kQuantity, "max_context_len"},
    {"paged_mqa_logits", "context_lens", TermKind::kQuantity, "context_lens"},
    {"paged_mqa_logits", "context_lens", TermKind::kRank, "1: lens_layout=1d | 2: lens_layout=2d"},
    {"paged_mqa_logits", "context_lens", TermKind::kLayout, "contiguous: lens_stride=1 | padded-rows: lens_stride=1"},
    {"paged_mqa_logits", "logits", TermKind::kLayout, "contiguous: logits_stride<=max_context_len | padded-rows:"},
    {"paged_mqa_logits", "block_table", TermKind::kLayout, "contiguous: table_row_pad=0 | padded-rows:"},
    {"paged_mqa_logits", "q_offset", TermKind::kQuantity, "q_offset"},              // bytes before q
    {"paged_mqa_logits", "weights_offset", TermKind::kQuantity, "weights_offset"},  // bytes before the weights
    {"paged_mqa_logits", "scales", TermKind::kDtype, "scales: fp32 ue8m0"},
    // each q_h . k as the kernel accumulates it: fp22 (13 fraction bits) is Hopper's fp8 tensor-core
    // accumulator, which DeepGEMM's sm90 kernel keeps for all of head_dim (docs/ops.md 2.1)
    {"paged_mqa_logits", "qk", TermKind::kPrecision, "fp32 fp22",
     "qk is each q_h . k as the kernel accumulates it (fp22: 13 fraction bits, as Hopper's fp8 tensor cores keep)"},
    // ragged indexer logits
    {"mqa_logits", "rows", TermKind::kQuantity, "rows"},
    {"mqa_logits", "keys", TermKind::kQuantity, "keys_count"},
    {"mqa_logits", "heads", TermKind::kQuantity, "heads"},
    {"mqa_logits", "head_dim", TermKind::kQuantity, "head_dim"},
    {"mqa_logits", "k", TermKind::kLayout, "contiguous: k_stride<=head_dim | padded-rows:"},
    {"mqa_logits", "q_offset", TermKind::kQuantity, "q_offset"},
    {"mqa_logits", "weights_offset", TermKind::kQuantity, "weights_offset"},
    {"mqa_logits", "logits", TermKind::kLayout, "contiguous: logits_stride<=keys_count | padded-rows:"},
    {"mqa_logits", "k_scale", TermKind::kLayout, "contiguous: scale_stride=1 | padded-rows: scale_stride=1"},
    {"mqa_logits", "ks", TermKind::kLayout, "contiguous: range_stride=1 | padded-rows: range_stride=1"},
    {"mqa_logits", "scales", TermKind::kDtype, "scales: fp32 ue8m0"},
    // pack / unpack of decode queries
    {"pack_decode", "next_n", TermKind::kQuantity, "next_n"},
    {"pack_decode", "decode_lens", TermKind::kQuantity, "decode_lens"},
    {"pack_decode", "tokens", TermKind::kLayout, "contiguous: token_row_pad=0 | padded-rows:"},
    {"pack_decode", "packed", TermKind::kLayout, "contiguous: packed_row_pad=0 | padded-rows:"},
    {"pack_decode", "dtype", TermKind::kDtype, "dtype: fp32 bf16 fp8_e4m3 int32"},
    // "padding any": the padding slots' values are the caller's to mask (docs/ops.md, pack_decode)
    {"pack_decode", "padding", TermKind::kDeclaration, "zero any",
     "any: the padding slots may hold anything (the spec says 0), the caller masks them; token slots and writes "
     "past the slots are still checked"},
    {"unpack_decode", "next_n", TermKind::kQuantity, "next_n"},
    {"unpack_decode", "decode_lens", TermKind::kQuantity, "decode_lens"},
    {"unpack_decode", "tokens", TermKind::kLayout, "contiguous: token_row_pad=0 | padded-rows:"},
    {"unpack_decode", "packed", TermKind::kLayout, "contiguous: packed_row_pad=0 | padded-rows:"},
    {"unpack_decode", "dtype", TermKind::kDtype, "dtype: fp32 bf16 fp8_e4m3 int32"},
    // top-k indices to global slots
    {"topk_to_global", "k", TermKind::kQuantity, "k"},
    {"topk_to_global", "page", TermKind::kQuantity, "page"},
    {"topk_to_global", "seq_lens", TermKind::kQuantity, "seq_lens"},
    {"topk_to_global", "decode_lens", TermKind::kQuantity, "decode_lens"},
    {"topk_to_global", "local", TermKind::kLayout, "contiguous: local_row_pad=0 | padded-rows:"},
    {"topk_to_global", "global", TermKind::kLayout, "contiguous: global_row_pad=0 in_place=0 | padded-rows:"},
    {"topk_to_global", "block_table", TermKind::kLayout, "contiguous: table_row_pad=0 | padded-rows:"},
    // sparse MLA decode
    {"sparse_mla_decode", "batch", TermKind::kQuantity, "batch"},
    {"sparse_mla_decode", "s_q", TermKind::kQuantity, "s_q"},
    {"sparse_mla_decode", "heads", TermKind::kQuantity, "heads"},
    {"sparse_mla_decode", "topk", TermKind::kQuantity, "topk"},
    {"sparse_mla_decode", "page", TermKind::kQuantity, "page"},
    {"sparse_mla_decode", "kv_cache", TermKind::kLayout, "contiguous: token_stride=656 | padded-rows:"},
    {"sparse_mla_decode", "scales", TermKind::kDtype, "scale_format: fp32 ue8m0"},
    {"sparse_mla_decode", "finite", TermKind::kFlag, "attn_sink:finite", "no NaN or infinite attention sink"},
    {"sparse_mla_decode", "batch_rows", TermKind::kDeclaration, "bitwise rounding",
     "rounding: a request's out and lse may differ from its rows launched alone by rounding (a split-KV schedule "
     "that depends on the batch), each within the declared precision's slack of the exact value; the spec: bit for bit"},
    {"sparse_mla_decode", "clean_indices", TermKind::kFlag, "invalid=minus-one",
     "every entry is -1 or a slot of the cache: no other negative, none past the cache (a caller whose top-k and "
     "slot conversion produce nothing else)"},
    {"sparse_mla_decode", "lse", TermKind::kDeclaration, "written none",
     "none: the implementation returns no lse (SGLang's Triton sparse decode returns out alone); out is checked as "
     "before and every lse element must be left unwritten (the output poison stays); the spec: lse written"},
    {"sparse_mla_decode", "q", TermKind::kPrecision, MLA_PRECISIONS},   // q in Q.K
    {"sparse_mla_decode", "kv", TermKind::kPrecision, MLA_PRECISIONS},  // K and V (decoded with their tile scales)
    {"sparse_mla_decode", "p", TermKind::kPrecision, MLA_P_PRECISIONS},   // the probabilities in P.V
    // dense MLA decode
    {"mla_decode", "batch", TermKind::kQuantity, "batch"},
    {"mla_decode", "q_len", TermKind::kQuantity, "q_len"},
    {"mla_decode", "heads", TermKind::kQuantity, "heads"},
    {"mla_decode", "page", TermKind::kQuantity, "page"},
    {"mla_decode", "seq_lens", TermKind::kQuantity, "seq_lens"},
    {"mla_decode", "num_splits", TermKind::kQuantity, "num_splits"},
    {"mla_decode", "kv_cache", TermKind::kLayout, "contiguous: token_stride=576 block_pad=0 | padded-rows:"},
    {"mla_decode", "block_table", TermKind::kLayout, "contiguous: table_row_pad=0 | padded-rows:"},
    {"mla_decode", "q", TermKind::kDtype, "q_dtype: bf16 fp8"},
    {"mla_decode", "kv_cache", TermKind::kDtype, "kv_dtype: bf16 fp8"},
    {"mla_decode", "q", TermKind::kPrecision, MLA_PRECISIONS},   // q (times q_scale) in Q.K
    {"mla_decode", "kv", TermKind::kPrecision, MLA_PRECISIONS},  // K and V (times k_scale) in Q.K and P.V
    {"mla_decode", "p", TermKind::kPrecision, MLA_P_PRECISIONS},   // the probabilities in P.V
    {"mla_decode", "qk", TermKind::kPrecision, "fp32 fp22", MLA_QK_NOTE},
    // the indexer's K-cache gather (docs/ops.md 2.4): the cache's block stride is block_size x
    // (head_dim + 4) rounded up to 4, plus block_pad 4-byte words; the table's row stride table_cols +
    // table_row_pad entries; dst_k's row stride head_dim + dst_row_pad bytes; T = cu_seq_lens[B] +
    // spare_rows
    {"indexer_k_cache_gather", "head_dim", TermKind::kQuantity, "head_dim"},
    {"indexer_k_cache_gather", "block_size", TermKind::kQuantity, "block_size"},
    {"indexer_k_cache_gather", "block_pad", TermKind::kQuantity, "block_pad"},
    {"indexer_k_cache_gather", "seq_lens", TermKind::kQuantity, "seq_lens"},
    {"indexer_k_cache_gather", "table_cols", TermKind::kQuantity, "table_cols"},
    {"indexer_k_cache_gather", "table_row_pad", TermKind::kQuantity, "table_row_pad"},
    {"indexer_k_cache_gather", "dst_row_pad", TermKind::kQuantity, "dst_row_pad"},
    {"indexer_k_cache_gather", "spare_rows", TermKind::kQuantity, "spare_rows"},
    {"indexer_k_cache_gather", "kv_cache", TermKind::kLayout, "contiguous: block_pad=0 cache_lead=0 | padded-rows:"},
    {"indexer_k_cache_gather", "block_table", TermKind::kLayout, "contiguous: table_row_pad=0 table_lead=0 | padded-rows:"},
    {"indexer_k_cache_gather", "dst_k", TermKind::kLayout, "contiguous: dst_row_pad=0 dst_lead=0 | padded-rows:"},
    // the MLA decode impl: its calls' and replays' precision, as mla_decode's
    {"mla_decode_impl", "q", TermKind::kPrecision, MLA_PRECISIONS},
    {"mla_decode_impl", "kv", TermKind::kPrecision, MLA_PRECISIONS},
    {"mla_decode_impl", "p", TermKind::kPrecision, MLA_P_PRECISIONS},
    {"mla_decode_impl", "qk", TermKind::kPrecision, "fp32 fp22", MLA_QK_NOTE},
};
#undef MLA_FINITE_TOPK
#undef MLA_FINITE_TOPK_NOTE
#undef MLA_SHORT_ROWS_NOTE
#undef MLA_TIES_NOTE
#undef MLA_NEG_INF_NOTE
#undef MLA_PRECISIONS

const char* kind_name(TermKind k) {
  switch (k) {
    case TermKind::kQuantity: return "integer";
    case TermKind::kLayout: return "layout";
    case TermKind::kRank: return "rank";
    case TermKind::kDtype: return "dtype";
    case TermKind::kFlag: return "flag";
    case TermKind::kPrecision: return "precision";
    case TermKind::kDeclaration: return "declaration";
  }
  return "?";
}

std::vector<const Term*> terms_of(const std::string& op) {
  std::vector<const Term*> out;
  for (const Term& t : kTerms) {
    if (op == t.op) out.push_back(&t);
  }
  return out;
}

std::string trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return std::string(s.substr(a, b - a));
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(trim(cur));
  return out;
}

std::vector<std::string> words_of(std::string_view s) {
  std::vector<std::string> out;
  std::istringstream in{std::string(s)};
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

bool parse_int(const std::string& s, int64_t& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE) return false;
  v = x;
  return true;
}

bool is_name(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_';
  }) && std::islower(static_cast<unsigned char>(s[0]));
}

// A number or a key: the bound's text.
LimitBound bound_of(const std::string& s) {
  LimitBound b;
  int64_t v = 0;
  char* end = nullptr;
  const double r = s.empty() ? 0.0 : std::strtod(s.c_str(), &end);
  if (parse_int(s, v)) {
    b.value = v;
  } else if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(r)) {
    b.real = r;
  } else {
    b.key = s;
  }
  return b;
}

// The limits of one item list of the term notation ("logits_row_pad=0 values_*:finite").
std::vector<KeyLimit> items_to_limits(std::string_view items) {
  std::vector<KeyLimit> out;
  for (const std::string& item : words_of(items)) {
    KeyLimit l;
    size_t at = 0;
    if ((at = item.find("<=")) != std::string::npos) {
      l.key = item.substr(0, at), l.hi = bound_of(item.substr(at + 2));
    } else if ((at = item.find(">=")) != std::string::npos) {
      l.key = item.substr(0, at), l.lo = bound_of(item.substr(at + 2));
    } else if ((at = item.find(":finite")) != std::string::npos) {
      l.key = item.substr(0, at), l.finite = true;
    } else if ((at = item.find('=')) != std::string::npos) {
      l.key = item.substr(0, at);
      const std::string v = item.substr(at + 1);
      int64_t n = 0;
      if (parse_int(v, n)) {
        l.lo.value = l.hi.value = n;
      } else {
        l.words = split(v, ',');
      }
    }
    out.push_back(std::move(l));
  }
  return out;
}

// The alternatives of a term's spec: "name: items | name: items".
std::map<std::string, std::string> alternatives(const char* spec) {
  std::map<std::string, std::string> out;
  for (const std::string& alt : split(spec, '|')) {
    const size_t colon = alt.find(':');
    out[trim(alt.substr(0, colon))] = colon == std::string::npos ? "" : alt.substr(colon + 1);
  }
  return out;
}

std::string joined(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string term_names(const std::string& op) {
  std::vector<std::string> names;
  for (const Term* t : terms_of(op)) {
    if (std::find(names.begin(), names.end(), t->name) == names.end()) names.push_back(t->name);
  }
  return names.empty() ? "none" : joined(names, ", ");
}

// The parser of one contract.
class ClauseParser {
 public:
  ClauseParser(const std::string& op, Contract& c) : op_(op), c_(c) {}

  void clause(const std::string& text, int n) {
    where_ = "contract of " + op_ + ", clause " + std::to_string(n) + " '" + text + "': ";
    const std::vector<std::string> w = words_of(text);
    if (w.size() == 1 && find(w[0], TermKind::kFlag)) return flag(*find(w[0], TermKind::kFlag), text);
    if (!w.empty() && find(w[0], TermKind::kDeclaration)) return declaration(*find(w[0], TermKind::kDeclaration), w, text);
    if (!w.empty() && w[0] == "precision") return precision(w, text);
    if (w.size() < 2) fail("not a clause (NAME <= N, NAME in [A, B], TENSOR LAYOUT, TENSOR rank N, TENSOR dtype D, finite, precision OPERAND FORMAT)");
    const std::string& name = w[0];
    if (w[1] == "<=" || w[1] == ">=" || w[1] == "=" || w[1] == "in") return bound(name, w, text);
    if (w[1] == "rank") return rank(name, w, text);
    if (w[1] == "dtype") return dtype(name, w, text);
    if (w[1] == "one-of") return one_of(name, w, text);
    if (w.size() == 2) return layout(name, w[1], text);
    fail("not a clause (NAME <= N, NAME in [A, B], TENSOR LAYOUT, TENSOR rank N, TENSOR dtype D, finite, precision OPERAND FORMAT)");
  }

 private:
  [[noreturn]] void fail(const std::string& why) const { throw Error(where_ + why); }

  const Term* find(const std::string& name, TermKind kind) const {
    for (const Term* t : terms_of(op_)) {
      if (name == t->name && t->kind == kind) return t;
    }
    return nullptr;
  }
  // The case key a bound's name stands for: a quantity term's key, or a key of the op's cases.
  std::string key_of(const std::string& name) const {
    if (const Term* t = find(name, TermKind::kQuantity)) return t->spec;
    if (!is_name(name)) fail("'" + name + "' is not a name");
    for (const Term* t : terms_of(op_)) {
      if (name == t->name) fail("'" + name + "' is a " + kind_name(t->kind) + " term, not a quantity");
    }
    // Any other key of the op's cases: the case readers refuse a contract on a key they never read
    // only when they run, so names that are no term are kept as given (case keys), and listed
    // apart by `mlacheck list`.
    return name;
  }

  void bound(const std::string& name, const std::vector<std::string>& w, const std::string& text) {
    KeyLimit l;
    l.key = key_of(name);
    auto value = [&](const std::string& s) {
      LimitBound b = bound_of(s);
      if (!b.value && !b.real) b.key = key_of(s);
      return b;
    };
    if (w[1] == "in") {
      // NAME in [A, B]: the words after "in" joined, then split at the comma.
      std::string rest;
      for (size_t i = 2; i < w.size(); ++i) rest += w[i];
      if (rest.size() < 5 || rest.front() != '[' || rest.back() != ']' || rest.find(',') == std::string::npos) {
        fail("a range is written [A, B]");
      }
      const std::vector<std::string> ab = split(rest.substr(1, rest.size() - 2), ',');
      if (ab.size() != 2 || ab[0].empty() || ab[1].empty()) fail("a range is written [A, B]");
      l.lo = value(ab[0]), l.hi = value(ab[1]);
    } else {
      if (w.size() != 3) fail("one value after " + w[1]);
      const LimitBound b = value(w[2]);
      if (w[1] == "<=") l.hi = b;
      if (w[1] == ">=") l.lo = b;
      if (w[1] == "=") l.lo = l.hi = b;
    }
    if (l.lo.value && l.hi.value && *l.lo.value > *l.hi.value) {
      fail("the range [" + std::to_string(*l.lo.value) + ", " + std::to_string(*l.hi.value) + "] is empty");
    }
    const auto number = [](const LimitBound& b) { return b.value ? std::optional<double>(double(*b.value)) : b.real; };
    if (number(l.lo) && number(l.hi) && *number(l.lo) > *number(l.hi)) fail("the range is empty");
    add(text, {l});
  }

  void layout(const std::string& tensor, const std::string& level, const std::string& text) {
    const Term* t = find(tensor, TermKind::kLayout);
    if (t == nullptr) fail("'" + tensor + "' has no layout terms (" + op_ + " has: " + term_names(op_) + ")");
    if (level == "strided") return add(text, {});  // anything the spec allows: no limit
    const auto alts = alternatives(t->spec);
    const auto at = alts.find(level);
    if (at == alts.end()) fail("unknown layout '" + level + "' (layouts: contiguous, padded-rows, strided)");
    add(text, items_to_limits(at->second));
  }

  void rank(const std::string& tensor, const std::vector<std::string>& w, const std::string& text) {
    const Term* t = find(tensor, TermKind::kRank);
    if (t == nullptr) fail("'" + tensor + "' has one rank in " + op_ + " (it is no rank term)");
    const auto alts = alternatives(t->spec);
    if (w.size() != 3 || !alts.count(w[2])) {
      std::vector<std::string> ranks;
      for (const auto& [r, items] : alts) ranks.push_back(r);
      fail(tensor + " has rank " + joined(ranks, " or "));
    }
    add(text, items_to_limits(alts.at(w[2])));
  }

  void dtype(const std::string& tensor, const std::vector<std::string>& w, const std::string& text) {
    const Term* t = find(tensor, TermKind::kDtype);
    if (t == nullptr) fail("'" + tensor + "' has one dtype in " + op_ + " (it is no dtype term)");
    const std::string spec = t->spec;
    const size_t colon = spec.find(':');
    const std::vector<std::string> known = words_of(spec.substr(colon + 1));
    KeyLimit l;
    l.key = spec.substr(0, colon);
    for (size_t i = 2; i < w.size(); ++i) {
      for (const std::string& d : split(w[i], ',')) {
        if (d.empty()) continue;
        if (std::find(known.begin(), known.end(), d) == known.end()) {
          fail("unknown dtype '" + d + "' (" + tensor + " takes " + joined(known, ", ") + ")");
        }
        l.words.push_back(d);
      }
    }
    if (l.words.empty()) fail("no dtype given");
    add(text, {l});
  }

  void one_of(const std::string& name, const std::vector<std::string>& w, const std::string& text) {
    KeyLimit l;
    l.key = key_of(name);
    for (size_t i = 2; i < w.size(); ++i) {
      for (const std::string& word : split(w[i], ',')) {
        if (!word.empty()) l.words.push_back(word);
      }
    }
    if (l.words.empty()) fail("one-of needs at least one word");
    add(text, {l});
  }

  void flag(const Term& t, const std::string& text) { add(text, items_to_limits(t.spec)); }

  // precision OPERAND FORMAT: a declaration of how the implementation computes, not a limit on cases.
  void precision(const std::vector<std::string>& w, const std::string& text) {
    std::vector<std::string> operands;
    for (const Term* t : terms_of(op_)) {
      if (t->kind == TermKind::kPrecision) operands.push_back(t->name);
    }
    if (operands.empty()) fail(op_ + " has no precision terms (its outputs are compared exactly or by a fixed bound)");
    if (w.size() != 3) fail("a precision clause is 'precision OPERAND FORMAT' (" + op_ + ": " + joined(operands, ", ") + ")");
    const Term* t = find(w[1], TermKind::kPrecision);
    if (t == nullptr) fail("'" + w[1] + "' is no precision operand of " + op_ + " (" + joined(operands, ", ") + ")");
    const std::vector<std::string> formats = words_of(t->spec);
    if (std::find(formats.begin(), formats.end(), w[2]) == formats.end()) {
      fail("unknown format '" + w[2] + "' (" + joined(formats, ", ") + ")");
    }
    if (c_.precision.count(w[1])) fail("the precision of " + w[1] + " is declared twice");
    c_.precision[w[1]] = w[2];
    c_.clauses.push_back(text);
  }

  // NAME WORD: what the implementation leaves to its caller (a check relaxed), not a limit on cases.
  void declaration(const Term& t, const std::vector<std::string>& w, const std::string& text) {
    const std::string name = t.name;
    const std::vector<std::string> words = words_of(t.spec);
    if (w.size() != 2 || std::find(words.begin(), words.end(), w[1]) == words.end()) {
      fail("a " + name + " clause is '" + name + " " + joined(words, "|") + "'");
    }
    if (c_.declared.count(name)) fail(name + " is declared twice");
    c_.declared[name] = w[1];
    c_.clauses.push_back(text);
  }

  void add(const std::string& text, std::vector<KeyLimit> limits) {
    c_.clauses.push_back(text);
    for (KeyLimit& l : limits) c_.limits.push_back(std::move(l));
  }

  std::string op_, where_;
  Contract& c_;
};

}  // namespace

bool KeyLimit::matches(std::string_view case_key) const {
  if (!key.empty() && key.back() == '*') {
    const std::string_view stem(key.data(), key.size() - 1);
    return case_key.substr(0, stem.size()) == stem ||
           (case_key.find('.') != std::string_view::npos &&
            case_key.substr(case_key.find('.') + 1, stem.size()) == stem);
  }
  if (case_key == key) return true;
  // A prefixed sub-case key: "c0.heads" for "heads".
  return case_key.size() > key.size() && case_key.substr(case_key.size() - key.size()) == key &&
         case_key[case_key.size() - key.size() - 1] == '.';
}

std::vector<const KeyLimit*> Contract::limits_on(std::string_view case_key) const {
  std::vector<const KeyLimit*> out;
  for (const KeyLimit& l : limits) {
    if (l.matches(case_key)) out.push_back(&l);
  }
  return out;
}

std::string Contract::describe() const { return clauses.empty() ? "the whole spec" : joined(clauses, "; "); }

double precision_unit(const std::string& format) {
  if (format == "fp22") return 0x1p-13;
  if (format == "tf32") return 0x1p-11;
  if (format == "bf16") return 0x1p-8;
  if (format == "fp8") return 0x1p-4;
  MLA_REQUIRE(format == "fp32", "precision: unknown format '", format, "' (fp32, tf32, bf16, fp8 or fp22)");
  return 0;
}

Contract parse_contract(const std::string& op, std::string_view text) {
  MLA_REQUIRE(find_op(op) != nullptr, "contract: unknown op '", op, "'");
  Contract c;
  c.op = op;
  int n = 0;
  for (const std::string& line : split(text, '\n')) {
    for (std::string clause : split(line, ';')) {
      clause = trim(clause.substr(0, clause.find('#')));  // '#' starts a comment
      if (clause.empty()) continue;
      ClauseParser(op, c).clause(clause, ++n);
    }
  }
  return c;
}

std::vector<std::string> contract_terms(const std::string& op) {
  std::vector<std::string> out;
  for (const Term* t : terms_of(op)) {
    std::string line = t->name;
    switch (t->kind) {
      case TermKind::kQuantity: line += " <= N"; break;
      case TermKind::kLayout: line += " contiguous|padded-rows|strided"; break;
      case TermKind::kRank: {
        std::vector<std::string> ranks;
        for (const auto& [r, items] : alternatives(t->spec)) ranks.push_back(r);
        line += " rank " + joined(ranks, "|");
        break;
      }
      case TermKind::kDtype: {
        const std::string spec = t->spec;
        line += " dtype " + joined(words_of(spec.substr(spec.find(':') + 1)), "|");
        break;
      }
      case TermKind::kFlag: break;
      case TermKind::kPrecision: line = "precision " + line + " " + joined(words_of(t->spec), "|"); break;
      case TermKind::kDeclaration: line += " " + joined(words_of(t->spec), "|"); break;
    }
    out.push_back(line);
  }
  return out;
}

namespace {

// "a=1 b<=c" as "a = 1, b <= c"; "" as "no limit".
std::string items_in_words(const std::string& items) {
  std::vector<std::string> out;
  for (std::string w : words_of(items)) {
    for (const char* op : {"<=", ">=", "="}) {
      const size_t at = w.find(op);
      if (at != std::string::npos) {
        w = w.substr(0, at) + " " + op + " " + w.substr(at + std::string(op).size());
        break;
      }
    }
    const size_t comma = w.find(',');
    if (comma != std::string::npos && w.find(" = ") != std::string::npos) w = w.substr(0, w.find(" = ")) + " one of " + w.substr(w.find(" = ") + 3);
    out.push_back(w);
  }
  return out.empty() ? "no limit" : joined(out, ", ");
}

}  // namespace

std::vector<std::pair<std::string, std::string>> contract_term_lines(const std::string& op) {
  const std::vector<std::string> shapes = contract_terms(op);
  std::vector<std::pair<std::string, std::string>> out;
  size_t i = 0;
  for (const Term* t : terms_of(op)) {
    std::string meaning;
    switch (t->kind) {
      case TermKind::kQuantity:
        meaning = std::string("limits the case key ") + t->spec + " (also >= N, = N, in [A, B], one-of N...)";
        break;
      case TermKind::kLayout: {
        std::vector<std::string> levels;
        for (const char* level : {"contiguous", "padded-rows"}) {
          const auto alts = alternatives(t->spec);
          const auto at = alts.find(level);
          if (at != alts.end()) levels.push_back(std::string(level) + ": " + items_in_words(at->second));
        }
        levels.push_back("strided: no limit");
        meaning = "the view's layout, at most: " + joined(levels, "; ");
        break;
      }
      case TermKind::kRank: {
        std::vector<std::string> ranks;
        for (const auto& [r, items] : alternatives(t->spec)) ranks.push_back("rank " + r + ": " + items_in_words(items));
        meaning = joined(ranks, "; ");
        break;
      }
      case TermKind::kDtype: {
        const std::string spec = t->spec;
        meaning = "the case key " + spec.substr(0, spec.find(':')) + " takes only the dtypes named";
        break;
      }
      case TermKind::kFlag: meaning = t->note ? t->note : items_in_words(t->spec); break;
      case TermKind::kPrecision:
        meaning = std::string("a declaration, no limit: ") +
                  (t->note ? t->note : t->name + std::string(" is rounded to that format where the kernel computes")) +
                  "; the oracle's slack follows (docs/ops.md 7)";
        break;
      case TermKind::kDeclaration:
        meaning = std::string("a declaration, no limit: ") + (t->note ? t->note : "");
        break;
    }
    out.emplace_back(shapes[i++], meaning);
  }
  return out;
}

std::vector<std::string> contract_term_keys(const std::string& op) {
  std::vector<std::string> keys;
  auto add = [&](const std::string& k) {
    if (!k.empty() && std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  };
  for (const Term* t : terms_of(op)) {
    if (t->kind == TermKind::kPrecision || t->kind == TermKind::kDeclaration) continue;  // no case key
    if (t->kind == TermKind::kQuantity) {
      add(t->spec);
    } else if (t->kind == TermKind::kDtype) {
      const std::string spec = t->spec;
      add(spec.substr(0, spec.find(':')));
    } else {
      for (const auto& [name, items] : t->kind == TermKind::kFlag ? std::map<std::string, std::string>{{"", t->spec}}
                                                                   : alternatives(t->spec)) {
        for (const KeyLimit& l : items_to_limits(items)) {
          add(l.key);
          if (!l.lo.key.empty()) add(l.lo.key);
          if (!l.hi.key.empty()) add(l.hi.key);
        }
      }
    }
  }
  return keys;
}

}  // namespace mlacheck
