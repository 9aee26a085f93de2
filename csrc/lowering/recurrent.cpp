// Recurrent layers: nn.LSTM, nn.GRU and nn.RNN and their cells.
//
// Two paths reach these lowerings.
//  - Per step: on a non-CPU device PyTorch's RNN code (aten::lstm, gru and
//    their cells, all composite) computes each step's gate matmuls itself and
//    calls a fused cell kernel for the elementwise rest: _thnn_fused_lstm_cell
//    and _thnn_fused_gru_cell, whose third/second result ("workspace") keeps
//    the activated gates for the backward ops. The workspace layouts are the
//    ones PyTorch's CUDA kernels use, since the backward ops receive them from
//    autograd: LSTM [i, f, g, o] (activated), GRU [r, z, n, hx, hn] where hn is
//    the hidden gates' new-gate part with its bias.
//  - Whole layers: aten::lstm/gru/rnn_tanh/rnn_relu (.input) as one program
//    in which each layer and direction is ONE stablehlo.while over time. The
//    input projection of every step is one matmul before the loop; the loop
//    carries the step counter, the state and the output sequence. aten/
//    (csrc/aten/recurrent.cpp) takes this path only where no gradient is
//    needed and no dropout is drawn.
// Half-precision inputs compute each step in f32 and round the state once per
// step to the input's type, as the state PyTorch carries between steps is.
#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using E = ElementType;
using Values = std::vector<Value>;

// The k-th of n equal parts of v's dimension 1 (a gate of [B, n*H]).
Value part(Builder& b, Value v, int64_t k, int64_t n) {
  int64_t h = v.shape()[1] / n;
  return b.slice(v, {0, k * h}, {v.shape()[0], (k + 1) * h}, {1, 1});
}

Value one_minus(Builder& b, Value x) { return b.sub(splat(b, 1, x), x); }
// d sigmoid = s (1 - s), d tanh = 1 - t^2, from the activated values.
Value sigmoid_slope(Builder& b, Value s) { return b.mul(one_minus(b, s), s); }
Value tanh_slope(Builder& b, Value t) { return one_minus(b, b.mul(t, t)); }

Value row_sum(Builder& b, Value v) { return b.reduce_sum(v, {0}); }

// v + bias over rows, when a bias is given.
Value plus_bias(Builder& b, Value v, const std::optional<Value>& bias) {
  if (!bias) return v;
  return b.add(v, broadcast_to(b, cast(b, *bias, v.dtype()), v.shape()));
}

// The fused cells' argument checks (PyTorch's checkSizes for its CUDA
// kernels): 2-D gates of one size, 1-D biases as long as a gate row, a
// previous state of batch x gates/factor.
void check_cell_sizes(const char* op, const Value& igates, const Value& hgates,
                      const std::optional<Value>& ibias, const std::optional<Value>& hbias,
                      int64_t factor, const Value& prev) {
  TPU_CHECK(igates.rank() == 2, ErrorKind::Runtime, op, ": expected input_gates to be 2-D, got ",
            igates.rank(), "-D");
  TPU_CHECK(igates.shape() == hgates.shape(), ErrorKind::Runtime, op,
            ": expected input_gates and hidden_gates of one size, got ", hlo::shape_str(igates.shape()),
            " and ", hlo::shape_str(hgates.shape()));
  int64_t gates = igates.shape()[1];
  TPU_CHECK(bool(ibias) == bool(hbias), ErrorKind::Runtime, op,
            ": expected both biases or neither");
  if (ibias) {
    TPU_CHECK(ibias->rank() == 1 && ibias->shape()[0] == gates, ErrorKind::Runtime, op,
              ": expected input_bias of size [", gates, "], got ", hlo::shape_str(ibias->shape()));
    TPU_CHECK(hbias->shape() == ibias->shape(), ErrorKind::Runtime, op,
              ": expected hidden_bias of size [", gates, "], got ", hlo::shape_str(hbias->shape()));
  }
  TPU_CHECK(prev.rank() == 2 && gates % factor == 0 &&
                prev.shape()[0] * prev.shape()[1] == igates.shape()[0] * (gates / factor),
            ErrorKind::Runtime, op, ": expected a previous state of size [", igates.shape()[0], ", ",
            gates / factor, "], got ", hlo::shape_str(prev.shape()));
  check_dtype(hlo::is_float(igates.dtype()), op, igates.dtype());
}

