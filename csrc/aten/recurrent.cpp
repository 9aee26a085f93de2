// Which path nn.LSTM, nn.GRU and nn.RNN take on tpu (the lowerings are in
// csrc/lowering/recurrent.cpp).
//
// aten::lstm/gru/rnn_tanh/rnn_relu are composite: PyTorch's own code runs the
// layers step by step, calling a fused cell op (or linear ops for rnn_*) per
// step, and autograd records each step: one program per step in strict mode.
// Their .input overloads get an AutogradPrivateUse1 kernel here that runs
// each layer and direction as ONE device loop over time instead:
//  - no gradient needed and no dropout drawn: the whole stack is one lowered
//    op (aten::lstm.input etc., registered below for PrivateUse1), one
//    program;
//  - otherwise: per layer and direction the op torch_tpu::rnn_layer (a
//    forward loop that also keeps what the backward needs) inside an autograd
//    function whose backward is torch_tpu::rnn_layer_backward (a loop back
//    over time); directions are concatenated, dropout between layers drawn
//    and the final states stacked by ordinary ops. Tensors with the Python
//    dispatch key (torch.compile's fake tensors) take this path too: tracing
//    would decompose aten::lstm into steps, while these ops stay whole (they
//    have Meta kernels).
// Under autocast the composite per-step path runs, as on CUDA (its fused
// cells are on autocast's lower-precision list). Packed sequences (the .data
// overloads) always take the composite path.
//
// The fused cells' backward ops return bias gradients only when there is a
// bias (has_bias); a lowering cannot return an undefined tensor, so their
// kernels here drop the ones the lowering computes.
#include <ATen/autocast_mode.h>
#include <ATen/ops/gru_native.h>
#include <ATen/ops/lstm_native.h>
#include <ATen/ops/rnn_relu_native.h>
#include <ATen/ops/rnn_tanh_native.h>

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include "aten/op_kernel.h"
#include "aten/pch.h"

