// `mlacheck bench fuzz` (tools/bench_fuzz.h).
#include "tools/bench_fuzz.h"
#include "tools/bench_command.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/error.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_runner.h"
#include "kernels/device.h"

namespace mlacheck {

namespace {

using Clock = std::chrono::steady_clock;

// The inputs of one target: a splitmix64 stream from the seed and the target's name, so every
// backend runs the same inputs in the same order.
class Inputs {
 public:
  Inputs(uint64_t seed, const std::string& target, size_t max_bytes, bool small)
      : state_(seed), max_bytes_(max_bytes), small_(small) {
    for (unsigned char c : target) state_ = (state_ ^ c) * 1099511628211ull;
  }
  std::string next() {
    std::string s(1 + next_word() % max_bytes_, '\0');
    // Bytes skewed small, as libFuzzer's early inputs and the case codec's small values are; with
    // small_, every byte below 8, so every value the codec reads is small (harness/case_bytes.h).
    for (char& c : s) {
      const uint64_t w = next_word();
      c = static_cast<char>(small_ ? (w >> 8) % 8 : w % 4 == 0 ? (w >> 8) & 0xFF : (w >> 8) % 16);
    }
    return s;
  }

 private:
  uint64_t next_word() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
  size_t max_bytes_;
  bool small_;
};

struct Row {
  std::string target, backend;
  uint64_t inputs = 0, refused = 0, skipped = 0, checked = 0, slow = 0;
  double seconds = 0;           // wall time of the inputs run
  double median_us = 0;         // per checked case
  std::string violation, case_text;  // the first, if any
  double per_second() const { return seconds > 0 ? static_cast<double>(checked) / seconds : 0; }
};

Row measure(kernels::Device& device, const std::string& backend, const FuzzTarget& target, uint64_t seed,
            size_t max_bytes, bool small, double budget) {
  Row r;
  r.target = target.name, r.backend = backend;
  fuzz::FuzzRunner runner(target, target.op + "@ref", backend, device, fuzz::FuzzBudgets{});
  Inputs inputs(seed, target.name, max_bytes, small);
  std::vector<double> checked_us;
  const auto start = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - start).count() < budget) {
    const std::string input = inputs.next();
    const auto t0 = Clock::now();
    const fuzz::FuzzOutcome o = runner.run(input);
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    ++r.inputs;
    switch (o.kind) {
      case fuzz::FuzzOutcome::kRefused: ++r.refused; break;
      case fuzz::FuzzOutcome::kSkipped: ++r.skipped; break;
      case fuzz::FuzzOutcome::kChecked:
        ++r.checked;
        r.slow += o.slow ? 1 : 0;
        checked_us.push_back(us);
        break;
      case fuzz::FuzzOutcome::kViolation:
        if (r.violation.empty()) r.violation = o.verdict, r.case_text = o.fc.text.format();
        break;
    }
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!checked_us.empty()) {
    std::nth_element(checked_us.begin(), checked_us.begin() + checked_us.size() / 2, checked_us.end());
    r.median_us = checked_us[checked_us.size() / 2];
  }
  return r;
}

std::string fixed(double v, int digits) { return format_fixed(v, digits); }

}  // namespace

int run_bench_fuzz(const flags::Parsed& f, std::ostream& out, std::ostream& err) {
  const std::string format = f.text("format"), other = f.text("backend");
  const double seconds = f.real("seconds");
  const uint64_t seed = f.seed("seed");
  const size_t max_bytes = static_cast<size_t>(f.integer("input-bytes"));
  const bool small = f.text("cases") == "small";
  try {
    std::vector<const FuzzTarget*> targets;
    for (const std::string& t : f.list("target")) targets.push_back(&find_fuzz_target(t));
    if (targets.empty()) {
      for (const FuzzTarget& t : fuzz_targets()) targets.push_back(&t);
    }
    std::vector<std::string> backends{"host"};
    if (other != "host") backends.push_back(other);
    std::vector<std::pair<std::string, std::unique_ptr<kernels::Device>>> devices;
    for (const std::string& name : backends) {
      const auto b = parse_backend(name);
      MLA_REQUIRE(b.has_value(), "--backend '", name, "' is not one of host, cuda, hip");
      std::string why;
      MLA_REQUIRE(kernels::device_usable(*b, &why), name, ": not usable: ", why,
                  " (--backend host measures the host backend alone)");
      devices.emplace_back(name, kernels::make_device(*b));
    }
    std::vector<Row> rows;
    for (const FuzzTarget* t : targets) {
      for (auto& [name, device] : devices) rows.push_back(measure(*device, name, *t, seed, max_bytes, small, seconds));
    }
    bool violated = false;
    if (format == "json") {
      out << "{\"seconds\": " << fixed(seconds, 2) << ", \"seed\": " << seed << ", \"max_input_bytes\": " << max_bytes
          << ", \"cases\": \"" << f.text("cases") << "\""
          << ", \"rows\": [\n";
      for (size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        out << "  {\"target\": \"" << r.target << "\", \"backend\": \"" << r.backend << "\", \"inputs\": " << r.inputs
            << ", \"refused\": " << r.refused << ", \"skipped\": " << r.skipped << ", \"checked\": " << r.checked
            << ", \"slow\": " << r.slow << ", \"checked_per_second\": " << fixed(r.per_second(), 1)
            << ", \"median_us\": " << fixed(r.median_us, 1) << ", \"violations\": " << (r.violation.empty() ? 0 : 1)
            << "}" << (i + 1 < rows.size() ? "," : "") << '\n';
      }
      out << "]}\n";
    } else {
      out << "mlacheck bench fuzz: " << fixed(seconds, 1) << " s per target and backend, one thread, seed " << seed
          << ", inputs of 1 to " << max_bytes << " random bytes, "
          << (small ? "each below 8 (small cases)" : "skewed small (mixed cases)")
          << ", the same on every backend, <op>@ref, the harnesses' budgets\n";
      char line[240];
      std::snprintf(line, sizeof line, "%-22s %-7s %8s %8s %8s %8s %10s %12s\n", "target", "backend", "inputs",
                    "refused", "skipped", "checked", "checked/s", "median us");
      out << line;
      for (const Row& r : rows) {
        std::snprintf(line, sizeof line, "%-22s %-7s %8llu %8llu %8llu %8llu %10.0f %12.0f\n", r.target.c_str(),
                      r.backend.c_str(), static_cast<unsigned long long>(r.inputs),
                      static_cast<unsigned long long>(r.refused), static_cast<unsigned long long>(r.skipped),
                      static_cast<unsigned long long>(r.checked), r.per_second(), r.median_us);
        out << line;
      }
      for (const std::string& b : backends) {
        std::vector<double> rates;
        for (const Row& r : rows) {
          if (r.backend == b) rates.push_back(r.per_second());
        }
        std::sort(rates.begin(), rates.end());
        out << b << ": checked/s median " << fixed(rates[rates.size() / 2], 0) << ", slowest " << fixed(rates.front(), 0)
            << ", targets at 1,000 or more " << std::count_if(rates.begin(), rates.end(), [](double x) { return x >= 1000; })
            << " of " << rates.size() << '\n';
      }
    }
    for (const Row& r : rows) {
      if (r.violation.empty()) continue;
      violated = true;
      err << "mlacheck bench fuzz: FALSE POSITIVE on " << r.target << "@ref (" << r.backend << "): " << r.violation
          << "\n" << r.case_text;
    }
    return violated ? 1 : 0;
  } catch (const Error& e) {
    err << flags::prefix("bench") << e.what() << '\n';
    return 2;
  }
}

}  // namespace mlacheck