// ---- LSTM

struct LstmStep {
  Value h, c;           // the new state (before any projection)
  Value i, f, g, o;     // activated gates
};

// gates: x W_ih^T + h W_hh^T + biases, [B, 4H], in the compute type.
LstmStep lstm_step(Builder& b, Value gates, Value c) {
  LstmStep s;
  s.i = b.logistic(part(b, gates, 0, 4));
  s.f = b.logistic(part(b, gates, 1, 4));
  s.g = b.tanh(part(b, gates, 2, 4));
  s.o = b.logistic(part(b, gates, 3, 4));
  s.c = b.add(b.mul(s.f, c), b.mul(s.i, s.g));
  s.h = b.mul(s.o, b.tanh(s.c));
  return s;
}

// (input_gates, hidden_gates, cx, input_bias?, hidden_bias?) -> (hy, cy, workspace)
Values lower_fused_lstm_cell(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value ig = a.at(0).as_tensor(), hg = a.at(1).as_tensor(), cx = a.at(2).as_tensor();
  auto ib = a.at(3).opt_tensor(), hb = a.at(4).opt_tensor();
  check_cell_sizes("_thnn_fused_lstm_cell", ig, hg, ib, hb, 4, cx);
  E t = ig.dtype(), c = opmath(t);
  Value gates = b.add(plus_bias(b, cast(b, ig, c), ib), plus_bias(b, cast(b, hg, c), hb));
  LstmStep s = lstm_step(b, gates, b.reshape(cast(b, cx, c), {ig.shape()[0], ig.shape()[1] / 4}));
  return {cast(b, b.reshape(s.h, cx.shape()), t), cast(b, b.reshape(s.c, cx.shape()), t),
          cast(b, b.concatenate({s.i, s.f, s.g, s.o}, 1), t)};
}

// (grad_hy?, grad_cy?, cx, cy, workspace, has_bias) -> (grad_gates, grad_cx,
// grad_bias). grad_bias is computed whatever has_bias says: aten/ drops it
// when there is no bias (a lowering returns values, never an undefined tensor).
Values lower_fused_lstm_cell_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  auto gh = a.at(0).opt_tensor(), gc = a.at(1).opt_tensor();
  Value cx = a.at(2).as_tensor(), cy = a.at(3).as_tensor(), ws = a.at(4).as_tensor();
  TPU_CHECK(gh || gc, ErrorKind::Runtime, "_thnn_fused_lstm_cell_backward_impl: no gradient given");
  TPU_CHECK(ws.rank() == 2 && cx.rank() == 2 && cy.shape() == cx.shape() &&
                ws.shape()[0] == cx.shape()[0] && ws.shape()[1] == 4 * cx.shape()[1],
            ErrorKind::Runtime, "_thnn_fused_lstm_cell_backward_impl: expected cx and cy of size [B, H] ",
            "and a workspace of [B, 4H], got ", hlo::shape_str(cx.shape()), ", ", hlo::shape_str(cy.shape()),
            " and ", hlo::shape_str(ws.shape()));
  E t = ws.dtype(), c = opmath(t);
  Value w = cast(b, ws, c), cxv = cast(b, cx, c), tc = b.tanh(cast(b, cy, c));
  Value go = gh ? cast(b, *gh, c) : b.zeros(c, cx.shape());
  Value gcy = gc ? cast(b, *gc, c) : b.zeros(c, cx.shape());
  Value i = part(b, w, 0, 4), f = part(b, w, 1, 4), g = part(b, w, 2, 4), o = part(b, w, 3, 4);
  Value dc = b.add(b.mul(b.mul(go, o), tanh_slope(b, tc)), gcy);
  Value di = b.mul(b.mul(dc, g), sigmoid_slope(b, i));
  Value df = b.mul(b.mul(dc, cxv), sigmoid_slope(b, f));
  Value dg = b.mul(b.mul(dc, i), tanh_slope(b, g));
  Value d_o = b.mul(b.mul(go, tc), sigmoid_slope(b, o));
  Value grad_gates = b.concatenate({di, df, dg, d_o}, 1);
  return {cast(b, grad_gates, t), cast(b, b.mul(dc, f), t), cast(b, row_sum(b, grad_gates), t)};
}

