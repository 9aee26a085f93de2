#include "common/release_queue.h"

#include "common/fork_guard.h"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace torch_tpu {

namespace {

class ReleaseQueue {
 public:
  ReleaseQueue() : thread_([this] { loop(); }) { thread_.detach(); }

  // Wakes the thread once per batch -- a wake-up per task costs more than
  // recording a small op -- or as soon as a lot of memory waits. Once woken
  // it counts as busy, so the pushes made before it runs (a graph's launch
  // drops a hundred buffers at once) do not signal it again.
  void push(std::function<void()> task, size_t nbytes) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
    bytes_ += nbytes;
    if (idle_ && (queue_.size() >= kBatch || bytes_ >= kBytes)) {
      idle_ = false;
      wake_.notify_one();
    }
  }

  // Asks again after every wake-up: a push that lands after the thread found
  // its queue empty (and stopped draining) but before this wakes does not
  // signal the thread, which would then wait for a batch while this waits for it.
  void drain() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!(queue_.empty() && idle_)) {
      draining_ = true;
      wake_.notify_one();
      done_.wait(lock);
    }
  }

 private:
  static constexpr size_t kBatch = 64;
  static constexpr size_t kBytes = size_t{64} << 20;

  void loop() {
    std::vector<std::function<void()>> batch;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        idle_ = true;
        if (queue_.empty()) draining_ = false;
        done_.notify_all();
        wake_.wait(lock, [&] {
          return !queue_.empty() && (draining_ || queue_.size() >= kBatch || bytes_ >= kBytes);
        });
        idle_ = false;
        batch.swap(queue_);
        bytes_ = 0;
      }
      for (auto& task : batch) task();  // a task may queue more: the lock is not held
      batch.clear();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::vector<std::function<void()>> queue_;
  size_t bytes_ = 0;
  bool idle_ = false;
  bool draining_ = false;
  std::thread thread_;
};

ReleaseQueue& release_queue() {
  static ReleaseQueue* q = new ReleaseQueue();  // never destroyed: things die until exit
  return *q;
}

}  // namespace

void release_later(std::function<void()> task, size_t nbytes) {
  if (in_bad_fork()) {
    // No release thread here, and the task would call into the plugin: the
    // memory is the parent's copy, gone when this child exits.
    new std::function<void()>(std::move(task));
    return;
  }
  release_queue().push(std::move(task), nbytes);
}

void drain_releases() {
  if (!in_bad_fork()) release_queue().drain();
}

}  // namespace torch_tpu
