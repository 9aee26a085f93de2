#include "runtime/runtime.h"

#include <iostream>

#include "common/env.h"
#include "common/error.h"
#include "pjrt/discovery.h"
#include "runtime/device_buffer.h"

namespace torch_tpu::runtime {

namespace {
std::vector<std::string>& package_roots() {
  static std::vector<std::string> roots;
  return roots;
}
std::mutex init_mu;
std::unique_ptr<Runtime> instance;
}  // namespace

void Runtime::set_package_roots(std::vector<std::string> roots) {
  package_roots() = std::move(roots);
}

bool Runtime::initialized() {
  std::lock_guard<std::mutex> lock(init_mu);
  return instance != nullptr;
}

Runtime& Runtime::get() {
  std::lock_guard<std::mutex> lock(init_mu);
  if (!instance) {
    pjrt::PluginChoice choice = pjrt::discover_plugin(env().pjrt_plugin, package_roots());
    auto plugin = pjrt::Plugin::load(choice);
    instance.reset(new Runtime(std::make_unique<pjrt::Client>(std::move(plugin))));
  }
  return *instance;
}

void Runtime::check_device(int device) const {
  TPU_CHECK(device >= 0 && device < device_count(), ErrorKind::Runtime,
            "Invalid device index tpu:", device, ": ", device_count(),
            " tpu device(s) available (PJRT plugin '", plugin_choice().path, "')");
}

std::shared_ptr<CompiledProgram> Runtime::lookup(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.hits;
  return it->second;
}

void Runtime::insert(const std::string& key, std::shared_ptr<CompiledProgram> program) {
  std::lock_guard<std::mutex> lock(mu_);
  cache_[key] = std::move(program);
}

std::unique_ptr<pjrt::Executable> Runtime::compile(const std::string& mlir,
                                                   std::vector<hlo::TensorType> outputs,
                                                   int device) const {
  if (env().dump_hlo) std::cerr << mlir << std::endl;
  auto exe = client_->compile(mlir, std::move(outputs), device);
  std::lock_guard<std::mutex> lock(mu_);
  const_cast<Runtime*>(this)->stats_.compiled++;
  return exe;
}

void Runtime::note_launch(std::shared_ptr<DeviceBuffer> newest) {
  std::lock_guard<std::mutex> lock(mu_);
  newest_ = newest;
}

void Runtime::synchronize(int device) {
  check_device(device);
  std::shared_ptr<DeviceBuffer> newest;
  {
    std::lock_guard<std::mutex> lock(mu_);
    newest = newest_.lock();
  }
  // Errors belong to the op's outputs and are raised where they are used,
  // not by an unrelated synchronize.
  if (newest && newest->state() == DeviceBuffer::State::Materialized) {
    try {
      newest->wait();
    } catch (const Error&) {
    }
  }
}

void Runtime::note_execution(int donated_buffers) {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.launches;
  stats_.donated_buffers += donated_buffers;
}

Runtime::CacheStats Runtime::cache_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Runtime::fail_next_launch(std::string message) {
  std::lock_guard<std::mutex> lock(mu_);
  injected_failure_ = std::move(message);
}

bool Runtime::take_injected_failure(std::string* message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (injected_failure_.empty()) return false;
  *message = std::move(injected_failure_);
  injected_failure_.clear();
  return true;
}

}  // namespace torch_tpu::runtime
