// Which path nn.LSTM, nn.GRU and nn.RNN take on tpu (the lowerings are in
// csrc/lowering/recurrent.cpp).
//
// aten::lstm/gru/rnn_tanh/rnn_relu are composite: PyTorch's own code runs the
// layers step by step, calling a fused cell op (or linear ops for rnn_*) per
// step, and autograd records each step. That path is right for everything,
// and it is one program per step in strict mode. Here the .input overloads
// get an AutogradPrivateUse1 kernel that, when no gradient is needed, no
// dropout is drawn and autocast is off, goes below autograd to the lowering
// that runs each layer as ONE device loop over time; otherwise it calls
// PyTorch's composite kernel. Packed sequences (the .data overloads) always
// take the composite path.
//
// The fused cells' backward ops return bias gradients only when there is a
// bias (has_bias); a lowering cannot return an undefined tensor, so their
// kernels here drop the ones the lowering computes.
#include <ATen/autocast_mode.h>
#include <ATen/ops/gru_native.h>
#include <ATen/ops/lstm_native.h>
#include <ATen/ops/rnn_relu_native.h>
#include <ATen/ops/rnn_tanh_native.h>

#include "aten/op_kernel.h"
#include "aten/pch.h"

namespace torch_tpu::aten {

namespace {

bool any_requires_grad(const at::Tensor& t) { return t.defined() && t.requires_grad(); }
bool any_requires_grad(at::TensorList ts) {
  for (const at::Tensor& t : ts)
    if (any_requires_grad(t)) return true;
  return false;
}

// The device loop computes no gradient and draws no dropout.
bool device_loop(const at::Tensor& input, at::TensorList hx, at::TensorList params, int64_t num_layers,
                 double dropout, bool train) {
  if (at::GradMode::is_enabled() &&
      (any_requires_grad(input) || any_requires_grad(hx) || any_requires_grad(params)))
    return false;
  if (train && dropout > 0 && num_layers > 1) return false;
  return !at::autocast::is_autocast_enabled(c10::DeviceType::PrivateUse1);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm(const at::Tensor& input, at::TensorList hx,
                                                    at::TensorList params, bool has_biases, int64_t num_layers,
                                                    double dropout, bool train, bool bidirectional,
                                                    bool batch_first) {
  if (!device_loop(input, hx, params, num_layers, dropout, train))
    return at::native::lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                            batch_first);
  at::AutoDispatchBelowADInplaceOrView below;
  return at::lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first);
}

// gru, rnn_tanh and rnn_relu share one signature.
using SingleStateRnn = std::tuple<at::Tensor, at::Tensor> (*)(const at::Tensor&, const at::Tensor&,
                                                               at::TensorList, bool, int64_t, double, bool,
                                                               bool, bool);
template <SingleStateRnn Composite, SingleStateRnn Dispatched>
std::tuple<at::Tensor, at::Tensor> single_state_rnn(const at::Tensor& input, const at::Tensor& hx,
                                                    at::TensorList params, bool has_biases, int64_t num_layers,
                                                    double dropout, bool train, bool bidirectional,
                                                    bool batch_first) {
  if (!device_loop(input, {hx}, params, num_layers, dropout, train))
    return Composite(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first);
  at::AutoDispatchBelowADInplaceOrView below;
  return Dispatched(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first);
}

// The overload sets of at::gru etc. need a cast to pick .input.
constexpr SingleStateRnn gru_native = &at::native::gru;
constexpr SingleStateRnn gru_dispatched = &at::gru;
constexpr SingleStateRnn rnn_tanh_native = &at::native::rnn_tanh;
constexpr SingleStateRnn rnn_tanh_dispatched = &at::rnn_tanh;
constexpr SingleStateRnn rnn_relu_native = &at::native::rnn_relu;
constexpr SingleStateRnn rnn_relu_dispatched = &at::rnn_relu;

// Replaces the last `count` results with undefined tensors unless has_bias
// (the schema's last argument).
template <int count>
void without_unused_bias_grads(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const bool has_bias = stack->back().toBool();
  lowered_op_kernel(op, stack);
  if (has_bias) return;
  for (int k = 1; k <= count; ++k) (*stack)[stack->size() - k] = c10::IValue(at::Tensor());
}

// No gradient reaches the cell: nothing to compute (as PyTorch's kernel does).
void fused_lstm_cell_backward(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  auto given = [&](size_t i) {
    const c10::IValue& v = (*stack)[stack->size() - n + i];
    return v.isTensor() && v.toTensor().defined();
  };
  if (given(0) || given(1)) return without_unused_bias_grads<1>(op, stack);
  torch::jit::drop(*stack, n);
  for (int k = 0; k < 3; ++k) stack->push_back(c10::IValue(at::Tensor()));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("gru.input", TORCH_FN((single_state_rnn<gru_native, gru_dispatched>)));
  m.impl("lstm.input", TORCH_FN(lstm));
  m.impl("rnn_relu.input", TORCH_FN((single_state_rnn<rnn_relu_native, rnn_relu_dispatched>)));
  m.impl("rnn_tanh.input", TORCH_FN((single_state_rnn<rnn_tanh_native, rnn_tanh_dispatched>)));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_gru_cell_backward", torch::CppFunction::makeFromBoxedFunction<&without_unused_bias_grads<2>>());
  m.impl("_thnn_fused_lstm_cell_backward_impl",
         torch::CppFunction::makeFromBoxedFunction<&fused_lstm_cell_backward>());
  // The device loop: register_lowered_ops leaves composite ops to their
  // composite kernels, so these are registered here.
  for (const char* name : {"gru.input", "lstm.input", "rnn_relu.input", "rnn_tanh.input"})
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&lowered_op_kernel>());
}

}  // namespace torch_tpu::aten