// ---- GRU

struct GruStep {
  Value h;
  Value r, z, n, hn;  // reset, update and new gates; hn: the hidden new-gate part
};

// gx, gh: the input's and the state's gates with their biases, [B, 3H].
GruStep gru_step(Builder& b, Value gx, Value gh, Value h) {
  GruStep s;
  s.r = b.logistic(b.add(part(b, gx, 0, 3), part(b, gh, 0, 3)));
  s.z = b.logistic(b.add(part(b, gx, 1, 3), part(b, gh, 1, 3)));
  s.hn = part(b, gh, 2, 3);
  s.n = b.tanh(b.add(part(b, gx, 2, 3), b.mul(s.r, s.hn)));
  s.h = b.add(s.n, b.mul(s.z, b.sub(h, s.n)));
  return s;
}

// (input_gates, hidden_gates, hx, input_bias?, hidden_bias?) -> (hy, workspace)
Values lower_fused_gru_cell(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value ig = a.at(0).as_tensor(), hg = a.at(1).as_tensor(), hx = a.at(2).as_tensor();
  auto ib = a.at(3).opt_tensor(), hb = a.at(4).opt_tensor();
  check_cell_sizes("_thnn_fused_gru_cell", ig, hg, ib, hb, 3, hx);
  E t = ig.dtype(), c = opmath(t);
  Value h = b.reshape(cast(b, hx, c), {ig.shape()[0], ig.shape()[1] / 3});
  GruStep s = gru_step(b, plus_bias(b, cast(b, ig, c), ib), plus_bias(b, cast(b, hg, c), hb), h);
  return {cast(b, b.reshape(s.h, hx.shape()), t),
          cast(b, b.concatenate({s.r, s.z, s.n, h, s.hn}, 1), t)};
}

// (grad_hy, workspace, has_bias) -> (grad_input_gates, grad_hidden_gates,
// grad_hx, grad_input_bias, grad_hidden_bias); the bias gradients as in
// lower_fused_lstm_cell_backward.
Values lower_fused_gru_cell_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value gy = a.at(0).as_tensor(), ws = a.at(1).as_tensor();
  TPU_CHECK(gy.rank() == 2 && ws.rank() == 2 && ws.shape()[0] == gy.shape()[0] &&
                ws.shape()[1] == 5 * gy.shape()[1],
            ErrorKind::Runtime, "_thnn_fused_gru_cell_backward: expected grad_hy of size [B, H] and a ",
            "workspace of [B, 5H], got ", hlo::shape_str(gy.shape()), " and ", hlo::shape_str(ws.shape()));
  E t = ws.dtype(), c = opmath(t);
  Value w = cast(b, ws, c), go = cast(b, gy, c);
  Value r = part(b, w, 0, 5), z = part(b, w, 1, 5), n = part(b, w, 2, 5), hx = part(b, w, 3, 5),
        hn = part(b, w, 4, 5);
  Value dz = b.mul(b.mul(go, b.sub(hx, n)), sigmoid_slope(b, z));
  Value dn = b.mul(b.mul(go, one_minus(b, z)), tanh_slope(b, n));
  Value dr = b.mul(b.mul(dn, hn), sigmoid_slope(b, r));
  Value gi = b.concatenate({dr, dz, dn}, 1), gh = b.concatenate({dr, dz, b.mul(dn, r)}, 1);
  return {cast(b, gi, t), cast(b, gh, t), cast(b, b.mul(go, z), t), cast(b, row_sum(b, gi), t),
          cast(b, row_sum(b, gh), t)};
}

