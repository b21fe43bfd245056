// Bounded, typed reads of input files (harness/input_file.h).
#include "harness/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "harness/memory_budget.h"

namespace mlacheck {
namespace {

// What a file that is not a regular one is, for the message; "" for a regular file.
std::string kind_of(mode_t mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

[[noreturn]] void refuse_kind(const std::string& path, const std::string& kind) {
  const std::string hint = kind == "a directory" ? " (repro --all DIR runs a folder's .case files)" : "";
  throw Error(path + ": " + kind + ", not a regular file" + hint);
}

[[noreturn]] void refuse_size(const std::string& path, int64_t size, int64_t max_bytes) {
  throw Error(path + ": " + format_bytes(size) + " (" + std::to_string(size) + " bytes), over the " +
              format_bytes(max_bytes) + " limit of an input file");
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string read_input_file(const std::string& path, int64_t max_bytes) {
  MLA_REQUIRE(!path.empty(), "an empty file name");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Error(path + ": " + std::strerror(errno));
  if (const std::string kind = kind_of(st.st_mode); !kind.empty()) refuse_kind(path, kind);
  if (st.st_size > max_bytes) refuse_size(path, st.st_size, max_bytes);
  // O_NONBLOCK: should the path become a FIFO between the stat and the open, the open does not wait
  // for a writer; the fstat below then refuses it.
  const Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (f.fd < 0) throw Error(path + ": " + std::strerror(errno));
  if (::fstat(f.fd, &st) != 0) throw Error(path + ": " + std::strerror(errno));
  if (const std::string kind = kind_of(st.st_mode); !kind.empty()) refuse_kind(path, kind);
  // Read at most max_bytes + 1: one byte past the limit says the file grew past it (or, as files in
  // /proc do, reports a size of 0 but holds more).
  std::string bytes;
  const int64_t want = add_bytes_saturating(max_bytes, 1);
  bytes.resize(static_cast<size_t>(std::min<int64_t>(want, std::max<int64_t>(st.st_size, 0) + 4096)));
  size_t got = 0;
  for (;;) {
    if (got == bytes.size()) {
      if (static_cast<int64_t>(got) >= want) break;
      bytes.resize(static_cast<size_t>(std::min<int64_t>(want, static_cast<int64_t>(got) * 2)));
    }
    const ssize_t n = ::read(f.fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(path + ": " + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (static_cast<int64_t>(got) > max_bytes) {
    throw Error(path + ": more than " + format_bytes(max_bytes) + " (its size said " +
                std::to_string(st.st_size) + " bytes), over the limit of an input file");
  }
  bytes.resize(got);
  return bytes;
}

}  // namespace mlacheck
