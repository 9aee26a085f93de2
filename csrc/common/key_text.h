// Cache keys and signatures are strings built for every recorded op, so
// their numbers are appended in place (std::to_string would allocate a
// temporary per number).
#pragma once

#include <charconv>
#include <cstdint>
#include <string>

namespace torch_tpu {

inline void append_int(std::string& key, int64_t v) {
  char buf[24];
  key.append(buf, std::to_chars(buf, buf + sizeof(buf), v).ptr);
}

inline void append_int(std::string& key, int64_t v, char sep) {
  append_int(key, v);
  key += sep;
}

}  // namespace torch_tpu
