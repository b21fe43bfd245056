// Tests of the flag table (tools/flags.def) and its parser (tools/flags.h): every command's --help
// shows each flag with its default and range and an example that parses; every bad value is one
// line naming the flag and what it takes.
#include "tools/flags.h"
#include "tools/flags_typed.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <gtest/gtest.h>

namespace mlacheck::flags {
namespace {

struct Outcome {
  int status;
  std::string out, err;
  Parsed parsed;
};

Outcome run(const std::string& command, const std::vector<std::string>& args) {
  std::ostringstream out, err;
  Outcome o;
  o.status = parse(command, args, o.parsed, out, err);
  o.out = out.str();
  o.err = err.str();
  return o;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The one error line of `command args`: exit 2, one line, the command's prefix, nothing on out.
std::string error_of(const std::string& command, const std::vector<std::string>& args) {
  const Outcome o = run(command, args);
  EXPECT_EQ(o.status, 2) << command << " " << args.front();
  EXPECT_EQ(o.out, "");
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_EQ(o.err.rfind("mlacheck " + command + ": ", 0), 0u) << o.err;
  return o.err;
}

TEST(Flags, EveryCommandsHelpShowsEachFlagItsDefaultAndRangeAndAnExample) {
  ASSERT_GE(commands().size(), 10u);
  for (const CommandSpec& c : commands()) {
    const std::string h = help(c.name);
    EXPECT_EQ(h.rfind("usage: mlacheck " + c.name, 0), 0u) << h;
    EXPECT_NE(h.find("\nexample:\n  mlacheck " + c.name), std::string::npos) << h;
    EXPECT_NE(h.find("  --help "), std::string::npos) << h;
    for (const FlagSpec& f : flags_of(c.name)) {
      EXPECT_NE(h.find("\n  --" + f.name + " "), std::string::npos) << c.name << " --" << f.name;
      if (!f.default_value.empty()) { EXPECT_NE(h.find("default " + f.default_value), std::string::npos) << f.name; }
      if (f.kind == Kind::Int || f.kind == Kind::Real) { EXPECT_NE(h.find(f.range()), std::string::npos) << f.name; }
    }
    // The same answer through parse: --help prints it and ends the command with 0.
    const Outcome o = run(c.name, {"--help"});
    EXPECT_EQ(o.status, 0);
    EXPECT_EQ(o.out, h);
    EXPECT_NE(overview().find("  " + c.synopsis + "\n"), std::string::npos) << c.name;
  }
}

TEST(Flags, EveryDefaultIsAValueItsFlagAccepts) {
  for (const CommandSpec& c : commands()) {
    for (const FlagSpec& f : flags_of(c.name)) {
      if (!f.default_value.empty()) { EXPECT_EQ(check_value(f, f.default_value), "") << c.name << " --" << f.name; }
      if (f.kind == Kind::Int) { EXPECT_LE(f.int_min, f.int_max) << f.name; }
      if (f.kind == Kind::Real) { EXPECT_LE(f.real_min, f.real_max) << f.name; }
      if (f.kind == Kind::Choice) { EXPECT_GE(f.choices().size(), 2u) << f.name; }
    }
  }
}

TEST(Flags, EveryExampleParses) {
  for (const CommandSpec& c : commands()) {
    std::vector<std::string> words = split(c.example);
    ASSERT_GE(words.size(), 2u) << c.example;
    ASSERT_EQ(words[0], "mlacheck");
    ASSERT_EQ(words[1], c.name);
    const Outcome o = run(c.name, std::vector<std::string>(words.begin() + 2, words.end()));
    EXPECT_EQ(o.status, -1) << c.example << ": " << o.err;
  }
}

TEST(Flags, ValuesAndDefaultsReadBack) {
  const Outcome o = run("check", {"--impl", "a@ref", "--impl=b@ref", "--budget", "2.5", "--seed", "0xff",
                                  "--contract-probe", "--format", "junit"});
  ASSERT_EQ(o.status, -1) << o.err;
  EXPECT_EQ(o.parsed.list("impl"), (std::vector<std::string>{"a@ref", "b@ref"}));
  EXPECT_EQ(o.parsed.real("budget"), 2.5);
  EXPECT_EQ(o.parsed.seed("seed"), 255u);
  EXPECT_TRUE(o.parsed.on("contract-probe"));
  EXPECT_EQ(o.parsed.text("format"), "junit");
  EXPECT_EQ(o.parsed.integer("cases"), 20);  // the default
  EXPECT_FALSE(o.parsed.given("cases"));
  EXPECT_EQ(o.parsed.text("save"), "mlacheck-cases");
  EXPECT_EQ(o.parsed.integer("max-mb"), default_max_mb());
  // The largest seed is read exactly; "--" ends the flags.
  const Outcome s = run("selfcheck", {"--seed", "18446744073709551615"});
  EXPECT_EQ(s.parsed.seed("seed"), 18446744073709551615u);
  const Outcome r = run("repro", {"--", "--odd-name.case"});
  ASSERT_EQ(r.status, -1) << r.err;
  EXPECT_EQ(r.parsed.positional, std::vector<std::string>{"--odd-name.case"});
  // A name the command's table does not have is a programming error, not a user's.
  EXPECT_THROW(o.parsed.text("no-such-flag"), std::logic_error);
  EXPECT_THROW(o.parsed.integer("format"), std::logic_error);
}

TEST(Flags, UnknownFlagsAndMissingValuesNameTheFlag) {
  EXPECT_NE(error_of("fuzz", {"--bogus"}).find("unknown flag '--bogus'"), std::string::npos);
  EXPECT_NE(error_of("fuzz", {"--bogus=3"}).find("unknown flag '--bogus'"), std::string::npos);
  EXPECT_NE(error_of("repro", {"-x"}).find("unknown flag '-x'"), std::string::npos);
  EXPECT_NE(error_of("fuzz", {"--jobs"}).find("--jobs needs a value (N: 1 to "), std::string::npos);
  EXPECT_NE(error_of("fuzz", {"--jobs", "--time", "5"}).find("--jobs needs a value"), std::string::npos);
  EXPECT_NE(error_of("check", {"--contract-probe=1"}).find("--contract-probe takes no value"), std::string::npos);
  EXPECT_NE(error_of("check", {"--budget", "1", "--budget", "2"}).find("--budget is given twice"), std::string::npos);
  EXPECT_NE(error_of("list", {"extra"}).find("unexpected argument 'extra'"), std::string::npos);
  EXPECT_NE(error_of("encode", {"one"}).find("usage: mlacheck encode CASE OUT"), std::string::npos);
}

TEST(Flags, NumbersOutOfRangeOrOverflowingAreRefusedWithTheRange) {
  EXPECT_NE(error_of("selfcheck", {"--samples", "0"}).find("--samples '0' is out of range: 1 to 100000"), std::string::npos);
  EXPECT_NE(error_of("selfcheck", {"--samples", "2000000000"}).find("out of range: 1 to 100000"), std::string::npos);
  EXPECT_NE(error_of("selfcheck", {"--samples", "9223372036854775807"}).find("out of range"), std::string::npos);
  EXPECT_NE(error_of("selfcheck", {"--samples", "9223372036854775808"}).find("out of range"), std::string::npos);
  EXPECT_NE(error_of("selfcheck", {"--samples", "x"}).find("is not a whole number (1 to 100000)"), std::string::npos);
  EXPECT_NE(error_of("selfcheck", {"--samples", "12abc"}).find("is not a whole number"), std::string::npos);
  EXPECT_NE(error_of("selfcheck", {"--samples", ""}).find("is not a whole number"), std::string::npos);
  // Seeds: 2^64 and past it, negative, not a number.
  for (const char* v : {"18446744073709551616", "99999999999999999999999", "0x10000000000000000", "-1"}) {
    EXPECT_NE(error_of("check", {"--seed", v}).find("out of range: 0 to 18446744073709551615"), std::string::npos) << v;
  }
  EXPECT_NE(error_of("mutants", {"--seed", "0xZZ"}).find("is not a whole number"), std::string::npos);
  // Reals: range, not finite, trailing junk.
  for (const char* v : {"0", "-5", "36001", "1e999"}) {
    const std::string e = error_of("check", {"--budget", v});
    EXPECT_TRUE(e.find("out of range: 0.01 to 36000") != std::string::npos || e.find("is not a number") != std::string::npos) << e;
  }
  for (const char* v : {"nan", "inf", "5s", " 5"}) {
    EXPECT_NE(error_of("check", {"--budget", v}).find("is not a number (0.01 to 36000)"), std::string::npos) << v;
  }
  EXPECT_NE(error_of("mutants", {"--format", "xml"}).find("--format 'xml' is not one of table, json, junit"), std::string::npos);
  // A very long value is shown cut, on one line.
  EXPECT_LT(error_of("fuzz", {"--jobs", std::string(5000, '9')}).size(), 200u);
}

TEST(Flags, JobsAreBoundedByThisMachinesCpus) {
  const int64_t cpus = cpu_count();
  ASSERT_GE(cpus, 1);
  EXPECT_EQ(run("fuzz", {"--jobs", std::to_string(cpus)}).status, -1);
  EXPECT_NE(error_of("fuzz", {"--jobs", std::to_string(cpus + 1)}).find("out of range: 1 to " + std::to_string(cpus)),
            std::string::npos);
  EXPECT_GE(machine_memory_mb(), default_max_mb());
  EXPECT_NE(error_of("repro", {"--max-mb", "0"}).find("--max-mb '0' is out of range: 1 to "), std::string::npos);
  EXPECT_NE(error_of("repro", {"--max-mb", std::to_string(machine_memory_mb() + 1)}).find("out of range"), std::string::npos);
}

// docs/cli.md has a section per command naming each of its flags.
TEST(Flags, TheCommandLineDocNamesEveryFlag) {
  std::ifstream in(MLACHECK_SOURCE_DIR "/docs/cli.md");
  ASSERT_TRUE(in.good());
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const CommandSpec& c : commands()) {
    const size_t at = doc.find("\n## mlacheck " + c.name + "\n");
    ASSERT_NE(at, std::string::npos) << c.name;
    const std::string section = doc.substr(at, doc.find("\n## ", at + 1) - at);
    for (const FlagSpec& f : flags_of(c.name)) {
      EXPECT_NE(section.find("`--" + f.name), std::string::npos) << "docs/cli.md, mlacheck " << c.name << ": --" << f.name;
    }
  }
}

TEST(Flags, UsageErrorsCarryOnePrefix) {
  std::ostringstream err;
  EXPECT_EQ(usage_error(err, "fuzz", "--target T is required"), 2);
  EXPECT_EQ(err.str(), "mlacheck fuzz: --target T is required (see mlacheck fuzz --help)\n");
  EXPECT_EQ(prefix("repro"), "mlacheck repro: ");
}

}  // namespace
}  // namespace mlacheck::flags

