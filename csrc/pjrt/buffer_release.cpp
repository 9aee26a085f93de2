#include "pjrt/buffer_release.h"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace torch_tpu::pjrt {

namespace {

class Releaser {
 public:
  Releaser() : thread_([this] { loop(); }) { thread_.detach(); }

  // Wakes the thread once per batch -- a wake-up per buffer costs more than
  // recording a small op -- or as soon as a lot of memory waits.
  void push(const Api* api, PJRT_Buffer* buffer, size_t nbytes) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({api, buffer});
    bytes_ += nbytes;
    if (idle_ && (queue_.size() >= kBatch || bytes_ >= kBytes)) wake_.notify_one();
  }

  void drain() {
    std::unique_lock<std::mutex> lock(mu_);
    draining_ = true;
    wake_.notify_one();
    done_.wait(lock, [&] { return queue_.empty() && idle_; });
  }

 private:
  static constexpr size_t kBatch = 64;
  static constexpr size_t kBytes = size_t{64} << 20;
  struct Entry {
    const Api* api;
    PJRT_Buffer* buffer;
  };

  void loop() {
    std::vector<Entry> batch;
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
      for (const Entry& e : batch) {
        PJRT_Buffer_Destroy_Args args{};
        args.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE;
        args.buffer = e.buffer;
        e.api->PJRT_Buffer_Destroy(&args);  // an error here has nobody left to tell
      }
      batch.clear();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::vector<Entry> queue_;
  size_t bytes_ = 0;
  bool idle_ = false;
  bool draining_ = false;
  std::thread thread_;
};

Releaser& releaser() {
  static Releaser* r = new Releaser();  // never destroyed: buffers die until exit
  return *r;
}

}  // namespace

void release_buffer(const Api* api, PJRT_Buffer* buffer, size_t nbytes) {
  releaser().push(api, buffer, nbytes);
}

void drain_buffer_releases() { releaser().drain(); }

}  // namespace torch_tpu::pjrt
