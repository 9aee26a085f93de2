// Matrix products. torch.matmul, linear and einsum are composite in PyTorch
// and reach the backend as these ops; each becomes one dot_general, plus the
// scaled bias of the add* forms.
#include "hlo/float8.h"
#include "lowering/common.h"
#include "lowering/gemm_kernel.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using hlo::Compare;
using E = ElementType;
using Dims = std::vector<int64_t>;


std::string dims_str(const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out;
}

void check_rank(const Value& v, int64_t rank, const char* what) {
  TPU_CHECK(v.rank() == rank, ErrorKind::Runtime, what, rank == 2 ? " must be a matrix" : " must be a 3D tensor");
}

void check_same_dtype(const Value& a, const Value& b) {
  TPU_CHECK(a.dtype() == b.dtype(), ErrorKind::Runtime,
            "expected m1 and m2 to have the same dtype, but got: ", cpp_type_name(a.dtype()), " != ",
            cpp_type_name(b.dtype()));
  TPU_CHECK(a.dtype() != E::Bool, ErrorKind::NotImplemented,
            "\"addmm_impl_cpu_\" not implemented for 'Bool'");
}

// Half-precision and float8 operands multiply into an f32 accumulator (as
// PyTorch's kernels do, and as the MXU does natively); the result stays in
// f32 so that a following bias add is rounded once.
E acc_type(E t) { return t == E::F16 || t == E::BF16 || hlo::is_float8(t) ? E::F32 : t; }

Value contract(Builder& b, Value lhs, Value rhs, const Dims& lb, const Dims& rb, const Dims& lc,
               const Dims& rc) {
  return b.dot_general(lhs, rhs, lb, rb, lc, rc, acc_type(lhs.dtype()));
}

// PyTorch's add* ops: beta * self + alpha * product, where beta == 0 means
// self is ignored (NaNs in it do not propagate). alpha and beta are program
// parameters, so the test happens on the device.
Value scaled_sum(Context& ctx, const Arg& self_arg, Value product, const Arg& beta_arg,
                 const Arg& alpha_arg, E out, bool round = true) {
  Builder& b = ctx.b;
  E acc = product.dtype();
  TPU_CHECK(self_arg.as_tensor().dtype() == out, ErrorKind::Runtime,
            "self and mat2 must have the same dtype, but got ",
            scalar_type_name(self_arg.as_tensor().dtype()), " and ", scalar_type_name(out));
  Value self = broadcast_to(b, cast(b, self_arg.as_tensor(), acc), product.shape());
  Value alpha = ctx.number(alpha_arg, acc);
  Value beta = ctx.number(beta_arg, acc);
  Value scaled = b.mul(broadcast_to(b, alpha, product.shape()), product);
  Value zero = b.constant(0, acc);
  Value bias = b.select(b.compare(beta, zero, Compare::EQ), b.zeros(acc, self.shape()),
                        b.mul(broadcast_to(b, beta, self.shape()), self));
  Value r = b.add(bias, scaled);
  return round ? cast(b, r, out) : r;
}

// XLA's CPU plugin multiplies x @ w.T (nn.Linear's product: the weight's
// transposed view) up to 3x slower when x has few rows than it does
// (w @ x.T).T, the weight first: [32, 256] @ [256, 1024] took 0.50 ms one way
// and 0.17 ms the other. Measured over shapes [M, K] @ [K, N], M < N: the
// weight first was faster at every shape with M <= 32, and with M <= 256 at
// K >= 128 (1.1-2.3x); at K = 64 and M = 64-128 it was up to 45% slower,
// and past M = 256 it went both ways (2.5x slower at [1024, 256] @ [256,
// 2048]). Such a product is emitted weight first and its result transposed
// back: the same products and sums (results measured equal). Without a
// transposed rhs (x @ w) the given order was the faster one.
bool weight_first_is_faster(int64_t rows, int64_t depth, int64_t cols) {
  return rows < cols && (rows <= 32 || (rows <= 256 && depth >= 128));
}

std::optional<Value> weight_first(Builder& b, const Value& lhs, const Value& rhs, bool batched) {
  auto w = b.transposed_from(rhs, batched ? Dims{0, 2, 1} : Dims{1, 0});
  int64_t rows = lhs.shape()[batched ? 1 : 0], depth = lhs.shape()[batched ? 2 : 1];
  if (!w || !weight_first_is_faster(rows, depth, rhs.shape()[batched ? 2 : 1])) return std::nullopt;
  Value swapped = batched ? contract(b, *w, lhs, {0}, {0}, {2}, {2}) : contract(b, *w, lhs, {}, {}, {1}, {1});
  // XLA's simplifier would fold the transpose back into the dot, in the slow order.
  swapped = b.op_multi("stablehlo.optimization_barrier", {swapped}, {swapped.type}, "", {})[0];
  return b.transpose(swapped, batched ? Dims{0, 2, 1} : Dims{1, 0});
}

