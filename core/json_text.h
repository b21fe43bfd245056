// Text for machine-read formats: valid UTF-8 and JSON string literals, shared by the reports
// (tools/report_formats.h) and the Python bridge's messages to its worker (kernels/python_bridge.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace mlacheck::text {

// The code point of the UTF-8 sequence at s[i] and its length, or length 0 when the bytes there are
// not a valid sequence (stray continuation, truncated, overlong, a surrogate, past U+10FFFF).
std::pair<uint32_t, size_t> decode_utf8_at(const std::string& s, size_t i);

// "\xHH" for a byte.
std::string hex_byte(unsigned char b);

// s as valid UTF-8: each byte of an invalid or overlong sequence becomes "\xHH".
std::string valid_utf8(const std::string& s);

// s as a JSON string literal, quotes included, valid UTF-8 (RFC 8259).
std::string json_quote(const std::string& s);

}  // namespace mlacheck::text
