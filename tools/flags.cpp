// The flag table's parser and --help text (tools/flags.h); the table itself is tools/flags.def.
#include "tools/flags.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "harness/memory_budget.h"

namespace mlacheck::flags {

namespace {

std::vector<std::string> words(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string w;
  for (char c : s) {
    if (c == sep) {
      if (!w.empty()) out.push_back(w);
      w.clear();
    } else {
      w += c;
    }
  }
  if (!w.empty()) out.push_back(w);
  return out;
}

// text wrapped at 100 columns, every line indented by `indent` spaces and ended by a newline.
std::string wrapped(const std::string& text, size_t indent) {
  std::string out(indent, ' ');
  size_t col = indent;
  for (const std::string& w : words(text, ' ')) {
    if (col > indent && col + 1 + w.size() > 100) out += "\n" + std::string(indent, ' '), col = indent;
    if (col > indent) out += ' ', ++col;
    out += w;
    col += w.size();
  }
  return out + "\n";
}

// A value as a message shows it: quoted, and cut when long.
std::string shown(const std::string& v) {
  return "'" + (v.size() > 60 ? v.substr(0, 57) + "..." : v) + "'";
}

std::string number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

struct Table {
  std::vector<CommandSpec> commands;
  std::vector<FlagSpec> flags;
};

const Table& table() {
  static const Table t = [] {
    Table out;
#define MLA_COMMAND(name, synopsis, min_positional, max_positional, about, example) \
  out.commands.push_back({name, synopsis, min_positional, max_positional, about, example});
#define MLA_FLAG(commands_, name, kind, metavar, default_value, min, max, help)                              \
  for (const std::string& c : words(commands_, ' ')) {                                                       \
    FlagSpec f{c, name, Kind::kind, metavar, default_value, static_cast<int64_t>(min), static_cast<int64_t>(max), \
               static_cast<double>(min), static_cast<double>(max), help};                                     \
    if (Kind::kind == Kind::Seed) f.int_min = 0, f.real_min = 0;                                             \
    out.flags.push_back(f);                                                                                  \
  }
#include "tools/flags.def"
    return out;
  }();
  return t;
}

const FlagSpec* find_flag(const std::string& command, const std::string& name) {
  for (const FlagSpec& f : table().flags) {
    if (f.command == command && f.name == name) return &f;
  }
  return nullptr;
}

}  // namespace

std::vector<std::string> FlagSpec::choices() const { return kind == Kind::Choice ? words(metavar, '|') : std::vector<std::string>{}; }

std::string FlagSpec::range() const {
  switch (kind) {
    case Kind::Int:
      return std::to_string(int_min) + " to " + std::to_string(int_max);
    case Kind::Seed:
      return "0 to 18446744073709551615";
    case Kind::Real:
      return number(real_min) + " to " + number(real_max);
    case Kind::Choice: {
      std::string s;
      for (const std::string& c : choices()) s += (s.empty() ? "" : ", ") + c;
      return "one of " + s;
    }
    default:
      return "";
  }
}

const std::vector<CommandSpec>& commands() { return table().commands; }

const std::vector<FlagSpec>& flags_of(const std::string& command) {
  static std::map<std::string, std::vector<FlagSpec>> by_command = [] {
    std::map<std::string, std::vector<FlagSpec>> m;
    for (const CommandSpec& c : table().commands) m[c.name];
    for (const FlagSpec& f : table().flags) m[f.command].push_back(f);
    return m;
  }();
  const auto it = by_command.find(command);
  if (it == by_command.end()) throw std::logic_error("flags: no command '" + command + "' in tools/flags.def");
  return it->second;
}

const CommandSpec& command(const std::string& name) {
  for (const CommandSpec& c : table().commands) {
    if (c.name == name) return c;
  }
  throw std::logic_error("flags: no command '" + name + "' in tools/flags.def");
}

std::string check_value(const FlagSpec& f, const std::string& v) {
  const std::string flag = "--" + f.name;
  errno = 0;
  char* end = nullptr;
  switch (f.kind) {
    case Kind::Bool:
    case Kind::Text:
    case Kind::List:
      return "";
    case Kind::Choice:
      for (const std::string& c : f.choices()) {
        if (c == v) return "";
      }
      return flag + " " + shown(v) + " is not " + f.range();
    case Kind::Int: {
      const bool digits = !v.empty() && v.find_first_not_of("0123456789", v[0] == '-' || v[0] == '+' ? 1 : 0) == std::string::npos &&
                          v.find_first_of("0123456789") != std::string::npos;
      if (!digits) return flag + " " + shown(v) + " is not a whole number (" + f.range() + ")";
      const long long x = std::strtoll(v.c_str(), &end, 10);
      if (errno == ERANGE || x < f.int_min || x > f.int_max) return flag + " " + shown(v) + " is out of range: " + f.range();
      return "";
    }
    case Kind::Seed: {
      const bool hex = v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
      const std::string body = hex ? v.substr(2) : v;
      const bool ok = !body.empty() && body.find_first_not_of(hex ? "0123456789abcdefABCDEF" : "0123456789") == std::string::npos;
      if (!ok && !v.empty() && v[0] == '-' && v.find_first_not_of("0123456789", 1) == std::string::npos && v.size() > 1) {
        return flag + " " + shown(v) + " is out of range: " + f.range();
      }
      if (!ok) return flag + " " + shown(v) + " is not a whole number (" + f.range() + ", or 0x hex)";
      std::strtoull(body.c_str(), &end, hex ? 16 : 10);
      if (errno == ERANGE) return flag + " " + shown(v) + " is out of range: " + f.range();
      return "";
    }
    case Kind::Real: {
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || std::isspace(static_cast<unsigned char>(v[0])) || !std::isfinite(x)) {
        return flag + " " + shown(v) + " is not a number (" + f.range() + ")";
      }
      if (x < f.real_min || x > f.real_max) return flag + " " + shown(v) + " is out of range: " + f.range();
      return "";
    }
  }
  return "";
}