Value matrix_product(Context& ctx, const Value& m1, const Value& m2) {
  Builder& b = ctx.b;
  check_rank(m1, 2, "self");
  check_rank(m2, 2, "mat2");
  TPU_CHECK(m1.shape()[1] == m2.shape()[0], ErrorKind::Runtime,
            "mat1 and mat2 shapes cannot be multiplied (", dims_str(m1.shape()), " and ",
            dims_str(m2.shape()), ")");
  check_same_dtype(m1, m2);
  if (auto kernel = gemm_kernel(ctx, m1, m2, /*batched=*/false)) return *kernel;
  if (auto swapped = weight_first(b, m1, m2, /*batched=*/false)) return *swapped;
  return contract(b, m1, m2, {}, {}, {1}, {0});
}

Value batch_product(Context& ctx, const Value& b1, const Value& b2) {
  Builder& b = ctx.b;
  check_rank(b1, 3, "batch1");
  check_rank(b2, 3, "batch2");
  TPU_CHECK(b2.shape()[0] == b1.shape()[0] && b2.shape()[1] == b1.shape()[2], ErrorKind::Runtime,
            "Expected size for first two dimensions of batch2 tensor to be: [", b1.shape()[0], ", ",
            b1.shape()[2], "] but got: [", b2.shape()[0], ", ", b2.shape()[1], "].");
  check_same_dtype(b1, b2);
  if (auto kernel = gemm_kernel(ctx, b1, b2, /*batched=*/true)) return *kernel;
  const Shape& s1 = b1.shape();
  const Shape& s2 = b2.shape();
  if (s1[0] == 1) {
    // One batch: a plain matrix product. XLA's CPU plugin runs a batch-1
    // half-type dot with a transposed lhs in a thunk that refuses the f32
    // accumulator ("BF16 x BF16 = F32"); the 2-D form it handles.
    Value m = contract(b, b.reshape(b1, {s1[1], s1[2]}), b.reshape(b2, {s2[1], s2[2]}), {}, {}, {1}, {0});
    return b.reshape(m, {1, s1[1], s2[2]});
  }
  if (auto swapped = weight_first(b, b1, b2, /*batched=*/true)) return *swapped;
  return contract(b, b1, b2, {0}, {0}, {2}, {1});
}

Value matrix_vector(const Value& m, const Value& v, Builder& b) {
  TPU_CHECK(m.rank() == 2 && v.rank() == 1, ErrorKind::Runtime,
            "vector + matrix @ vector expected, got 1, ", m.rank(), ", ", v.rank());
  TPU_CHECK(m.shape()[1] == v.shape()[0], ErrorKind::Runtime, "size mismatch, got input (",
            m.shape()[0], "), mat (", dims_str(m.shape()), "), vec (", v.shape()[0], ")");
  check_same_dtype(m, v);
  return contract(b, m, v, {}, {}, {1}, {0});
}

// PyTorch's CPU kernel adds the batches' products into the result one after
// the other (result.addmm_(b1[i], b2[i]) for each i); a few batches do the
// same here, so that the rounding matches; many are contracted at once.
constexpr int64_t kAddbmmSequentialBatches = 16;

std::vector<Value> lower_addbmm(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value b1 = a[1].as_tensor(), b2 = a[2].as_tensor();
  Value batches = batch_product(ctx, b1, b2);
  int64_t n = b1.shape()[0];
  if (n == 0 || n > kAddbmmSequentialBatches) {
    Value p = contract(b, b1, b2, {}, {}, {0, 2}, {0, 1});
    return {scaled_sum(ctx, a[0], p, a[3], a[4], b1.dtype())};
  }
  Shape ps = batches.shape();
  Shape mat{ps[1], ps[2]};
  E acc = batches.dtype();
  Value alpha = broadcast_to(b, ctx.number(a[4], acc), mat);
  // The first product goes through scaled_sum (beta * self + alpha * p0).
  auto product = [&](int64_t i) {
    return b.reshape(b.slice(batches, {i, 0, 0}, {i + 1, ps[1], ps[2]}, {1, 1, 1}), mat);
  };
  Value r = scaled_sum(ctx, a[0], product(0), a[3], a[4], b1.dtype(), /*round=*/false);
  for (int64_t i = 1; i < n; ++i) r = b.add(r, b.mul(alpha, product(i)));
  return {cast(b, r, b1.dtype())};
}

