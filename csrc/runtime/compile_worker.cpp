// The compile worker: one thread that compiles and launches programs one at
// a time, in the order they were flushed, so that the recording thread goes
// on recording meanwhile (defer_and_fuse) and a long compile can be waited
// for interruptibly (every mode). A job touches only its own fields while it
// runs; the recording thread waits on the job, under the executor's lock,
// and adopts its outputs into the graph's live buffers (or their error).
#include <deque>
#include <thread>

#include "common/interrupt.h"
#include "runtime/executor_internal.h"
#include "runtime/memory_stats.h"

namespace torch_tpu::runtime {

void CompileJob::run() {
  Runtime& rt = Runtime::get();
  try {
    if (!mlir.empty()) {
      program->exe = rt.compile(mlir, out_types, device, label);
      rt.insert(key, program);
    }
    outs = executor::execute(*program->exe, args, program->donated, device,
                             {label.name, label.ops, mlir.empty() ? "hit" : "miss", label.correlation});
  } catch (const Error& e) {
    error = e.what();  // the adopting thread names the graph (launch.cpp)
    error_kind = e.kind();
    if (e.kind() == ErrorKind::OutOfMemory) record_oom(device);
  }
  std::lock_guard<std::mutex> lock(mu);
  done = true;
  cv.notify_all();
}

void CompileJob::wait() {
  wait_interruptibly([&] {  // a long compile or launch: Ctrl-C still works
    std::lock_guard<std::mutex> lock(mu);
    return done;
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
}

void CompileJob::adopt(const std::vector<std::shared_ptr<DeviceBuffer>>& targets) {
  wait();
  params.clear();
  if (!error.empty()) return executor::poison(targets, error, error_kind);
  for (size_t k = 0; k < targets.size(); ++k) targets[k]->fulfil(std::move(outs[k]));
}

void CompileJob::adopt_live() {
  std::vector<std::shared_ptr<DeviceBuffer>> targets;
  std::vector<std::unique_ptr<pjrt::Buffer>> kept;
  targets.reserve(live.size());
  kept.reserve(live.size());
  wait();
  for (size_t k = 0; k < live.size(); ++k) {
    if (auto b = live[k].lock()) {
      targets.push_back(std::move(b));
      kept.push_back(k < outs.size() ? std::move(outs[k]) : nullptr);
    }
  }
  outs = std::move(kept);
  adopt(targets);
}

namespace executor {
namespace {

// A single worker: programs compile and launch one at a time, in flush order.
class CompileWorker {
 public:
  CompileWorker() { std::thread([this] { loop(); }).detach(); }
  void submit(std::shared_ptr<CompileJob> job) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
    cv_.notify_one();
  }

 private:
  void loop() {
    for (;;) {
      std::shared_ptr<CompileJob> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !queue_.empty(); });
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      job->run();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<CompileJob>> queue_;
};

CompileWorker& compile_worker() {
  static CompileWorker* worker = new CompileWorker();  // never joined: it outlives exit
  return *worker;
}

}  // namespace

void submit_to_worker(std::shared_ptr<CompileJob> job) { compile_worker().submit(std::move(job)); }

}  // namespace executor
}  // namespace torch_tpu::runtime
