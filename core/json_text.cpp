#include "core/json_text.h"

#include <cstdio>

namespace mlacheck::text {

std::pair<uint32_t, size_t> decode_utf8_at(const std::string& s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b = byte(i);
  if (b < 0x80) return {b, 1};
  size_t n = 0;
  uint32_t cp = 0, min = 0;
  if ((b & 0xE0) == 0xC0) n = 2, cp = b & 0x1F, min = 0x80;
  else if ((b & 0xF0) == 0xE0) n = 3, cp = b & 0x0F, min = 0x800;
  else if ((b & 0xF8) == 0xF0) n = 4, cp = b & 0x07, min = 0x10000;
  else return {0, 0};
  if (i + n > s.size()) return {0, 0};
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return {0, 0};
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {0, 0};
  return {cp, n};
}

std::string hex_byte(unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02X", b);
  return buf;
}

std::string valid_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto [cp, n] = decode_utf8_at(s, i);
    if (n == 0) {
      out += hex_byte(static_cast<unsigned char>(s[i++]));
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

std::string json_quote(const std::string& s) {
  const std::string text = valid_utf8(s);
  std::string out = "\"";
  out.reserve(text.size() + 2);
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace mlacheck::text
