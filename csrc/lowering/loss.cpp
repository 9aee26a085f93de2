// Losses. cross_entropy is composite (log_softmax + nll_loss, or a product
// and sum for probability targets), so nll_loss carries class-index losses;
// the pointwise losses (mse, smooth_l1, huber) share one table of formulas
// and their derivatives; binary cross entropy (on probabilities or logits)
// stands alone.
#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using hlo::Compare;
using E = ElementType;
using Dims = std::vector<int64_t>;

E acc_type(E t) { return t == E::F16 || t == E::BF16 ? E::F32 : t; }

enum Reduction : int64_t { None = 0, Mean = 1, Sum = 2 };

Reduction reduction_of(const Arg& a) {
  int64_t r = a.as_int();
  TPU_CHECK(r >= 0 && r <= 2, ErrorKind::Value, r, " is not a valid value for reduction");
  return static_cast<Reduction>(r);
}

Value sum_all(Builder& b, Value v) {
  if (v.rank() == 0) return v;
  Dims all(v.rank());
  for (int64_t i = 0; i < v.rank(); ++i) all[i] = i;
  return b.reduce_sum(v, all);
}

Value reduce_loss(Builder& b, Value loss, Reduction r) {
  if (r == None) return loss;
  Value s = sum_all(b, loss);
  if (r == Sum) return s;
  // Mean over no elements is 0/0 = NaN, as in PyTorch.
  return b.div(s, b.constant(double(loss.type.numel()), loss.dtype()));
}

// The scale each element's derivative gets from the reduction.
Value grad_scale(Builder& b, Value g, Reduction r, const Shape& shape, E acc) {
  Value ga = cast(b, g, acc);
  if (r == Mean) ga = b.div(ga, b.constant(double(hlo::TensorType{acc, shape}.numel()), acc));
  return broadcast_to(b, ga, shape);
}

// ---- nll_loss: input (C), (N, C) or (N, C, d1, ...), class dim 1 (0 unbatched)

enum class NllForm { Flat, Spatial };  // nll_loss / nll_loss2d

void check_nll(const Value& self, const Value& target, const std::optional<Value>& weight,
               NllForm form) {
  if (form == NllForm::Flat) {
    TPU_CHECK(self.rank() >= 1 && self.rank() <= 2, ErrorKind::Runtime,
              "input tensor should be 1D or 2D");
    TPU_CHECK(target.rank() <= 1, ErrorKind::Runtime,
              "0D or 1D target tensor expected, multi-target not supported");
    bool unbatched = self.rank() == 1 && target.rank() == 0;
    TPU_CHECK(unbatched || (self.rank() == 2 && target.rank() == 1 &&
                            self.shape()[0] == target.shape()[0]),
              ErrorKind::Runtime, "size mismatch (got input: ", hlo::shape_str(self.shape()),
              ", target: ", hlo::shape_str(target.shape()), ")");
  } else {
    TPU_CHECK(target.rank() == 3, ErrorKind::Runtime,
              "only batches of spatial targets supported (3D tensors) but got targets of "
              "dimension: ",
              target.rank());
    TPU_CHECK(self.rank() == 4, ErrorKind::Runtime,
              "only batches of spatial inputs supported (4D tensors), but got input of "
              "dimension: ",
              self.rank());
    const Shape& s = self.shape();
    const Shape& t = target.shape();
    TPU_CHECK(s[0] == t[0] && s[2] == t[1] && s[3] == t[2], ErrorKind::Runtime,
              "input and target batch or spatial sizes don't match: target ", hlo::shape_str(t),
              ", input ", hlo::shape_str(s));
  }
  TPU_CHECK(target.dtype() == E::I64 || target.dtype() == E::U8, ErrorKind::Runtime,
            "expected target dtype to be Long or Byte, but got ", scalar_type_name(target.dtype()));
  TPU_CHECK(hlo::is_float(self.dtype()), ErrorKind::NotImplemented,
            "\"nll_loss\" not implemented for '", scalar_type_name(self.dtype()), "'");
  int64_t classes = self.shape()[self.rank() == 1 ? 0 : 1];
  if (weight)
    TPU_CHECK(weight->type.numel() == classes, ErrorKind::Runtime,
              "weight tensor should be defined either for all ", classes,
              " classes or no classes but got weight tensor of shape: ",
              hlo::shape_str(weight->shape()));
}

