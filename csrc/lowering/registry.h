// The one operator registry: ATen operator name ("aten::add.Tensor") ->
// lowering. Lowerings are registered under functional names; aten/ routes the
// in-place (add_) and out= (add.out) variants to the same entry.
#pragma once

#include <string>
#include <vector>

#include "lowering/arg.h"
#include "lowering/context.h"

namespace torch_tpu::lowering {

using LoweringFn = std::vector<hlo::Value> (*)(Context& ctx, const Args& args);

struct Lowering {
  std::string name;
  LoweringFn fn = nullptr;
  // The values of Number arguments shape the program (arange's length, a
  // constant exponent): they go into the cache key instead of parameters.
  bool static_numbers = false;
  // A random op whose schema has no Generator (native_dropout): the default
  // generator's state is appended as a last, Rng argument.
  bool implicit_generator = false;
  // `float` arguments (not only Scalars) are fed as Number parameters: the
  // fused optimizers take lr, betas and momentum as floats, and a learning
  // rate scheduler changes them every step.
  bool float_params = false;
  // With static_numbers, the last argument is fed all the same: the padded
  // wrapper's true sizes (lowering/padded.h) around an op with static numbers.
  bool fed_last = false;
};

// Whether argument `arg` of `nargs` is baked into the program.
inline bool static_arg(const Lowering& l, size_t arg, size_t nargs) {
  return l.static_numbers && !(l.fed_last && arg + 1 == nargs);
}

enum LoweringFlags : int { kStaticNumbers = 1, kImplicitGenerator = 2, kFloatParams = 4 };

void register_lowering(Lowering lowering);
const Lowering* find_lowering(const std::string& name);
std::vector<std::string> registered_names();  // sorted

struct Registrar {
  // `flags`: LoweringFlags (`true` reads as kStaticNumbers).
  Registrar(const char* name, LoweringFn fn, int flags = 0) {
    register_lowering({name, fn, (flags & kStaticNumbers) != 0, (flags & kImplicitGenerator) != 0,
                       (flags & kFloatParams) != 0});
  }
};

}  // namespace torch_tpu::lowering

#define TPU_LOWERING_CAT2(a, b) a##b
#define TPU_LOWERING_CAT(a, b) TPU_LOWERING_CAT2(a, b)
// TPU_LOWERING("aten::add.Tensor", lower_add);
#define TPU_LOWERING(name, ...)                                                         \
  static ::torch_tpu::lowering::Registrar TPU_LOWERING_CAT(tpu_lowering_, __COUNTER__)( \
      name, __VA_ARGS__)
