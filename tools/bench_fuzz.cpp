// `mlacheck bench fuzz` (tools/bench_fuzz.h).
#include "tools/bench_fuzz.h"
#include "tools/bench_command.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
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
  double rate = -1;             // --jobs: the workers' checked/s summed (-1: checked / seconds)
  std::string violation, case_text;  // the first, if any
  double per_second() const { return rate >= 0 ? rate : seconds > 0 ? static_cast<double>(checked) / seconds : 0; }
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

// The number after "key": in one JSON row of `bench fuzz --format json` (rows are flat objects).
double json_number(const std::string& row, const std::string& key) {
  const size_t at = row.find("\"" + key + "\": ");
  MLA_REQUIRE(at != std::string::npos, "a worker's report has no '", key, "': ", row);
  return std::strtod(row.c_str() + at + key.size() + 4, nullptr);
}

std::string read_all_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// --jobs N: target t on backend b measured by N copies of this program at once (`bench fuzz
// --target t --backend b --no-host --format json`, worker j with seed + j), in processes so that
// each has its own device context and nothing is shared but the device. One row: the workers'
// inputs, refused, skipped and checked summed, checked/s the sum of their rates, median us the
// median of their medians. A worker that found a violation exits 1 and its report says which
// (violation_of); any other failure of a worker is an Error with its first line.
Row measure_in_processes(const std::string& backend, const FuzzTarget& t, uint64_t seed, size_t max_bytes,
                         const std::string& cases, double seconds, int jobs, std::string* violation_of) {
  std::error_code ec;
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  MLA_REQUIRE(!ec, "--jobs: cannot find this program's own path (/proc/self/exe)");
  struct Worker {
    pid_t pid = -1;
    std::string out, err;
  };
  std::vector<Worker> workers(static_cast<size_t>(jobs));
  // A worker that cannot be started: the ones already running are stopped and waited for first.
  const auto give_up = [&workers](const std::string& why) {
    for (Worker& w : workers) {
      if (w.pid > 0) ::kill(w.pid, SIGTERM), ::waitpid(w.pid, nullptr, 0);
      if (!w.out.empty()) std::remove(w.out.c_str()), std::remove(w.err.c_str());
    }
    throw Error("--jobs: " + why);
  };
  for (int j = 0; j < jobs; ++j) {
    Worker& w = workers[static_cast<size_t>(j)];
    char out_path[] = "/tmp/mlacheck-bench-XXXXXX", err_path[] = "/tmp/mlacheck-bench-XXXXXX";
    const int out_fd = ::mkstemp(out_path), err_fd = ::mkstemp(err_path);
    if (out_fd < 0 || err_fd < 0) give_up("cannot create a worker's report file in /tmp");
    w.out = out_path, w.err = err_path;
    std::vector<std::string> argv{exe, "bench", "fuzz", "--target", t.name, "--backend", backend,
                                  "--seconds", fixed(seconds, 3), "--cases", cases, "--input-bytes",
                                  std::to_string(max_bytes), "--seed", std::to_string(seed + static_cast<uint64_t>(j)),
                                  "--format", "json"};
    if (backend != "host") argv.push_back("--no-host");
    w.pid = ::fork();
    if (w.pid < 0) give_up(std::string("fork failed: ") + std::strerror(errno));
    if (w.pid == 0) {
      ::dup2(out_fd, 1);
      ::dup2(err_fd, 2);
      std::vector<char*> args;
      for (std::string& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
      ::_exit(127);
    }
    ::close(out_fd), ::close(err_fd);
  }
  Row r;
  r.target = t.name, r.backend = backend, r.rate = 0;
  std::vector<double> medians;
  std::string failure;
  for (Worker& w : workers) {
    int status = 0;
    while (::waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
    }
    const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    const std::string report = read_all_of(w.out), errors = read_all_of(w.err);
    std::remove(w.out.c_str()), std::remove(w.err.c_str());
    if (rc != 0 && rc != 1) {
      if (failure.empty()) failure = "a worker exited " + std::to_string(rc) + ": " + errors.substr(0, errors.find('\n'));
      continue;
    }
    const size_t row = report.find("{\"target\"");
    if (row == std::string::npos) {
      if (failure.empty()) failure = "a worker printed no report: " + errors.substr(0, errors.find('\n'));
      continue;
    }
    const std::string line = report.substr(row, report.find('}', row) - row);
    r.inputs += static_cast<uint64_t>(json_number(line, "inputs"));
    r.refused += static_cast<uint64_t>(json_number(line, "refused"));
    r.skipped += static_cast<uint64_t>(json_number(line, "skipped"));
    r.checked += static_cast<uint64_t>(json_number(line, "checked"));
    r.slow += static_cast<uint64_t>(json_number(line, "slow"));
    r.rate += json_number(line, "checked_per_second");
    medians.push_back(json_number(line, "median_us"));
    if (rc == 1 && r.violation.empty()) r.violation = "a worker's case", *violation_of = errors;
  }
  MLA_REQUIRE(failure.empty(), "--jobs ", jobs, ", ", t.name, " on ", backend, ": ", failure);
  r.seconds = seconds;
  std::sort(medians.begin(), medians.end());
  r.median_us = medians[medians.size() / 2];
  return r;
}

}  // namespace