namespace torch_tpu::aten {

namespace {

using at::Tensor;
using OptTensor = std::optional<Tensor>;

bool any_requires_grad(const Tensor& t) { return t.defined() && t.requires_grad(); }
bool any_requires_grad(at::TensorList ts) {
  for (const Tensor& t : ts)
    if (any_requires_grad(t)) return true;
  return false;
}

// The cell kinds of torch_tpu::rnn_layer (lowering/recurrent.cpp's Cell).
enum class Cell : int64_t { Lstm = 0, Gru = 1, Tanh = 2, Relu = 3 };
int64_t gate_count(Cell cell) { return cell == Cell::Lstm ? 4 : cell == Cell::Gru ? 3 : 1; }
const char* cell_op(Cell cell) {
  return cell == Cell::Lstm ? "lstm" : cell == Cell::Gru ? "gru" : cell == Cell::Tanh ? "rnn_tanh" : "rnn_relu";
}

using LayerResult = std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor>;
LayerResult rnn_layer_op(const Tensor& input, const Tensor& h0, const OptTensor& c0, const Tensor& w_ih,
                         const Tensor& w_hh, const OptTensor& b_ih, const OptTensor& b_hh, const OptTensor& w_hr,
                         int64_t cell, bool reverse) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("torch_tpu::rnn_layer", "")
                       .typed<LayerResult(const Tensor&, const Tensor&, const OptTensor&, const Tensor&,
                                          const Tensor&, const OptTensor&, const OptTensor&, const OptTensor&,
                                          int64_t, bool)>();
  return op.call(input, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, cell, reverse);
}

using LayerGrads = std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor>;
LayerGrads rnn_layer_backward_op(const Tensor& grad_output, const Tensor& grad_hy, const OptTensor& grad_cy,
                                 const Tensor& input, const Tensor& h0, const OptTensor& c0, const Tensor& w_ih,
                                 const Tensor& w_hh, const OptTensor& b_ih, const OptTensor& b_hh,
                                 const OptTensor& w_hr, const Tensor& output, const Tensor& gates,
                                 const Tensor& states, int64_t cell, bool reverse) {
  static auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("torch_tpu::rnn_layer_backward", "")
          .typed<LayerGrads(const Tensor&, const Tensor&, const OptTensor&, const Tensor&, const Tensor&,
                            const OptTensor&, const Tensor&, const Tensor&, const OptTensor&, const OptTensor&,
                            const OptTensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, bool)>();
  return op.call(grad_output, grad_hy, grad_cy, input, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, output, gates, states,
                 cell, reverse);
}

OptTensor opt(const Tensor& t) { return t.defined() ? OptTensor(t) : std::nullopt; }

torch::autograd::variable_list differentiable_backward(torch::autograd::AutogradContext* ctx,
                                                       const torch::autograd::variable_list& grads);

// One layer and direction; its backward is the device loop back over time.
struct RnnLayerFunction : public torch::autograd::Function<RnnLayerFunction> {
  // Absent tensors are nullopt (an undefined Tensor argument would be taken
  // for a variable).
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const Tensor& input,
                                                const Tensor& h0, const OptTensor& c0, const Tensor& w_ih,
                                                const Tensor& w_hh, const OptTensor& b_ih, const OptTensor& b_hh,
                                                const OptTensor& w_hr, int64_t cell, bool reverse) {
    auto [out, hy, cy, gates, states] = rnn_layer_op(input, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, cell, reverse);
    auto or_undefined = [](const OptTensor& t) { return t ? *t : Tensor(); };
    // Empty results (the GRU and rnn_* keep no states, rnn_* no gates, and
    // only the LSTM has a cy) are neither saved nor returned: torch.compile's
    // programs take and give whole buffers, which an empty tensor has none of.
    auto unless_empty = [](const Tensor& t) { return t.numel() > 0 ? t : Tensor(); };
    ctx->save_for_backward({input, h0, or_undefined(c0), w_ih, w_hh, or_undefined(b_ih), or_undefined(b_hh),
                            or_undefined(w_hr), out, unless_empty(gates), unless_empty(states)});
    ctx->saved_data["cell"] = cell;
    ctx->saved_data["reverse"] = reverse;
    if (c0) return {out, hy, cy};
    return {out, hy};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    // A backward that is itself differentiated (create_graph=True): the
    // loops have no derivative of their own.
    if (at::GradMode::is_enabled()) return differentiable_backward(ctx, grads);
    auto v = ctx->get_saved_variables();
    const Tensor &input = v[0], &h0 = v[1], &c0 = v[2], &w_ih = v[3], &w_hh = v[4], &b_ih = v[5], &b_hh = v[6],
                 &w_hr = v[7], &out = v[8], &gates = v[9], &states = v[10];
    auto given = [](const Tensor& g, const Tensor& like) { return g.defined() ? g : at::zeros_like(like); };
    // The backward reads no saved gates or states where the forward kept
    // none; any tensor stands in.
    auto saved = [&](const Tensor& t) { return t.defined() ? t : out; };
    OptTensor grad_cy = c0.defined() ? OptTensor(given(grads[2], c0)) : std::nullopt;
    auto [dx, dh0, dc0, dw_ih, dw_hh, db_ih, db_hh, dw_hr] = rnn_layer_backward_op(
        given(grads[0], out), given(grads[1], h0), grad_cy, input, h0, opt(c0), w_ih, w_hh, opt(b_ih), opt(b_hh),
        opt(w_hr), out, saved(gates), saved(states), ctx->saved_data["cell"].toInt(),
        ctx->saved_data["reverse"].toBool());
    auto kept = [](const Tensor& g, const Tensor& input) { return input.defined() ? g : Tensor(); };
    return {dx, dh0, kept(dc0, c0), dw_ih, dw_hh, kept(db_ih, b_ih), kept(db_hh, b_hh), kept(dw_hr, w_hr),
            Tensor(), Tensor()};
  }
};