// ---- whole layers: aten::lstm/gru/rnn_tanh/rnn_relu (.input)

enum class Cell { Lstm, Gru, Tanh, Relu };

const char* cell_op(Cell cell) {
  switch (cell) {
    case Cell::Lstm: return "lstm";
    case Cell::Gru: return "gru";
    case Cell::Tanh: return "rnn_tanh";
    case Cell::Relu: return "rnn_relu";
  }
  return "";
}

int64_t gate_count(Cell cell) { return cell == Cell::Lstm ? 4 : cell == Cell::Gru ? 3 : 1; }

struct LayerWeights {
  Value w_ih, w_hh;
  std::optional<Value> b_ih, b_hh, w_hr;
};

struct LayerState {
  Value h;
  std::optional<Value> c;  // LSTM
};

// x @ w^T over the last dim of x, accumulated in f32 for half types.
Value times_transposed(Builder& b, Value x, Value w) {
  return b.dot_general(x, w, {}, {}, {x.rank() - 1}, {1}, opmath(x.dtype()));
}

// One direction of one layer over the time-major x [T, B, I]: the outputs
// [T, B, H_out] and the final state. One stablehlo.while over the steps.
std::pair<Value, LayerState> run_layer(Builder& b, Cell cell, Value x, const LayerState& init,
                                       const LayerWeights& w, bool reverse) {
  E t = x.dtype(), c = opmath(t);
  const int64_t steps = x.shape()[0], batch = x.shape()[1], gates = w.w_ih.shape()[0];
  const int64_t h_out = init.h.shape()[1];
  Value outputs = b.zeros(t, {steps, batch, h_out});
  if (steps == 0) return {outputs, init};
  // Every step's input projection at once: the loop only multiplies the state.
  Value gx_all = plus_bias(b, times_transposed(b, x, w.w_ih), w.b_ih);
  auto step = [&](Builder& r, Value gx, Value h, const std::optional<Value>& cx) -> LayerState {
    Value gh = plus_bias(r, times_transposed(r, h, w.w_hh), w.b_hh);
    switch (cell) {
      case Cell::Lstm: {
        LstmStep s = lstm_step(r, r.add(gx, gh), cast(r, *cx, c));
        Value hy = cast(r, s.h, t);
        if (w.w_hr) hy = cast(r, times_transposed(r, hy, *w.w_hr), t);
        return {hy, cast(r, s.c, t)};
      }
      case Cell::Gru:
        return {cast(r, gru_step(r, gx, gh, cast(r, h, c)).h, t), std::nullopt};
      case Cell::Tanh:
        return {cast(r, r.tanh(r.add(gx, gh)), t), std::nullopt};
      case Cell::Relu: {
        Value sum = r.add(gx, gh);
        return {cast(r, nan_max(r, sum, splat(r, 0, sum)), t), std::nullopt};
      }
    }
    return {};
  };
  const bool lstm = cell == Cell::Lstm;
  // carry: step, h, [c,] outputs
  Values carry{b.constant_int(0, E::I64), init.h};
  if (lstm) carry.push_back(*init.c);
  carry.push_back(outputs);
  hlo::RegionFn cond = [&](Builder& r, const Values& s) {
    return Values{r.compare(s[0], r.constant_int(steps, E::I64), hlo::Compare::LT)};
  };
  hlo::RegionFn body = [&](Builder& r, const Values& s) {
    Value k = s[0];
    Value at = reverse ? r.sub(r.constant_int(steps - 1, E::I64), k) : k;
    Value zero = r.constant_int(0, E::I64);
    Value gx = r.reshape(r.dynamic_slice(gx_all, {at, zero, zero}, {1, batch, gates}), {batch, gates});
    LayerState next = step(r, gx, s[1], lstm ? std::optional<Value>(s[2]) : std::nullopt);
    Value out = r.dynamic_update_slice(s.back(), r.reshape(next.h, {1, batch, h_out}), {at, zero, zero});
    Values result{r.add(k, r.constant_int(1, E::I64)), next.h};
    if (lstm) result.push_back(*next.c);
    result.push_back(out);
    return result;
  };
  Values done = while_loop(b, carry, cond, body);
  LayerState last{done[1], lstm ? std::optional<Value>(done[2]) : std::nullopt};
  return {done.back(), last};
}

