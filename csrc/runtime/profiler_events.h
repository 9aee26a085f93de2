// What the profiler records about the device while a trace runs: one span per
// launched program (from runtime/device_timeline.h) and one per compilation
// (from runtime/compile_log.h). aten/ turns them into kineto activities for
// torch.profiler.
//
// Correlation: torch's profiler gives each op a correlation id, pushed on the
// op's thread while it runs. A launch takes the id on top of its thread's
// stack, so a strict-mode program belongs to the op that issued it and a fused
// graph to the op that made it run (.cpu(), .item(), the op completing a
// repeat). Programs launched on the compile worker carry the id taken when
// the graph was flushed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/device_timeline.h"

namespace torch_tpu::runtime {

struct CompileSpan {
  std::string program;
  int ops = 0;
  std::string tier;  // "disk" (persistent cache hit) or "compiled"
  int device = 0;
  int64_t start_ns = 0, end_ns = 0;
  uint64_t correlation = 0;
};

struct DeviceTrace {
  std::vector<std::shared_ptr<LaunchTiming>> launches;  // in launch order
  std::vector<CompileSpan> compiles;
};

bool tracing();
void start_trace();
// Ends the trace and returns what it recorded. Launches may still be running:
// the caller waits for them (LaunchTiming::wait) before reading end times.
DeviceTrace stop_trace();

void record_launch(std::shared_ptr<LaunchTiming> launch);
void record_compile(CompileSpan span);

void push_correlation(uint64_t id);
void pop_correlation();
// The innermost id pushed on this thread (0: none).
uint64_t current_correlation();

// Device span of each launch: [start, end] where start is the later of its
// launch and the end of the previous launch on the same device.
struct Span {
  int64_t start_ns, end_ns;
};
std::vector<Span> device_spans(const std::vector<std::shared_ptr<LaunchTiming>>& launches);

}  // namespace torch_tpu::runtime