// The layer again, step by step from differentiable ops, and its gradients
// with a graph: what create_graph=True needs (gradient penalties and the like).
torch::autograd::variable_list differentiable_backward(torch::autograd::AutogradContext* ctx,
                                                       const torch::autograd::variable_list& grads) {
  auto v = ctx->get_saved_variables();
  const Tensor &input = v[0], &h0 = v[1], &c0 = v[2], &w_ih = v[3], &w_hh = v[4], &b_ih = v[5], &b_hh = v[6],
               &w_hr = v[7];
  const Cell cell = static_cast<Cell>(ctx->saved_data["cell"].toInt());
  const bool reverse = ctx->saved_data["reverse"].toBool();
  const int64_t steps = input.size(0);
  Tensor h = h0, c = c0;
  std::vector<Tensor> outs(steps);
  for (int64_t k = 0; k < steps; ++k) {
    const int64_t t = reverse ? steps - 1 - k : k;
    Tensor gx = at::linear(input[t], w_ih, b_ih), gh = at::linear(h, w_hh, b_hh);
    switch (cell) {
      case Cell::Lstm: {
        auto g = gx.add(gh).chunk(4, 1);
        c = g[1].sigmoid().mul(c).add(g[0].sigmoid().mul(g[2].tanh()));
        h = g[3].sigmoid().mul(c.tanh());
        if (w_hr.defined()) h = at::linear(h, w_hr);
        break;
      }
      case Cell::Gru: {
        auto a = gx.chunk(3, 1), b = gh.chunk(3, 1);
        Tensor r = a[0].add(b[0]).sigmoid(), z = a[1].add(b[1]).sigmoid();
        Tensor n = a[2].add(r.mul(b[2])).tanh();
        h = n.add(z.mul(h.sub(n)));
        break;
      }
      case Cell::Tanh: h = gx.add(gh).tanh(); break;
      case Cell::Relu: h = gx.add(gh).relu(); break;
    }
    outs[t] = h;
  }
  std::vector<Tensor> results{at::stack(outs, 0), h}, grad_results;
  if (c0.defined()) results.push_back(c);
  for (size_t k = 0; k < results.size(); ++k)
    grad_results.push_back(grads[k].defined() ? grads[k] : at::zeros_like(results[k]));
  std::vector<Tensor> wrt;
  std::vector<size_t> where;
  for (size_t k = 0; k < 8; ++k)
    if (v[k].defined() && v[k].requires_grad()) {
      wrt.push_back(v[k]);
      where.push_back(k);
    }
  torch::autograd::variable_list out(10);
  if (wrt.empty()) return out;
  auto got = torch::autograd::grad(results, wrt, grad_results, /*retain_graph=*/true, /*create_graph=*/true,
                                   /*allow_unused=*/true);
  for (size_t k = 0; k < where.size(); ++k) out[where[k]] = got[k];
  return out;
}

// nn.RNNBase's stack, layer by layer with RnnLayerFunction: (output, h_n[, c_n]).
std::vector<Tensor> layers_with_gradients(Cell cell, const Tensor& input, at::TensorList hx, at::TensorList params,
                                          bool has_biases, int64_t num_layers, double dropout, bool train,
                                          bool bidirectional, bool batch_first) {
  const char* op = cell_op(cell);
  const bool lstm = cell == Cell::Lstm;
  const int64_t dirs = bidirectional ? 2 : 1;
  TORCH_CHECK(input.dim() == 3, op, ": expected a 3-D input, got ", input.dim(), "-D");
  TORCH_CHECK(static_cast<int64_t>(hx.size()) == (lstm ? 2 : 1), op, ": expected ", lstm ? 2 : 1,
              " hidden states, got ", hx.size());
  Tensor seq = batch_first ? input.transpose(0, 1) : input;
  const int64_t batch = seq.size(1);
  for (const Tensor& h : hx) {
    TORCH_CHECK(h.dim() == 3 && h.size(0) == num_layers * dirs && h.size(1) == batch, op,
                ": expected hidden states of size [", num_layers * dirs, ", ", batch, ", *], got ", h.sizes());
    TORCH_CHECK(h.scalar_type() == input.scalar_type(), op, ": expected hidden states of type ",
                input.scalar_type(), " as the input, got ", h.scalar_type());
  }
  const bool proj = lstm && hx[0].size(2) != hx[1].size(2);
  const int64_t per = 2 + (has_biases ? 2 : 0) + (proj ? 1 : 0);
  TORCH_CHECK(static_cast<int64_t>(params.size()) == num_layers * dirs * per, op, ": expected ",
              num_layers * dirs * per, " parameters, got ", params.size());
  const int64_t h_out = hx[0].size(2), hidden = lstm ? hx[1].size(2) : h_out, gates = gate_count(cell) * hidden;
  const bool tracing = input.key_set().has(c10::DispatchKey::Python);
  std::vector<Tensor> finals_h, finals_c;
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    if (layer > 0 && dropout > 0 && train) seq = at::dropout(seq, dropout, train);
    std::vector<Tensor> outs;
    for (int64_t dir = 0; dir < dirs; ++dir) {
      const int64_t index = layer * dirs + dir;
      at::TensorList w = params.slice(index * per, per);
      auto check = [&](const Tensor& t, c10::IntArrayRef want, const char* what) {
        TORCH_CHECK(t.sizes() == want, op, ": expected ", what, " of size ", want, ", got ", t.sizes());
        TORCH_CHECK(t.scalar_type() == input.scalar_type(), op, ": expected ", what, " of type ",
                    input.scalar_type(), " as the input, got ", t.scalar_type());
        return t;
      };
      Tensor w_ih = check(w[0], {gates, seq.size(2)}, "weight_ih"), w_hh = check(w[1], {gates, h_out}, "weight_hh");
      Tensor b_ih = has_biases ? check(w[2], {gates}, "bias_ih") : Tensor();
      Tensor b_hh = has_biases ? check(w[3], {gates}, "bias_hh") : Tensor();
      Tensor w_hr = proj ? check(w[per - 1], {h_out, hidden}, "weight_hr") : Tensor();
      // Under torch.compile the layer's initial states are copies: AOTAutograd
      // hands saved slices to the backward program detached from the tensor
      // they slice, and the tpu backend's programs take whole buffers.
      auto state = [&](const Tensor& h) { return tracing ? h[index].clone() : h[index]; };
      auto r = RnnLayerFunction::apply(seq, state(hx[0]), lstm ? OptTensor(state(hx[1])) : std::nullopt, w_ih,
                                       w_hh, opt(b_ih), opt(b_hh), opt(w_hr), static_cast<int64_t>(cell), dir == 1);
      outs.push_back(r[0]);
      finals_h.push_back(r[1]);
      if (lstm) finals_c.push_back(r[2]);
    }
    seq = dirs == 1 ? outs[0] : at::cat(outs, 2);
  }
  std::vector<Tensor> result{batch_first ? seq.transpose(0, 1) : seq, at::stack(finals_h, 0)};
  if (lstm) result.push_back(at::stack(finals_c, 0));
  return result;
}

