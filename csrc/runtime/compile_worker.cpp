// The compile workers: threads (one per core, at most kMaxWorkers) that
// compile programs side by side and launch them one at a time, in the order
// they were submitted, so that the recording thread goes on recording
// meanwhile and a long compile can be waited for interruptibly (every mode).
// Launching in order is what lets a job take as arguments the outputs of
// jobs submitted before it (PendingArg): when its turn comes they have
// launched, and PJRT orders the device work. A job touches only its own
// fields and reads its producers' outputs under their lock; the recording
// thread waits on the job, under the executor's lock, and adopts its outputs
// into the graph's live buffers (or their error).
#include <algorithm>
#include <deque>
#include <thread>

#include "common/interrupt.h"
#include "runtime/executor_internal.h"
#include "runtime/memory_stats.h"

namespace torch_tpu::runtime {

namespace {

// A compile ahead, on whichever thread claimed it; its log line is noted
// here, as it launches nothing.
void compile_ahead_job(CompileJob& job) {
  job.compile_step();
  if (job.note.tier) note_compile(job.label, job.note.tier, job.device, job.note.start_ns, job.note.end_ns);
}

}  // namespace

void CompileJob::compile_step() {
  if (mlir.empty()) {
    // A program still queued to compile ahead: compiled here, side by side
    // with the worker's other compiles, rather than waited for.
    if (!program->ready.load(std::memory_order_acquire))
      if (auto queued = program->ahead.lock(); queued && queued->claim()) compile_ahead_job(*queued);
    return;
  }
  try {
    program->exe = Runtime::get().compile(mlir, out_types, device, label, &note);
  } catch (const Error& e) {
    program->compile_error = e.what();
    program->compile_error_kind = e.kind();
    Runtime::get().forget(key, program.get());  // the next launch compiles (and reports) it again
  }
  program->ready.store(true, std::memory_order_release);
  program->ready.notify_all();
}

void CompileJob::launch_step() {
  if (note.tier) note_compile(label, note.tier, device, note.start_ns, note.end_ns);
  for (const PendingArg& p : pending) {
    std::lock_guard<std::mutex> lock(p.producer->mu);
    if (!p.producer->error.empty() || p.out >= p.producer->out_ptrs.size()) {
      input_failed = true;  // the settling thread raises the producer's error (launch.cpp)
      error = p.producer->error.empty() ? "an input was not produced" : p.producer->error;
      error_kind = p.producer->error_kind;
      return;
    }
    args[p.arg] = p.producer->out_ptrs[p.out];
  }
  if (!injected_failure.empty()) {
    error = "on the device: " + injected_failure;
    return;
  }
  program->ready.wait(false, std::memory_order_acquire);  // compiled ahead, maybe still compiling
  if (!program->exe) {
    error = program->compile_error;
    error_kind = program->compile_error_kind;
    return;
  }
  try {
    outs = executor::execute(*program->exe, args, program->donated, device,
                             {label.name, label.ops, mlir.empty() ? "hit" : "miss", label.correlation});
  } catch (const Error& e) {
    error = e.what();  // the adopting thread names the graph (launch.cpp)
    error_kind = e.kind();
    if (e.kind() == ErrorKind::OutOfMemory) record_oom(device);
  }
}

void CompileJob::finish(bool publish_outputs) {
  std::lock_guard<std::mutex> lock(mu);
  if (publish_outputs) {
    out_ptrs.reserve(outs.size());
    for (const auto& o : outs) out_ptrs.push_back(o.get());
  }
  done = true;
  cv.notify_all();
}

void CompileJob::run() {
  compile_step();
  launch_step();
  finish(false);  // on the calling thread: no later job reads its outputs
}

bool CompileJob::finished() {
  std::lock_guard<std::mutex> lock(mu);
  return done;
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

constexpr unsigned kMaxWorkers = 8;  // compiles take memory; more rarely pay

class CompileWorker {
 public:
  CompileWorker() {
    unsigned n = std::clamp(std::thread::hardware_concurrency(), 1u, kMaxWorkers);
    for (unsigned i = 0; i < n; ++i) std::thread([this] { loop(); }).detach();
  }
  void submit(std::shared_ptr<CompileJob> job) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(next_ticket_++, std::move(job));
    cv_.notify_all();
  }

 private:
  void loop() {
    for (;;) {
      uint64_t ticket;
      std::shared_ptr<CompileJob> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !queue_.empty(); });
        ticket = queue_.front().first;
        job = std::move(queue_.front().second);
        queue_.pop_front();
      }
      job->compile_step();
      {
        // Jobs are taken in ticket order, so the turn's owner is always
        // running: waiting for it cannot deadlock.
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return launched_ == ticket; });
      }
      job->launch_step();
      job->finish(true);
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++launched_;
      }
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<uint64_t, std::shared_ptr<CompileJob>>> queue_;
  uint64_t next_ticket_ = 0, launched_ = 0;
};

CompileWorker& compile_worker() {
  static CompileWorker* worker = new CompileWorker();  // never joined: they outlive exit
  return *worker;
}

}  // namespace

void submit_to_worker(std::shared_ptr<CompileJob> job) { compile_worker().submit(std::move(job)); }

void submit_ahead(std::shared_ptr<CompileJob> job) {
  // One thread, so that compiles ahead take at most one core from the
  // host and the worker (a launch that needs one still queued compiles it
  // itself); never destroyed: it outlives exit.
  struct Ahead {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::shared_ptr<CompileJob>> queue;
  };
  static Ahead* ahead = [] {
    auto* a = new Ahead();
    std::thread([a] {
      for (;;) {
        std::shared_ptr<CompileJob> next;
        {
          std::unique_lock<std::mutex> lock(a->mu);
          a->cv.wait(lock, [&] { return !a->queue.empty(); });
          next = std::move(a->queue.front());
          a->queue.pop_front();
        }
        if (next->claim()) compile_ahead_job(*next);
      }
    }).detach();
    return a;
  }();
  {
    std::lock_guard<std::mutex> lock(ahead->mu);
    ahead->queue.push_back(std::move(job));
  }
  ahead->cv.notify_one();
}

}  // namespace executor
}  // namespace torch_tpu::runtime
