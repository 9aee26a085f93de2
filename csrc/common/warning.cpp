#include "common/warning.h"

#include <atomic>
#include <iostream>
#include <mutex>
#include <set>

namespace torch_tpu {

namespace {
std::atomic<WarningSink> sink{nullptr};
std::mutex mu;
std::set<std::string>& said = *new std::set<std::string>;  // never destroyed: used during exit
}  // namespace

void set_warning_sink(WarningSink s) { sink = s; }

void warn_once(const std::string& key, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!said.insert(key).second) return;
  }
  if (WarningSink s = sink.load()) return s(message);
  std::cerr << "torch_tpu warning: " << message << std::endl;
}

}  // namespace torch_tpu