// The weights of layer `layer`, direction `dir` in the flat parameter list
// (w_ih, w_hh[, b_ih, b_hh][, w_hr] per layer and direction, as nn.RNNBase's
// _flat_weights), checked against the sizes the layer needs.
LayerWeights layer_weights(Cell cell, const Arg& params, bool has_biases, bool proj, int64_t index,
                           int64_t in_size, int64_t hidden, int64_t h_out, E t) {
  const int64_t per = 2 + (has_biases ? 2 : 0) + (proj ? 1 : 0);
  const char* op = cell_op(cell);
  TPU_CHECK(static_cast<int64_t>(params.tensors.size()) >= (index + 1) * per, ErrorKind::Runtime, op,
            ": expected ", per, " parameters per layer and direction, got ", params.tensors.size(),
            " in all");
  auto get = [&](int64_t k, const Shape& want, const char* what) {
    const auto& v = params.tensors[index * per + k];
    TPU_CHECK(v.has_value(), ErrorKind::Runtime, op, ": parameter ", what, " is undefined");
    TPU_CHECK(v->shape() == want, ErrorKind::Runtime, op, ": expected ", what, " of size ",
              hlo::shape_str(want), ", got ", hlo::shape_str(v->shape()));
    TPU_CHECK(v->dtype() == t, ErrorKind::Runtime, op, ": expected ", what, " of type ",
              scalar_type_name(t), " as the input, got ", scalar_type_name(v->dtype()));
    return *v;
  };
  const int64_t gates = gate_count(cell) * hidden;
  LayerWeights w;
  w.w_ih = get(0, {gates, in_size}, "weight_ih");
  w.w_hh = get(1, {gates, h_out}, "weight_hh");
  if (has_biases) {
    w.b_ih = get(2, {gates}, "bias_ih");
    w.b_hh = get(3, {gates}, "bias_hh");
  }
  if (proj) w.w_hr = get(per - 1, {h_out, hidden}, "weight_hr");
  return w;
}

