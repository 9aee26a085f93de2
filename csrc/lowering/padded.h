// Ops on tensors padded along one dynamic dimension (runtime/dynamic_dims.h).
//
// A padded input arrives as its whole padded buffer, and its true size along
// the dimension arrives as an int64 Number parameter, so one program serves
// every size up to the bound. Which ops may run that way, and what each needs
// so that the padding never reaches a valid result, is this file's one table:
//  - pointwise ops compute garbage in the padding, which nobody reads;
//  - reductions, softmax and matmul over other dimensions likewise;
//  - a reduction or softmax over the padded dimension first fills the
//    padding with the reduction's identity (0 for sum, -inf for max...);
//  - cat along it writes each part at the running offset of the true sizes;
//  - attention with padded keys masks the padded key positions.
// Everything else runs on the exact tensor (a slice program per size).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lowering/registry.h"

namespace torch_tpu::lowering {

// What fills the padding of an input before the op reads it.
enum class Fill { None, Zero, Lowest, Highest, False, True };

// One tensor input of an op, in argument order (a list contributes one per
// entry): its shape (padded, for a padded one), and its padded dimension and
// true size (dim -1: not padded).
struct PaddedSlot {
  hlo::Shape shape;
  int dim = -1;
  int64_t size = 0;
  bool present = true;
};

// The fill of every slot when op `name` with `args` can run on `slots`
// padded as given; nullopt when it cannot (it then runs on exact tensors).
std::optional<std::vector<Fill>> plan_padded(const std::string& name, const Args& args,
                                             const std::vector<PaddedSlot>& slots);
bool has_padded_rule(const std::string& name);

// The wrapper that runs op `name` on padded inputs: its arguments are the
// op's own, then String name, IntList padded dim per slot (-1: none),
// IntList (dim, bound) per output (-1, 0: leave as the op gives it) and
// NumberList of the true sizes of the padded slots.
const Lowering& padded_lowering();
// The same around an op whose Numbers are static: the sizes stay fed.
const Lowering& padded_static_lowering();
// Exact tensor of a padded one: args Tensor, Int dim, Int size.
const Lowering& unpad_lowering();
// A box of a padded tensor at a runtime offset: args Tensor, IntList sizes,
// NumberList starts (one per dimension).
const Lowering& box_lowering();

}  // namespace torch_tpu::lowering
