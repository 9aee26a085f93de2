// torch.tpu.memory._record_memory_history() / _snapshot(): the allocation
// history in the format of torch.cuda's snapshots, so that
// torch.cuda._memory_viz renders it (trace_plot, segment_plot, flame graphs).
//
// PJRT buffers have no addresses we may look at, and there is no pool: each
// live buffer is reported as one segment holding one block. Addresses are
// made up, one fresh range per allocation, so a trace never shows two live
// buffers overlapping. Python stacks are taken when a buffer is allocated
// (and, with context="all", freed) through the runtime's memory observer.
#include <Python.h>
#include <frameobject.h>
#include <torch/csrc/utils/pybind.h>

#include <deque>
#include <mutex>
#include <unordered_map>

#include "aten/tensor_bridge.h"
#include "runtime/device_timeline.h"
#include "runtime/memory_stats.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace torch_tpu::aten {

namespace {

struct Frame {
  std::string filename, name;
  int line;
};
using Stack = std::shared_ptr<const std::vector<Frame>>;

struct Block {
  int device;
  uint64_t address;
  int64_t size;
  Stack frames;
};

struct TraceEntry {
  std::string action;  // "alloc", "free_requested", "free_completed"
  int device;
  uint64_t address;
  int64_t size;
  int64_t time_us;
  Stack frames;
};

std::mutex mu;
bool recording = false;
bool free_stacks = false;  // context="all"
bool stacks = true;        // stacks="python" (or "all"); false: none
size_t max_entries = 0;
uint64_t next_address = 0x10000;
// Never destroyed: blocks are freed during exit.
std::unordered_map<const void*, Block>& live = *new std::unordered_map<const void*, Block>;
std::deque<TraceEntry>& entries = *new std::deque<TraceEntry>;

Stack python_stack() {
  if (!Py_IsInitialized()) return nullptr;
  PyGILState_STATE gil = PyGILState_Ensure();
  auto frames = std::make_shared<std::vector<Frame>>();
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  Py_XINCREF(frame);
  while (frame != nullptr && frames->size() < 64) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    const char* name = PyUnicode_AsUTF8(code->co_name);
    if (!file || !name) PyErr_Clear();
    frames->push_back({file ? file : "?", name ? name : "?", PyFrame_GetLineNumber(frame)});
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  PyGILState_Release(gil);
  return frames;
}

void push(TraceEntry e) {
  entries.push_back(std::move(e));
  while (max_entries && entries.size() > max_entries) entries.pop_front();
}

void observe(int device, const void* block, int64_t bytes, bool alloc) {
  // The stack is taken before the lock: walking frames takes the GIL.
  Stack frames = stacks && (alloc || free_stacks) ? python_stack() : nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (!recording) return;
  int64_t t = runtime::now_ns() / 1000;
  if (alloc) {
    uint64_t address = next_address;
    next_address += (static_cast<uint64_t>(bytes) + 511) / 512 * 512 + 512;
    live[block] = {device, address, bytes, frames};
    push({"alloc", device, address, bytes, t, frames});
    return;
  }
  auto it = live.find(block);
  if (it == live.end()) return;  // allocated before recording began
  uint64_t address = it->second.address;
  live.erase(it);
  push({"free_requested", device, address, bytes, t, frames});
  push({"free_completed", device, address, bytes, t, frames});
}

py::list frames_list(const Stack& s) {
  py::list l;
  if (!s) return l;
  for (const Frame& f : *s) {
    py::dict d;
    d["filename"] = f.filename;
    d["line"] = f.line;
    d["name"] = f.name;
    l.append(d);
  }
  return l;
}

void record_history(const std::string& enabled, const std::string& context,
                    const std::string& stack_kind, size_t max) {
  TORCH_CHECK_VALUE(enabled == "all" || enabled == "state" || enabled.empty(),
                    "_record_memory_history: enabled must be None, \"state\" or \"all\", got \"",
                    enabled, "\"");
  TORCH_CHECK_VALUE(context == "alloc" || context == "all" || context == "state" || context.empty(),
                    "_record_memory_history: context must be None, \"state\", \"alloc\" or \"all\", got \"",
                    context, "\"");
  TORCH_CHECK_VALUE(stack_kind == "python" || stack_kind == "all",
                    "_record_memory_history: stacks must be \"python\" or \"all\", got \"",
                    stack_kind, "\"");
  std::lock_guard<std::mutex> lock(mu);
  if (enabled.empty()) {
    recording = false;
    runtime::set_memory_observer(nullptr);
    live.clear();
    entries.clear();
    return;
  }
  // Calling it again while recording changes the options and keeps what was
  // recorded, as torch.cuda's does.
  recording = true;
  free_stacks = context == "all";
  stacks = !context.empty();
  max_entries = enabled == "state" ? 0 : max;
  runtime::set_memory_observer(&observe);
}

py::dict snapshot() {
  std::lock_guard<std::mutex> lock(mu);
  py::list segments;
  for (const auto& [ptr, b] : live) {
    py::dict block;
    block["address"] = b.address;
    block["size"] = b.size;
    block["requested_size"] = b.size;
    block["state"] = "active_allocated";
    block["frames"] = frames_list(b.frames);
    py::list blocks;
    blocks.append(block);
    py::dict seg;
    seg["device"] = b.device;
    seg["address"] = b.address;
    seg["total_size"] = b.size;
    seg["allocated_size"] = b.size;
    seg["active_size"] = b.size;
    seg["requested_size"] = b.size;
    seg["stream"] = 0;
    seg["segment_type"] = b.size >= (1 << 20) ? "large" : "small";
    seg["segment_pool_id"] = py::make_tuple(0, 0);
    seg["is_expandable"] = false;
    seg["frames"] = py::list();
    seg["blocks"] = blocks;
    segments.append(seg);
  }
  int devices = runtime::Runtime::initialized() ? runtime::Runtime::get().device_count() : 1;
  std::vector<py::list> traces(static_cast<size_t>(std::max(devices, 1)));
  for (const TraceEntry& e : entries) {
    if (e.device >= static_cast<int>(traces.size())) continue;
    py::dict d;
    d["action"] = e.action;
    d["addr"] = e.address;
    d["size"] = e.size;
    d["stream"] = 0;
    d["time_us"] = e.time_us;
    d["frames"] = frames_list(e.frames);
    traces[static_cast<size_t>(e.device)].append(d);
  }
  py::list device_traces;
  for (auto& t : traces) device_traces.append(t);
  py::dict out;
  out["segments"] = segments;
  out["device_traces"] = device_traces;
  out["allocator_settings"] = py::dict();
  return out;
}

}  // namespace

void bind_memory_history(py::module& m) {
  m.def("_record_memory_history", &record_history, "Start/stop recording allocations (see memory.py)");
  m.def("_memory_snapshot", &snapshot, "The recorded history in torch.cuda's snapshot format");
}

}  // namespace torch_tpu::aten
