#include "runtime/auto_dynamic.h"

#include <atomic>
#include <iostream>
#include <map>
#include <mutex>

#include "common/env.h"
#include "runtime/counters.h"

namespace torch_tpu::runtime {

namespace {

std::atomic<int> enabled{-1};  // -1: not read from the environment yet

struct Place {
  hlo::Shape last;
  int dim = -1;  // the dynamic dimension, once one is
};

std::mutex mu;
std::map<std::string, Place>& places() {
  static auto& p = *new std::map<std::string, Place>;  // never destroyed: used during exit
  return p;
}

}  // namespace

bool auto_dynamic_enabled() {
  int e = enabled.load();
  if (e < 0) {
    e = env().auto_dynamic ? 1 : 0;
    enabled.store(e);
  }
  return e == 1;
}

void set_auto_dynamic(bool on) { enabled.store(on ? 1 : 0); }

std::optional<int> auto_dynamic_dim(const std::string& place, const hlo::TensorType& type, int device) {
  if (type.rank() == 0) return std::nullopt;
  const std::string key = place + '|' + hlo::mlir_name(type.dtype) + '/' + std::to_string(type.rank()) + '@' + std::to_string(device);
  std::lock_guard<std::mutex> lock(mu);
  auto& all = places();
  if (all.size() > 4096) all.clear();  // bounded: a key per place
  auto [it, fresh] = all.try_emplace(key, Place{type.shape, -1});
  Place& p = it->second;
  if (!fresh && p.dim < 0) {
    int differing = -1, count_diff = 0;
    for (int64_t d = 0; d < type.rank(); ++d)
      if (type.shape[d] != p.last[d]) {
        differing = static_cast<int>(d);
        ++count_diff;
      }
    if (count_diff == 1) {
      p.dim = differing;
      count("dims_made_dynamic");
      if (env().log_compile)
        std::cerr << "torch_tpu dynamic: dimension " << differing << " of the rank-" << type.rank() << " "
                  << hlo::mlir_name(type.dtype) << " tensors copied to tpu:" << device << " at " << place << " is dynamic from now on (size "
                  << p.last[differing] << ", then " << type.shape[differing]
                  << "): padded to its bucket; torch_tpu.dynamic.mark_static keeps it static\n";
    }
  }
  p.last = type.shape;
  if (p.dim < 0) return std::nullopt;
  return p.dim;
}

void reset_auto_dynamic() {
  std::lock_guard<std::mutex> lock(mu);
  places().clear();
}

}  // namespace torch_tpu::runtime
