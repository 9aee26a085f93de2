// Device-side index checks (on by default in strict and defer_and_fuse;
// TORCH_TPU_CHECK_INDICES=0 turns them off), where a CUDA kernel would
// assert. A device cannot raise, so each checked op records a tiny node
// (lowering/index_range.h) that reads its indices and yields an i32 state:
// in defer_and_fuse into the op's graph; in strict, where each op is its
// own program, the check waits on the host (holding the index buffer, whose
// value never changes) until the next read, and the waiting checks run
// then as one program: fused into every op's program they cost each op an
// extra input, output and reduction. Each check takes the state of the
// check before it, within a graph and across graphs, and counts on the
// device: the newest state of the chain names its first failed check. So a graph however many checks
// it holds has one live state, and one read answers for every graph
// before it -- in strict, where each op is a graph, a read per op would
// cost a device wait per op. A graph reading an earlier graph's state is
// ordered after it on the device; the host never waits for it. The host
// keeps, per check, only what its message needs (formatted when one fails)
// and the op's results.
//
// The states are read (4 bytes, the newest of each chain) when a value
// next leaves the device (DeviceBuffer::to_host) and at synchronize, those
// whose graph has run. A failed check raises IndexError naming the op and
// its Python line, and poisons the op's results so that every later use
// raises too; the next check starts a new chain (a failed state stays
// failed). The checks after the failure in its chain did not count: their
// ops' results are poisoned too (as a CUDA device-side assert fails all
// later work), and a read that finds such checks raises as well. A state whose graph has not run is left for a later read, so
// checking never flushes pending work.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/device_buffer.h"
#include "runtime/executor.h"

namespace torch_tpu::runtime {

// What a failed check's message names.
struct IndexCheckSite {
  std::string op;  // "aten::gather"
  int64_t size = 0, dim = 0;
  bool target = false;  // a class target (nll_loss), not an index
  std::shared_ptr<const std::string> origin;
};

// The checks an op relies on: numbers among its device's checks. `own`:
// those recorded for it; the others were recorded for an earlier op that
// read the same index (the same buffer, view and range), whose check
// answers for this op too.
struct OpIndexChecks {
  int device = 0;
  std::vector<int64_t> all, own;
};

// One index argument of an op to check: the elements read (a view of its
// storage) and the range they must lie in, as lowering/index_range.h takes
// it: {lo, hi, ignore, has_ignore}.
struct IndexCheck {
  TensorInput index;
  std::array<int64_t, 4> range{};
  int device = 0;
};

// Records `check`: into the current graph (lowering::kIndexOutOfRange,
// with the chain's state, and OpCall::fuse_with_next), or in strict, for
// the next read. An index already checked and not failed (or not read yet)
// is not checked again: its check is added to `into`. `origin`: the op's
// Python line, asked of the origin provider when a check is recorded (and
// given back for the op). False when nothing was recorded (the index
// carries an error: so will the op).
bool record_index_check(const IndexCheck& check, const IndexCheckSite& site,
                        std::shared_ptr<const std::string>& origin, OpIndexChecks& into);
// The op's results, poisoned if one of its checks fails.
void watch_index_results(const OpIndexChecks& checks, const std::vector<std::weak_ptr<DeviceBuffer>>& results);
// The op raised instead of running: a failure of its own checks is not
// reported (the op's own error was).
void drop_index_checks(const OpIndexChecks& checks);
// Reads the states whose graphs ran; throws Error(Index) for a failed check.
void check_index_flags();

}  // namespace torch_tpu::runtime
