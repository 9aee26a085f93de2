// Failure scope of a fused graph (defer_and_fuse). A graph is one program,
// so when its build, compilation or launch fails every output shares the one
// error, including results that never depended on the op at fault. The
// contract is narrower: a failure poisons only what depends on it. So a
// failed graph of several nodes is split: its nodes run again one at a time,
// in order, each launched and waited for on its own. The node that fails
// again carries the error (and, through the usual error-input rule, so does
// every later node reading its results); every other node gets its real
// value. The graph's live results then take the value or the error of their
// node. Splitting costs a launch per node, but only on the failure path.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/graph.h"

namespace torch_tpu::runtime {

// Settles the live results of `g`, whose program failed with `error`:
// `params` are the buffers the program was given (Graph::params at launch).
// A graph of one node has nothing to split: its results carry `error`
// (raised as `kind`).
void split_failed_graph(Graph& g, const std::vector<std::shared_ptr<DeviceBuffer>>& params,
                        const std::string& error, ErrorKind kind = ErrorKind::Runtime);

// Test hook: every program holding a node of lowering `op` fails to compile
// with `message`, as if the compiler rejected that op (an empty `op` ends
// it). Lets tests put an invalid op inside a graph of valid ones.
void reject_op_for_test(std::string op, std::string message);
// Throws the rejection when `g` holds the rejected op.
void check_rejected_for_test(const Graph& g);
// Whether some op is being rejected (reject_op_for_test).
bool rejecting_for_test();

}  // namespace torch_tpu::runtime
