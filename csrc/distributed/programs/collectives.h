// The StableHLO programs of tpu_dist's "pjrt" path: one pure function per
// collective family, from (op, dtype, per-rank shape, world size, root...)
// to a module compiled for `world` replicas, replica r being rank r. Each
// program takes one operand per replica and returns one result per replica;
// collective_path.h says when the path runs, and the C++ tests run every
// program on a multi-device CPU client.
//
// Torch-free (it sits below aten/ like hlo/ and pjrt/, see CMakeLists.txt),
// so the reduce ops are our own enum; c10d's ReduceOp maps onto it one to
// one where the process group uses these programs.
#pragma once

#include <string>
#include <vector>

#include "hlo/types.h"

namespace torch_tpu::distributed::programs {

enum class ReduceOp { Avg, BitAnd, BitOr, BitXor, Max, Min, Product, Sum };

struct Program {
  std::string mlir;
  hlo::TensorType input;   // each replica's operand
  hlo::TensorType output;  // each replica's result
  int world = 0;           // replicas to compile for
};

// Every rank gets the reduction of all ranks' `shape` operands. Bool follows
// Gloo (SUM/MAX/BOR are "any", PRODUCT/MIN/BAND "all", BXOR parity); AVG of
// integers is the sum in int64 divided with truncation, like the host path.
Program all_reduce(ReduceOp op, hlo::ElementType dtype, const hlo::Shape& shape, int world);
// Input `shape`, output [world, shape...]: rank r's operand at index r.
Program all_gather(hlo::ElementType dtype, const hlo::Shape& shape, int world);
// Input [world, shape...], output `shape`: rank r gets the reduction of
// every rank's row r.
Program reduce_scatter(ReduceOp op, hlo::ElementType dtype, const hlo::Shape& shape, int world);
// all_to_all_single with equal splits: `shape`'s leading dimension is `world`
// blocks; block j of rank i becomes block i of rank j.
Program all_to_all(hlo::ElementType dtype, const hlo::Shape& shape, int world);
// Every rank gets `root`'s operand, bit for bit.
Program broadcast(hlo::ElementType dtype, const hlo::Shape& shape, int world, int root);
// Rank `dst` gets rank `src`'s operand; every other rank gets its own operand
// back unchanged (a send/recv pair as one program of the group).
Program send_recv(hlo::ElementType dtype, const hlo::Shape& shape, int world, int src, int dst);

}  // namespace torch_tpu::distributed::programs