// ---- Parsed ------------------------------------------------------------------------------------

const FlagSpec& Parsed::spec(const std::string& name, Kind kind) const {
  const FlagSpec* f = find_flag(command_, name);
  const bool text_like = kind == Kind::Text && f && f->kind == Kind::Choice;
  if (!f || (f->kind != kind && !text_like)) {
    throw std::logic_error("flags: '" + command_ + " --" + name + "' is not a flag of that kind in tools/flags.def");
  }
  return *f;
}

std::string Parsed::value_or_default(const FlagSpec& f) const {
  const auto it = values_.find(f.name);
  return it == values_.end() || it->second.empty() ? f.default_value : it->second.back();
}

bool Parsed::given(const std::string& name) const {
  if (!find_flag(command_, name)) throw std::logic_error("flags: '" + command_ + " --" + name + "' is not in tools/flags.def");
  return values_.count(name) > 0;
}

bool Parsed::on(const std::string& name) const {
  spec(name, Kind::Bool);
  return values_.count(name) > 0;
}

std::string Parsed::text(const std::string& name) const { return value_or_default(spec(name, Kind::Text)); }

std::vector<std::string> Parsed::list(const std::string& name) const {
  spec(name, Kind::List);
  const auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

int64_t Parsed::integer(const std::string& name) const {
  const std::string v = value_or_default(spec(name, Kind::Int));
  return v.empty() ? 0 : std::strtoll(v.c_str(), nullptr, 10);
}

uint64_t Parsed::seed(const std::string& name) const {
  const std::string v = value_or_default(spec(name, Kind::Seed));
  if (v.empty()) return 0;
  const bool hex = v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
  return std::strtoull(hex ? v.c_str() + 2 : v.c_str(), nullptr, hex ? 16 : 10);
}

double Parsed::real(const std::string& name) const {
  const std::string v = value_or_default(spec(name, Kind::Real));
  return v.empty() ? 0 : std::strtod(v.c_str(), nullptr);
}

void Parsed::set(const std::string& name, const std::string& value) { values_[name].push_back(value); }

// ---- parsing -----------------------------------------------------------------------------------

std::string prefix(const std::string& command) { return "mlacheck " + command + ": "; }

int usage_error(std::ostream& err, const std::string& command, const std::string& what) {
  err << prefix(command) << what << " (see mlacheck " << command << " --help)\n";
  return 2;
}

int parse(const std::string& command_name, const std::vector<std::string>& args, Parsed& p, std::ostream& out,
          std::ostream& err) {
  const CommandSpec& cmd = command(command_name);
  p = Parsed(command_name);
  bool only_positional = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (only_positional || a.size() < 2 || a[0] != '-') {
      p.positional.push_back(a);
      continue;
    }
    if (a == "--") {
      only_positional = true;
      continue;
    }
    if (a == "--help" || a == "-h" || a == "-help") {
      out << help(command_name);
      return 0;
    }
    const size_t eq = a.find('=');
    const std::string name = a.substr(a[1] == '-' ? 2 : 1, eq == std::string::npos ? std::string::npos : eq - (a[1] == '-' ? 2 : 1));
    const FlagSpec* f = a.rfind("--", 0) == 0 ? find_flag(command_name, name) : nullptr;
    if (!f) {
      const std::string shown_flag = eq == std::string::npos ? a : a.substr(0, eq);
      return usage_error(err, command_name, "unknown flag " + shown(shown_flag.size() > 60 ? shown_flag.substr(0, 60) : shown_flag));
    }
    const std::string flag = "--" + f->name;
    if (f->kind == Kind::Bool) {
      if (eq != std::string::npos) return usage_error(err, command_name, flag + " takes no value");
      p.set(f->name, "1");
      continue;
    }
    std::string value;
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
    } else if (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
      value = args[++i];
    } else {
      const std::string range = f->range();
      return usage_error(err, command_name, flag + " needs a value (" + f->metavar + (range.empty() ? "" : ": " + range) + ")");
    }
    if (f->kind != Kind::List && p.given(f->name)) return usage_error(err, command_name, flag + " is given twice");
    const std::string bad = check_value(*f, value);
    if (!bad.empty()) return usage_error(err, command_name, bad);
    p.set(f->name, value);
  }
  const int n = static_cast<int>(p.positional.size());
  if (n > cmd.max_positional) {
    return usage_error(err, command_name,
                       "unexpected argument " + shown(p.positional[static_cast<size_t>(cmd.max_positional)]) +
                           (cmd.max_positional == 0 ? "" : ": usage: mlacheck " + cmd.synopsis));
  }
  if (n < cmd.min_positional) return usage_error(err, command_name, "usage: mlacheck " + cmd.synopsis);
  return -1;
}

