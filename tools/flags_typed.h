// Made from tools/flags.def by flags::typed_header() (tools/flags.cpp); do not edit. After a change
// to the table: `BUILD/tools/flags_typed_gen > tools/flags_typed.h` (the test
// FlagsTyped.TheCheckedInHeaderIsCurrent fails until then).
//
// A struct per command: a typed field per flag, holding its value or its default, `given` (which
// flags the command line named) and the arguments without a flag; parse_<command>() parses into
// it as flags::parse does (-1: go on; 0: --help printed; 2: one line on err).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "tools/flags.h"

namespace mlacheck::flags {

// mlacheck list [--plugin PATH]... [--contract-terms]
struct ListFlags {
  bool contract_terms = false;  // --contract-terms
  std::vector<std::string> plugin;  // --plugin PATH
  std::vector<std::string> adapter;  // --adapter NAME
  std::vector<std::string> python;  // --python SPEC
  struct Given {
    bool contract_terms = false;
    bool plugin = false;
    bool adapter = false;
    bool python = false;
  } given;
  std::vector<std::string> positional;
};

inline int parse_list(const std::vector<std::string>& args, ListFlags& o, std::ostream& out, std::ostream& err) {
  Parsed p;
  const int rc = parse("list", args, p, out, err);
  if (rc >= 0) return rc;
  o.contract_terms = p.on("contract-terms");
  o.given.contract_terms = p.given("contract-terms");
  o.plugin = p.list("plugin");
  o.given.plugin = p.given("plugin");
  o.adapter = p.list("adapter");
  o.given.adapter = p.given("adapter");
  o.python = p.list("python");
  o.given.python = p.given("python");
  o.positional = p.positional;
  return -1;
}

// mlacheck selfcheck [--seed N] [--samples N]
struct SelfcheckFlags {
  uint64_t seed = 0;  // --seed N
  int64_t samples = 0;  // --samples N
  struct Given {
    bool seed = false;
    bool samples = false;
  } given;
  std::vector<std::string> positional;
};

inline int parse_selfcheck(const std::vector<std::string>& args, SelfcheckFlags& o, std::ostream& out, std::ostream& err) {
  Parsed p;
  const int rc = parse("selfcheck", args, p, out, err);
  if (rc >= 0) return rc;
  o.seed = p.seed("seed");
  o.given.seed = p.given("seed");
  o.samples = p.integer("samples");
  o.given.samples = p.given("samples");
  o.positional = p.positional;
  return -1;
}

// mlacheck check [--impl OP@NAME]... [--plugin PATH]... [flags]
struct CheckFlags {
  std::vector<std::string> impl;  // --impl OP@NAME
  std::string backend;  // --backend host|cuda|hip
  double budget = 0;  // --budget SECONDS
  double case_timeout = 0;  // --case-timeout SECONDS
  int64_t cases = 0;  // --cases N
  uint64_t seed = 0;  // --seed N
  std::string corpus;  // --corpus DIR
  std::string save;  // --save DIR
  std::string sanitize;  // --sanitize memcheck
  std::vector<std::string> property;  // --property OP.NAME
  bool fail_fast = false;  // --fail-fast
  bool no_shrink = false;  // --no-shrink
  bool no_fuzz = false;  // --no-fuzz
  bool contract_probe = false;  // --contract-probe
  std::string format;  // --format table|json|junit
  std::string report;  // --report none|html
  std::string report_dir;  // --report-dir DIR
  int64_t max_mb = 0;  // --max-mb MB
  std::vector<std::string> plugin;  // --plugin PATH
  std::vector<std::string> adapter;  // --adapter NAME
  std::vector<std::string> python;  // --python SPEC
  struct Given {
    bool impl = false;
    bool backend = false;
    bool budget = false;
    bool case_timeout = false;
    bool cases = false;
    bool seed = false;
    bool corpus = false;
    bool save = false;
    bool sanitize = false;
    bool property = false;
    bool fail_fast = false;
    bool no_shrink = false;
    bool no_fuzz = false;
    bool contract_probe = false;
    bool format = false;
    bool report = false;
    bool report_dir = false;
    bool max_mb = false;
    bool plugin = false;
    bool adapter = false;
    bool python = false;
  } given;
  std::vector<std::string> positional;
};

inline int parse_check(const std::vector<std::string>& args, CheckFlags& o, std::ostream& out, std::ostream& err) {
  Parsed p;
  const int rc = parse("check", args, p, out, err);
  if (rc >= 0) return rc;
  o.impl = p.list("impl");
  o.given.impl = p.given("impl");
  o.backend = p.text("backend");
  o.given.backend = p.given("backend");
  o.budget = p.real("budget");
  o.given.budget = p.given("budget");
  o.case_timeout = p.real("case-timeout");
  o.given.case_timeout = p.given("case-timeout");
  o.cases = p.integer("cases");
  o.given.cases = p.given("cases");
  o.seed = p.seed("seed");
  o.given.seed = p.given("seed");
  o.corpus = p.text("corpus");
  o.given.corpus = p.given("corpus");
  o.save = p.text("save");
  o.given.save = p.given("save");
  o.sanitize = p.text("sanitize");
  o.given.sanitize = p.given("sanitize");
  o.property = p.list("property");
  o.given.property = p.given("property");
  o.fail_fast = p.on("fail-fast");
  o.given.fail_fast = p.given("fail-fast");
  o.no_shrink = p.on("no-shrink");
  o.given.no_shrink = p.given("no-shrink");
  o.no_fuzz = p.on("no-fuzz");
  o.given.no_fuzz = p.given("no-fuzz");
  o.contract_probe = p.on("contract-probe");
  o.given.contract_probe = p.given("contract-probe");
  o.format = p.text("format");
  o.given.format = p.given("format");
  o.report = p.text("report");
  o.given.report = p.given("report");
  o.report_dir = p.text("report-dir");
  o.given.report_dir = p.given("report-dir");
  o.max_mb = p.integer("max-mb");
  o.given.max_mb = p.given("max-mb");
  o.plugin = p.list("plugin");
  o.given.plugin = p.given("plugin");
  o.adapter = p.list("adapter");
  o.given.adapter = p.given("adapter");
  o.python = p.list("python");
  o.given.python = p.given("python");
  o.positional = p.positional;
  return -1;
}

// mlacheck repro FILE | --all DIR [flags]
struct ReproFlags {
  std::string impl;  // --impl OP@NAME
  std::string backend;  // --backend host|cuda|hip
  double case_timeout = 0;  // --case-timeout SECONDS
  std::string sanitize;  // --sanitize memcheck
  std::string all;  // --all DIR
  std::string emit;  // --emit pytest:FILE
  std::string target;  // --target T
  bool ignore_contract = false;  // --ignore-contract
  std::string format;  // --format table|json|junit
  std::string report;  // --report none|html
  std::string report_dir;  // --report-dir DIR
  int64_t max_mb = 0;  // --max-mb MB
  std::vector<std::string> plugin;  // --plugin PATH
  std::vector<std::string> adapter;  // --adapter NAME
  std::vector<std::string> python;  // --python SPEC
  struct Given {
    bool impl = false;
    bool backend = false;
    bool case_timeout = false;
    bool sanitize = false;
    bool all = false;
    bool emit = false;
    bool target = false;
    bool ignore_contract = false;
    bool format = false;
    bool report = false;
    bool report_dir = false;
    bool max_mb = false;
    bool plugin = false;
    bool adapter = false;
    bool python = false;
  } given;
  std::vector<std::string> positional;
};

inline int parse_repro(const std::vector<std::string>& args, ReproFlags& o, std::ostream& out, std::ostream& err) {
  Parsed p;
  const int rc = parse("repro", args, p, out, err);
  if (rc >= 0) return rc;
  o.impl = p.text("impl");
  o.given.impl = p.given("impl");
  o.backend = p.text("backend");
  o.given.backend = p.given("backend");
  o.case_timeout = p.real("case-timeout");
  o.given.case_timeout = p.given("case-timeout");
  o.sanitize = p.text("sanitize");
  o.given.sanitize = p.given("sanitize");
  o.all = p.text("all");
  o.given.all = p.given("all");
  o.emit = p.text("emit");
  o.given.emit = p.given("emit");
  o.target = p.text("target");
  o.given.target = p.given("target");
  o.ignore_contract = p.on("ignore-contract");
  o.given.ignore_contract = p.given("ignore-contract");
  o.format = p.text("format");
  o.given.format = p.given("format");
  o.report = p.text("report");
  o.given.report = p.given("report");
  o.report_dir = p.text("report-dir");
  o.given.report_dir = p.given("report-dir");
  o.max_mb = p.integer("max-mb");
  o.given.max_mb = p.given("max-mb");
  o.plugin = p.list("plugin");
  o.given.plugin = p.given("plugin");
  o.adapter = p.list("adapter");
  o.given.adapter = p.given("adapter");
  o.python = p.list("python");
  o.given.python = p.given("python");
  o.positional = p.positional;
  return -1;
}

// mlacheck fuzz --target T [flags]
struct FuzzFlags {
  std::string target;  // --target T
  std::string impl;  // --impl OP@NAME
  std::string backend;  // --backend host|cuda
  int64_t time = 0;  // --time SECONDS
  int64_t runs = 0;  // --runs N
  int64_t jobs = 0;  // --jobs N
  std::string out;  // --out DIR
  std::vector<std::string> seeds;  // --seeds DIR
  int64_t seed = 0;  // --seed N
  int64_t minimize = 0;  // --minimize SECONDS
  int64_t timeout = 0;  // --timeout SECONDS
  std::string harness_dir;  // --harness-dir DIR
  std::string format;  // --format text|sarif
  std::string sarif;  // --sarif FILE
  int64_t max_mb = 0;  // --max-mb MB
  std::vector<std::string> plugin;  // --plugin PATH
  std::vector<std::string> adapter;  // --adapter NAME
  std::vector<std::string> python;  // --python SPEC
  struct Given {
    bool target = false;
    bool impl = false;
    bool backend = false;
    bool time = false;
    bool runs = false;
    bool jobs = false;
    bool out = false;
    bool seeds = false;
    bool seed = false;
    bool minimize = false;
    bool timeout = false;
    bool harness_dir = false;
    bool format = false;
    bool sarif = false;
    bool max_mb = false;
    bool plugin = false;
    bool adapter = false;
    bool python = false;
  } given;
  std::vector<std::string> positional;
};

inline int parse_fuzz(const std::vector<std::string>& args, FuzzFlags& o, std::ostream& out, std::ostream& err) {
  Parsed p;
  const int rc = parse("fuzz", args, p, out, err);
  if (rc >= 0) return rc;
  o.target = p.text("target");
  o.given.target = p.given("target");
  o.impl = p.text("impl");
  o.given.impl = p.given("impl");
  o.backend = p.text("backend");
  o.given.backend = p.given("backend");
  o.time = p.integer("time");
  o.given.time = p.given("time");
  o.runs = p.integer("runs");
  o.given.runs = p.given("runs");
  o.jobs = p.integer("jobs");
  o.given.jobs = p.given("jobs");
  o.out = p.text("out");
  o.given.out = p.given("out");
  o.seeds = p.list("seeds");
  o.given.seeds = p.given("seeds");
  o.seed = p.integer("seed");
  o.given.seed = p.given("seed");
  o.minimize = p.integer("minimize");
  o.given.minimize = p.given("minimize");
  o.timeout = p.integer("timeout");
  o.given.timeout = p.given("timeout");
  o.harness_dir = p.text("harness-dir");
  o.given.harness_dir = p.given("harness-dir");
  o.format = p.text("format");
  o.given.format = p.given("format");
  o.sarif = p.text("sarif");
  o.given.sarif = p.given("sarif");
  o.max_mb = p.integer("max-mb");
  o.given.max_mb = p.given("max-mb");
  o.plugin = p.list("plugin");
  o.given.plugin = p.given("plugin");
  o.adapter = p.list("adapter");
  o.given.adapter = p.given("adapter");
  o.python = p.list("python");
  o.given.python = p.given("python");
  o.positional = p.positional;
  return -1;
}

// mlacheck mutants [--only ID]... [flags]
struct MutantsFlags {
  std::string backend;  // --backend host|cuda|hip
  double budget = 0;  // --budget SECONDS
  double case_timeout = 0;  // --case-timeout SECONDS
  int64_t cases = 0;  // --cases N
  uint64_t seed = 0;  // --seed N
  std::string corpus;  // --corpus DIR
  std::string sanitize;  // --sanitize memcheck
  std::string save;  // --save DIR
  std::string format;  // --format table|json|junit
  std::vector<std::string> only;  // --only ID
  int64_t max_mb = 0;  // --max-mb MB
  std::vector<std::string> plugin;  // --plugin PATH
  std::vector<std::string> adapter;  // --adapter NAME
  std::vector<std::string> python;  // --python SPEC
  struct Given {
    bool backend = false;
    bool budget = false;
    bool case_timeout = false;
    bool cases = false;
    bool seed = false;
    bool corpus = false;
    bool sanitize = false;
    bool save = false;
    bool format = false;
    bool only = false;
    bool max_mb = false;
    bool plugin = false;
    bool adapter = false;
    bool python = false;
  } given;
  std::vector<std::string> positional;
};

inline int parse_mutants(const std::vector<std::string>& args, MutantsFlags& o, std::ostream& out, std::ostream& err) {
  Parsed p;
  const int rc = parse("mutants", args, p, out, err);
  if (rc >= 0) return rc;
  o.backend = p.text("backend");
  o.given.backend = p.given("backend");
  o.budget = p.real("budget");
  o.given.budget = p.given("budget");
  o.case_timeout = p.real("case-timeout");
  o.given.case_timeout = p.given("case-timeout");
  o.cases = p.integer("cases");
  o.given.cases = p.given("cases");
  o.seed = p.seed("seed");
  o.given.seed = p.given("seed");
  o.corpus = p.text("corpus");
  o.given.corpus = p.given("corpus");
  o.sanitize = p.text("sanitize");
  o.given.sanitize = p.given("sanitize");
  o.save = p.text("save");
  o.given.save = p.given("save");
  o.format = p.text("format");
  o.given.format = p.given("format");
  o.only = p.list("only");
  o.given.only = p.given("only");
  o.max_mb = p.integer("max-mb");
  o.given.max_mb = p.given("max-mb");
  o.plugin = p.list("plugin");
  o.given.plugin = p.given("plugin");
  o.adapter = p.list("adapter");
  o.given.adapter = p.given("adapter");
  o.python = p.list("python");
  o.given.python = p.given("python");
  o.positional = p.positional;
  return -1;
}

// mlacheck bench guards|fuzz [flags]
struct BenchFlags {
  std::string backend;  // --backend cuda|host|hip
  uint64_t seed = 0;  // --seed N
  std::string size;  // --size production|small
  int64_t repeats = 0;  // --repeats N
  std::string format;  // --format table|json
  double seconds = 0;  // --seconds S
  int64_t input_bytes = 0;  // --input-bytes N
  std::vector<std::string> target;  // --target T
  int64_t jobs = 0;  // --jobs N
  bool no_host = false;  // --no-host
  std::string cases;  // --cases mixed|small
  struct Given {
    bool backend = false;
    bool seed = false;
    bool size = false;
    bool repeats = false;
    bool format = false;
    bool seconds = false;
    bool input_bytes = false;
    bool target = false;
    bool jobs = false;
    bool no_host = false;
    bool cases = false;
  } given;
  std::vector<std::string> positional;
};

inline int parse_bench(const std::vector<std::string>& args, BenchFlags& o, std::ostream& out, std::ostream& err) {
  Parsed p;
  const int rc = parse("bench", args, p, out, err);
  if (rc >= 0) return rc;
  o.backend = p.text("backend");
  o.given.backend = p.given("backend");
  o.seed = p.seed("seed");
  o.given.seed = p.given("seed");
  o.size = p.text("size");
  o.given.size = p.given("size");
  o.repeats = p.integer("repeats");
  o.given.repeats = p.given("repeats");
  o.format = p.text("format");
  o.given.format = p.given("format");
  o.seconds = p.real("seconds");
  o.given.seconds = p.given("seconds");
  o.input_bytes = p.integer("input-bytes");
  o.given.input_bytes = p.given("input-bytes");
  o.target = p.list("target");
  o.given.target = p.given("target");
  o.jobs = p.integer("jobs");
  o.given.jobs = p.given("jobs");
  o.no_host = p.on("no-host");
  o.given.no_host = p.given("no-host");
  o.cases = p.text("cases");
  o.given.cases = p.given("cases");
  o.positional = p.positional;
  return -1;
}

// mlacheck targets
struct TargetsFlags {
  struct Given {
  } given;
  std::vector<std::string> positional;
};

inline int parse_targets(const std::vector<std::string>& args, TargetsFlags& o, std::ostream& out, std::ostream& err) {
  Parsed p;
  const int rc = parse("targets", args, p, out, err);
  if (rc >= 0) return rc;
  o.positional = p.positional;
  return -1;
}

// mlacheck decode --target T FILE [flags]
struct DecodeFlags {
  std::string impl;  // --impl OP@NAME
  std::string backend;  // --backend host|cuda|hip
  std::string target;  // --target T
  struct Given {
    bool impl = false;
    bool backend = false;
    bool target = false;
  } given;
  std::vector<std::string> positional;
};

inline int parse_decode(const std::vector<std::string>& args, DecodeFlags& o, std::ostream& out, std::ostream& err) {
  Parsed p;
  const int rc = parse("decode", args, p, out, err);
  if (rc >= 0) return rc;
  o.impl = p.text("impl");
  o.given.impl = p.given("impl");
  o.backend = p.text("backend");
  o.given.backend = p.given("backend");
  o.target = p.text("target");
  o.given.target = p.given("target");
  o.positional = p.positional;
  return -1;
}

// mlacheck encode CASE OUT
struct EncodeFlags {
  struct Given {
  } given;
  std::vector<std::string> positional;
};

inline int parse_encode(const std::vector<std::string>& args, EncodeFlags& o, std::ostream& out, std::ostream& err) {
  Parsed p;
  const int rc = parse("encode", args, p, out, err);
  if (rc >= 0) return rc;
  o.positional = p.positional;
  return -1;
}

}  // namespace mlacheck::flags