// (input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
// batch_first): hx is [h0, c0] for the LSTM, h0 for the others. Dropout
// between layers is not drawn here (aten/ sends training with dropout to
// PyTorch's per-step path).
Values lower_rnn_layers(Context& ctx, const Args& a, Cell cell) {
  Builder& b = ctx.b;
  const char* op = cell_op(cell);
  Value x = a.at(0).as_tensor();
  std::vector<Value> hx;
  if (a.at(1).kind == Arg::Kind::TensorList) {
    for (const auto& v : a.at(1).tensors) {
      TPU_CHECK(v.has_value(), ErrorKind::Runtime, op, ": undefined hidden state");
      hx.push_back(*v);
    }
  } else {
    hx.push_back(a.at(1).as_tensor());
  }
  const Arg& params = a.at(2);
  const bool has_biases = a.at(3).as_bool(), bidirectional = a.at(7).as_bool(),
             batch_first = a.at(8).as_bool();
  const int64_t layers = a.at(4).as_int(), dirs = bidirectional ? 2 : 1;
  TPU_CHECK(a.at(5).as_float() == 0 || !a.at(6).as_bool() || layers == 1, ErrorKind::Runtime, op,
            ": the device loop draws no dropout");
  TPU_CHECK(x.rank() == 3, ErrorKind::Runtime, op, ": expected a 3-D input, got ", x.rank(), "-D");
  check_dtype(hlo::is_float(x.dtype()), op, x.dtype());
  TPU_CHECK(static_cast<int64_t>(hx.size()) == (cell == Cell::Lstm ? 2 : 1), ErrorKind::Runtime, op,
            ": expected ", cell == Cell::Lstm ? 2 : 1, " hidden states, got ", hx.size());
  if (batch_first) x = b.transpose(x, {1, 0, 2});
  const int64_t batch = x.shape()[1];
  for (const Value& h : hx) {
    TPU_CHECK(h.rank() == 3 && h.shape()[0] == layers * dirs && h.shape()[1] == batch, ErrorKind::Runtime,
              op, ": expected hidden states of size [", layers * dirs, ", ", batch, ", *], got ",
              hlo::shape_str(h.shape()));
    TPU_CHECK(h.dtype() == x.dtype(), ErrorKind::Runtime, op, ": expected hidden states of type ",
              scalar_type_name(x.dtype()), " as the input, got ", scalar_type_name(h.dtype()));
  }
  const int64_t h_out = hx[0].shape()[2];
  const int64_t hidden = cell == Cell::Lstm ? hx[1].shape()[2] : h_out;
  const bool proj = hidden != h_out;
  auto state_of = [&](int64_t index) {
    auto take = [&](const Value& v) {
      Value s = b.slice(v, {index, 0, 0}, {index + 1, batch, v.shape()[2]}, {1, 1, 1});
      return b.reshape(s, {batch, v.shape()[2]});
    };
    LayerState s{take(hx[0]), std::nullopt};
    if (cell == Cell::Lstm) s.c = take(hx[1]);
    return s;
  };
  Values finals_h, finals_c;
  Value seq = x;
  for (int64_t layer = 0; layer < layers; ++layer) {
    Values outs;
    for (int64_t dir = 0; dir < dirs; ++dir) {
      int64_t index = layer * dirs + dir;
      LayerWeights w = layer_weights(cell, params, has_biases, proj, index, seq.shape()[2], hidden, h_out,
                                     x.dtype());
      auto [out, last] = run_layer(b, cell, seq, state_of(index), w, dir == 1);
      outs.push_back(out);
      finals_h.push_back(b.reshape(last.h, {1, batch, h_out}));
      if (last.c) finals_c.push_back(b.reshape(*last.c, {1, batch, hidden}));
    }
    seq = outs.size() == 1 ? outs[0] : b.concatenate(outs, 2);
  }
  if (batch_first) seq = b.transpose(seq, {1, 0, 2});
  Values result{seq, b.concatenate(finals_h, 0)};
  if (cell == Cell::Lstm) result.push_back(b.concatenate(finals_c, 0));
  return result;
}

Values lower_lstm_layers(Context& ctx, const Args& a) { return lower_rnn_layers(ctx, a, Cell::Lstm); }
Values lower_gru_layers(Context& ctx, const Args& a) { return lower_rnn_layers(ctx, a, Cell::Gru); }
Values lower_rnn_tanh_layers(Context& ctx, const Args& a) { return lower_rnn_layers(ctx, a, Cell::Tanh); }
Values lower_rnn_relu_layers(Context& ctx, const Args& a) { return lower_rnn_layers(ctx, a, Cell::Relu); }

}  // namespace

TPU_LOWERING("aten::_thnn_fused_gru_cell", lower_fused_gru_cell);
TPU_LOWERING("aten::_thnn_fused_gru_cell_backward", lower_fused_gru_cell_backward);
TPU_LOWERING("aten::_thnn_fused_lstm_cell", lower_fused_lstm_cell);
TPU_LOWERING("aten::_thnn_fused_lstm_cell_backward_impl", lower_fused_lstm_cell_backward);
TPU_LOWERING("aten::gru.input", lower_gru_layers);
TPU_LOWERING("aten::lstm.input", lower_lstm_layers);
TPU_LOWERING("aten::rnn_relu.input", lower_rnn_relu_layers);
TPU_LOWERING("aten::rnn_tanh.input", lower_rnn_tanh_layers);

}  // namespace torch_tpu::lowering