// Each target as a one-hot mask over the class dim (the backward's and a
// class weight's pick; the forward's input is gathered, picked_input): a
// target outside [0, C) (other than ignore_index) then picks nothing and
// contributes 0 instead of being clamped onto a class.
struct Picked {
  Value mask;    // self-shaped: true at each position's target class
  Value valid;   // target-shaped: target != ignore_index
  Value weight;  // target-shaped class weight, 0 where ignored
  Dims target_dims;  // where target dims sit in self
  int64_t cdim;
};

Picked pick(Builder& b, const Value& self, const Value& target, const std::optional<Value>& weight,
            int64_t ignore_index, E acc) {
  Picked p;
  p.cdim = self.rank() == 1 ? 0 : 1;
  for (int64_t i = 0; i < self.rank(); ++i)
    if (i != p.cdim) p.target_dims.push_back(i);
  Value t = cast(b, target, E::I64);
  Value classes = b.iota(hlo::TensorType{E::I64, self.shape()}, p.cdim);
  p.mask = b.compare(classes, b.broadcast_in_dim(t, self.shape(), p.target_dims), Compare::EQ);
  Value ignore = b.broadcast_in_dim(b.constant_int(ignore_index, E::I64), t.shape(), {});
  p.valid = b.compare(t, ignore, Compare::NE);
  Value zeros = b.zeros(acc, t.shape());
  Value w = b.full(1, acc, t.shape());
  if (weight) {
    Value wb = b.broadcast_in_dim(b.reshape(cast(b, *weight, acc), {weight->type.numel()}),
                                  self.shape(), {p.cdim});
    w = b.reduce_sum(b.select(p.mask, wb, b.zeros(acc, self.shape())), {p.cdim});
  }
  p.weight = b.select(p.valid, w, zeros);
  return p;
}

// Each position's input at its target class, 0 where the target is outside
// [0, C) (the mask above picks nothing there): a gather of one element per
// target. Picking by the mask instead (a select and a sum over the classes)
// makes XLA:CPU pass over the whole input in a reduce-window: 2-3 ms for the
// GPT's [1024, 4096] logits, against microseconds for 1024 elements.
Value picked_input(Builder& b, const Value& self, const Value& target, int64_t cdim, E acc) {
  const int64_t classes = self.shape()[cdim], rank = self.rank();
  Value t = cast(b, target, E::I64);
  Value in_range = b.and_(b.compare(t, b.zeros(E::I64, t.shape()), Compare::GE),
                          b.compare(t, b.full(double(classes), E::I64, t.shape()), Compare::LT));
  // Coordinates [..., rank]: the target's own position in every dim but the
  // class dim, which takes the target (clamped into range by the gather).
  Shape one = t.shape();
  one.push_back(1);
  std::vector<Value> coords;
  for (int64_t d = 0, td = 0; d < rank; ++d)
    coords.push_back(b.reshape(d == cdim ? t : b.iota(hlo::TensorType{E::I64, t.shape()}, td++), one));
  Builder::GatherDims g;
  for (int64_t d = 0; d < rank; ++d) g.collapsed_slice_dims.push_back(d), g.start_index_map.push_back(d);
  g.index_vector_dim = t.rank();
  Value x = b.gather(self, b.concatenate(coords, t.rank()), g, Dims(rank, 1), t.shape());
  return b.select(in_range, cast(b, x, acc), b.zeros(acc, t.shape()));
}