// ---- help --------------------------------------------------------------------------------------

std::string help(const std::string& command_name) {
  const CommandSpec& cmd = command(command_name);
  std::ostringstream os;
  os << "usage: mlacheck " << cmd.synopsis << "\n\n";
  os << wrapped(cmd.about, 0) << "\nflags:\n";
  const auto line = [&](const std::string& left, const std::string& text) {
    const std::string body = wrapped(text, 28);
    os << "  " << left << std::string(left.size() < 26 ? 26 - left.size() : 1, ' ') << body.substr(left.size() < 26 ? 28 : 2 + left.size() + 1);
  };
  for (const FlagSpec& f : flags_of(command_name)) {
    line("--" + f.name + (f.metavar.empty() ? "" : " " + f.metavar), f.help);
    std::string facts;
    if (!f.default_value.empty()) facts = "default " + f.default_value;
    if (f.kind == Kind::Int || f.kind == Kind::Real || f.kind == Kind::Seed) {
      facts += (facts.empty() ? "" : "; ") + f.range();
    }
    if (!facts.empty()) os << std::string(28, ' ') << facts << '\n';
  }
  line("--help", "this text");
  os << "\nexample:\n  " << cmd.example << "\n\nexit status: 0 ok, 1 a check failed, 2 bad usage or input (one line on stderr)\n";
  return os.str();
}

std::string overview() {
  std::ostringstream os;
  os << "mlacheck: correctness checks and fuzzing for sparse MLA decode kernels\n\n"
     << "usage: mlacheck <command> [flags]\n\ncommands:\n";
  for (const CommandSpec& c : commands()) {
    const size_t stop = c.about.find(". ");
    const std::string first = stop == std::string::npos ? c.about : c.about.substr(0, stop + 1);
    os << "  " << c.synopsis << '\n' << wrapped(first, 6);
  }
  os << "  help [COMMAND]\n      This text, or a command's (the same as mlacheck COMMAND --help).\n\n"
     << "Every command takes --help: its flags, their defaults and ranges, and an example.\n"
     << "--plugin PATH loads a shared library of your own kernels (include/mlacheck/plugin.h) into the\n"
     << "registry first, so OP@NAME may name its implementations; a case on them runs in a child process.\n\n"
     << "exit status: 0 ok, 1 a check failed, 2 bad usage or input (one line on stderr)\n";
  return os.str();
}