enum class Path { PerStep, WholeStack, Layers };

Path path_of(const Tensor& input, at::TensorList hx, at::TensorList params, int64_t num_layers, double dropout,
             bool train) {
  if (at::autocast::is_autocast_enabled(c10::DeviceType::PrivateUse1)) return Path::PerStep;
  if (input.key_set().has(c10::DispatchKey::Python)) return Path::Layers;
  const bool grad = at::GradMode::is_enabled() &&
                    (any_requires_grad(input) || any_requires_grad(hx) || any_requires_grad(params));
  return grad || (train && dropout > 0 && num_layers > 1) ? Path::Layers : Path::WholeStack;
}

std::tuple<Tensor, Tensor, Tensor> lstm(const Tensor& input, at::TensorList hx, at::TensorList params,
                                        bool has_biases, int64_t num_layers, double dropout, bool train,
                                        bool bidirectional, bool batch_first) {
  switch (path_of(input, hx, params, num_layers, dropout, train)) {
    case Path::PerStep:
      return at::native::lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                              batch_first);
    case Path::WholeStack: {
      at::AutoDispatchBelowADInplaceOrView below;
      return at::lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first);
    }
    case Path::Layers: break;
  }
  auto r = layers_with_gradients(Cell::Lstm, input, hx, params, has_biases, num_layers, dropout, train,
                                 bidirectional, batch_first);
  return {r[0], r[1], r[2]};
}

// gru, rnn_tanh and rnn_relu share one signature.
using SingleStateRnn = std::tuple<Tensor, Tensor> (*)(const Tensor&, const Tensor&, at::TensorList, bool, int64_t,
                                                      double, bool, bool, bool);
template <Cell cell, SingleStateRnn Composite, SingleStateRnn Dispatched>
std::tuple<Tensor, Tensor> single_state_rnn(const Tensor& input, const Tensor& hx, at::TensorList params,
                                            bool has_biases, int64_t num_layers, double dropout, bool train,
                                            bool bidirectional, bool batch_first) {
  switch (path_of(input, {hx}, params, num_layers, dropout, train)) {
    case Path::PerStep:
      return Composite(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first);
    case Path::WholeStack: {
      at::AutoDispatchBelowADInplaceOrView below;
      return Dispatched(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first);
    }
    case Path::Layers: break;
  }
  auto r = layers_with_gradients(cell, input, {hx}, params, has_biases, num_layers, dropout, train, bidirectional,
                                 batch_first);
  return {r[0], r[1]};
}

