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
//  - Whole layers, each layer and direction ONE stablehlo.while over time:
//    the input projection of every step is one matmul before the loop, which
//    carries the step counter, the state and the output sequence.
//    aten::lstm/gru/rnn_tanh/rnn_relu (.input) is the whole stack as one
//    program (no gradient, no dropout); torch_tpu::rnn_layer is one layer and
//    direction that also keeps, per step, what its backward needs, and
//    torch_tpu::rnn_layer_backward runs a second loop back over time, after
//    which the weight and input gradients are matmuls over all steps at once.
//    csrc/aten/recurrent.cpp says which runs when.
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

// What the backward loop needs of a forward step, one [T, B, *] buffer each,
// indexed by time: LSTM gates [i, f, g, o] (activated) and states [c] (and
// the unprojected h after it with a projection); GRU gates [r, z, n, hn];
// nothing for rnn_tanh/relu, whose outputs are their states.
struct Saved {
  Value gates, states;
};

int64_t saved_gate_width(Cell cell, int64_t hidden) {
  return cell == Cell::Lstm || cell == Cell::Gru ? 4 * hidden : 0;
}
int64_t saved_state_width(Cell cell, int64_t hidden, bool proj) {
  return cell == Cell::Lstm ? (proj ? 2 : 1) * hidden : 0;
}

Value time_slice(Builder& r, Value all, Value at) {
  Value zero = r.constant_int(0, E::I64);
  const Shape& s = all.shape();
  return r.reshape(r.dynamic_slice(all, {at, zero, zero}, {1, s[1], s[2]}), {s[1], s[2]});
}
Value time_update(Builder& r, Value all, Value v, Value at) {
  Value zero = r.constant_int(0, E::I64);
  return r.dynamic_update_slice(all, r.reshape(v, {1, v.shape()[0], v.shape()[1]}), {at, zero, zero});
}

// The time index of loop step k: forward from 0, or back from T - 1.
Value time_of(Builder& r, Value k, int64_t steps, bool backwards) {
  return backwards ? r.sub(r.constant_int(steps - 1, E::I64), k) : k;
}