// (output, total_weight)
std::vector<Value> nll_forward(Context& ctx, const Args& a, NllForm form) {
  Builder& b = ctx.b;
  Value self = a[0].as_tensor(), target = a[1].as_tensor();
  auto weight = a[2].opt_tensor();
  Reduction r = reduction_of(a[3]);
  // A 1-D input takes a one-element 1-D target as its 0-d class (the
  // backward refuses it, as on the CPU).
  if (form == NllForm::Flat && self.rank() == 1 && target.rank() == 1) {
    TPU_CHECK(target.shape()[0] == 1, ErrorKind::Value,
              "For 1D input, 1D target must have size 1, but got target size: ", target.shape()[0]);
    target = b.reshape(target, {});
  }
  check_nll(self, target, weight, form);
  E acc = acc_type(self.dtype());
  Picked p = pick(b, self, target, weight, a[4].as_int(), acc);
  Value picked = picked_input(b, self, target, p.cdim, acc);
  // Ignored targets give exactly 0, even where the input is -inf.
  Value loss = b.select(p.valid, b.neg(b.mul(picked, p.weight)), b.zeros(acc, picked.shape()));
  if (r == None) return {cast(b, loss, self.dtype()), b.constant(0, self.dtype())};
  Value total = sum_all(b, p.weight);
  Value out = sum_all(b, loss);
  if (r == Mean) out = b.div(out, total);
  return {cast(b, out, self.dtype()), cast(b, total, self.dtype())};
}

Value nll_backward(Context& ctx, const Args& a, NllForm form) {
  Builder& b = ctx.b;
  Value g = a[0].as_tensor(), self = a[1].as_tensor(), target = a[2].as_tensor();
  auto weight = a[3].opt_tensor();
  Reduction r = reduction_of(a[4]);
  Value total = a[6].as_tensor();
  check_nll(self, target, weight, form);
  E acc = acc_type(self.dtype());
  Picked p = pick(b, self, target, weight, a[5].as_int(), acc);
  Value scale = cast(b, g, acc);
  if (r == None) {
    TPU_CHECK(g.shape() == target.shape(), ErrorKind::Runtime, "Expected a tensor of dimension ",
              target.rank(), " and tensor.size[0] == ", target.rank() ? target.shape()[0] : 1,
              " but got: dimension ", g.rank(), " and tensor.size[0] == ",
              g.rank() ? g.shape()[0] : 1);
  } else {
    TPU_CHECK(g.type.numel() == 1, ErrorKind::Runtime,
              "Expected a single element grad_output tensor, but got: ", hlo::shape_str(g.shape()));
    scale = b.reshape(scale, {});
    if (r == Mean) scale = b.div(scale, b.reshape(cast(b, total, acc), {}));
    scale = broadcast_to(b, scale, target.shape());
  }
  Value per = b.select(p.valid, b.neg(b.mul(p.weight, scale)), b.zeros(acc, target.shape()));
  Value spread = b.broadcast_in_dim(per, self.shape(), p.target_dims);
  return cast(b, b.select(p.mask, spread, b.zeros(acc, self.shape())), self.dtype());
}

// ---- multi_margin_loss: input (N, C), (C) or (), target (N) or ()
//
// loss[n] = sum over classes i != y of max(0, margin - x[y] + x[i])^p,
// times weight[y], divided by C. p is 1 or 2 and decides the program, so the
// Scalars are static. A target outside [0, C) picks no class: the CPU raises
// "target out of range", which the device cannot.

struct Margin {
  Value x;       // (N, C) in the accumulation type
  Value mask;    // (N, C): the target class
  Value z;       // (N, C): margin - x[y] + x[i]
  Value scale;   // (N): weight[y] / C
  int64_t n, c;
  int p;
  E acc;
};

