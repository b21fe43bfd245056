// The roundings an MLA decode implementation declares beyond fp32 (its contract's precision clauses,
// core/contract.h), shared by the dense and sparse MLA oracles: the unit roundoff of the values its
// products take (tf32 2^-11, bf16 2^-8, fp8 e4m3 2^-4), 0 for fp32, whose rounding the oracles'
// slacks always allow. e4m3 is subnormal below 2^-6, where a probability (at most 1: exp of its score
// less a running maximum) is rounded to a multiple of 2^-9, off by up to 2^-10 whatever its size.
#pragma once

#include <map>
#include <string>

#include "core/contract.h"

namespace mlacheck::oracle {

struct MlaPrecision {
  double q = 0;   // q (times q_scale), as Q.K takes it
  double kv = 0;  // K and V (times their scales), as Q.K and P.V take them
  double p = 0;   // the probabilities, as P.V takes them
  double p_abs = 0;  // and the absolute part of their rounding (fp8: 2^-10, half e4m3's subnormal step)
  double qk = 0;     // Q.K's accumulation (fp22: 2^-13, Hopper's fp8 tensor cores), in place of fp32's
  bool declared() const { return q > 0 || kv > 0 || p > 0 || qk > 0; }
};

// The units of a contract's precision clauses (Contract::precision: operand -> format, each term's
// formats checked when the contract was parsed; precision_unit gives each its unit roundoff).
inline MlaPrecision mla_precision_of(const std::map<std::string, std::string>& declared) {
  MlaPrecision u;
  for (const auto& [operand, format] : declared) {
    if (operand == "q") u.q = precision_unit(format);
    if (operand == "kv") u.kv = precision_unit(format);
    if (operand == "p") u.p = precision_unit(format), u.p_abs = format == "fp8" ? 0x1p-10 : 0.0;
    if (operand == "qk") u.qk = precision_unit(format);
  }
  return u;
}

}  // namespace mlacheck::oracle