// One direction of one layer over the time-major x [T, B, I]: the outputs
// [T, B, H_out] and the final state. One stablehlo.while over the steps;
// with `saved`, it also fills the buffers the backward loop reads.
std::pair<Value, LayerState> run_layer(Builder& b, Cell cell, Value x, const LayerState& init,
                                       const LayerWeights& w, bool reverse, Saved* saved = nullptr) {
  E t = x.dtype(), c = opmath(t);
  const int64_t steps = x.shape()[0], batch = x.shape()[1];
  const int64_t h_out = init.h.shape()[1], hidden = w.w_hh.shape()[0] / gate_count(cell);
  const bool lstm = cell == Cell::Lstm;
  Value outputs = b.zeros(t, {steps, batch, h_out});
  if (saved) {
    saved->gates = b.zeros(t, {steps, batch, saved_gate_width(cell, hidden)});
    saved->states = b.zeros(t, {steps, batch, saved_state_width(cell, hidden, bool(w.w_hr))});
  }
  if (steps == 0) return {outputs, init};
  // Every step's input projection at once: the loop only multiplies the state.
  Value gx_all = plus_bias(b, times_transposed(b, x, w.w_ih), w.b_ih);
  struct Step {
    LayerState next;
    Value gates, states;  // what `saved` keeps of this step
  };
  auto step = [&](Builder& r, Value gx, Value h, const std::optional<Value>& cx) -> Step {
    Value gh = plus_bias(r, times_transposed(r, h, w.w_hh), w.b_hh);
    switch (cell) {
      case Cell::Lstm: {
        LstmStep s = lstm_step(r, r.add(gx, gh), cast(r, *cx, c));
        Value raw = cast(r, s.h, t), hy = raw;
        if (w.w_hr) hy = cast(r, times_transposed(r, raw, *w.w_hr), t);
        Value cy = cast(r, s.c, t);
        return {{hy, cy}, cast(r, r.concatenate({s.i, s.f, s.g, s.o}, 1), t),
                w.w_hr ? r.concatenate({cy, raw}, 1) : cy};
      }
      case Cell::Gru: {
        GruStep s = gru_step(r, gx, gh, cast(r, h, c));
        return {{cast(r, s.h, t), std::nullopt}, cast(r, r.concatenate({s.r, s.z, s.n, s.hn}, 1), t), {}};
      }
      case Cell::Tanh:
        return {{cast(r, r.tanh(r.add(gx, gh)), t), std::nullopt}, {}, {}};
      case Cell::Relu: {
        Value sum = r.add(gx, gh);
        return {{cast(r, nan_max(r, sum, splat(r, 0, sum)), t), std::nullopt}, {}, {}};
      }
    }
    return {};
  };
  // carry: step, h, [c,] outputs[, saved gates, saved states]
  Values carry{b.constant_int(0, E::I64), init.h};
  if (lstm) carry.push_back(*init.c);
  const size_t out_at = carry.size();
  carry.push_back(outputs);
  if (saved) {
    carry.push_back(saved->gates);
    carry.push_back(saved->states);
  }
  hlo::RegionFn cond = [&](Builder& r, const Values& s) {
    return Values{r.compare(s[0], r.constant_int(steps, E::I64), hlo::Compare::LT)};
  };
  hlo::RegionFn body = [&](Builder& r, const Values& s) {
    Value k = s[0], at = time_of(r, k, steps, reverse);
    Step st = step(r, time_slice(r, gx_all, at), s[1], lstm ? std::optional<Value>(s[2]) : std::nullopt);
    Values result{r.add(k, r.constant_int(1, E::I64)), st.next.h};
    if (lstm) result.push_back(*st.next.c);
    result.push_back(time_update(r, s[out_at], st.next.h, at));
    if (saved) {
      result.push_back(st.gates.valid() ? time_update(r, s[out_at + 1], st.gates, at) : s[out_at + 1]);
      result.push_back(st.states.valid() ? time_update(r, s[out_at + 2], st.states, at) : s[out_at + 2]);
    }
    return result;
  };
  Values done = while_loop(b, carry, cond, body);
  if (saved) {
    saved->gates = done[out_at + 1];
    saved->states = done[out_at + 2];
  }
  LayerState last{done[1], lstm ? std::optional<Value>(done[2]) : std::nullopt};
  return {done[out_at], last};
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

// ---- one layer and direction with gradients: torch_tpu::rnn_layer and
// torch_tpu::rnn_layer_backward (aten/ wraps them in an autograd function)

Cell cell_arg(const Arg& a) {
  int64_t v = a.as_int();
  TPU_CHECK(v >= 0 && v <= 3, ErrorKind::Value, "rnn_layer: unknown cell kind ", v);
  return static_cast<Cell>(v);
}

LayerWeights weights_arg(const Args& a, size_t first) {
  LayerWeights w;
  w.w_ih = a.at(first).as_tensor();
  w.w_hh = a.at(first + 1).as_tensor();
  w.b_ih = a.at(first + 2).opt_tensor();
  w.b_hh = a.at(first + 3).opt_tensor();
  w.w_hr = a.at(first + 4).opt_tensor();
  return w;
}

// (input [T, B, I], h0 [B, H_out], c0?, w_ih, w_hh, b_ih?, b_hh?, w_hr?, cell,
// reverse) -> (output, hy, cy, saved gates, saved states); cy is empty but
// for the LSTM.
Values lower_rnn_layer(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Cell cell = cell_arg(a.at(8));
  Value x = a.at(0).as_tensor();
  LayerState init{a.at(1).as_tensor(), a.at(2).opt_tensor()};
  TPU_CHECK(cell != Cell::Lstm || init.c, ErrorKind::Runtime, "rnn_layer: the LSTM needs c0");
  Saved saved;
  auto [out, last] = run_layer(b, cell, x, init, weights_arg(a, 3), a.at(9).as_bool(), &saved);
  return {out, last.h, last.c ? *last.c : b.zeros(x.dtype(), {0}), saved.gates, saved.states};
}

// The forward's gradients by one stablehlo.while back over time: each step
// turns the gradient reaching its state into the gradients of its gates
// (stored per step) and of the state before it. The weight and input
// gradients are then a few matmuls over every step at once.
// (grad_output, grad_hy, grad_cy?, input, h0, c0?, w_ih, w_hh, b_ih?, b_hh?,
// w_hr?, output, saved gates, saved states, cell, reverse) -> (d input, d h0,
// d c0, d w_ih, d w_hh, d b_ih, d b_hh, d w_hr); d c0 and d w_hr are empty
// where there is none, the bias gradients are computed whether or not there
// are biases (aten/ drops them).
Values lower_rnn_layer_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Cell cell = cell_arg(a.at(14));
  const bool reverse = a.at(15).as_bool(), lstm = cell == Cell::Lstm;
  Value x = a.at(3).as_tensor(), h0 = a.at(4).as_tensor();
  LayerWeights w = weights_arg(a, 6);
  Value out = a.at(11).as_tensor(), gates = a.at(12).as_tensor(), states = a.at(13).as_tensor();
  E t = x.dtype(), c = opmath(t);
  const int64_t steps = x.shape()[0], batch = x.shape()[1], h_out = h0.shape()[1];
  const int64_t hidden = w.w_hh.shape()[0] / gate_count(cell), g = w.w_hh.shape()[0];
  const bool proj = bool(w.w_hr);
  Value go_all = cast(b, a.at(0).as_tensor(), c);
  Value w_hh = cast(b, w.w_hh, c);
  // d gates of the input projection and of the state's (they differ for the
  // GRU's new gate only), and d of the projected output per step.
  Values carry{b.constant_int(0, E::I64), cast(b, a.at(1).as_tensor(), c)};
  if (lstm) carry.push_back(cast(b, *a.at(2).opt_tensor(), c));
  const size_t bufs = carry.size();
  carry.push_back(b.zeros(c, {steps, batch, g}));
  carry.push_back(b.zeros(c, {steps, batch, cell == Cell::Gru ? g : 0}));
  carry.push_back(b.zeros(c, {steps, batch, proj ? h_out : 0}));
  // The LSTM's cell state per step (the saved states lead with it).
  Value c0 = lstm ? *a.at(5).opt_tensor() : Value{};
  Value c_all = lstm && proj ? b.slice(states, {0, 0, 0}, {steps, batch, hidden}, {1, 1, 1}) : states;
  hlo::RegionFn cond = [&](Builder& r, const Values& s) {
    return Values{r.compare(s[0], r.constant_int(steps, E::I64), hlo::Compare::LT)};
  };
  hlo::RegionFn body = [&](Builder& r, const Values& s) {
    Value k = s[0], at = time_of(r, k, steps, !reverse);
    // The step before this one in the forward's order, and whether there is none.
    Value prev = reverse ? r.add(at, r.constant_int(1, E::I64)) : r.sub(at, r.constant_int(1, E::I64));
    Value first = r.compare(at, r.constant_int(reverse ? steps - 1 : 0, E::I64), hlo::Compare::EQ);
    auto before = [&](Value all, Value initial) {
      Value v = time_slice(r, all, prev);  // dynamic_slice clamps the index of the first step
      return r.select(r.broadcast_in_dim(first, v.shape(), {}), initial, v);
    };
    Value dh = r.add(s[1], time_slice(r, go_all, at));
    Values next{r.add(k, r.constant_int(1, E::I64))};
    Value d_gx, d_gh, d_proj;
    switch (cell) {
      case Cell::Lstm: {
        Value gv = cast(r, time_slice(r, gates, at), c);
        Value i = part(r, gv, 0, 4), f = part(r, gv, 1, 4), gg = part(r, gv, 2, 4), o = part(r, gv, 3, 4);
        Value ct = cast(r, time_slice(r, c_all, at), c), c_prev = cast(r, before(c_all, c0), c);
        Value draw = dh;
        if (proj) {
          d_proj = dh;
          draw = r.dot_general(dh, cast(r, *w.w_hr, c), {}, {}, {1}, {0}, c);
        }
        Value tc = r.tanh(ct);
        Value dc = r.add(s[2], r.mul(r.mul(draw, o), tanh_slope(r, tc)));
        Value di = r.mul(r.mul(dc, gg), sigmoid_slope(r, i));
        Value df = r.mul(r.mul(dc, c_prev), sigmoid_slope(r, f));
        Value dg = r.mul(r.mul(dc, i), tanh_slope(r, gg));
        Value d_o = r.mul(r.mul(draw, tc), sigmoid_slope(r, o));
        d_gx = r.concatenate({di, df, dg, d_o}, 1);
        next.push_back(r.dot_general(d_gx, w_hh, {}, {}, {1}, {0}, c));
        next.push_back(r.mul(dc, f));
        break;
      }
      case Cell::Gru: {
        Value gv = cast(r, time_slice(r, gates, at), c);
        Value rg = part(r, gv, 0, 4), z = part(r, gv, 1, 4), n = part(r, gv, 2, 4), hn = part(r, gv, 3, 4);
        Value h_prev = cast(r, before(out, h0), c);
        Value dz = r.mul(r.mul(dh, r.sub(h_prev, n)), sigmoid_slope(r, z));
        Value dn = r.mul(r.mul(dh, one_minus(r, z)), tanh_slope(r, n));
        Value dr = r.mul(r.mul(dn, hn), sigmoid_slope(r, rg));
        d_gx = r.concatenate({dr, dz, dn}, 1);
        d_gh = r.concatenate({dr, dz, r.mul(dn, rg)}, 1);
        next.push_back(r.add(r.mul(dh, z), r.dot_general(d_gh, w_hh, {}, {}, {1}, {0}, c)));
        break;
      }
      case Cell::Tanh:
      case Cell::Relu: {
        Value h = cast(r, time_slice(r, out, at), c);
        Value slope = cell == Cell::Tanh
                          ? tanh_slope(r, h)
                          : r.select(r.compare(h, splat(r, 0, h), hlo::Compare::GT), splat(r, 1, h), splat(r, 0, h));
        d_gx = r.mul(dh, slope);
        next.push_back(r.dot_general(d_gx, w_hh, {}, {}, {1}, {0}, c));
        break;
      }
    }
    next.push_back(time_update(r, s[bufs], d_gx, at));
    next.push_back(d_gh.valid() ? time_update(r, s[bufs + 1], d_gh, at) : s[bufs + 1]);
    next.push_back(d_proj.valid() ? time_update(r, s[bufs + 2], d_proj, at) : s[bufs + 2]);
    return next;
  };
  Values done = steps == 0 ? carry : while_loop(b, carry, cond, body);
  Value d_gx_all = done[bufs], d_gh_all = cell == Cell::Gru ? done[bufs + 1] : d_gx_all;
  // The state each step started from: h0, then the outputs, in the forward's order.
  Value h_prev_all;
  if (steps == 0) {
    h_prev_all = b.zeros(t, {0, batch, h_out});
  } else {
    Value h0_row = b.reshape(h0, {1, batch, h_out});
    Value rest = reverse ? b.slice(out, {1, 0, 0}, {steps, batch, h_out}, {1, 1, 1})
                         : b.slice(out, {0, 0, 0}, {steps - 1, batch, h_out}, {1, 1, 1});
    h_prev_all = reverse ? b.concatenate({rest, h0_row}, 0) : b.concatenate({h0_row, rest}, 0);
  }
  auto over_steps = [&](Value d, Value v) {  // sum over time and batch of d^T v
    return b.dot_general(d, cast(b, v, c), {}, {}, {0, 1}, {0, 1}, c);
  };
  Value dx = b.dot_general(d_gx_all, cast(b, w.w_ih, c), {}, {}, {2}, {0}, c);
  Values result{cast(b, dx, t), cast(b, done[1], t), lstm ? cast(b, done[2], t) : b.zeros(t, {0}),
                cast(b, over_steps(d_gx_all, x), w.w_ih.dtype()), cast(b, over_steps(d_gh_all, h_prev_all), t),
                cast(b, b.reduce_sum(d_gx_all, {0, 1}), t), cast(b, b.reduce_sum(d_gh_all, {0, 1}), t)};
  if (proj) {
    Value raw_all = b.slice(states, {0, 0, hidden}, {steps, batch, 2 * hidden}, {1, 1, 1});
    result.push_back(cast(b, over_steps(done[bufs + 2], raw_all), t));
  } else {
    result.push_back(b.zeros(t, {0}));
  }
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
TPU_LOWERING("torch_tpu::rnn_layer", lower_rnn_layer);
TPU_LOWERING("torch_tpu::rnn_layer_backward", lower_rnn_layer_backward);

}  // namespace torch_tpu::lowering
