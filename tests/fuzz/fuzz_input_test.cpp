// Tests of fuzz/fuzz_input.h: every target's inputs decode deterministically, a decoded case
// encodes back to bytes that decode to the same case, and the case rules refuse few inputs.
#include "fuzz/fuzz_input.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>

#include "core/contract.h"
#include "core/error.h"
#include "kernels/registry.h"
#include "properties/property_registry.h"
#include "properties/topk_gen.h"
#include "kernels/topk.h"

namespace mlacheck {
namespace {

// Random inputs: short ones mostly, as libFuzzer's are; bytes skewed small, as the codec reads.
std::string random_input(std::mt19937_64& rng) {
  const size_t n = std::uniform_int_distribution<size_t>(0, 200)(rng);
  std::string s(n, '\0');
  for (char& ch : s) ch = static_cast<char>(rng() % 4 == 0 ? rng() % 256 : rng() % 16);
  return s;
}

constexpr int kInputs = 300;

// What each target's rules refuse: printed for docs/fuzzing.md, bounded so a parse function that stops
// drawing constructively (a count not exact, a range not dependent) is noticed.
TEST(FuzzInput, EveryTargetDecodesRoundTripsAndRefusesFew) {
  for (const FuzzTarget& target : fuzz_targets()) {
    std::mt19937_64 rng(20261121);
    int refused = 0;
    std::string first_refusal;
    for (int i = 0; i < kInputs; ++i) {
      const std::string input = random_input(rng);
      FuzzCase fc;
      try {
        fc = decode_fuzz_input(target, input, "", "");
      } catch (const Error& e) {
        ++refused;
        if (first_refusal.empty()) first_refusal = e.what();
        EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
        continue;
      }
      const std::string text = fc.text.format();
      // Deterministic: the same bytes decode to the same case.
      EXPECT_EQ(decode_fuzz_input(target, input, "", "").text.format(), text) << target.name;
      // Round trip: the case encodes to bytes that decode to it.
      const std::string bytes = encode_fuzz_input(text);
      const FuzzCase back = decode_fuzz_input(target, bytes, "", "");
      ASSERT_FALSE(back.from_text);
      EXPECT_EQ(back.text.format(), text) << target.name << ": input " << i;
      // The text itself is an input too (a case file in the corpus), read as text.
      const FuzzCase as_text = decode_fuzz_input(target, text, "", "");
      EXPECT_TRUE(as_text.from_text);
      EXPECT_EQ(as_text.property, fc.property);
    }
    std::printf("%-22s %3d of %d random inputs refused%s%s\n", target.name.c_str(), refused, kInputs,
                first_refusal.empty() ? "" : "; first: ", first_refusal.c_str());
    EXPECT_LE(refused, kInputs / 2) << target.name << ": first refusal: " << first_refusal;
  }
}

// Every "key word" pair of a case, sorted.
std::vector<std::string> words_by_key(const CaseText& c) {
  std::vector<std::string> out;
  std::istringstream in(c.format());
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ws(line);
    std::string key, w;
    ws >> key;
    int i = 0;
    while (ws >> w) out.push_back(key + "[" + std::to_string(i++) + "] " + w);
    if (i == 0) out.push_back(key + " (empty)");
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Every case file in corpus/ (seeds and regressions) encodes to bytes that decode to the same case:
// what `mlacheck fuzz` feeds the harnesses is what the files say.
// Random drawing, fuzz decoding and shrinking stay inside an implementation's contract. The
// shrinker (tools/suite_runner.cpp) makes its candidates from a failing input's bytes, a chunk
// removed or zeroed, and decodes each through decode_fuzz_input as the fuzzer does: every such
// candidate, and every random input, must decode to a case the contract's own reader accepts.
TEST(FuzzInput, DecodedAndShrunkInputsStayInsideTheContract) {
  struct Leg {
    const char* target;
    const char* impl;
    const char* contract;
  };
  const Leg legs[] = {
      {"topk_decode", "topk_decode@ref", "k <= 64\ncols <= 300\nfinite\nseq_lens rank 1\nout contiguous\nties any"},
      {"topk_to_global", "topk_to_global@ref", "k = 128\nseq_lens >= 1\nlocals one-of in-range\nglobal contiguous"},
      {"mla_decode", "mla_decode@ref", "q_len = 1\nseq_lens >= 1\nheads >= 2\nq dtype bf16\nprecision p bf16"},
      {"pack_decode", "pack_decode@ref", "dtype dtype fp8_e4m3\npadding any\ntokens contiguous"},
      {"decode_metadata", "decode_metadata@ref", "table_cols >= table_width\nnext_n >= 2\nblock_table contiguous"},
      {"topk_prefill", "topk_prefill@ref", "row_stride <= 1000000000\nk <= 512\nshort_rows any-order"},
  };
  for (const Leg& leg : legs) {
    SCOPED_TRACE(leg.impl);
    const FuzzTarget& target = find_fuzz_target(leg.target);
    kernels::registry().set_contract(leg.impl, parse_contract(leg.target, leg.contract));
    std::mt19937_64 rng(20261129);
    int decoded = 0, shrunk = 0;
    const auto inside = [&](const std::string& input, int& count) {
      FuzzCase fc;
      try {
        fc = decode_fuzz_input(target, input, leg.impl, "host");
      } catch (const Error&) {
        return;  // refused by the case rules: nothing runs
      }
      ++count;
      const std::string why = outside_contract(fc.text, leg.impl);
      EXPECT_EQ(why, "") << fc.text.format();
    };
    for (int i = 0; i < 25; ++i) {
      const std::string input = random_input(rng);
      inside(input, decoded);
      // The shrinker's candidates: a chunk removed, or zeroed, at every size from half down.
      for (size_t chunk = std::max<size_t>(1, input.size() / 2); chunk >= 1 && !input.empty(); chunk /= 2) {
        const size_t at = rng() % input.size();
        std::string removed = input, zeroed = input;
        removed.erase(at, chunk);
        for (size_t j = at; j < std::min(input.size(), at + chunk); ++j) zeroed[j] = 0;
        inside(removed, shrunk);
        inside(zeroed, shrunk);
        if (chunk == 1) break;
      }
    }
    kernels::registry().set_contract(leg.impl, Contract{});
    EXPECT_GT(decoded, 8) << "too few inputs decode to a case";
    EXPECT_GT(shrunk, 50) << "too few shrunk inputs decode to a case";
  }
}

// clean_indices (sparse_mla_decode): every case drawn from fuzz bytes inside the contract holds only
// -1 and slots of its pages, where cases drawn outside it hold other negatives and slots past the
// cache too (so the check below can see the difference).
TEST(FuzzInput, CleanIndicesDrawOnlyMinusOneAndSlotsOfTheCache) {
  const FuzzTarget& target = find_fuzz_target("sparse_mla_decode");
  const auto count = [&](bool clean, int& cases, int& other_invalid) {
    kernels::registry().set_contract("sparse_mla_decode@ref",
                                     clean ? parse_contract("sparse_mla_decode", "clean_indices") : Contract{});
    std::mt19937_64 rng(20261206);
    for (int i = 0; i < 300; ++i) {
      FuzzCase fc;
      try {
        fc = decode_fuzz_input(target, random_input(rng), "sparse_mla_decode@ref", "host");
      } catch (const Error&) {
        continue;  // refused by the case rules
      }
      if (fc.property->name == "sparse_mla_decode.far_slots") continue;
      ++cases;
      std::map<std::string, std::string> line;  // key -> the rest of its line
      std::istringstream text(fc.text.format());
      for (std::string l; std::getline(text, l);) line[l.substr(0, l.find(' '))] = l.substr(l.find(' ') + 1);
      const int64_t slots =
          (std::stoll(line["num_blocks"]) - (line.count("block_base") ? std::stoll(line["block_base"]) : 0)) *
          std::stoll(line["page"]);
      std::istringstream entries(line["indices"]);
      for (int64_t e = 0; entries >> e;) other_invalid += e != -1 && (e < 0 || e >= slots);
    }
    kernels::registry().set_contract("sparse_mla_decode@ref", Contract{});
  };
  int cases = 0, other = 0, free_cases = 0, free_other = 0;
  count(true, cases, other);
  count(false, free_cases, free_other);
  EXPECT_GT(cases, 50);
  EXPECT_EQ(other, 0) << "an entry other than -1 and the cache's slots, drawn under clean_indices";
  EXPECT_GT(free_other, 0) << "without the contract no case held another invalid entry: the check sees nothing";
}

// The catalogue of contract terms against the case readers: every key a term of an op stands for
// (core/contract.h) is a key that the op's readers write into its cases (sub-case keys "c0.heads"
// count as "heads"), so no contract clause names a key nothing reads and silently limits nothing.
// A pattern ("values_*") stands for every key with its prefix: at least one must occur.
bool term_key_held(const std::string& key, const std::set<std::string>& keys) {
  if (key.empty() || key.back() != '*') return keys.count(key) > 0;
  const std::string prefix = key.substr(0, key.size() - 1);
  return std::any_of(keys.begin(), keys.end(), [&](const std::string& k) { return k.rfind(prefix, 0) == 0; });
}

TEST(FuzzInput, EveryContractTermKeyIsAKeyTheOpsCasesHold) {
  std::map<std::string, std::set<std::string>> seen;  // op -> keys of its decoded cases
  // A target's inputs are decoded until every term key of its op is held (then more inputs change
  // nothing this test asks), or 5 x kInputs of them: a key no case holds still costs them all.
  const auto all_held = [&](const std::string& op) {
    const std::vector<std::string> keys = contract_term_keys(op);
    return std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return term_key_held(k, seen[op]); });
  };
  for (const FuzzTarget& target : fuzz_targets()) {
    std::mt19937_64 rng(20261124);
    for (int i = 0; i < 5 * kInputs && !(i % 50 == 0 && i > 0 && all_held(target.op)); ++i) {
      FuzzCase fc;
      try {
        fc = decode_fuzz_input(target, random_input(rng), "", "");
      } catch (const Error&) {
        continue;
      }
      std::istringstream lines(fc.text.format());
      for (std::string line; std::getline(lines, line);) {
        if (line.empty() || line[0] == '#') continue;
        const std::string key = line.substr(0, line.find(' '));
        seen[target.op].insert(key.substr(key.rfind('.') + 1));
      }
    }
  }
  int checked = 0;
  for (const auto& [op, keys] : seen) {
    for (const std::string& key : contract_term_keys(op)) {
      ++checked;
      EXPECT_TRUE(term_key_held(key, keys)) << op << ": a contract term stands for key '" << key
                                   << "', which no decoded case of the op holds";
    }
  }
  EXPECT_GT(checked, 10);
}

// Issue 45: the top-k fuzz seeds (corpus/topk_decode, corpus/topk_prefill: what `mlacheck fuzz`
// starts from and what check's seed stage runs) bring every pattern to a long row (past the
// short-row maximum: the radix passes) and to a row longer than k at k = 2048 (the fast path), in
// decode and in prefill. (ctest's generators: TopkCoverage in tests/kernels/topk_test.cpp.)
TEST(FuzzInput, TheTopkSeedsBringEveryPatternToTheLongRowsAndTheFastPath) {
  namespace fs = std::filesystem;
  std::set<std::string> seen;  // "decode long nan", "prefill k2048 huge", ...
  for (const char* family : {"topk_decode", "topk_prefill"}) {
    for (const auto& f : fs::directory_iterator(std::string(MLACHECK_SOURCE_DIR "/corpus/") + family)) {
      std::ifstream in(f.path());
      std::ostringstream text;
      text << in.rdbuf();
      const CaseText c = CaseText::parse(text.str());
      if (c.word("property").find("far_rows") != std::string::npos) continue;  // a reader of their own
      const TopkCase t = topk_from_text(c);
      const std::vector<int64_t> n = topk_row_lengths(t);
      for (size_t r = 0; r < n.size(); ++r) {
        const std::string pattern = topk_pattern_names()[static_cast<size_t>(t.patterns[r])];
        const std::string where = std::string(t.prefill() ? "prefill " : "decode ");
        if (n[r] > kernels::kTopkShortRowMaxLen && n[r] > t.k) seen.insert(where + "long " + pattern);
        if (t.k == kernels::kTopkFastK && n[r] > t.k) seen.insert(where + "k2048 " + pattern);
      }
    }
  }
  std::string missing;
  for (const char* where : {"decode ", "prefill "}) {
    for (const char* path : {"long ", "k2048 "}) {
      for (const char* pattern : topk_pattern_names()) {
        if (!seen.count(std::string(where) + path + pattern)) missing += std::string(" ") + where + path + pattern + ";";
      }
    }
  }
  EXPECT_EQ(missing, "") << "(no seed row of that pattern on that path)";
}

TEST(FuzzInput, EveryCorpusCaseEncodesToItself) {
  namespace fs = std::filesystem;
  int n = 0;
  for (const auto& dir : fs::directory_iterator(MLACHECK_SOURCE_DIR "/corpus")) {
    if (!dir.is_directory()) continue;
    const std::string name = dir.path().filename().string();
    if (name == "case_text" || name == "view_reshape") continue;  // the parser's and the views' own inputs
    for (const auto& f : fs::directory_iterator(dir.path())) {
      if (f.path().extension() != ".case") continue;
      std::ifstream in(f.path());
      std::ostringstream text;
      text << in.rdbuf();
      const CaseText c = CaseText::parse(text.str());
      const FuzzTarget& target = fuzz_target_of(property_registry().find(c.word("property")));
      if (name != "regressions") {
        EXPECT_EQ(target.name, name) << f.path() << " lies in another target's folder";
      }
      const FuzzCase as_text = decode_fuzz_input(target, text.str(), "", "");
      const FuzzCase as_bytes = decode_fuzz_input(target, encode_fuzz_input(text.str()), "", "");
      EXPECT_FALSE(as_bytes.from_text);
      EXPECT_EQ(as_bytes.property, as_text.property) << f.path();
      // Same keys and values (the decoded text lists them in the parse's order, and prints a real
      // in its shortest form: 0.0721 for 0.072099999999999997).
      std::vector<std::string> a = words_by_key(as_text.text), b = words_by_key(as_bytes.text);
      ASSERT_EQ(a.size(), b.size()) << f.path();
      for (size_t i = 0; i < a.size(); ++i) {
        const bool same_real = std::strtod(a[i].c_str(), nullptr) == std::strtod(b[i].c_str(), nullptr) &&
                               a[i].find_first_of("0123456789") != std::string::npos;
        EXPECT_TRUE(a[i] == b[i] || same_real) << f.path() << ": " << a[i] << " vs " << b[i];
      }
      ++n;
    }
  }
  EXPECT_GT(n, 100);
}

// case_keys reads an op's keys from its schemas: every key of every corpus case of the op is
// among them (the corpus holds each property's seeds and the regressions), and no header key is.
TEST(FuzzInput, CaseKeysHoldEveryKeyOfTheCorpus) {
  namespace fs = std::filesystem;
  std::map<std::string, std::set<std::string>> keys;
  int files = 0;
  for (const auto& dir : fs::recursive_directory_iterator(MLACHECK_SOURCE_DIR "/corpus")) {
    if (dir.path().extension() != ".case") continue;
    const std::string folder = dir.path().parent_path().filename().string();
    if (folder == "case_text" || folder == "view_reshape") continue;
    std::ifstream in(dir.path());
    std::ostringstream text;
    text << in.rdbuf();
    const CaseText c = CaseText::parse(text.str());
    const std::string op = property_registry().find(c.word("property")).op;
    if (!keys.count(op)) keys[op] = case_keys(op);
    std::istringstream lines(text.str());
    std::string line;
    while (std::getline(lines, line)) {
      const std::string key = line.substr(0, line.find(' '));
      if (line.empty() || line[0] == '#' || key == "property" || key == "impl" || key == "backend") continue;
      if (key == kMaxMbKey || key == kCaseTimeoutKey) continue;  // check's notes for repro, not the case's
      EXPECT_TRUE(keys[op].count(key)) << dir.path() << ": '" << key << "' is not among " << op << "'s case keys";
    }
    ++files;
  }
  EXPECT_GT(files, 100);
  for (const auto& [op, k] : keys) {
    EXPECT_FALSE(k.count("impl") || k.count("property") || k.count("backend")) << op;
    EXPECT_GE(k.size(), 3u) << op;
  }
  EXPECT_TRUE(case_keys("sparse_mla_decode").count("block_base")) << "the far cases' key";
  EXPECT_TRUE(case_keys("no_such_op").empty());
}

}  // namespace
}  // namespace mlacheck
