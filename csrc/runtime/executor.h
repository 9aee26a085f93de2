// Runs ATen ops: each call records a node into the current graph of its
// device (runtime/graph.h), and the eager mode (runtime/eager_mode.h)
// decides when the graph is flushed: at once (strict, debug) or later
// (defer_and_fuse). Inputs are read through their views inside the program,
// and in-place writes produce the storage's new base in the same program.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "lowering/registry.h"
#include "runtime/compile_log.h"
#include "runtime/graph.h"
#include "runtime/storage.h"
#include "runtime/view.h"

namespace torch_tpu::runtime {

struct TensorInput {
  Storage* storage = nullptr;
  ViewGeometry view;
  // The view is over the padded buffer itself (runtime/dynamic_dims.h);
  // otherwise a padded base is made exact before it is read.
  bool padded = false;
};

struct Destination {
  TensorInput target;
  // In-place ops may not narrow the result type (float into an int tensor);
  // copy_ may.
  bool check_cast = true;
};

struct OpCall {
  const lowering::Lowering* lowering = nullptr;
  lowering::Args args;  // tensor values are filled in while building
  // inputs[i] holds the tensors of args[i]: one for Tensor, one per entry for
  // TensorList (nullopt for None entries), none otherwise.
  std::vector<std::vector<std::optional<TensorInput>>> inputs;
  // destinations[j] receives output j; outputs past the end or without a
  // destination become new buffers.
  std::vector<std::optional<Destination>> destinations;
  int device = 0;
  hlo::ElementType default_float = hlo::ElementType::F32;
  // torch.get_float32_matmul_precision() when the op was issued.
  hlo::DotPrecision precision = hlo::DotPrecision::Highest;
  // Where the op was issued; null: asked of the origin provider.
  std::shared_ptr<const std::string> origin;
  // No cut after this node: strict runs it in one program with the op
  // recorded next (an index check beside its op, runtime/index_flags.h).
  bool fuse_with_next = false;
};

// Returns one buffer per lowering output; null for outputs written into a
// destination. Throws torch_tpu::Error for bad input (nothing recorded).
std::vector<std::shared_ptr<DeviceBuffer>> run_op(OpCall& call);

// The types of the op's results, recording nothing (raises its shape and
// dtype errors as run_op would).
std::vector<hlo::TensorType> result_types(OpCall call);

// In strict mode, compiles in the background the program `call` would
// launch, without running it (runtime/dynamic_dims.h: a growing tensor's
// next bucket); a no-op in the other modes and when it is cached.
void compile_ahead(OpCall& call);

// Runs one op as its own program now, as strict mode would, whatever the
// mode, outside the graph being recorded (which is left as it was).
std::vector<std::shared_ptr<DeviceBuffer>> run_op_alone(OpCall& call);

// Runs a recorded graph now (no-op if it already ran). Results nobody holds
// are dropped from the program; a failure turns the live results into
// errors naming the op, and leaves every other buffer as it was.
void flush_graph(const std::shared_ptr<Graph>& graph, const char* reason);
// Flushes every device's pending graph and, with `settle`, waits until
// every graph in flight has launched and its results are taken.
void flush_all(const char* reason, bool settle = true);
// Graphs compiling or launching on the worker, not settled yet (does not wait).
int64_t graphs_in_flight();
// While held (an optimizer step runs), a repeat cut marks the graph due
// instead of flushing it; a due graph is flushed before the next op is
// recorded or at the next flush (the step's end).
void hold_repeat_cuts(bool hold);

// torch.compile: the ops recorded between begin_capture and end_capture form
// one program that is compiled once and then launched for every call with
// new input buffers (of the same types). Inputs are parameters, so the
// executable depends only on their shapes and dtypes.
//
// Donation: an input the program updates (optimizer state, parameters,
// buffers) has its new value as an output of the same type, and the program
// is compiled with that input aliased to that output, so a launch overwrites
// the input's buffer instead of allocating a new one. Donating consumes the
// buffer, which is only right when nothing but the caller's tensor holds it
// (no pending graph, no other storage); when some updated input is shared, the
// launch uses a twin executable without aliases, compiled when first needed.
class CapturedProgram {
 public:
  // Fresh generator state for random ops: (seed, offset) reserving `count`.
  using RngSource = std::pair<uint64_t, uint64_t> (*)(int device, uint64_t count);
  // `exclusive[i]`: only the caller holds inputs[i] (it may be donated).
  std::vector<std::shared_ptr<DeviceBuffer>> run(const std::vector<std::shared_ptr<DeviceBuffer>>& inputs,
                                                 const std::vector<bool>& exclusive,
                                                 RngSource rng) const;
  const std::vector<hlo::TensorType>& input_types() const { return input_types_; }
  const std::vector<hlo::TensorType>& output_types() const { return output_types_; }

