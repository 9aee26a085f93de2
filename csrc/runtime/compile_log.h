// Compile visibility: every compilation (a persistent-cache load included)
// is reported here. With TORCH_TPU_LOG=compile each gets a line on stderr;
// the profiler gets a compile span; and when compilations keep the host
// waiting longer than TORCH_TPU_SLOW_COMPILE_SECONDS (default 5) within one
// burst -- compilations less than a second apart -- one line says how many
// programs are compiling and why: ops already compiled meeting new input
// shapes, or ops never compiled before, with the most frequent of each.
#pragma once

#include <cstdint>
#include <string>

namespace torch_tpu::runtime {

// What a program is, for logs and traces.
struct ProgramLabel {
  std::string name;    // "'aten::mm'", "graph of 12 ops: 'aten::mul.Tensor' .. 'aten::add_.Tensor'"
  int ops = 0;
  std::string origin;  // Python line of its first op ("" when unknown)
  uint64_t correlation = 0;  // profiler correlation id (runtime/profiler_events.h)
};

// A compile's tier -- "disk" (loaded from the persistent cache) or
// "compiled" -- and when it ran.
struct CompileNote {
  const char* tier = nullptr;  // null: nothing to note
  int64_t start_ns = 0, end_ns = 0;
};

void note_compile(const ProgramLabel& label, const std::string& tier, int device, int64_t start_ns,
                  int64_t end_ns);

}  // namespace torch_tpu::runtime