// The overload sets of at::gru etc. need a cast to pick .input.
constexpr SingleStateRnn gru_native = &at::native::gru;
constexpr SingleStateRnn gru_dispatched = &at::gru;
constexpr SingleStateRnn rnn_tanh_native = &at::native::rnn_tanh;
constexpr SingleStateRnn rnn_tanh_dispatched = &at::rnn_tanh;
constexpr SingleStateRnn rnn_relu_native = &at::native::rnn_relu;
constexpr SingleStateRnn rnn_relu_dispatched = &at::rnn_relu;

// Shapes for tracing (torch.compile's fake tensors).
LayerResult rnn_layer_meta(const Tensor& input, const Tensor& h0, const OptTensor& c0, const Tensor&,
                           const Tensor& w_hh, const OptTensor&, const OptTensor&, const OptTensor& w_hr,
                           int64_t cell, bool) {
  const Cell kind = static_cast<Cell>(cell);
  const int64_t steps = input.size(0), batch = input.size(1), hidden = w_hh.size(0) / gate_count(kind);
  const bool lstm = kind == Cell::Lstm;
  auto o = input.options();
  return {at::empty({steps, batch, h0.size(1)}, o), at::empty_like(h0),
          lstm && c0 ? at::empty_like(*c0) : at::empty({0}, o),
          at::empty({steps, batch, lstm || kind == Cell::Gru ? 4 * hidden : 0}, o),
          at::empty({steps, batch, lstm ? (w_hr ? 2 : 1) * hidden : 0}, o)};
}

LayerGrads rnn_layer_backward_meta(const Tensor&, const Tensor&, const OptTensor&, const Tensor& input,
                                   const Tensor& h0, const OptTensor& c0, const Tensor& w_ih, const Tensor& w_hh,
                                   const OptTensor&, const OptTensor&, const OptTensor& w_hr, const Tensor&,
                                   const Tensor&, const Tensor&, int64_t cell, bool) {
  auto o = input.options();
  const bool lstm = static_cast<Cell>(cell) == Cell::Lstm;
  return {at::empty_like(input), at::empty_like(h0), lstm && c0 ? at::empty_like(*c0) : at::empty({0}, o),
          at::empty_like(w_ih), at::empty_like(w_hh), at::empty({w_hh.size(0)}, o), at::empty({w_hh.size(0)}, o),
          w_hr ? at::empty_like(*w_hr) : at::empty({0}, o)};
}

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

// cell: 0 LSTM, 1 GRU, 2 rnn_tanh, 3 rnn_relu. input is time-major; the
// states are one layer's [B, H]; cy is empty but for the LSTM; the last two
// results are what the backward reads.
TORCH_LIBRARY_FRAGMENT(torch_tpu, m) {
  m.def("rnn_layer(Tensor input, Tensor h0, Tensor? c0, Tensor w_ih, Tensor w_hh, Tensor? b_ih, Tensor? b_hh, "
        "Tensor? w_hr, int cell, bool reverse) -> (Tensor output, Tensor hy, Tensor cy, Tensor gates, "
        "Tensor states)");
  m.def("rnn_layer_backward(Tensor grad_output, Tensor grad_hy, Tensor? grad_cy, Tensor input, Tensor h0, "
        "Tensor? c0, Tensor w_ih, Tensor w_hh, Tensor? b_ih, Tensor? b_hh, Tensor? w_hr, Tensor output, "
        "Tensor gates, Tensor states, int cell, bool reverse) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, "
        "Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(torch_tpu, PrivateUse1, m) {
  m.impl("rnn_layer", torch::CppFunction::makeFromBoxedFunction<&lowered_op_kernel>());
  m.impl("rnn_layer_backward", torch::CppFunction::makeFromBoxedFunction<&lowered_op_kernel>());
}

TORCH_LIBRARY_IMPL(torch_tpu, Meta, m) {
  m.impl("rnn_layer", TORCH_FN(rnn_layer_meta));
  m.impl("rnn_layer_backward", TORCH_FN(rnn_layer_backward_meta));
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("gru.input", TORCH_FN((single_state_rnn<Cell::Gru, gru_native, gru_dispatched>)));
  m.impl("lstm.input", TORCH_FN(lstm));
  m.impl("rnn_relu.input", TORCH_FN((single_state_rnn<Cell::Relu, rnn_relu_native, rnn_relu_dispatched>)));
  m.impl("rnn_tanh.input", TORCH_FN((single_state_rnn<Cell::Tanh, rnn_tanh_native, rnn_tanh_dispatched>)));
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