Margin margin_terms(Builder& b, const Args& a, int first) {
  Value self = a[first].as_tensor(), target = a[first + 1].as_tensor();
  double p = a[first + 2].number.as_double(), margin = a[first + 3].number.as_double();
  auto weight = a[first + 4].opt_tensor();
  int64_t rank = self.rank();
  TPU_CHECK((rank == 2 && self.shape()[1] != 0) || (rank == 1 && self.shape()[0] != 0) || rank == 0,
            ErrorKind::Runtime,
            "Expected non-empty vector or matrix with optional 0-dim batch size, but got: ",
            hlo::shape_str(self.shape()));
  Margin m;
  m.n = rank <= 1 ? 1 : self.shape()[0];
  m.c = rank == 0 ? 1 : self.shape()[rank - 1];
  TPU_CHECK(target.rank() <= 1 && target.type.numel() == m.n, ErrorKind::Runtime,
            "multi_margin_loss: target tensor should be 1-D with size equal to the number of input "
            "samples (batch size). Expected target size [", m.n, "], but got ",
            hlo::shape_str(target.shape()), ". Input has shape ", hlo::shape_str(self.shape()), ".");
  if (weight)
    TPU_CHECK(weight->rank() <= 1 && weight->type.numel() == m.c, ErrorKind::Runtime,
              "inconsistent weight size, expected ", m.c, " but got ", hlo::shape_str(weight->shape()));
  TPU_CHECK(p == 1 || p == 2, ErrorKind::Runtime, "only p == 1 and p == 2 supported");
  check_dtype(hlo::is_float(self.dtype()), "multi_margin_loss_cpu_kernel", self.dtype());
  TPU_CHECK(target.dtype() == E::I64, ErrorKind::Runtime, "expected scalar type Long but found ",
            scalar_type_name(target.dtype()));
  if (weight)
    TPU_CHECK(weight->dtype() == self.dtype(), ErrorKind::Runtime, "expected scalar type ",
              scalar_type_name(self.dtype()), " but found ", scalar_type_name(weight->dtype()));
  m.p = int(p);
  m.acc = acc_type(self.dtype());
  Shape nc = {m.n, m.c};
  m.x = b.reshape(cast(b, self, m.acc), nc);
  Value y = b.reshape(target, {m.n});
  m.mask = b.compare(b.iota(hlo::TensorType{E::I64, nc}, 1), b.broadcast_in_dim(y, nc, {0}), Compare::EQ);
  Value zeros = b.zeros(m.acc, nc);
  Value xy = b.reduce_sum(b.select(m.mask, m.x, zeros), {1});
  m.z = b.add(b.sub(b.full(margin, m.acc, nc), b.broadcast_in_dim(xy, nc, {0})), m.x);
  m.scale = b.full(1.0 / double(m.c), m.acc, {m.n});
  if (weight) {
    Value w = b.broadcast_in_dim(b.reshape(cast(b, *weight, m.acc), {m.c}), nc, {1});
    m.scale = b.mul(b.reduce_sum(b.select(m.mask, w, zeros), {1}), m.scale);
  }
  return m;
}

// multi_margin_loss(self, target, p, margin, weight, reduction)
std::vector<Value> lower_multi_margin_loss(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Margin m = margin_terms(b, a, 0);
  Reduction r = reduction_of(a[5]);
  Value zeros = b.zeros(m.acc, m.z.shape());
  Value on = b.and_(b.not_(m.mask), b.compare(m.z, zeros, Compare::GT));
  Value h = b.select(on, m.p == 1 ? m.z : b.mul(m.z, m.z), zeros);
  Value loss = b.mul(b.reduce_sum(h, {1}), m.scale);  // (N)
  E t = a[0].as_tensor().dtype();
  if (r == None) return {cast(b, a[1].as_tensor().rank() == 0 ? b.reshape(loss, {}) : loss, t)};
  return {cast(b, reduce_loss(b, loss, r), t)};
}

// multi_margin_loss_backward(grad_output, self, target, p, margin, weight, reduction)
std::vector<Value> lower_multi_margin_loss_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Margin m = margin_terms(b, a, 1);
  Reduction r = reduction_of(a[6]);
  Value g = a[0].as_tensor();
  Shape nc = m.z.shape();
  Value zeros = b.zeros(m.acc, nc);
  Value on = b.and_(b.not_(m.mask), b.compare(m.z, zeros, Compare::GT));
  // d(loss[n])/d(x[i]) for i != y; the target class gets minus their sum.
  Value d = m.p == 1 ? b.full(1, m.acc, nc) : b.mul(b.full(2, m.acc, nc), m.z);
  d = b.mul(b.select(on, d, zeros), b.broadcast_in_dim(m.scale, nc, {0}));
  Value dy = b.neg(b.reduce_sum(d, {1}));
  d = b.select(m.mask, b.broadcast_in_dim(dy, nc, {0}), d);
  Value gn = r == None && g.rank() > 0 ? b.reshape(cast(b, g, m.acc), {m.n})
                                       : grad_scale(b, g, r, {m.n}, m.acc);
  if (r == None && g.rank() == 0) gn = broadcast_to(b, cast(b, g, m.acc), {m.n});
  Value gi = b.mul(d, b.broadcast_in_dim(gn, nc, {0}));
  const Value& self = a[1].as_tensor();
  return {cast(b, b.reshape(gi, self.shape()), self.dtype())};
}

