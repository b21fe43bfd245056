// The implementation registry (kernels/registry.h).
#include "kernels/registry.h"

#include <algorithm>

#include "core/ops.h"

namespace mlacheck::kernels {
namespace {

// "op" alone means op@ref.
std::string qualify(std::string_view q) {
  return q.find('@') == std::string_view::npos ? std::string(q) + "@ref" : std::string(q);
}

size_t spec_order(const std::string& op) {
  const auto& ops = spec_ops();
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].name == op) return i;
  }
  return ops.size();
}

}  // namespace

void Registry::add_erased(ImplementationInfo info, std::type_index type, void (*fn)()) {
  MLA_REQUIRE(find_op(info.op) != nullptr, "registry: '", info.op, "' is not an op of docs/ops.md");
  MLA_REQUIRE(!info.name.empty() && info.name.find('@') == std::string::npos, "registry: bad implementation name '",
              info.name, "'");
  MLA_REQUIRE(lookup(info.qualified()) == nullptr, "registry: ", info.qualified(), " is registered twice");
  entries_.push_back({std::move(info), type, fn, std::make_shared<const Contract>()});
}

void Registry::set_contract(std::string_view qualified, Contract contract) {
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const Entry& e) { return e.info.qualified() == qualify(qualified); });
  MLA_REQUIRE(it != entries_.end(), "registry: no implementation ", qualify(qualified), " to give a contract");
  MLA_REQUIRE(contract.op.empty() || contract.op == it->info.op, "registry: a contract of ", contract.op, " for ",
              it->info.qualified());
  it->contract = std::make_shared<const Contract>(std::move(contract));
}

std::shared_ptr<const Contract> Registry::contract(std::string_view qualified) const {
  const Entry* e = lookup(qualified);
  MLA_REQUIRE(e != nullptr, "registry: no implementation ", qualify(qualified));
  return e->contract;
}

std::map<std::string, std::string> Registry::declared_precision(std::string_view qualified) const {
  const Entry* e = lookup(qualified);
  return e != nullptr && e->contract ? e->contract->precision : std::map<std::string, std::string>{};
}

const Registry::Entry* Registry::lookup(std::string_view qualified) const {
  const std::string q = qualify(qualified);
  for (const Entry& e : entries_) {
    if (e.info.qualified() == q) return &e;
  }
  return nullptr;
}

bool Registry::contains(std::string_view qualified) const { return lookup(qualified) != nullptr; }

void (*Registry::find_erased(std::string_view qualified, std::type_index type) const)() {
  const Entry* e = lookup(qualified);
  if (e == nullptr) {
    const std::string q = qualify(qualified), op = q.substr(0, q.find('@'));
    std::string known;
    for (const Entry& x : entries_) {
      if (x.info.op == op) known += (known.empty() ? "" : ", ") + x.info.qualified();
    }
    throw Error("no implementation " + q + (known.empty() ? " (the op has none registered)" : "; registered: " + known));
  }
  MLA_REQUIRE(e->type == type, "registry: ", e->info.qualified(), " was looked up with another entry-point type");
  return e->fn;
}

std::vector<ImplementationInfo> Registry::list() const {
  std::vector<ImplementationInfo> out;
  for (const Entry& e : entries_) out.push_back(e.info);
  std::stable_sort(out.begin(), out.end(), [](const ImplementationInfo& a, const ImplementationInfo& b) {
    const size_t oa = spec_order(a.op), ob = spec_order(b.op);
    return oa != ob ? oa < ob : a.name < b.name;
  });
  return out;
}

}  // namespace mlacheck::kernels
