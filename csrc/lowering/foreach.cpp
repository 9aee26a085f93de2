// _foreach_* ops as ONE node per list. An optimizer step is a handful of
// foreach calls over every parameter; PyTorch's generic implementation runs
// them one tensor at a time, which made recording an AdamW step cost more than
// the model's forward and backward together. Element i is lowered by the
// per-tensor op's own lowering (add.Tensor for _foreach_add.List...), so the
// numerics are exactly those of the op-by-op path.
//
// The per-tensor lowerings take arguments the foreach schema lacks (alpha=1
// of add.Scalar): those are constants, marked by a negative index, which the
// element context turns into literals instead of program parameters. A Number
// argument the foreach op does have becomes one parameter shared by every
// element; element i of a scalar list becomes a parameter of its own.
#include <map>
#include <tuple>
#include <utility>

#include "common/error.h"
#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using E = ElementType;
using Values = std::vector<Value>;

class ElementContext final : public Context {
 public:
  explicit ElementContext(Context& outer) : Context(outer.b, outer.default_float), outer_(outer) {}

  Value number(const Arg& a, E t) override {
    if (a.index < 0) return number_constant(b, a.number, t);
    auto key = std::make_tuple(a.index, a.element, t);
    auto it = shared_.find(key);
    if (it == shared_.end()) it = shared_.emplace(key, outer_.number(a, t)).first;
    return it->second;
  }
  Value rng_state(const Arg& a) override { return outer_.rng_state(a); }
  std::string kernel_target(const std::string& name) override { return outer_.kernel_target(name); }

 private:
  Context& outer_;
  std::map<std::tuple<int, int, E>, Value> shared_;
};

Arg constant_one() {
  Arg a;
  a.kind = Arg::Kind::Number;
  a.index = -1;
  a.number.kind = Number::Kind::Int;
  a.number.i = 1;
  return a;
}

// Lowers every element of the list arguments through `per_tensor`, with the
// other arguments as given, then `extra` appended (defaults the foreach
// schema does not have).
Values each(Context& ctx, const Args& args, const char* per_tensor, const Args& extra = {}) {
  const Lowering* element = find_lowering(per_tensor);
  TPU_CHECK(element, ErrorKind::Runtime, "no lowering for ", per_tensor);
  const size_t n = args.at(0).tensors.size();
  TPU_CHECK(n > 0, ErrorKind::Runtime, "Tensor list must have at least one tensor.");
  for (const Arg& a : args) {
    TPU_CHECK(a.kind != Arg::Kind::TensorList || a.tensors.size() == n, ErrorKind::Runtime,
              "Tensor lists must have the same number of tensors, got ", n, " and ", a.tensors.size());
    TPU_CHECK(a.kind != Arg::Kind::NumberList || a.numbers.size() == n, ErrorKind::Runtime,
              "Tensor list must have same number of elements as scalar list.");
  }
  ElementContext ectx(ctx);
  Values out;
  for (size_t i = 0; i < n; ++i) {
    Args ai;
    for (const Arg& a : args) {
      if (a.kind == Arg::Kind::NumberList) {  // element i, fed as its own parameter
        Arg e;
        e.kind = Arg::Kind::Number;
        e.index = a.index;
        e.element = static_cast<int>(i);
        e.number = a.numbers[i];
        e.fed = a.fed;
        ai.push_back(std::move(e));
        continue;
      }
      if (a.kind != Arg::Kind::TensorList) {
        ai.push_back(a);
        continue;
      }
      Arg t;
      t.kind = Arg::Kind::Tensor;
      t.index = a.index;
      TPU_CHECK(a.tensors[i].has_value(), ErrorKind::Runtime, per_tensor, ": the tensor list has a hole");
      t.tensor = *a.tensors[i];
      ai.push_back(std::move(t));
    }
    for (const Arg& a : extra) ai.push_back(a);
    out.push_back(element->fn(ectx, ai).at(0));
  }
  return out;
}

template <const char* kOp>
Values as_is(Context& ctx, const Args& args) {
  return each(ctx, args, kOp);
}

template <const char* kOp>
Values with_alpha_one(Context& ctx, const Args& args) {
  return each(ctx, args, kOp, {constant_one()});
}

constexpr char kAddScalar[] = "aten::add.Scalar";
constexpr char kAddTensor[] = "aten::add.Tensor";
constexpr char kAddcdiv[] = "aten::addcdiv";
constexpr char kAddcmul[] = "aten::addcmul";
constexpr char kDivScalar[] = "aten::div.Scalar";
constexpr char kDivTensor[] = "aten::div.Tensor";
constexpr char kLerpScalar[] = "aten::lerp.Scalar";
constexpr char kMulScalar[] = "aten::mul.Scalar";
constexpr char kMulTensor[] = "aten::mul.Tensor";
constexpr char kSqrt[] = "aten::sqrt";
constexpr char kSubScalar[] = "aten::sub.Scalar";
constexpr char kSubTensor[] = "aten::sub.Tensor";

}  // namespace

// Scalar lists (AdamW's step sizes, new every step) are program parameters,
// one per element, so one executable serves every step.
TPU_LOWERING("aten::_foreach_add.List", as_is<kAddTensor>);
TPU_LOWERING("aten::_foreach_add.Scalar", with_alpha_one<kAddScalar>);
TPU_LOWERING("aten::_foreach_add.ScalarList", with_alpha_one<kAddScalar>);
TPU_LOWERING("aten::_foreach_addcdiv.Scalar", as_is<kAddcdiv>);
TPU_LOWERING("aten::_foreach_addcdiv.ScalarList", as_is<kAddcdiv>);
TPU_LOWERING("aten::_foreach_addcmul.Scalar", as_is<kAddcmul>);
TPU_LOWERING("aten::_foreach_addcmul.ScalarList", as_is<kAddcmul>);
TPU_LOWERING("aten::_foreach_div.List", as_is<kDivTensor>);
TPU_LOWERING("aten::_foreach_div.Scalar", as_is<kDivScalar>);
TPU_LOWERING("aten::_foreach_div.ScalarList", as_is<kDivScalar>);
TPU_LOWERING("aten::_foreach_lerp.Scalar", as_is<kLerpScalar>);
TPU_LOWERING("aten::_foreach_mul.List", as_is<kMulTensor>);
TPU_LOWERING("aten::_foreach_mul.Scalar", as_is<kMulScalar>);
TPU_LOWERING("aten::_foreach_mul.ScalarList", as_is<kMulScalar>);
TPU_LOWERING("aten::_foreach_sqrt", as_is<kSqrt>);
TPU_LOWERING("aten::_foreach_sub.List", as_is<kSubTensor>);
TPU_LOWERING("aten::_foreach_sub.Scalar", with_alpha_one<kSubScalar>);
TPU_LOWERING("aten::_foreach_sub.ScalarList", with_alpha_one<kSubScalar>);

}  // namespace torch_tpu::lowering