// ---- multilabel_margin_loss: input (N, C), (C) or (), target of the same shape
//
// Each row of target lists classes, up to its first -1. loss[n] = sum over the
// listed y (repeats count again) and the classes i not listed of
// max(0, 1 - x[y] + x[i]), divided by C. The (N, C, C) terms are built whole, so
// memory grows with C squared. A listed class outside [0, C) picks nothing: the
// CPU raises "out of range", which the device cannot.

struct Multilabel {
  Value active;     // (N, Cj, Ci): the hinge of listed y_j against class i is positive
  Value z;          // (N, Cj, Ci): 1 - x[y_j] + x[i]
  Value onehot;     // (N, Cj, Ci): y_j == i, for listed y_j
  Value is_target;  // (N, C)
  int64_t n, c;
  E acc;
};

Multilabel multilabel_terms(Builder& b, const Value& self, const Value& target) {
  int64_t rank = self.rank();
  TPU_CHECK((rank == 2 && self.shape()[1] != 0) || (rank == 1 && self.shape()[0] != 0) || rank == 0,
            ErrorKind::Runtime, "Expected non-empty vector or matrix with optional 0-dim batch size, but got: ",
            hlo::shape_str(self.shape()));
  TPU_CHECK(target.shape() == self.shape(), ErrorKind::Runtime, "inconsistent target size: ",
            hlo::shape_str(target.shape()), " for input of size: ", hlo::shape_str(self.shape()));
  check_dtype(self.dtype() == E::F32 || self.dtype() == E::F64, "multilabel_margin_loss_forward_out_frame",
              self.dtype());
  TPU_CHECK(target.dtype() == E::I64, ErrorKind::Runtime, "expected scalar type Long but found ",
            scalar_type_name(target.dtype()));
  Multilabel m;
  m.n = rank <= 1 ? 1 : self.shape()[0];
  m.c = rank == 0 ? 1 : self.shape()[rank - 1];
  m.acc = self.dtype();
  Shape nc = {m.n, m.c}, ncc = {m.n, m.c, m.c};
  Value x = b.reshape(self, nc), t = b.reshape(target, nc);
  Value pos = b.iota(hlo::TensorType{E::I64, nc}, 1);
  Value width = b.full(double(m.c), E::I64, nc);
  Value first_end = b.reduce_min(b.select(b.compare(t, b.zeros(E::I64, nc), Compare::LT), pos, width), {1});
  Value listed = b.compare(pos, b.broadcast_in_dim(first_end, nc, {0}), Compare::LT);
  Value cls = b.iota(hlo::TensorType{E::I64, ncc}, 2);
  m.onehot = b.and_(b.compare(b.broadcast_in_dim(t, ncc, {0, 1}), cls, Compare::EQ),
                    b.broadcast_in_dim(listed, ncc, {0, 1}));
  m.is_target = b.reduce_or(m.onehot, {1});
  Value zeros = b.zeros(m.acc, ncc);
  Value xi = b.broadcast_in_dim(x, ncc, {0, 2});
  Value xy = b.reduce_sum(b.select(m.onehot, xi, zeros), {2});  // (N, Cj)
  m.z = b.add(b.sub(b.full(1, m.acc, ncc), b.broadcast_in_dim(xy, ncc, {0, 1})), xi);
  Value hit = b.reduce_or(m.onehot, {2});  // y_j is listed and names a class
  m.active = b.and_(b.and_(b.broadcast_in_dim(hit, ncc, {0, 1}), b.not_(b.broadcast_in_dim(m.is_target, ncc, {0, 2}))),
                    b.compare(m.z, zeros, Compare::GT));
  return m;
}

