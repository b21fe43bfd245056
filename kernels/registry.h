// The registry of implementations: every kernel entry point registered by op and name
// ("topk_decode@ref"), so properties, fuzzers and the command line can run any of them on any
// backend. Seeded-bug variants register beside the correct ones as "<op>@<bug id>"; plugins add
// their own names.
//
// An entry holds the op's checked entry point (a function taking Device& first, as in
// kernels/<op>_glue.h); find<Fn>() returns it typed, and refuses a lookup with the wrong type.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <typeindex>
#include <vector>

#include "core/contract.h"
#include "core/error.h"

namespace mlacheck::kernels {

struct ImplementationInfo {
  std::string op;       // docs/ops.md op name
  std::string name;     // "ref", a docs/bugs.md id, or a plugin's name
  std::string summary;  // one line: what it is (and for a variant, what is wrong)
  std::string qualified() const { return op + "@" + name; }
};

class Registry {
 public:
  // Registers fn (any function type) as op@name; throws if the name is taken.
  template <class Fn>
  void add(ImplementationInfo info, Fn* fn) {
    add_erased(std::move(info), std::type_index(typeid(Fn)), reinterpret_cast<void (*)()>(fn));
  }
  // The implementation called "op@name" (or "op" for op@ref). Throws mlacheck::Error naming the
  // registered implementations of the op when there is none, or when Fn is not its type.
  template <class Fn>
  Fn* find(std::string_view qualified) const {
    return reinterpret_cast<Fn*>(find_erased(qualified, std::type_index(typeid(Fn))));
  }
  bool contains(std::string_view qualified) const;
  // The contract of an implementation (core/contract.h): what it declared it accepts. Built-in
  // implementations take the whole spec (an empty contract). Throws for an unknown implementation.
  void set_contract(std::string_view qualified, Contract contract);
  std::shared_ptr<const Contract> contract(std::string_view qualified) const;
  // Its contract's precision clauses (operand -> format); none for an unknown implementation or
  // one without a contract (the oracles then allow fp32's rounding only).
  std::map<std::string, std::string> declared_precision(std::string_view qualified) const;
  // Every implementation, ordered by op (docs/ops.md order) then name.
  std::vector<ImplementationInfo> list() const;

 private:
  struct Entry {
    ImplementationInfo info;
    std::type_index type;
    void (*fn)();
    std::shared_ptr<const Contract> contract;
  };
  void add_erased(ImplementationInfo info, std::type_index type, void (*fn)());
  void (*find_erased(std::string_view qualified, std::type_index type) const)();
  const Entry* lookup(std::string_view qualified) const;
  std::vector<Entry> entries_;
};

// The process-wide registry with the built-in implementations (kernels/registry_builtin.cpp).
Registry& registry();

}  // namespace mlacheck::kernels
