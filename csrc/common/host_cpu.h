// The host CPU's features that measured kernel choices depend on (which of
// two GEMMs, from how many keys the fused attention), asked of the CPU itself
// (cpuid, through GCC's builtins). Python's choices read the same answers
// (torch_tpu._C._host_cpu), so that C++ and Python never disagree on a host.
#pragma once

namespace torch_tpu {

inline bool host_has_avx512f() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

inline bool host_is_intel() {
  static const bool is = __builtin_cpu_is("intel");
  return is;
}

}  // namespace torch_tpu
