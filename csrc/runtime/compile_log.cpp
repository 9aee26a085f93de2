#include "runtime/compile_log.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "common/env.h"
#include "runtime/profiler_events.h"

namespace torch_tpu::runtime {

namespace {

constexpr int64_t kBurstGapNs = 1000000000;  // compilations further apart start a new burst

std::mutex mu;
// Never destroyed: used during exit.
std::set<std::string>& compiled_before = *new std::set<std::string>;  // program names compiled at least once
struct Burst {
  int64_t last_end_ns = 0;
  int64_t waited_ns = 0;
  int programs = 0;
  std::map<std::string, int> new_shapes, new_ops;
  bool reported = false;
} burst;

std::string most_frequent(const std::map<std::string, int>& counts) {
  std::vector<std::pair<int, std::string>> v;
  for (const auto& [name, n] : counts) v.emplace_back(-n, name);
  std::sort(v.begin(), v.end());
  std::string s;
  for (size_t i = 0; i < v.size() && i < 3; ++i)
    s += (i ? ", " : "") + v[i].second + " x" + std::to_string(-v[i].first);
  if (v.size() > 3) s += ", ...";
  return s;
}

}  // namespace

void note_compile(const ProgramLabel& label, const std::string& tier, int device, int64_t start_ns,
                  int64_t end_ns) {
  const std::string name = label.name.empty() ? "(unnamed program)" : label.name;
  record_compile({name, label.ops, tier, device, start_ns, end_ns, label.correlation});
  std::lock_guard<std::mutex> lock(mu);
  bool seen = !compiled_before.insert(name).second;
  double seconds = static_cast<double>(end_ns - start_ns) / 1e9;
  if (env().log_compile) {
    fprintf(stderr, "torch_tpu compile: tpu:%d %s (%d op%s%s%s) %.3f s, %s\n", device, name.c_str(),
            label.ops, label.ops == 1 ? "" : "s", label.origin.empty() ? "" : ", at ",
            label.origin.c_str(), seconds,
            tier == "disk" ? "persistent cache hit" : seen ? "compiled: new input shapes"
                                                          : "compiled: new program");
  }
  if (start_ns - burst.last_end_ns > kBurstGapNs) burst = Burst{};
  burst.last_end_ns = end_ns;
  burst.waited_ns += end_ns - start_ns;
  ++burst.programs;
  ++(seen ? burst.new_shapes : burst.new_ops)[name];
  double threshold = env().slow_compile_seconds;
  if (burst.reported || static_cast<double>(burst.waited_ns) / 1e9 < threshold) return;
  burst.reported = true;
  int shapes = 0, ops = 0;
  for (const auto& [n, c] : burst.new_shapes) shapes += c;
  for (const auto& [n, c] : burst.new_ops) ops += c;
  std::string why;
  if (shapes) why += std::to_string(shapes) + " for new input shapes of ops compiled before (" +
                     most_frequent(burst.new_shapes) + ")";
  if (ops) why += std::string(why.empty() ? "" : "; ") + std::to_string(ops) +
                  " never compiled before (" + most_frequent(burst.new_ops) + ")";
  fprintf(stderr,
          "torch_tpu: compiling has kept the host waiting %.1f s: %d programs so far, %s. "
          "TORCH_TPU_LOG=compile lists each.\n",
          static_cast<double>(burst.waited_ns) / 1e9, burst.programs, why.c_str());
}

}  // namespace torch_tpu::runtime