 private:
  friend std::shared_ptr<CapturedProgram> end_capture(
      const std::vector<std::shared_ptr<DeviceBuffer>>&, const std::vector<std::shared_ptr<DeviceBuffer>>&,
      const std::vector<int>&);
  struct Source {
    int input = -1;                          // a call input...
    std::shared_ptr<DeviceBuffer> constant;  // ...or a buffer captured with the graph
    bool donated = false;                    // aliased to the output holding its update
  };
  struct Number {
    lowering::Number value;
    hlo::ElementType type;
    bool rng;
    uint64_t rng_count;
  };
  const pjrt::Executable& executable(bool donating) const;

  std::unique_ptr<pjrt::Executable> exe_;  // with the donation aliases
  mutable std::unique_ptr<pjrt::Executable> exe_keep_;  // without: compiled on first need
  mutable std::mutex keep_mu_;
  std::string mlir_keep_;
  std::vector<Source> params_;
  std::vector<Number> numbers_;
  std::vector<hlo::TensorType> input_types_;
  std::vector<hlo::TensorType> output_types_;
  int device_ = 0;
  ProgramLabel label_;  // "torch.compile graph of N ops: ..." in traces and logs
};

// Flushes pending work and starts recording into a capture graph.
void begin_capture(int device);
// `inputs`: the buffers standing for the program's inputs while capturing;
// `outputs`: the buffers it returns; `updates[i]`: the output that is input
// i's new value (an input the graph wrote to), or -1. Throws if the capture
// cannot be compiled (it then also ends).
std::shared_ptr<CapturedProgram> end_capture(const std::vector<std::shared_ptr<DeviceBuffer>>& inputs,
                                             const std::vector<std::shared_ptr<DeviceBuffer>>& outputs,
                                             const std::vector<int>& updates);
// Ends a capture that failed (an op raised), dropping what was recorded.
void abort_capture();
// Whether a capture is recording.
bool capturing();

// Where ops come from, for error messages ("train.py:42"). aten/ installs a
// provider that reads the Python stack; it may return null.
using OriginProvider = std::shared_ptr<const std::string> (*)();
void set_origin_provider(OriginProvider provider);

// Uploads row-major host data as a new buffer.
std::shared_ptr<DeviceBuffer> upload(const void* data, const hlo::TensorType& type, int device);
// A small immutable constant (a Python number passed as a 0-dim tensor),
// uploaded once per distinct value and shared.
std::shared_ptr<DeviceBuffer> constant(const void* data, const hlo::TensorType& type, int device);

// A contiguous buffer holding the view (the base itself when it is one).
std::shared_ptr<DeviceBuffer> read_contiguous(const TensorInput& input);

// Writes `src` (broadcast and converted) through the view `dst`. When `dst`
// covers its whole storage and `src` is already the right buffer, the
// storages share it instead (buffers are immutable, so sharing is a copy).
// `transform`: kCopyConjugate / kCopyNegate resolve PyTorch's lazy bits.
enum CopyTransform : int { kCopyConjugate = 1, kCopyNegate = 2 };
void copy_into(const TensorInput& dst, const TensorInput& src, int transform = 0);

}  // namespace torch_tpu::runtime
