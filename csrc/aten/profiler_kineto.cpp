// torch.profiler's view of the device: a kineto activity profiler registered
// for PrivateUse1 (torch 2.13's PrivateUse1ProfilerRegistry). With
// ProfilerActivity.PrivateUse1 requested, kineto opens one session of ours
// per trace. The session switches on the runtime's trace recording
// (runtime/profiler_events.h), forwards kineto's per-op correlation ids to
// it, and at the end hands kineto one activity per launched program (a
// kernel on the device's "programs" row, linked to the op that launched it,
// so key_averages() counts it as that op's device time) and one per
// compilation (on the device's "compiles" row, not linked: it is host time).
// Stopping waits for the programs launched during the trace, so each has an
// end time.
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>

#include <set>

#include "aten/tensor_bridge.h"
#include "runtime/profiler_events.h"
#include "runtime/runtime.h"

namespace torch_tpu::aten {

namespace {

using libkineto::ActivityType;

constexpr int32_t kProgramsRow = 0;
constexpr int32_t kCompilesRow = 1;

class TpuProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    runtime::start_trace();
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    if (runtime::Runtime::initialized()) {
      try {
        runtime::flush_all("profiler");  // deferred work of the trace runs inside it
      } catch (const Error& e) {
        errors_.push_back(e.what());
      }
    }
    trace_ = runtime::stop_trace();
    for (const auto& l : trace_.launches) l->wait();
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return errors_; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, nullptr, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback linked, int64_t, int64_t) override {
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    int64_t first = trace_.launches.empty() ? 0 : trace_.launches.front()->launch_ns;
    int64_t last = first;
    std::vector<runtime::Span> spans = runtime::device_spans(trace_.launches);
    for (size_t i = 0; i < trace_.launches.size(); ++i) {
      const runtime::LaunchTiming& l = *trace_.launches[i];
      auto& a = add(ActivityType::CONCURRENT_KERNEL, l.name, l.device, kProgramsRow, spans[i].start_ns,
                    spans[i].end_ns, l.correlation, linked);
      a.addMetadataQuoted("ops", std::to_string(l.ops));
      if (!l.cache.empty()) a.addMetadataQuoted("program cache", l.cache);
      if (l.failed) a.addMetadataQuoted("status", "failed");
      last = std::max(last, spans[i].end_ns);
      logger.handleActivity(a);
    }
    // Compile spans get ids of their own, above any op's correlation id: with
    // id 0 torch's post-processing would merge them with unrelated events.
    int32_t compile_id = 1 << 30;
    for (const runtime::CompileSpan& c : trace_.compiles) {
      auto& a = add(ActivityType::PRIVATEUSE1_RUNTIME, "compile " + c.program, c.device, kCompilesRow,
                    c.start_ns, c.end_ns, 0, nullptr);
      a.id = compile_id++;
      a.addMetadataQuoted("ops", std::to_string(c.ops));
      a.addMetadataQuoted("tier", c.tier == "disk" ? "persistent cache hit" : "compiled");
      logger.handleActivity(a);
    }
    buffer_->span = libkineto::TraceSpan(first, last, "tpu");
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    int device = devices().empty() ? 0 : *devices().begin();
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{
        device, libkineto::kExceedMaxPid + device, "tpu", "tpu " + std::to_string(device)});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> rows;
    for (int d : devices()) {
      rows.push_back({kProgramsRow, kProgramsRow, d, "programs"});
      rows.push_back({kCompilesRow, kCompilesRow, d, "compiles"});
    }
    return rows;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

  void pushCorrelationId(uint64_t id) override { runtime::push_correlation(id); }
  void popCorrelationId() override { runtime::pop_correlation(); }

 private:
  libkineto::GenericTraceActivity& add(ActivityType type, const std::string& name, int device,
                                       int32_t row, int64_t start_ns, int64_t end_ns,
                                       uint64_t correlation,
                                       const libkineto::getLinkedActivityCallback& linked) {
    buffer_->emplace_activity(buffer_->span, type, name);
    auto& a = libkineto::CpuTraceBuffer::toRef(buffer_->activities.back());
    a.startTime = start_ns;
    a.endTime = end_ns;
    a.device = device;
    a.resource = row;
    a.id = static_cast<int32_t>(correlation);
    if (correlation != 0) {
      a.flow.id = static_cast<uint32_t>(correlation);
      a.flow.type = libkineto::kLinkAsyncCpuGpu;
      a.flow.start = 0;
      if (linked) a.linked = linked(static_cast<int32_t>(correlation));
    }
    return a;
  }

  std::set<int> devices() const {
    std::set<int> d;
    for (const auto& l : trace_.launches) d.insert(l->device);
    for (const auto& c : trace_.compiles) d.insert(c.device);
    return d;
  }

  runtime::DeviceTrace trace_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;  // on the heap: activities point at its span
  std::vector<std::string> errors_;
};

class TpuActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return activities_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& types, const libkineto::Config&) override {
    // torch 2.13 passes these types in CPU-only traces too, so such traces
    // also get the device rows.
    for (ActivityType t : activities_)
      if (types.count(t)) return std::make_unique<TpuProfilerSession>();
    return nullptr;
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<ActivityType>& types, const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_ = "torch_tpu";
  std::set<ActivityType> activities_{ActivityType::CONCURRENT_KERNEL,
                                     ActivityType::PRIVATEUSE1_RUNTIME};
};

}  // namespace

REGISTER_PRIVATEUSE1_PROFILER(TpuActivityProfiler);

}  // namespace torch_tpu::aten