// ---- this machine ------------------------------------------------------------------------------

int64_t cpu_count() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? n : 1;
}

int64_t machine_memory_mb() {
  const int64_t bytes = physical_memory_bytes();
  return bytes > 0 ? std::max<int64_t>(1, bytes >> 20) : int64_t{1} << 30;
}

int64_t default_max_mb() { return std::max<int64_t>(1, default_case_memory_budget_bytes() >> 20); }

void apply_max_mb(bool given, int64_t max_mb) {
  if (given) set_case_memory_budget_bytes(max_mb << 20);
}

}  // namespace mlacheck::flags

// ---- the typed header --------------------------------------------------------------------------

namespace mlacheck::flags {

namespace {

std::string identifier(const std::string& name) {
  std::string id = name;
  std::replace(id.begin(), id.end(), '-', '_');
  return id;
}

std::string struct_name(const std::string& command) {
  std::string s = command;
  s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s + "Flags";
}

const char* field_type(Kind k) {
  switch (k) {
    case Kind::Bool: return "bool";
    case Kind::Text:
    case Kind::Choice: return "std::string";
    case Kind::List: return "std::vector<std::string>";
    case Kind::Int: return "int64_t";
    case Kind::Seed: return "uint64_t";
    case Kind::Real: return "double";
  }
  return "";
}

const char* reader(Kind k) {
  switch (k) {
    case Kind::Bool: return "on";
    case Kind::Text:
    case Kind::Choice: return "text";
    case Kind::List: return "list";
    case Kind::Int: return "integer";
    case Kind::Seed: return "seed";
    case Kind::Real: return "real";
  }
  return "";
}

}  // namespace

std::string typed_header() {
  std::ostringstream h;
  h << "// Made from tools/flags.def by flags::typed_header() (tools/flags.cpp); do not edit. After a change\n"
       "// to the table: `BUILD/tools/flags_typed_gen > tools/flags_typed.h` (the test\n"
       "// FlagsTyped.TheCheckedInHeaderIsCurrent fails until then).\n"
       "//\n"
       "// A struct per command: a typed field per flag, holding its value or its default, `given` (which\n"
       "// flags the command line named) and the arguments without a flag; parse_<command>() parses into\n"
       "// it as flags::parse does (-1: go on; 0: --help printed; 2: one line on err).\n"
       "#pragma once\n\n"
       "#include <cstdint>\n#include <iosfwd>\n#include <string>\n#include <vector>\n\n"
       "#include \"tools/flags.h\"\n\n"
       "namespace mlacheck::flags {\n";
  for (const CommandSpec& c : commands()) {
    const std::vector<FlagSpec>& fs = flags_of(c.name);
    const std::string type = struct_name(c.name);
    h << "\n// mlacheck " << c.synopsis << "\nstruct " << type << " {\n";
    for (const FlagSpec& f : fs) {
      h << "  " << field_type(f.kind) << " " << identifier(f.name)
        << (f.kind == Kind::Bool ? " = false" : f.kind == Kind::Int || f.kind == Kind::Seed || f.kind == Kind::Real ? " = 0" : "")
        << ";  // --" << f.name << (f.metavar.empty() || f.kind == Kind::Bool ? "" : " " + f.metavar) << "\n";
      // (No default in the comment: --max-mb's is this machine's memory, and the file is the same everywhere.)
    }
    h << "  struct Given {\n";
    for (const FlagSpec& f : fs) h << "    bool " << identifier(f.name) << " = false;\n";
    h << "  } given;\n  std::vector<std::string> positional;\n};\n\n";
    h << "inline int parse_" << identifier(c.name) << "(const std::vector<std::string>& args, " << type
      << "& o, std::ostream& out, std::ostream& err) {\n"
      << "  Parsed p;\n  const int rc = parse(\"" << c.name << "\", args, p, out, err);\n"
      << "  if (rc >= 0) return rc;\n";
    for (const FlagSpec& f : fs) {
      const std::string id = identifier(f.name);
      h << "  o." << id << " = p." << reader(f.kind) << "(\"" << f.name << "\");\n";
      h << "  o.given." << id << " = p.given(\"" << f.name << "\");\n";
    }
    h << "  o.positional = p.positional;\n  return -1;\n}\n";
  }
  h << "\n}  // namespace mlacheck::flags\n";
  return h.str();
}

}  // namespace mlacheck::flags
