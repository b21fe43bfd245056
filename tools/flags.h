// The command line of every mlacheck subcommand, read through one table (tools/flags.def): parsing
// with one-line errors that name the flag and its allowed range, --help text, and the prefix every
// message of a command starts with ("mlacheck fuzz: ...").
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mlacheck::flags {

enum class Kind { Bool, Text, List, Choice, Int, Seed, Real };

// One row of tools/flags.def for one command.
struct FlagSpec {
  std::string command, name;  // name without the leading "--"
  Kind kind;
  std::string metavar, default_value;
  int64_t int_min = 0, int_max = 0;
  double real_min = 0, real_max = 0;
  std::string help;
  std::vector<std::string> choices() const;  // Choice: the words of metavar
  std::string range() const;                 // "1 to 16", "one of table, json, junit", "" when any
};

struct CommandSpec {
  std::string name, synopsis;
  int min_positional = 0, max_positional = 0;
  std::string about, example;
};

// The table, in the order of tools/flags.def.
const std::vector<CommandSpec>& commands();
const std::vector<FlagSpec>& flags_of(const std::string& command);
// The command's row; throws std::logic_error for a command not in the table.
const CommandSpec& command(const std::string& name);

// What a command line says, every value already checked against the table.
class Parsed {
 public:
  Parsed() = default;
  explicit Parsed(std::string command) : command_(std::move(command)) {}
  const std::string& command() const { return command_; }
  // Whether the flag was given on the command line (a default does not count).
  bool given(const std::string& name) const;
  bool on(const std::string& name) const;  // a Bool flag
  // A Text or Choice flag's value, or its default.
  std::string text(const std::string& name) const;
  std::vector<std::string> list(const std::string& name) const;  // a List flag, in order given
  int64_t integer(const std::string& name) const;                // an Int flag, or its default
  uint64_t seed(const std::string& name) const;                  // a Seed flag, or its default
  double real(const std::string& name) const;                    // a Real flag, or its default
  std::vector<std::string> positional;

  // Used by parse(): stores a checked value.
  void set(const std::string& name, const std::string& value);

 private:
  const FlagSpec& spec(const std::string& name, Kind kind) const;  // logic_error if not in the table
  std::string value_or_default(const FlagSpec& f) const;
  std::string command_;
  std::map<std::string, std::vector<std::string>> values_;
};

// The range or overflow error of one value, or "" when value is a valid `f` value.
std::string check_value(const FlagSpec& f, const std::string& value);

// Parses a command's arguments. Returns -1 to go on (p filled); 0 after --help printed its text on
// out; 2 after one line on err naming the flag and what it takes.
int parse(const std::string& command, const std::vector<std::string>& args, Parsed& p, std::ostream& out,
          std::ostream& err);

// The --help text of a command: usage, about, every flag with its default and range, one example.
std::string help(const std::string& command);
// The summary of every command (mlacheck --help).
std::string overview();

// "mlacheck fuzz: " (the prefix of every message of that command).
std::string prefix(const std::string& command);
// Writes "mlacheck <command>: <what> (see mlacheck <command> --help)" on err; returns 2.
int usage_error(std::ostream& err, const std::string& command, const std::string& what);

// The text of tools/flags_typed.h, made from the table: a struct per command with a typed field per
// flag (--no-shrink is `bool no_shrink`, --budget `double budget`, a List a vector), which fields
// were given, and a parse_<command>() that fills it. FlagsTyped.TheCheckedInHeaderIsCurrent holds
// the checked-in file to it; `tools/flags_typed_gen > tools/flags_typed.h` (a build's) remakes it.
std::string typed_header();

// This machine: its CPUs (at least 1), its memory in MiB, and the default --max-mb.
int64_t cpu_count();
int64_t machine_memory_mb();
int64_t default_max_mb();
// --max-mb, when given, as the process-wide budget of one case (harness/memory_budget.h); the
// default budget stands otherwise. Every command that runs cases calls it once, after parse.
void apply_max_mb(bool given, int64_t max_mb);

}  // namespace mlacheck::flags
