// Cache keys and signatures are strings built for every recorded op, so
// their numbers are appended in place (std::to_string would allocate a
// temporary per number).
#pragma once

#include <charconv>
#include <cstdint>
#include <string>

namespace torch_tpu {

namespace detail {
template <typename T>
inline void append_text(std::string& key, T v, char sep) {
  char buf[32];
  key.append(buf, std::to_chars(buf, buf + sizeof(buf), v).ptr);
  if (sep) key += sep;
}
}  // namespace detail

inline void append_int(std::string& key, int64_t v, char sep = 0) { detail::append_text(key, v, sep); }

// The shortest text that reads back as exactly `v`: two values that differ
// in any bit never share a key (fixed decimals would merge 1e-7 and 2e-7).
inline void append_double(std::string& key, double v, char sep = 0) { detail::append_text(key, v, sep); }

}  // namespace torch_tpu
