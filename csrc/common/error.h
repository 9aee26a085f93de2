// The one error type of the C++ layers below aten/. Each error carries the
// Python exception class it must become; aten/ converts it at the boundary.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace torch_tpu {

// OutOfMemory: a device allocation or program could not get the memory it
// needs; it becomes c10::OutOfMemoryError (torch.OutOfMemoryError).
enum class ErrorKind { Runtime, Value, Type, Index, NotImplemented, OutOfMemory };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message)
      : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

namespace detail {
inline void append(std::ostringstream&) {}
template <typename T, typename... Rest>
void append(std::ostringstream& out, const T& first, const Rest&... rest) {
  out << first;
  append(out, rest...);
}
}  // namespace detail

template <typename... Parts>
[[noreturn]] void fail(ErrorKind kind, const Parts&... parts) {
  std::ostringstream out;
  detail::append(out, parts...);
  throw Error(kind, out.str());
}

}  // namespace torch_tpu

// Like TORCH_CHECK, without torch: raises torch_tpu::Error of the given kind.
#define TPU_CHECK(cond, kind, ...)                      \
  do {                                                  \
    if (!(cond)) ::torch_tpu::fail(kind, __VA_ARGS__);  \
  } while (0)