int run_bench_fuzz(const flags::BenchFlags& f, std::ostream& out, std::ostream& err) {
  const std::string format = f.format, other = f.backend;
  const double seconds = f.seconds;
  const uint64_t seed = f.seed;
  const size_t max_bytes = static_cast<size_t>(f.input_bytes);
  const bool small = f.cases == "small";
  const int jobs = static_cast<int>(f.jobs);
  const bool no_host = f.no_host;
  try {
    MLA_REQUIRE(!(no_host && other == "host"), "--no-host with --backend host leaves nothing to measure");
    std::vector<const FuzzTarget*> targets;
    for (const std::string& t : f.target) targets.push_back(&find_fuzz_target(t));
    if (targets.empty()) {
      for (const FuzzTarget& t : fuzz_targets()) targets.push_back(&t);
    }
    std::vector<std::string> backends;
    if (!no_host) backends.push_back("host");
    if (other != "host") backends.push_back(other);
    for (const std::string& name : backends) {
      const auto b = parse_backend(name);
      MLA_REQUIRE(b.has_value(), "--backend '", name, "' is not one of host, cuda, hip");
      std::string why;
      MLA_REQUIRE(kernels::device_usable(*b, &why), why, " (--backend host measures the host backend alone)");
    }
    std::vector<Row> rows;
    std::string worker_violation;  // --jobs: a worker's report of its violation
    if (jobs > 1) {
      // The workers make their own devices: this process makes none.
      for (const FuzzTarget* t : targets) {
        for (const std::string& name : backends) {
          rows.push_back(measure_in_processes(name, *t, seed, max_bytes, f.cases, seconds, jobs, &worker_violation));
        }
      }
    } else {
      std::vector<std::pair<std::string, std::unique_ptr<kernels::Device>>> devices;
      for (const std::string& name : backends) devices.emplace_back(name, kernels::make_device(*parse_backend(name)));
      for (const FuzzTarget* t : targets) {
        for (auto& [name, device] : devices) rows.push_back(measure(*device, name, *t, seed, max_bytes, small, seconds));
      }
    }
    bool violated = false;
    if (format == "json") {
      out << "{\"seconds\": " << fixed(seconds, 2) << ", \"seed\": " << seed << ", \"max_input_bytes\": " << max_bytes
          << ", \"cases\": \"" << f.cases << "\""
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
      out << "mlacheck bench fuzz: " << fixed(seconds, 1) << " s per target and backend, "
          << (jobs > 1 ? std::to_string(jobs) + " processes at once (checked/s their sum, median us the median of "
                                                "theirs), seeds " + std::to_string(seed) + " to " +
                             std::to_string(seed + static_cast<uint64_t>(jobs) - 1)
                       : "one thread, seed " + std::to_string(seed))
          << ", inputs of 1 to " << max_bytes << " random bytes, "
          << (small ? "each below 8 (small cases)" : "skewed small (mixed cases)")
          << ", the same on every backend, <op>@ref, the harnesses' budgets\n";
      if (jobs > 1 && other != "host" && !kernels::mps_daemon_running()) {
        out << "note: no MPS daemon (nvidia-cuda-mps-control -d; its pipe in $CUDA_MPS_PIPE_DIRECTORY or "
               "/tmp/nvidia-mps): the " << jobs << " processes time-slice the GPU\n";
      }
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
      if (!worker_violation.empty()) {
        err << worker_violation;  // the worker's own report of it, with its case
        break;
      }
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