// multilabel_margin_loss_forward(self, target, reduction) -> (output, is_target)
std::vector<Value> lower_multilabel_margin_loss_forward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  const Value& self = a[0].as_tensor();
  Multilabel m = multilabel_terms(b, self, a[1].as_tensor());
  Reduction r = reduction_of(a[2]);
  Value h = b.select(m.active, m.z, b.zeros(m.acc, m.z.shape()));
  Value loss = b.div(b.reduce_sum(h, {1, 2}), b.full(double(m.c), m.acc, {m.n}));  // (N)
  Value out = r == None ? (self.rank() <= 1 ? b.reshape(loss, {}) : loss) : reduce_loss(b, loss, r);
  return {out, b.reshape(b.convert(m.is_target, self.dtype()), self.shape())};
}

// multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target):
// each positive hinge adds 1/C to its class i and takes it from its listed y_j.
std::vector<Value> lower_multilabel_margin_loss_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value g = a[0].as_tensor();
  const Value& self = a[1].as_tensor();
  Multilabel m = multilabel_terms(b, self, a[2].as_tensor());
  Reduction r = reduction_of(a[3]);
  Shape nc = {m.n, m.c}, ncc = m.z.shape();
  Value ones = b.select(m.active, b.full(1, m.acc, ncc), b.zeros(m.acc, ncc));
  Value per_j = b.reduce_sum(ones, {2});  // (N, Cj): positive hinges of each listed y_j
  Value to_y = b.reduce_sum(b.select(m.onehot, b.broadcast_in_dim(per_j, ncc, {0, 1}), b.zeros(m.acc, ncc)), {1});
  Value d = b.div(b.sub(b.reduce_sum(ones, {1}), to_y), b.full(double(m.c), m.acc, nc));
  Value gn = r == None && self.rank() == 2 ? b.reshape(cast(b, g, m.acc), {m.n}) : grad_scale(b, g, r, {m.n}, m.acc);
  return {b.reshape(b.mul(d, b.broadcast_in_dim(gn, nc, {0})), self.shape())};
}

// ---- pointwise losses of d = input - target

enum class Pointwise { Mse, SmoothL1, Huber };

struct PointwiseSpec {
  const char* kernel;  // for the not-implemented message
  int param_index;     // beta / delta, or -1
};

PointwiseSpec spec(Pointwise k) {
  switch (k) {
    case Pointwise::Mse: return {"mse_cpu", -1};
    case Pointwise::SmoothL1: return {"smooth_l1_cpu", 3};
    case Pointwise::Huber: return {"huber_cpu", 3};
  }
  return {"", -1};
}

// Loss and derivative for one element; p is beta (smooth_l1) or delta (huber).
Value pointwise_loss(Builder& b, Pointwise k, Value d, double p) {
  E t = d.dtype();
  const Shape& s = d.shape();
  if (k == Pointwise::Mse) return b.mul(d, d);
  Value ad = b.abs(d);
  if (k == Pointwise::SmoothL1 && p == 0) return ad;  // PyTorch: beta 0 is L1
  Value small = b.compare(ad, b.full(p, t, s), Compare::LT);
  Value half_sq = b.mul(b.full(0.5, t, s), b.mul(d, d));
  Value large = b.sub(ad, b.full(0.5 * p, t, s));
  if (k == Pointwise::SmoothL1) return b.select(small, b.div(half_sq, b.full(p, t, s)), large);
  return b.select(small, half_sq, b.mul(b.full(p, t, s), large));
}

Value pointwise_derivative(Builder& b, Pointwise k, Value d, double p) {
  E t = d.dtype();
  const Shape& s = d.shape();
  if (k == Pointwise::Mse) return b.mul(b.full(2, t, s), d);
  if (k == Pointwise::SmoothL1 && p == 0) return b.sign(d);
  Value small = b.compare(b.abs(d), b.full(p, t, s), Compare::LT);
  if (k == Pointwise::SmoothL1) return b.select(small, b.div(d, b.full(p, t, s)), b.sign(d));
  return b.select(small, d, b.mul(b.full(p, t, s), b.sign(d)));
}

// Promoted, broadcast (input, target) in the accumulation type.
struct Pair {
  Value x, y;
  E out;
};

