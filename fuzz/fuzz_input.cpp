// Fuzz targets and inputs (fuzz/fuzz_input.h).
#include "fuzz/fuzz_input.h"

#include <random>
#include <sstream>

#include "core/error.h"
#include "core/ops.h"
#include "kernels/registry.h"

namespace mlacheck {

const std::vector<FuzzTarget>& fuzz_targets() {
  static const std::vector<FuzzTarget> targets = [] {
    std::vector<FuzzTarget> t;
    for (const OpInfo& op : spec_ops()) t.push_back({std::string(op.name), std::string(op.name), std::string(op.fuzz_summary)});
    return t;
  }();
  return targets;
}

const FuzzTarget& find_fuzz_target(const std::string& name) {
  std::string names;
  for (const FuzzTarget& t : fuzz_targets()) {
    if (t.name == name) return t;
    names += (names.empty() ? "" : ", ") + t.name;
  }
  throw Error("no fuzz target called '" + name + "' (there are: " + names + ")");
}

const FuzzTarget& fuzz_target_of(const PropertyEntry& property) {
  for (const FuzzTarget& t : fuzz_targets()) {
    if (t.op == property.op) return t;
  }
  throw Error("property '" + property.name + "' belongs to no fuzz target (op " + property.op + ")");
}

std::vector<const PropertyEntry*> fuzz_target_properties(const FuzzTarget& target) {
  std::vector<const PropertyEntry*> out;
  for (const PropertyEntry& p : property_registry().list()) {
    if (p.op == target.op) out.push_back(&p);
  }
  MLA_REQUIRE(!out.empty(), "fuzz target ", target.name, " has no properties");
  return out;
}

namespace {

// Marks the header keys read (a case's own keys are checked by expect_all_read).
void read_header(const CaseText& c) {
  c.word("property");
  c.word("impl");
  c.word("backend");
}

// What check saved beside a case for repro (the memory it took, a hang's case timeout): read and
// left out of the input, which decodes the case alone.
void read_repro_keys(const CaseText& c) {
  for (const char* key : {kMaxMbKey, kCaseTimeoutKey}) {
    if (c.has(key)) c.word(key);
  }
}

// A case file's text without those keys' lines (the encoder reads every key it is given).
std::string without_repro_keys(std::string_view case_file) {
  std::string out;
  size_t at = 0;
  while (at < case_file.size()) {
    size_t end = case_file.find('\n', at);
    if (end == std::string_view::npos) end = case_file.size();
    const std::string_view line = case_file.substr(at, end - at);
    bool drop = false;
    for (const char* key : {kMaxMbKey, kCaseTimeoutKey}) {
      const std::string k = std::string(key) + " ";
      drop = drop || line.substr(0, k.size()) == k;
    }
    if (!drop) out.append(line).append("\n");
    at = end + 1;
  }
  return out;
}

// A case file of one of target's properties, or null.
const PropertyEntry* text_case_property(const FuzzTarget& target, std::string_view input, CaseText& out) {
  // Cheap first: a case file has a line "property P", wherever it is (harness/case_text.h).
  if (!CaseText::names_a_property(input)) return nullptr;
  try {
    out = CaseText::parse(input);
    if (!out.has("property")) return nullptr;
    const PropertyEntry& p = property_registry().find(out.word("property"));
    return p.op == target.op ? &p : nullptr;
  } catch (const Error&) {
    return nullptr;
  }
}

// The contract of impl, when it is a registered implementation (otherwise run_case_text refuses it).
std::shared_ptr<const Contract> contract_of(const std::string& impl) {
  return kernels::registry().contains(impl) ? kernels::registry().contract(impl) : nullptr;
}

}  // namespace

FuzzCase decode_fuzz_input(const FuzzTarget& target, std::string_view input, const std::string& impl,
                           const std::string& backend) {
  FuzzCase fc;
  if (const PropertyEntry* p = text_case_property(target, input, fc.text)) {
    fc.property = p;
    fc.from_text = true;
    if (!impl.empty()) fc.text.set("impl", impl);
    if (!backend.empty()) fc.text.set("backend", backend);
    read_header(fc.text);
    read_repro_keys(fc.text);
    fc.text.within(contract_of(fc.text.word("impl")));
    // A refusal names the line of the key it is about ("case line 12: 'k' is 0, outside [1, 8]").
    try {
      p->parse(fc.text);
    } catch (const OutsideContract& e) {
      throw OutsideContract(fc.text.locate(e.what()));
    } catch (const Error& e) {
      throw Error(fc.text.locate(e.what()));
    }
    return fc;
  }
  const std::vector<const PropertyEntry*> props = fuzz_target_properties(target);
  fc.text = CaseText::decoding(input);
  fc.property = props[static_cast<size_t>(fc.text.code(0, 0, static_cast<int64_t>(props.size()) - 1))];
  fc.text.set("property", fc.property->name)
      .set("impl", impl.empty() ? target.op + "@ref" : impl)
      .set("backend", backend.empty() ? "host" : backend);
  read_header(fc.text);
  fc.text.within(contract_of(fc.text.word("impl")));  // drawn inside the implementation's contract
  fc.property->parse(fc.text);
  fc.text.stop_drawing();
  return fc;
}

std::set<std::string> case_keys(const std::string& op) {
  std::set<std::string> keys;
  for (const FuzzTarget& target : fuzz_targets()) {
    if (target.op != op) continue;
    for (const PropertyEntry* p : fuzz_target_properties(target)) {
      // Inputs of all-low, middling and all-high bytes, then seeded random ones (small bytes mostly,
      // as the codec reads them): a key read only under a flag or a value range (a list's length, a
      // far case's block base), or past a rule the uniform inputs break, is read by one of them.
      std::vector<std::string> inputs;
      for (const char fill : {'\x00', '\x55', '\xaa', '\xff'}) inputs.emplace_back(4096, fill);
      std::mt19937_64 rng(0x6b657973);
      for (int i = 0; i < 32; ++i) {
        std::string bytes(4096, '\0');
        for (char& b : bytes) b = static_cast<char>(rng() % 4 == 0 ? rng() % 256 : rng() % 16);
        inputs.push_back(std::move(bytes));
      }
      for (const std::string& input : inputs) {
        CaseText text = CaseText::decoding(input);
        text.set("property", p->name).set("impl", op + "@ref").set("backend", "host");
        read_header(text);
        try {
          p->parse(text);
        } catch (const Error&) {
          continue;  // a rule refused this input's case; another one reads the keys
        }
        std::istringstream lines(text.format());
        std::string line;
        while (std::getline(lines, line)) {
          const std::string key = line.substr(0, line.find(' '));
          if (!line.empty() && line[0] != '#' && key != "property" && key != "impl" && key != "backend") {
            keys.insert(key);
          }
        }
      }
    }
  }
  return keys;
}

std::string encode_fuzz_input(std::string_view case_file) {
  const CaseText c = CaseText::encoding(without_repro_keys(case_file));
  const PropertyEntry& p = property_registry().find(c.word("property"));
  const std::vector<const PropertyEntry*> props = fuzz_target_properties(fuzz_target_of(p));
  int64_t index = 0;
  while (props[static_cast<size_t>(index)] != &p) ++index;
  c.code(index, 0, static_cast<int64_t>(props.size()) - 1);
  read_header(c);
  CaseText within = c;  // shares the encoding
  within.within(contract_of(c.word("impl")));
  p.parse(within);
  return within.encoded_bytes();
}

}  // namespace mlacheck