std::vector<Value> lower_addmm(Context& ctx, const Args& a) {
  Value m1 = a[1].as_tensor();
  return {scaled_sum(ctx, a[0], matrix_product(ctx, m1, a[2].as_tensor()), a[3], a[4],
                     m1.dtype())};
}

std::vector<Value> lower_addmv(Context& ctx, const Args& a) {
  Value m = a[1].as_tensor();
  return {scaled_sum(ctx, a[0], matrix_vector(m, a[2].as_tensor(), ctx.b), a[3], a[4],
                     m.dtype())};
}

std::vector<Value> lower_baddbmm(Context& ctx, const Args& a) {
  Value b1 = a[1].as_tensor();
  return {scaled_sum(ctx, a[0], batch_product(ctx, b1, a[2].as_tensor()), a[3], a[4],
                     b1.dtype())};
}

std::vector<Value> lower_bmm(Context& ctx, const Args& a) {
  Value b1 = a[0].as_tensor();
  return {cast(ctx.b, batch_product(ctx, b1, a[1].as_tensor()), b1.dtype())};
}

std::vector<Value> lower_dot(Context& ctx, const Args& a) {
  Value x = a[0].as_tensor(), y = a[1].as_tensor();
  TPU_CHECK(x.rank() == 1 && y.rank() == 1, ErrorKind::Runtime,
            "1D tensors expected, but got ", x.rank(), "D and ", y.rank(), "D tensors");
  TPU_CHECK(x.shape()[0] == y.shape()[0], ErrorKind::Runtime,
            "inconsistent tensor size, expected tensor [", x.shape()[0], "] and src [",
            y.shape()[0], "] to have the same number of elements, but got ", x.shape()[0],
            " and ", y.shape()[0], " elements respectively");
  TPU_CHECK(x.dtype() == y.dtype(), ErrorKind::Runtime,
            "dot : expected both vectors to have same dtype, but found ",
            scalar_type_name(x.dtype()), " and ", scalar_type_name(y.dtype()));
  return {cast(ctx.b, contract(ctx.b, x, y, {}, {}, {0}, {0}), x.dtype())};
}

std::vector<Value> lower_mm(Context& ctx, const Args& a) {
  Value m1 = a[0].as_tensor();
  return {cast(ctx.b, matrix_product(ctx, m1, a[1].as_tensor()), m1.dtype())};
}

std::vector<Value> lower_mv(Context& ctx, const Args& a) {
  Value m = a[0].as_tensor();
  return {cast(ctx.b, matrix_vector(m, a[1].as_tensor(), ctx.b), m.dtype())};
}

// torch._grouped_mm (mixture-of-experts layers): one operand's ragged
// dimension is cut into groups at `offs` (int32 cumulative ends), and each
// group multiplies its own matrix. ATen's composite kernel reads the offsets
// on the host and runs one mm per group on slices whose shapes and offsets
// differ by group: every group (and every layer) was a program of its own.
// Here the groups stay on the device: the product is taken for every group
// over the whole ragged dimension and each position keeps its own group's
// (a select, so an overflow elsewhere cannot leak in), one program whatever
// the offsets. That costs groups-times the flops of a ragged product, which
// StableHLO has no op for; positions past the last offset are zero (ATen's
// kernel leaves them unwritten). torch.compile graphs keep the op whole and
// lower it here too (its fake kernel: python/torch_tpu/_grouped_mm.py).

// (length, groups) i1: position p of the ragged dimension is in group e,
// the number of offsets at or below p.
Value group_mask(Builder& b, const Value& offs, int64_t length) {
  Shape lg{length, offs.shape()[0]};
  Value past = b.compare(b.iota(hlo::TensorType{E::I32, lg}, 0), b.broadcast_in_dim(offs, lg, {1}), Compare::GE);
  Value group = b.reduce_sum(b.convert(past, E::I32), {1});
  return b.compare(b.broadcast_in_dim(group, lg, {0}), b.iota(hlo::TensorType{E::I32, lg}, 1), Compare::EQ);
}