Pair loss_operands(Context& ctx, const Arg& self, const Arg& target, const char* kernel) {
  E out = result_type(ctx, {&self, &target});
  TPU_CHECK(hlo::is_float(out), ErrorKind::NotImplemented, "\"", kernel,
            "\" not implemented for '", scalar_type_name(out), "'");
  E acc = acc_type(out);
  Value x = cast(ctx.b, self.as_tensor(), acc), y = cast(ctx.b, target.as_tensor(), acc);
  Shape s = broadcast_shapes(x.shape(), y.shape());
  return {broadcast_to(ctx.b, x, s), broadcast_to(ctx.b, y, s), out};
}

Value pointwise_forward(Context& ctx, const Args& a, Pointwise k) {
  PointwiseSpec sp = spec(k);
  double p = sp.param_index >= 0 ? a[sp.param_index].as_float() : 0;
  TPU_CHECK(k == Pointwise::Huber ? p > 0 : p >= 0, ErrorKind::Runtime,
            k == Pointwise::Huber ? "huber_loss does not support non-positive values for delta."
                                  : "smooth_l1_loss does not support negative values for beta.");
  Pair o = loss_operands(ctx, a[0], a[1], sp.kernel);
  Value loss = pointwise_loss(ctx.b, k, ctx.b.sub(o.x, o.y), p);
  return cast(ctx.b, reduce_loss(ctx.b, loss, reduction_of(a[2])), o.out);
}

Value pointwise_backward(Context& ctx, const Args& a, Pointwise k) {
  PointwiseSpec sp = spec(k);
  double p = sp.param_index >= 0 ? a[sp.param_index + 1].as_float() : 0;
  Pair o = loss_operands(ctx, a[1], a[2], sp.kernel);
  Value d = ctx.b.sub(o.x, o.y);
  Value g = grad_scale(ctx.b, a[0].as_tensor(), reduction_of(a[3]), d.shape(), d.dtype());
  return cast(ctx.b, ctx.b.mul(pointwise_derivative(ctx.b, k, d, p), g), o.out);
}

// ---- binary_cross_entropy(input, target, weight, reduction)

Value bce_weight(Builder& b, const Arg& w, const Shape& s, E acc) {
  return w.is_none() ? b.full(1, acc, s) : broadcast_to(b, cast(b, w.as_tensor(), acc), s);
}

std::vector<Value> lower_binary_cross_entropy(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Pair o = loss_operands(ctx, a[0], a[1], "binary_cross_entropy");
  E acc = o.x.dtype();
  const Shape& s = o.x.shape();
  // PyTorch clamps each log at -100 so that 0 and 1 give finite losses.
  Value floor = b.full(-100, acc, s);
  Value log_x = b.max(b.log(o.x), floor);
  Value log_1mx = b.max(b.log1p(b.neg(o.x)), floor);
  Value one = b.full(1, acc, s);
  Value loss = b.sub(b.mul(b.sub(o.y, one), log_1mx), b.mul(o.y, log_x));
  loss = b.mul(loss, bce_weight(b, a[2], s, acc));
  return {cast(b, reduce_loss(b, loss, reduction_of(a[3])), o.out)};
}

std::vector<Value> lower_binary_cross_entropy_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Pair o = loss_operands(ctx, a[1], a[2], "binary_cross_entropy_backward");
  E acc = o.x.dtype();
  const Shape& s = o.x.shape();
  // PyTorch's EPSILON keeps the denominator away from 0 at x = 0 or 1.
  Value denom = b.max(b.mul(b.sub(b.full(1, acc, s), o.x), o.x), b.full(1e-12, acc, s));
  Value grad = b.div(b.sub(o.x, o.y), denom);
  grad = b.mul(grad, bce_weight(b, a[3], s, acc));
  grad = b.mul(grad, grad_scale(b, a[0].as_tensor(), reduction_of(a[4]), s, acc));
  return {cast(b, grad, o.out)};
}

// binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction):
// (1 - t) x + (1 + (pw - 1) t) softplus(-x), with softplus(-x) written as
// max(-x, 0) + log1p(exp(-|x|)) so large |x| neither overflows nor cancels.
std::vector<Value> lower_binary_cross_entropy_with_logits(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Pair o = loss_operands(ctx, a[0], a[1], "binary_cross_entropy_with_logits");
  E acc = o.x.dtype();
  const Shape& s = o.x.shape();
  Value one = b.full(1, acc, s), zero = b.zeros(acc, s);
  Value softplus_neg = b.add(b.max(b.neg(o.x), zero), b.log1p(b.exp(b.neg(b.abs(o.x)))));
  Value scale = one;
  if (!a[3].is_none()) {
    Value pw = broadcast_to(b, cast(b, a[3].as_tensor(), acc), s);
    scale = b.add(one, b.mul(b.sub(pw, one), o.y));
  }
  Value loss = b.add(b.mul(b.sub(one, o.y), o.x), b.mul(scale, softplus_neg));
  loss = b.mul(loss, bce_weight(b, a[2], s, acc));
  return {cast(b, reduce_loss(b, loss, reduction_of(a[4])), o.out)};
}

std::vector<Value> lower_huber_loss(Context& ctx, const Args& a) {
  return {pointwise_forward(ctx, a, Pointwise::Huber)};
}
std::vector<Value> lower_huber_loss_backward(Context& ctx, const Args& a) {
  return {pointwise_backward(ctx, a, Pointwise::Huber)};
}
std::vector<Value> lower_mse_loss(Context& ctx, const Args& a) {
  return {pointwise_forward(ctx, a, Pointwise::Mse)};
}
std::vector<Value> lower_mse_loss_backward(Context& ctx, const Args& a) {
  return {pointwise_backward(ctx, a, Pointwise::Mse)};
}
std::vector<Value> lower_nll_loss2d_backward(Context& ctx, const Args& a) {
  return {nll_backward(ctx, a, NllForm::Spatial)};
}
std::vector<Value> lower_nll_loss2d_forward(Context& ctx, const Args& a) {
  return nll_forward(ctx, a, NllForm::Spatial);
}
std::vector<Value> lower_nll_loss_backward(Context& ctx, const Args& a) {
  return {nll_backward(ctx, a, NllForm::Flat)};
}
std::vector<Value> lower_nll_loss_forward(Context& ctx, const Args& a) {
  return nll_forward(ctx, a, NllForm::Flat);
}
std::vector<Value> lower_smooth_l1_loss(Context& ctx, const Args& a) {
  return {pointwise_forward(ctx, a, Pointwise::SmoothL1)};
}
std::vector<Value> lower_smooth_l1_loss_backward(Context& ctx, const Args& a) {
  return {pointwise_backward(ctx, a, Pointwise::SmoothL1)};
}

}  // namespace

TPU_LOWERING("aten::binary_cross_entropy", lower_binary_cross_entropy);
TPU_LOWERING("aten::binary_cross_entropy_backward", lower_binary_cross_entropy_backward);
TPU_LOWERING("aten::binary_cross_entropy_with_logits", lower_binary_cross_entropy_with_logits);
TPU_LOWERING("aten::huber_loss", lower_huber_loss);
TPU_LOWERING("aten::huber_loss_backward", lower_huber_loss_backward);
TPU_LOWERING("aten::mse_loss", lower_mse_loss);
TPU_LOWERING("aten::mse_loss_backward", lower_mse_loss_backward);
TPU_LOWERING("aten::multi_margin_loss", lower_multi_margin_loss, kStaticNumbers);
TPU_LOWERING("aten::multi_margin_loss_backward", lower_multi_margin_loss_backward, kStaticNumbers);
TPU_LOWERING("aten::multilabel_margin_loss_backward", lower_multilabel_margin_loss_backward);
TPU_LOWERING("aten::multilabel_margin_loss_forward", lower_multilabel_margin_loss_forward);
TPU_LOWERING("aten::nll_loss2d_backward", lower_nll_loss2d_backward);
TPU_LOWERING("aten::nll_loss2d_forward", lower_nll_loss2d_forward);
TPU_LOWERING("aten::nll_loss_backward", lower_nll_loss_backward);
TPU_LOWERING("aten::nll_loss_forward", lower_nll_loss_forward);
TPU_LOWERING("aten::smooth_l1_loss", lower_smooth_l1_loss);
TPU_LOWERING("aten::smooth_l1_loss_backward", lower_smooth_l1_loss_backward);

}  // namespace torch_tpu::lowering