// ---- tools/flags_typed.h: the typed flags of each command, made from the table -------------------

namespace mlacheck::flags {
namespace {

// The checked-in header is what the table makes now: a flag added, renamed or retyped in
// tools/flags.def fails here until `BUILD/tools/flags_typed_gen > tools/flags_typed.h` is run.
TEST(FlagsTyped, TheCheckedInHeaderIsCurrent) {
  std::ifstream in(MLACHECK_SOURCE_DIR "/tools/flags_typed.h");
  ASSERT_TRUE(in) << "no tools/flags_typed.h";
  std::ostringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(text.str() == typed_header())
      << "tools/flags_typed.h is not what tools/flags.def makes: run BUILD/tools/flags_typed_gen > tools/flags_typed.h";
  // Every flag of every command is a field of its command's struct, and is read by its name.
  for (const CommandSpec& c : commands()) {
    for (const FlagSpec& f : flags_of(c.name)) {
      EXPECT_NE(text.str().find("(\"" + f.name + "\")"), std::string::npos) << c.name << " --" << f.name;
    }
  }
}

// parse_<command> fills its struct: values typed, defaults where not given, which were given, the
// arguments without a flag; --help and a bad value return as parse does, the struct untouched.
TEST(FlagsTyped, ParseFillsTheCommandsStructWithValuesDefaultsAndWhatWasGiven) {
  std::ostringstream out, err;
  CheckFlags c;
  ASSERT_EQ(parse_check(split("--budget 2.5 --no-shrink --impl topk_decode@ref --impl mla_decode@ref --seed 0x10"), c,
                        out, err),
            -1)
      << err.str();
  EXPECT_EQ(c.budget, 2.5);
  EXPECT_TRUE(c.no_shrink);
  EXPECT_FALSE(c.fail_fast);
  EXPECT_EQ(c.impl, (std::vector<std::string>{"topk_decode@ref", "mla_decode@ref"}));
  EXPECT_EQ(c.seed, 16u);
  EXPECT_EQ(c.cases, 20);  // the default
  EXPECT_EQ(c.save, "mlacheck-cases");
  EXPECT_EQ(c.format, "table");
  EXPECT_TRUE(c.given.budget && c.given.no_shrink && c.given.impl && c.given.seed);
  EXPECT_FALSE(c.given.cases || c.given.save || c.given.fail_fast);
  FuzzFlags z;
  ASSERT_EQ(parse_fuzz(split("--target topk_decode --runs 5"), z, out, err), -1) << err.str();
  EXPECT_EQ(z.target, "topk_decode");
  EXPECT_EQ(z.runs, 5);
  EXPECT_TRUE(z.given.runs);
  EXPECT_FALSE(z.given.time);
  EXPECT_EQ(z.time, 60);  // the default, though --runs replaces it
  DecodeFlags d;
  ASSERT_EQ(parse_decode(split("--target topk_decode input.bin"), d, out, err), -1) << err.str();
  EXPECT_EQ(d.positional, (std::vector<std::string>{"input.bin"}));
  EXPECT_EQ(parse_fuzz(split("--target topk_decode extra"), z, out, err), 2);  // fuzz takes no file
  MutantsFlags m;
  m.budget = -1;
  EXPECT_EQ(parse_mutants(split("--budget 0"), m, out, err), 2);  // below the range: one line, exit 2
  EXPECT_EQ(m.budget, -1);
  EXPECT_EQ(parse_mutants(split("--help"), m, out, err), 0);
  EXPECT_EQ(m.budget, -1);
}

}  // namespace
}  // namespace mlacheck::flags
