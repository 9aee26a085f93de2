// The *_copy view ops (a view read contiguously: the tensor arrives already
// read through its own view, so each is one reshape/transpose/slice), and the
// backwards of views that PyTorch has no generic kernel for (unfold_backward)
// or that compose to several programs (select_backward).
#include <string>

#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using E = ElementType;
using Ints = std::vector<int64_t>;
using Values = std::vector<Value>;

Ints unit(int64_t n) { return Ints(n, 1); }

// x[..., start:start+len*step:step (along dim), ...]
Value slice_dim(Builder& b, Value x, int64_t dim, int64_t start, int64_t limit, int64_t step) {
  Ints lo(x.rank(), 0), hi = x.shape(), st = unit(x.rank());
  lo[dim] = start, hi[dim] = limit, st[dim] = step;
  return b.slice(x, lo, hi, st);
}

Values lower_view_copy(Context& ctx, const Args& a) {
  Value x = a[0].as_tensor();
  Ints size = a[1].as_ints();
  int64_t numel = 1, known = 1, infer = -1;
  for (int64_t d : x.shape()) numel *= d;
  for (size_t i = 0; i < size.size(); ++i) {
    if (size[i] == -1) {
      TPU_CHECK(infer < 0, ErrorKind::Runtime, "only one dimension can be inferred");
      infer = int64_t(i);
    } else {
      known *= size[i];
    }
  }
  if (infer >= 0) size[infer] = known == 0 ? 0 : numel / known;
  int64_t total = 1;
  for (int64_t d : size) total *= d;
  TPU_CHECK(total == numel, ErrorKind::Runtime, "shape '", hlo::TensorType{x.dtype(), size}.str(),
            "' is invalid for input of size ", numel);
  return {ctx.b.reshape(x, size)};
}

Values lower_permute_copy(Context& ctx, const Args& a) {
  Value x = a[0].as_tensor();
  Ints perm = wrap_dims(a[1].as_ints(), x.rank());
  TPU_CHECK(int64_t(perm.size()) == x.rank(), ErrorKind::Runtime,
            "permute(sparse_coo): number of dimensions in the tensor input does not match the length of the desired ordering of dimensions i.e. input.dim() = ",
            x.rank(), " is not equal to len(dims) = ", perm.size());
  return {ctx.b.transpose(x, perm)};
}

Values lower_transpose_copy(Context& ctx, const Args& a) {
  Value x = a[0].as_tensor();
  if (x.rank() == 0) return {x};
  int64_t d0 = wrap_dim(a[1].as_int(), x.rank()), d1 = wrap_dim(a[2].as_int(), x.rank());
  Ints perm;
  for (int64_t i = 0; i < x.rank(); ++i) perm.push_back(i);
  std::swap(perm[d0], perm[d1]);
  return {ctx.b.transpose(x, perm)};
}

Values lower_t_copy(Context& ctx, const Args& a) {
  Value x = a[0].as_tensor();
  TPU_CHECK(x.rank() <= 2, ErrorKind::Runtime, "t() expects a tensor with <= 2 dimensions, but self is ", x.rank(), "D");
  if (x.rank() < 2) return {x};
  return {ctx.b.transpose(x, {1, 0})};
}

Values lower_expand_copy(Context& ctx, const Args& a) {
  Value x = a[0].as_tensor();
  Ints size = a[1].as_ints();
  TPU_CHECK(size.size() >= size_t(x.rank()), ErrorKind::Runtime,
            "expand: the number of sizes provided (", size.size(),
            ") must be greater or equal to the number of dimensions in the tensor (", x.rank(), ")");
  int64_t lead = int64_t(size.size()) - x.rank();
  for (int64_t i = 0; i < x.rank(); ++i) {
    int64_t& s = size[lead + i];
    if (s == -1) s = x.shape()[i];
    TPU_CHECK(x.shape()[i] == s || x.shape()[i] == 1, ErrorKind::Runtime, "The expanded size of the tensor (", s,
              ") must match the existing size (", x.shape()[i], ") at non-singleton dimension ", lead + i);
  }
  return {broadcast_to(ctx.b, x, size)};
}

