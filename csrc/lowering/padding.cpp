// Reflection and replication padding, and their gradients. (constant_pad_nd
// is in shape.cpp.) Both modes are separable: each padded dimension reads
// its input at positions known when the program is built, so the forward is
// one gather per dimension and the backward the matching scatter-add. The
// same take/take_grad pair serves upsampling and adaptive max pooling.
#include <algorithm>
#include <string>

#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

using hlo::Builder;
using E = ElementType;
using Ints = std::vector<int64_t>;

Value constant_vector(Builder& b, const std::vector<double>& values, E t) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + hlo::literal(values[i], t);
  hlo::TensorType type{t, {static_cast<int64_t>(values.size())}};
  return b.op("stablehlo.constant", {}, type, "value = dense<[" + text + "]> : " + type.str());
}

namespace {

Value index_column(Builder& b, const Ints& positions) {
  std::vector<double> v(positions.begin(), positions.end());
  return b.reshape(constant_vector(b, v, E::I64), {static_cast<int64_t>(v.size()), 1});
}

Ints all_but(int64_t dim, int64_t rank) {
  Ints out;
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim) out.push_back(d);
  return out;
}

}  // namespace

Value take(Builder& b, Value x, int64_t dim, const Ints& positions) {
  Builder::GatherDims dims;
  dims.offset_dims = all_but(dim, x.rank());
  dims.collapsed_slice_dims = {dim};
  dims.start_index_map = {dim};
  dims.index_vector_dim = 1;
  Shape slice = x.shape(), out = x.shape();
  slice[dim] = 1;
  out[dim] = static_cast<int64_t>(positions.size());
  return b.gather(x, index_column(b, positions), dims, slice, out);
}

Value take_1d(Builder& b, Value x, Value idx) {
  Shape out = idx.shape();
  Shape with_vec = out;
  with_vec.push_back(1);
  Builder::GatherDims d;
  d.collapsed_slice_dims = {0};
  d.start_index_map = {0};
  d.index_vector_dim = idx.rank();
  return b.gather(x, b.reshape(idx, with_vec), d, {1}, out);
}

Value take_grad(Builder& b, Value g, int64_t dim, const Ints& positions, int64_t size) {
  E t = g.dtype();
  E acc = t == E::F16 || t == E::BF16 ? E::F32 : t;
  Builder::ScatterDims dims;
  dims.update_window_dims = all_but(dim, g.rank());
  dims.inserted_window_dims = {dim};
  dims.scatter_dims_to_operand_dims = {dim};
  dims.index_vector_dim = 1;
  Shape shape = g.shape();
  shape[dim] = size;
  Value sum = b.scatter(b.zeros(acc, shape), index_column(b, positions), cast(b, g, acc), dims,
                        [](Builder& r, const std::vector<Value>& a) {
                          return std::vector<Value>{r.add(a[0], a[1])};
                        });
  return cast(b, sum, t);
}