// Keeps product's entries whose group (dimension group_dim) is the position's
// (dimension pos_dim) by mask, and sums the groups away.
Value own_group(Builder& b, const Value& product, const Value& mask, int64_t pos_dim, int64_t group_dim) {
  Value keep = b.broadcast_in_dim(mask, product.shape(), {pos_dim, group_dim});
  return b.reduce_sum(b.select(keep, product, b.zeros(product.dtype(), product.shape())), {group_dim});
}

std::vector<Value> lower_grouped_mm(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor(), w = a[1].as_tensor();
  std::optional<Value> offs = a[2].opt_tensor();
  // The CPU kernel's checks and messages.
  TPU_CHECK((x.rank() == 2 || x.rank() == 3) && (w.rank() == 2 || w.rank() == 3), ErrorKind::Runtime,
            "mat_a and mat_b must be 2D or 3D, got ", x.rank(), "D and ", w.rank(), "D");
  for (const Value* m : {&x, &w})
    TPU_CHECK(m->dtype() == E::F32 || m->dtype() == E::BF16 || m->dtype() == E::F16, ErrorKind::Runtime,
              "Expected ", m == &x ? "mat_a" : "mat_b", " to be Float32, BFloat16 or Float16 matrix, got ",
              scalar_type_name(m->dtype()));
  check_same_dtype(x, w);
  TPU_CHECK(a[3].is_none(), ErrorKind::NotImplemented, "_grouped_mm: bias is not supported on tpu");
  const bool ragged = x.rank() == 2 || w.rank() == 2;
  TPU_CHECK(offs.has_value() == ragged, ErrorKind::Runtime,
            "Have to provide offsets if there is a 2d matrix, or no offset if both matrices are 3d");
  TPU_CHECK(x.shape()[x.rank() - 1] == w.shape()[w.rank() - 2], ErrorKind::Runtime,
            "contraction dimension of mat_a and mat_b must match");
  if (offs) {
    TPU_CHECK(offs->dtype() == E::I32, ErrorKind::Runtime, "Offsets have to be int32");
    const int64_t groups = x.rank() == 3 ? x.shape()[0] : w.rank() == 3 ? w.shape()[0] : offs->shape()[0];
    TPU_CHECK(offs->rank() == 1 && offs->shape()[0] == groups, ErrorKind::Runtime,
              "matrix batch sizes have to match: offsets have ", offs->shape()[0], ", groups ", groups);
  }
  const E out_type = a[4].is_none() ? x.dtype() : a[4].as_dtype();
  // Half operands widened first: the products are exact in f32, and XLA's CPU
  // dot thunk refuses some of these layouts as BF16 x BF16 = F32.
  x = cast(b, x, acc_type(x.dtype()));
  w = cast(b, w, acc_type(w.dtype()));
  Value out;
  if (x.rank() == 2 && w.rank() == 3) {
    // Rows of x by group: (rows, groups, n), each row keeping its group's.
    out = own_group(b, contract(b, x, w, {}, {}, {1}, {1}), group_mask(b, *offs, x.shape()[0]), 0, 1);
  } else if (x.rank() == 3 && w.rank() == 2) {
    // Columns of w by group: (groups, rows, columns).
    out = own_group(b, contract(b, x, w, {}, {}, {2}, {0}), group_mask(b, *offs, w.shape()[1]), 2, 0);
  } else if (x.rank() == 2) {
    // The contraction by group: x's columns outside the group are zeroed,
    // giving one (rows, n) product per group.
    const int64_t g = offs->shape()[0], m = x.shape()[0], k = x.shape()[1];
    Shape gmk{g, m, k};
    Value keep = b.broadcast_in_dim(group_mask(b, *offs, k), gmk, {2, 0});
    Value xs = b.select(keep, b.broadcast_in_dim(x, gmk, {1, 2}), b.zeros(x.dtype(), gmk));
    out = contract(b, xs, w, {}, {}, {2}, {0});
  } else {
    out = batch_product(ctx, x, w);
  }
  return {cast(b, out, out_type)};
}

}  // namespace

TPU_LOWERING("aten::addbmm", lower_addbmm);
TPU_LOWERING("aten::addmm", lower_addmm);
TPU_LOWERING("aten::addmv", lower_addmv);
TPU_LOWERING("aten::baddbmm", lower_baddbmm);
TPU_LOWERING("aten::bmm", lower_bmm);
TPU_LOWERING("aten::dot", lower_dot);
TPU_LOWERING("aten::_grouped_mm", lower_grouped_mm);
TPU_LOWERING("aten::mm", lower_mm);
TPU_LOWERING("aten::mv", lower_mv);

}  // namespace torch_tpu::lowering