Values lower_unsqueeze_copy(Context& ctx, const Args& a) {
  Value x = a[0].as_tensor();
  int64_t d = wrap_dim(a[1].as_int(), x.rank() + 1);
  Shape s = x.shape();
  s.insert(s.begin() + d, 1);
  return {ctx.b.reshape(x, s)};
}

Value squeeze_dims(Builder& b, Value x, const Ints& dims) {
  Shape s;
  for (int64_t i = 0; i < x.rank(); ++i) {
    bool listed = false;
    for (int64_t d : dims) listed |= d == i;
    if (!(listed && x.shape()[i] == 1)) s.push_back(x.shape()[i]);
  }
  return b.reshape(x, s);
}

Values lower_squeeze_copy(Context& ctx, const Args& a) {
  Value x = a[0].as_tensor();
  Ints all;
  for (int64_t i = 0; i < x.rank(); ++i) all.push_back(i);
  return {squeeze_dims(ctx.b, x, all)};
}

Values lower_squeeze_copy_dim(Context& ctx, const Args& a) {
  Value x = a[0].as_tensor();
  if (x.rank() == 0) return {x};
  return {squeeze_dims(ctx.b, x, {wrap_dim(a[1].as_int(), x.rank())})};
}

Values lower_squeeze_copy_dims(Context& ctx, const Args& a) {
  Value x = a[0].as_tensor();
  if (x.rank() == 0) return {x};
  return {squeeze_dims(ctx.b, x, wrap_dims(a[1].as_ints(), x.rank()))};
}

Values lower_alias_copy(Context&, const Args& a) { return {a[0].as_tensor()}; }

Values lower_select_copy(Context& ctx, const Args& a) {
  Value x = a[0].as_tensor();
  TPU_CHECK(x.rank() > 0, ErrorKind::Index, "select() cannot be applied to a 0-dim tensor.");
  int64_t dim = wrap_dim(a[1].as_int(), x.rank());
  int64_t size = x.shape()[dim], i = a[2].as_int();
  TPU_CHECK(i >= -size && i < size, ErrorKind::Index, "select(): index ", i, " out of range for tensor of size ",
            hlo::TensorType{x.dtype(), x.shape()}.str(), " at dimension ", dim);
  if (i < 0) i += size;
  Shape s = x.shape();
  s.erase(s.begin() + dim);
  return {ctx.b.reshape(slice_dim(ctx.b, x, dim, i, i + 1, 1), s)};
}

Values lower_slice_copy(Context& ctx, const Args& a) {
  Value x = a[0].as_tensor();
  int64_t dim = wrap_dim(a[1].as_int(), x.rank());
  int64_t size = x.shape()[dim];
  int64_t start = a[2].is_none() ? 0 : a[2].as_int();
  int64_t end = a[3].is_none() ? size : a[3].as_int();
  int64_t step = a[4].as_int();
  TPU_CHECK(step > 0, ErrorKind::Runtime, "slice step must be positive");
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::min(std::max(start, int64_t(0)), size);
  end = std::min(std::max(end, start), size);
  return {slice_dim(ctx.b, x, dim, start, end, step)};
}

// x.unfold(dim, size, step): windows along dim stacked in a new last dim.
Values lower_unfold_copy(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  bool scalar = x.rank() == 0;
  if (scalar) x = b.reshape(x, {1});
  int64_t dim = wrap_dim(a[1].as_int(), x.rank()), size = a[2].as_int(), step = a[3].as_int();
  int64_t len = x.shape()[dim];
  TPU_CHECK(size <= len, ErrorKind::Runtime, "maximum size for tensor at dimension ", dim, " is ", len,
            " but size is ", size);
  TPU_CHECK(step > 0, ErrorKind::Runtime, "step is ", step, " but must be > 0");
  int64_t n = (len - size) / step + 1;
  Values parts;
  for (int64_t j = 0; j < size; ++j) {
    Value s = slice_dim(b, x, dim, j, j + (n - 1) * step + 1, step);
    Shape sh = s.shape();
    sh.push_back(1);
    parts.push_back(b.reshape(s, sh));
  }
  Value r = size == 0 ? b.zeros(x.dtype(), [&] { Shape s = x.shape(); s[dim] = n; s.push_back(0); return s; }())
                      : b.concatenate(parts, x.rank());
  if (scalar) r = b.reshape(r, {size});
  return {r};
}

