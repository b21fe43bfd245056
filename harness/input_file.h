// Reading a file a user names (a case file, a raw fuzz input): only a regular file, and never more
// than a limit. The type and the size are checked before a byte is read, so /dev/zero, a FIFO or a
// directory is refused by its type with one line instead of read without end, blocked on, or read
// as 0 bytes.
#pragma once

#include <cstdint>
#include <string>

namespace mlacheck {

// The most bytes a case file or a raw fuzz input may take (CaseText::parse's limit).
constexpr int64_t kMaxInputFileBytes = int64_t{1} << 22;  // 4 MiB

// The bytes of the regular file at path (a link to one is followed). Throws mlacheck::Error with
// one line that starts with the path, for a file that does not exist or cannot be read, a
// directory, a FIFO, a socket or a device ("/dev/zero: a character device, not a regular file"),
// or a file over max_bytes ("big.case: 12.0 MiB (12582912 bytes), over the 4.0 MiB limit of an
// input file").
std::string read_input_file(const std::string& path, int64_t max_bytes = kMaxInputFileBytes);

}  // namespace mlacheck
