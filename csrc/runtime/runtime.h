// The process-wide runtime: the loaded PJRT plugin and client, created on
// first use, and the in-memory executable cache.
#pragma once

#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "pjrt/client.h"
#include "pjrt/plugin.h"
#include "runtime/compile_log.h"

namespace torch_tpu::runtime {

struct CompiledProgram;  // runtime/executor_internal.h

class Runtime {
 public:
  // Where Python packages live (site-packages folders), for plugin discovery.
  // Must be called before the first get().
  static void set_package_roots(std::vector<std::string> roots);
  // Loads the plugin on first call; throws torch_tpu::Error if none can be.
  static Runtime& get();
  // True once get() has succeeded (does not load anything).
  static bool initialized();

  const pjrt::Client& client() const { return *client_; }
  const pjrt::PluginChoice& plugin_choice() const { return client_->plugin().choice(); }
  int device_count() const { return client_->device_count(); }
  void check_device(int device) const;

  // The in-memory program cache, keyed by graph keys (runtime/graph.h). It
  // keeps the most recently used kMaxPrograms: every loaded executable maps
  // memory (about three mappings each on the CPU plugin), and a process may
  // hold only so many mappings (vm.max_map_count). Evicted programs come
  // back from the persistent cache.
  static constexpr size_t kMaxPrograms = 4096;
  // A miss is counted unless `count_miss` is false (a lookup that a full
  // one follows on a miss).
  std::shared_ptr<CompiledProgram> lookup(const std::string& key, bool count_miss = true);
  void insert(const std::string& key, std::shared_ptr<CompiledProgram> program);
  // Removes `key` if it still names `program` (whose compile failed).
  void forget(const std::string& key, const CompiledProgram* program);
  // Compiles `mlir` for `device`, or loads it from the persistent cache
  // (runtime/disk_cache.h), whose entries are keyed by the program text, the
  // plugin and the device so that nothing compiled elsewhere is reused.
  // `label` names the program in compile logs and traces (runtime/compile_log.h);
  // with `later`, the caller notes it there (the compile workers note theirs
  // in launch order, so that logs and "new program" or "new input shapes"
  // do not depend on which of two compiles ended first).
  std::unique_ptr<pjrt::Executable> compile(const std::string& mlir,
                                            std::vector<hlo::TensorType> outputs,
                                            int device, const ProgramLabel& label = {},
                                            CompileNote* later = nullptr);

  // Keeps the completion event of each launch until it is ready, so that
  // synchronize() waits for everything issued so far, including programs
  // whose results nobody holds any more (the plugin may run launches
  // concurrently, so the newest one finishing proves nothing).
  void note_launch(std::unique_ptr<pjrt::Event> done);
  void synchronize(int device);
  // Gives the plugin's worker threads TORCH_TPU_DEVICE_THREAD_NICE's value,
  // or `fallback` where it is unset (none: leaves them); a refusal (a lower
  // value than they have, without privilege) is a warning, not an error.
  void set_device_thread_nice(std::optional<int> fallback);
  // Launches not finished yet (does not wait).
  int64_t launches_in_progress() const;

  // Test hook: forgets the in-memory programs, so the next launches compile
  // or come from the persistent cache.
  void clear_programs_for_test();
  // Test hook: the next launched op fails as if the device had reported an
  // error asynchronously; its outputs carry `message`.
  void fail_next_launch(std::string message);
  bool take_injected_failure(std::string* message);

 private:
  explicit Runtime(std::unique_ptr<pjrt::Client> client) : client_(std::move(client)) {}

  std::unique_ptr<pjrt::Client> client_;
  mutable std::mutex mu_;
  struct Entry {
    std::shared_ptr<CompiledProgram> program;
    std::list<std::string>::iterator age;  // position in lru_
  };
  std::unordered_map<std::string, Entry> cache_;
  std::list<std::string> lru_;  // most recently used first
  std::deque<std::unique_ptr<pjrt::Event>> launches_;  // not yet known to be finished
  std::string injected_failure_;
};

}  // namespace torch_tpu::runtime