// unfold_backward(grad, input_sizes, dim, size, step): each window position j
// scatters back with a strided pad, summed.
Values lower_unfold_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value g = a[0].as_tensor();
  const Ints& in = a[1].as_ints();
  int64_t rank = int64_t(in.size());
  bool scalar = rank == 0;
  Shape in_shape = scalar ? Shape{1} : Shape(in.begin(), in.end());
  int64_t dim = wrap_dim(a[2].as_int(), in_shape.size()), size = a[3].as_int(), step = a[4].as_int();
  TPU_CHECK(step > 0, ErrorKind::Value, "step is ", step, " but must be > 0");
  TPU_CHECK(size >= 0, ErrorKind::Runtime, "size is ", size, " but must be >= 0");
  int64_t len = in_shape[dim];
  int64_t n = size <= len ? (len - size) / step + 1 : 0;
  E t = g.dtype(), acc = opmath(t);
  Shape gshape = in_shape;
  gshape[dim] = n;
  gshape.push_back(size);
  int64_t want = 1, have = 1;
  for (int64_t d : gshape) want *= d;
  for (int64_t d : g.shape()) have *= d;
  TPU_CHECK(n > 0 && want == have, ErrorKind::Runtime, "unfold_backward: grad of shape ",
            hlo::shape_str(g.shape()), " does not hold windows of size ", size, " and step ", step,
            " over input sizes ", hlo::shape_str(in_shape), " at dim ", dim);
  Value gv = b.reshape(cast(b, g, acc), gshape);
  int64_t last = int64_t(gshape.size()) - 1;
  Value sum = b.zeros(acc, in_shape);
  Value zero = b.constant(0, acc);
  for (int64_t j = 0; j < size; ++j) {
    Value s = slice_dim(b, gv, last, j, j + 1, 1);
    Shape sh(gshape.begin(), gshape.end() - 1);
    s = b.reshape(s, sh);
    Ints lo(sh.size(), 0), hi(sh.size(), 0), in_pad(sh.size(), 0);
    lo[dim] = j;
    hi[dim] = len - j - ((n - 1) * step + 1);
    in_pad[dim] = step - 1;
    sum = b.add(sum, b.pad(s, zero, lo, hi, in_pad));
  }
  Value r = cast(b, sum, t);
  if (scalar) r = b.reshape(r, {});
  return {r};
}

// select_backward: the gradient padded back into a zero tensor.
Values lower_select_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value g = a[0].as_tensor();
  Shape in(a[1].as_ints().begin(), a[1].as_ints().end());
  int64_t dim = wrap_dim(a[2].as_int(), in.size());
  int64_t i = a[3].as_int();
  if (i < 0) i += in[dim];
  Shape with = in;
  with[dim] = 1;
  Ints lo(in.size(), 0), hi(in.size(), 0), inner(in.size(), 0);
  lo[dim] = i;
  hi[dim] = in[dim] - i - 1;
  return {b.pad(b.reshape(g, with), b.constant(0, g.dtype()), lo, hi, inner)};
}

}  // namespace

TPU_LOWERING("aten::alias_copy", lower_alias_copy);
TPU_LOWERING("aten::expand_copy", lower_expand_copy);
TPU_LOWERING("aten::permute_copy", lower_permute_copy);
TPU_LOWERING("aten::select_backward", lower_select_backward);
TPU_LOWERING("aten::select_copy.int", lower_select_copy);
TPU_LOWERING("aten::slice_copy.Tensor", lower_slice_copy);
TPU_LOWERING("aten::squeeze_copy", lower_squeeze_copy);
TPU_LOWERING("aten::squeeze_copy.dim", lower_squeeze_copy_dim);
TPU_LOWERING("aten::squeeze_copy.dims", lower_squeeze_copy_dims);
TPU_LOWERING("aten::t_copy", lower_t_copy);
TPU_LOWERING("aten::transpose_copy.int", lower_transpose_copy);
TPU_LOWERING("aten::unfold_backward", lower_unfold_backward);
TPU_LOWERING("aten::unfold_copy", lower_unfold_copy);
TPU_LOWERING("aten::unsqueeze_copy", lower_unsqueeze_copy);
TPU_LOWERING("aten::view_copy", lower_view_copy);

}  // namespace torch_tpu::lowering