namespace {

enum class Mode { Reflect, Replicate };

// Where each output row along one dimension of `size` reads from, for
// padding (before, after); negative padding crops.
Ints source_rows(Mode mode, int64_t size, int64_t before, int64_t after) {
  Ints rows;
  for (int64_t o = 0; o < size + before + after; ++o) {
    int64_t j = o - before;
    if (mode == Mode::Reflect) {
      if (j < 0) j = -j;
      if (j >= size) j = 2 * (size - 1) - j;
    } else {
      j = std::min(std::max(j, int64_t{0}), size - 1);
    }
    rows.push_back(j);
  }
  return rows;
}

std::string sizes_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The padded dimensions, last first as PyTorch's padding lists are, after
// PyTorch's checks for an `n`-d padding op.
void check(Mode mode, const Value& x, const Ints& pad, size_t n) {
  const char* name = mode == Mode::Reflect ? "reflection_pad" : "replication_pad";
  TPU_CHECK(pad.size() == 2 * n, ErrorKind::Runtime, "padding size is expected to be ", 2 * n,
            ", but got: ", pad.size());
  TPU_CHECK(x.rank() == int64_t(n) + 1 || x.rank() == int64_t(n) + 2, ErrorKind::Runtime,
            n + 1, "D or ", n + 2, "D (batch mode) tensor expected for input, but got: ",
            sizes_str(x.shape()));
  TPU_CHECK(x.dtype() != E::Bool, ErrorKind::NotImplemented, "\"", name, n,
            "d\" not implemented for 'Bool'");
  for (size_t i = 0; i < n; ++i) {
    int64_t dim = x.rank() - 1 - i, size = x.shape()[dim];
    int64_t before = pad[2 * i], after = pad[2 * i + 1];
    if (mode == Mode::Reflect)
      TPU_CHECK(before < size && after < size, ErrorKind::Runtime,
                "Argument #4: Padding size should be less than the corresponding input dimension, "
                "but got: padding (",
                before, ", ", after, ") at dimension ", dim, " of input ", sizes_str(x.shape()));
    TPU_CHECK(size + before + after >= 1, ErrorKind::Runtime, "input (", sizes_str(x.shape()),
              ") is too small. Calculated output size at dimension ", dim, ": ",
              size + before + after);
  }
}

std::vector<Value> pad_forward(Context& ctx, const Args& a, Mode mode, size_t n) {
  Value x = a[0].as_tensor();
  const Ints& pad = a[1].as_ints();
  check(mode, x, pad, n);
  for (size_t i = 0; i < n; ++i) {
    int64_t dim = x.rank() - 1 - i;
    x = take(ctx.b, x, dim, source_rows(mode, x.shape()[dim], pad[2 * i], pad[2 * i + 1]));
  }
  return {x};
}

std::vector<Value> pad_backward(Context& ctx, const Args& a, Mode mode, size_t n) {
  Value g = a[0].as_tensor(), x = a[1].as_tensor();
  const Ints& pad = a[2].as_ints();
  check(mode, x, pad, n);
  for (size_t i = 0; i < n; ++i) {
    int64_t dim = x.rank() - 1 - i, size = x.shape()[dim];
    g = take_grad(ctx.b, g, dim, source_rows(mode, size, pad[2 * i], pad[2 * i + 1]), size);
  }
  return {g};
}

template <Mode mode, size_t n>
std::vector<Value> forward(Context& ctx, const Args& a) {
  return pad_forward(ctx, a, mode, n);
}

template <Mode mode, size_t n>
std::vector<Value> backward(Context& ctx, const Args& a) {
  return pad_backward(ctx, a, mode, n);
}

}  // namespace

TPU_LOWERING("aten::reflection_pad1d", forward<Mode::Reflect, 1>);
TPU_LOWERING("aten::reflection_pad1d_backward", backward<Mode::Reflect, 1>);
TPU_LOWERING("aten::reflection_pad2d", forward<Mode::Reflect, 2>);
TPU_LOWERING("aten::reflection_pad2d_backward", backward<Mode::Reflect, 2>);
TPU_LOWERING("aten::reflection_pad3d", forward<Mode::Reflect, 3>);
TPU_LOWERING("aten::reflection_pad3d_backward", backward<Mode::Reflect, 3>);
TPU_LOWERING("aten::replication_pad1d", forward<Mode::Replicate, 1>);
TPU_LOWERING("aten::replication_pad1d_backward", backward<Mode::Replicate, 1>);
TPU_LOWERING("aten::replication_pad2d", forward<Mode::Replicate, 2>);
TPU_LOWERING("aten::replication_pad2d_backward", backward<Mode::Replicate, 2>);
TPU_LOWERING("aten::replication_pad3d", forward<Mode::Replicate, 3>);
TPU_LOWERING("aten::replication_pad3d_backward", backward<Mode::Replicate, 3>);

}  // namespace torch_tpu::lowering
