// The Builder's ops with regions -- reduce (and its sum, product, max, min,
// and, or forms), reduce_window, sort, gather and scatter -- whose region
// bodies are callbacks checked to yield rank-0 values of the expected types;
// and rng_bit_generator, which returns a new generator state beside its bits.
#include <optional>
#include <utility>

#include "hlo/builder_internal.h"

namespace torch_tpu::hlo {

using namespace internal;

namespace {

// All ones, the identity of a bitwise and.
Value all_ones(Builder& b, ElementType t) {
  if (t == ElementType::Bool) return b.constant_bool(true);
  return is_unsigned(t) ? b.max_value(t) : b.constant_int(-1, t);
}

}  // namespace

// ---- ops with regions

namespace {

// Checks that a region yielded rank-0 values of the expected element types.
RegionFn checked_region(const char* o, std::vector<ElementType> expect, const RegionFn& body) {
  return [o, expect, body](Builder& b, const std::vector<Value>& args) {
    std::vector<Value> out = body(b, args);
    if (out.size() != expect.size())
      bad(o, "region returned " + std::to_string(out.size()) + " values, expected " +
                 std::to_string(expect.size()));
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i].type != scalar_type(expect[i]))
        bad(o, "region result " + std::to_string(i) + " is " + out[i].type.str() +
                   ", expected " + scalar_type(expect[i]).str());
    return out;
  };
}

void check_inputs_inits(const std::vector<Value>& inputs, const std::vector<Value>& inits,
                        const char* o) {
  if (inputs.empty() || inputs.size() != inits.size())
    bad(o, "needs one init value per input, and at least one input");
  for (size_t i = 0; i < inputs.size(); ++i) {
    need(inputs[i], o);
    need(inits[i], o);
    if (inputs[i].shape() != inputs[0].shape())
      bad(o, "inputs differ in shape: " + inputs[i].type.str() + " vs " + inputs[0].type.str());
    if (inits[i].type != scalar_type(inputs[i].dtype()))
      bad(o, "init value " + inits[i].type.str() + " should be " +
                 scalar_type(inputs[i].dtype()).str());
  }
}

// Region arguments of reduce-like ops: the accumulators, then the elements.
std::vector<TensorType> acc_then_x(const std::vector<Value>& inputs) {
  std::vector<TensorType> ts;
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& v : inputs) ts.push_back(scalar_type(v.dtype()));
  return ts;
}

std::vector<ElementType> dtypes(const std::vector<Value>& vs) {
  std::vector<ElementType> ds;
  for (const auto& v : vs) ds.push_back(v.dtype());
  return ds;
}

}  // namespace

std::vector<Value> Builder::reduce(const std::vector<Value>& inputs, const std::vector<Value>& inits,
                                   const std::vector<int64_t>& dims, const RegionFn& body) {
  check_inputs_inits(inputs, inits, "reduce");
  check_dims(dims, inputs[0].rank(), "reduce");
  std::vector<TensorType> results;
  for (const auto& v : inputs) {
    TensorType t{v.dtype(), {}};
    for (int64_t d = 0; d < v.rank(); ++d)
      if (!contains(dims, d)) t.shape.push_back(v.shape()[d]);
    results.push_back(t);
  }
  std::vector<Value> operands = inputs;
  operands.insert(operands.end(), inits.begin(), inits.end());
  std::vector<int64_t> sorted = dims;
  std::sort(sorted.begin(), sorted.end());
  return op_multi("stablehlo.reduce", operands, results, "dimensions = " + i64_array(sorted),
                  {{acc_then_x(inputs), checked_region("reduce", dtypes(inputs), body)}});
}

namespace {

Value reduce_with(Builder& b, Value a, const std::vector<int64_t>& dims, Value init,
                  Value (Builder::*combine)(Value, Value)) {
  return b.reduce({a}, {init}, dims, [combine](Builder& r, const std::vector<Value>& x) {
    return std::vector<Value>{(r.*combine)(x[0], x[1])};
  })[0];
}

}  // namespace

namespace {

// `a` with its reduced dimensions `dims` (sorted, valid) made one, at the
// returned axis: in place when they are adjacent (a free reshape), else
// moved after the kept ones.
std::pair<Value, int64_t> reduced_as_one(Builder& b, Value a, const std::vector<int64_t>& dims) {
  int64_t count = 1;
  for (int64_t d : dims) count *= a.shape()[d];
  Value v = a;
  int64_t axis = dims.front();
  if (dims.back() - dims.front() + 1 != int64_t(dims.size())) {
    std::vector<int64_t> perm;
    for (int64_t i = 0; i < a.rank(); ++i)
      if (!std::binary_search(dims.begin(), dims.end(), i)) perm.push_back(i);
    axis = int64_t(perm.size());
    perm.insert(perm.end(), dims.begin(), dims.end());
    v = b.transpose(v, perm);
  }
  Shape shape(v.shape().begin(), v.shape().begin() + axis);
  shape.push_back(count);
  shape.insert(shape.end(), v.shape().begin() + axis + int64_t(dims.size()), v.shape().end());
  return {b.reshape(v, shape), axis};
}

// `v` padded with `fill` at the end of `axis` to a multiple of `block`.
Value pad_to_blocks(Builder& b, Value v, int64_t axis, int64_t block, Value fill) {
  int64_t n = v.shape()[axis], blocks = (n + block - 1) / block;
  if (blocks * block == n) return v;
  std::vector<int64_t> none(v.rank(), 0), high(v.rank(), 0);
  high[axis] = blocks * block - n;
  return b.pad(v, fill, none, high, none);
}

// The dims of `a`, sorted; nullopt when there are none, or one is out of
// range or repeated (reduce() then names the error).
std::optional<std::vector<int64_t>> sorted_dims(const Value& a, const std::vector<int64_t>& dims) {
  std::vector<int64_t> sorted = dims;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] < 0 || sorted[i] >= a.rank() || (i > 0 && sorted[i] == sorted[i - 1])) return std::nullopt;
  if (sorted.empty()) return std::nullopt;
  return sorted;
}

// A max or min as a cascade of reductions of at most kStage elements each.
//
// XLA:CPU rewrites a reduction of more than 32 elements into a reduce-window
// of 32 and a reduce of the windows (its tree reduction rewriter), and its
// reduce-window code is slow for max and min: 27 ms for the row max of a
// [1024, 4096] f32 (a cross-entropy's) against 1.7 ms as the cascade below,
// 3.5 ms against 0.23 ms for softmax's over [8, 4, 128, 128]. Each stage
// reduces a strided dimension of kStage (the rows' elements i, i + n/kStage,
// ...), so the code runs along the contiguous one. XLA's simplifier merges a
// reduce of a reduce with the same computation back into one; the stages'
// computations alternate their operands (max(acc, x), max(x, acc)), the same
// function, which keeps them apart. Max and min are exact in any order, NaN
// included, so the result is the one reduce's.
Value reduce_extremum(Builder& b, Value a, const std::vector<int64_t>& dims, Value identity,
                      Value (Builder::*combine)(Value, Value)) {
  constexpr int64_t kStage = 16, kOneReduce = 32;
  auto stage = [&](Value v, int64_t axis, bool swapped) {
    return b.reduce({v}, {identity}, {axis}, [combine, swapped](Builder& r, const std::vector<Value>& x) {
      return std::vector<Value>{swapped ? (r.*combine)(x[1], x[0]) : (r.*combine)(x[0], x[1])};
    })[0];
  };
  std::optional<std::vector<int64_t>> sorted = sorted_dims(a, dims);
  int64_t count = 1;
  if (sorted)
    for (int64_t d : *sorted) count *= a.shape()[d];
  if (!sorted || count <= kOneReduce) return reduce_with(b, a, dims, identity, combine);
  auto [v, axis] = reduced_as_one(b, a, *sorted);
  bool swapped = false;
  while (v.shape()[axis] > kOneReduce) {
    v = pad_to_blocks(b, v, axis, kStage, identity);
    Shape split = v.shape();
    split[axis] = kStage;
    split.insert(split.begin() + axis + 1, v.shape()[axis] / kStage);
    v = stage(b.reshape(v, split), axis, swapped);
    swapped = !swapped;
  }
  return stage(v, axis, swapped);
}

}  // namespace

Value Builder::reduce_sum(Value a, const std::vector<int64_t>& dims) {
  // One stablehlo.reduce may add its elements in one sequence (XLA's CPU
  // emitter does), its rounding error growing with their count; PyTorch's
  // CPU kernels sum in cascades of 16. Summing blocks of 16 consecutive
  // elements, then the blocks' sums likewise, rounds as they do.
  constexpr int64_t kBlock = 16;
  auto plain = [this](Value v, const std::vector<int64_t>& d) {
    return reduce_with(*this, v, d, constant(0, v.dtype()), &Builder::add);
  };
  std::optional<std::vector<int64_t>> sorted = sorted_dims(a, dims);
  if (!sorted) return plain(a, dims);
  int64_t count = 1;
  for (int64_t d : *sorted) count *= a.shape()[d];
  if (!is_float(a.dtype()) || count <= kBlock) return plain(a, dims);
  auto [v, axis] = reduced_as_one(*this, a, *sorted);
  Shape shape = v.shape();
  while (shape[axis] > kBlock) {
    // Zeros fill the last block: adding them is exact.
    v = pad_to_blocks(*this, v, axis, kBlock, constant(0, v.dtype()));
    int64_t blocks = v.shape()[axis] / kBlock;
    Shape split = shape;
    split[axis] = blocks;
    split.insert(split.begin() + axis + 1, kBlock);
    v = plain(reshape(v, split), {axis + 1});
    shape[axis] = blocks;
  }
  return plain(v, {axis});
}
Value Builder::reduce_prod(Value a, const std::vector<int64_t>& dims) {
  return reduce_with(*this, a, dims, constant(1, a.dtype()), &Builder::mul);
}
Value Builder::reduce_max(Value a, const std::vector<int64_t>& dims) {
  return reduce_extremum(*this, a, dims, min_value(a.dtype()), &Builder::max);
}
Value Builder::reduce_min(Value a, const std::vector<int64_t>& dims) {
  return reduce_extremum(*this, a, dims, max_value(a.dtype()), &Builder::min);
}
Value Builder::reduce_and(Value a, const std::vector<int64_t>& dims) {
  need_dtype(a, is_int_or_bool(a.dtype()), "reduce_and", "bools or integers");
  return reduce_with(*this, a, dims, all_ones(*this, a.dtype()), &Builder::and_);
}
Value Builder::reduce_or(Value a, const std::vector<int64_t>& dims) {
  need_dtype(a, is_int_or_bool(a.dtype()), "reduce_or", "bools or integers");
  return reduce_with(*this, a, dims, constant_int(0, a.dtype()), &Builder::or_);
}

std::vector<Value> Builder::reduce_window(
    const std::vector<Value>& inputs, const std::vector<Value>& inits,
    const std::vector<int64_t>& window_dims, const std::vector<int64_t>& window_strides,
    const std::vector<int64_t>& base_dilations, const std::vector<int64_t>& window_dilations,
    const std::vector<std::pair<int64_t, int64_t>>& padding, const RegionFn& body) {
  const char* o = "reduce_window";
  check_inputs_inits(inputs, inits, o);
  size_t r = inputs[0].shape().size();
  // Empty lists mean the defaults (strides and dilations 1, no padding).
  auto or_ones = [r](std::vector<int64_t> v) { return v.empty() ? std::vector<int64_t>(r, 1) : v; };
  std::vector<int64_t> strides = or_ones(window_strides), base = or_ones(base_dilations),
                       wdil = or_ones(window_dilations);
  auto pads = padding.empty() ? std::vector<std::pair<int64_t, int64_t>>(r, {0, 0}) : padding;
  if (window_dims.size() != r || strides.size() != r || base.size() != r || wdil.size() != r ||
      pads.size() != r)
    bad(o, "window attributes must have rank " + std::to_string(r) + " entries");
  Shape out;
  std::vector<std::string> pad_rows;
  for (size_t i = 0; i < r; ++i) {
    if (window_dims[i] <= 0 || strides[i] <= 0 || base[i] <= 0 || wdil[i] <= 0)
      bad(o, "window sizes, strides and dilations must be positive");
    int64_t d = inputs[0].shape()[i];
    int64_t padded = (d > 0 ? (d - 1) * base[i] + 1 : 0) + pads[i].first + pads[i].second;
    int64_t window = (window_dims[i] - 1) * wdil[i] + 1;
    out.push_back(padded < window ? 0 : (padded - window) / strides[i] + 1);
    pad_rows.push_back("[" + std::to_string(pads[i].first) + ", " + std::to_string(pads[i].second) +
                       "]");
  }
  std::vector<TensorType> results;
  for (const auto& v : inputs) results.push_back(TensorType{v.dtype(), out});
  std::string attrs = "window_dimensions = " + i64_array(window_dims) +
                      ", window_strides = " + i64_array(strides) +
                      ", base_dilations = " + i64_array(base) +
                      ", window_dilations = " + i64_array(wdil) + ", padding = dense<" +
                      (r ? "[" + join(pad_rows) + "]" : std::string("0")) + "> : tensor<" +
                      std::to_string(r) + "x2xi64>";
  std::vector<Value> operands = inputs;
  operands.insert(operands.end(), inits.begin(), inits.end());
  return op_multi("stablehlo.reduce_window", operands, results, attrs,
                  {{acc_then_x(inputs), checked_region(o, dtypes(inputs), body)}});
}

std::vector<Value> Builder::sort(const std::vector<Value>& inputs, int64_t dim, bool is_stable,
                                 const RegionFn& comparator) {
  if (inputs.empty()) bad("sort", "needs at least one input");
  std::vector<TensorType> args;
  for (const auto& v : inputs) {
    need(v, "sort");
    if (v.shape() != inputs[0].shape())
      bad("sort", "inputs differ in shape: " + v.type.str() + " vs " + inputs[0].type.str());
    args.push_back(scalar_type(v.dtype()));
    args.push_back(scalar_type(v.dtype()));
  }
  check_dim(dim, inputs[0].rank(), "sort");
  std::string attrs = "dimension = " + std::to_string(dim) +
                      " : i64, is_stable = " + (is_stable ? "true" : "false");
  return op_multi("stablehlo.sort", inputs, types_of(inputs), attrs,
                  {{args, checked_region("sort", {ElementType::Bool}, comparator)}});
}

namespace {

// Indices without index_vector_dim: the batch ("scatter") dimensions.
Shape batch_shape(const Value& indices, int64_t index_vector_dim) {
  Shape s;
  for (int64_t d = 0; d < indices.rank(); ++d)
    if (d != index_vector_dim) s.push_back(indices.shape()[d]);
  return s;
}

void check_indices(const Value& indices, int64_t index_vector_dim, size_t index_count,
                   const char* o) {
  need(indices, o);
  if (!is_integral(indices.dtype())) bad(o, "indices must be integers, got " + indices.type.str());
  if (index_vector_dim < 0 || index_vector_dim > indices.rank())
    bad(o, "index_vector_dim " + std::to_string(index_vector_dim) + " out of range");
  int64_t n = index_vector_dim == indices.rank() ? 1 : indices.shape()[index_vector_dim];
  if (n != static_cast<int64_t>(index_count))
    bad(o, "index vectors have " + std::to_string(n) + " entries but the index map has " +
               std::to_string(index_count));
}

// Dimension-number fields; batching fields only when used, so that plugins
// predating batching dimensions still parse the common case.
std::string field(const char* key, const std::vector<int64_t>& v, bool optional = false) {
  if (optional && v.empty()) return "";
  return std::string(key) + " = " + list(v) + ", ";
}

}  // namespace

Value Builder::gather(Value operand, Value indices, const GatherDims& dims,
                      const std::vector<int64_t>& slice_sizes, const Shape& result_shape) {
  const char* o = "gather";
  need(operand, o);
  check_indices(indices, dims.index_vector_dim, dims.start_index_map.size(), o);
  if (static_cast<int64_t>(slice_sizes.size()) != operand.rank())
    bad(o, "slice_sizes " + shape_str(slice_sizes) + " do not match " + operand.type.str());
  for (int64_t i = 0; i < operand.rank(); ++i)
    if (slice_sizes[i] < 0 || slice_sizes[i] > operand.shape()[i])
      bad(o, "slice_sizes " + shape_str(slice_sizes) + " exceed " + operand.type.str());
  std::vector<int64_t> dropped = dims.collapsed_slice_dims;
  dropped.insert(dropped.end(), dims.operand_batching_dims.begin(), dims.operand_batching_dims.end());
  check_dims(dropped, operand.rank(), o);
  check_dims(dims.start_index_map, operand.rank(), o);
  if (dims.operand_batching_dims.size() != dims.start_indices_batching_dims.size())
    bad(o, "operand and indices need as many batching dimensions");
  for (int64_t d : dropped)
    if (slice_sizes[d] > 1) bad(o, "collapsed dimension " + std::to_string(d) + " has size > 1");

  Shape offsets;
  for (int64_t d = 0; d < operand.rank(); ++d)
    if (!contains(dropped, d)) offsets.push_back(slice_sizes[d]);
  if (offsets.size() != dims.offset_dims.size())
    bad(o, "offset_dims " + shape_str(dims.offset_dims) + " do not match slice " +
               shape_str(offsets));
  Shape batch = batch_shape(indices, dims.index_vector_dim);
  int64_t rank = static_cast<int64_t>(offsets.size() + batch.size());
  check_dims(dims.offset_dims, rank, o);
  Shape expect;
  for (int64_t d = 0, off = 0, bat = 0; d < rank; ++d)
    expect.push_back(contains(dims.offset_dims, d) ? offsets[off++] : batch[bat++]);
  if (result_shape != expect)
    bad(o, "result shape " + shape_str(result_shape) + " should be " + shape_str(expect));

  std::string attrs = "dimension_numbers = #stablehlo.gather<" +
                      field("offset_dims", dims.offset_dims) +
                      field("collapsed_slice_dims", dims.collapsed_slice_dims) +
                      field("operand_batching_dims", dims.operand_batching_dims, true) +
                      field("start_indices_batching_dims", dims.start_indices_batching_dims, true) +
                      field("start_index_map", dims.start_index_map) +
                      "index_vector_dim = " + std::to_string(dims.index_vector_dim) +
                      ">, slice_sizes = " + i64_array(slice_sizes) + ", indices_are_sorted = false";
  return op("stablehlo.gather", {operand, indices}, TensorType{operand.dtype(), expect}, attrs);
}

Value Builder::scatter(Value operand, Value indices, Value updates, const ScatterDims& dims,
                       const RegionFn& update) {
  const char* o = "scatter";
  need(operand, o);
  need(updates, o);
  check_indices(indices, dims.index_vector_dim, dims.scatter_dims_to_operand_dims.size(), o);
  if (updates.dtype() != operand.dtype())
    bad(o, "updates " + updates.type.str() + " differ in type from " + operand.type.str());
  std::vector<int64_t> dropped = dims.inserted_window_dims;
  dropped.insert(dropped.end(), dims.input_batching_dims.begin(), dims.input_batching_dims.end());
  check_dims(dropped, operand.rank(), o);
  check_dims(dims.scatter_dims_to_operand_dims, operand.rank(), o);
  if (dims.input_batching_dims.size() != dims.scatter_indices_batching_dims.size())
    bad(o, "input and indices need as many batching dimensions");
  check_dims(dims.update_window_dims, updates.rank(), o);

  Shape window_bounds;  // operand dimensions that update windows span
  for (int64_t d = 0; d < operand.rank(); ++d)
    if (!contains(dropped, d)) window_bounds.push_back(operand.shape()[d]);
  Shape batch = batch_shape(indices, dims.index_vector_dim);
  if (window_bounds.size() != dims.update_window_dims.size() ||
      updates.rank() != static_cast<int64_t>(window_bounds.size() + batch.size()))
    bad(o, "updates " + updates.type.str() + " do not match operand " + operand.type.str() +
               " and indices " + indices.type.str());
  for (int64_t d = 0, w = 0, s = 0; d < updates.rank(); ++d) {
    bool window = contains(dims.update_window_dims, d);
    int64_t n = updates.shape()[d];
    if (window ? n > window_bounds[w++] : n != batch[s++])
      bad(o, "dimension " + std::to_string(d) + " of updates " + updates.type.str() +
                 " does not fit operand " + operand.type.str() + " / indices " +
                 indices.type.str());
  }
  std::string attrs =
      "scatter_dimension_numbers = #stablehlo.scatter<" +
      field("update_window_dims", dims.update_window_dims) +
      field("inserted_window_dims", dims.inserted_window_dims) +
      field("input_batching_dims", dims.input_batching_dims, true) +
      field("scatter_indices_batching_dims", dims.scatter_indices_batching_dims, true) +
      field("scatter_dims_to_operand_dims", dims.scatter_dims_to_operand_dims) +
      "index_vector_dim = " + std::to_string(dims.index_vector_dim) +
      ">, indices_are_sorted = false, unique_indices = false";
  TensorType s = scalar_type(operand.dtype());
  return op_multi("stablehlo.scatter", {operand, indices, updates}, {operand.type}, attrs,
                  {{{s, s}, checked_region(o, {operand.dtype()}, update)}})[0];
}

Value Builder::rng_bit_generator(Value state, const TensorType& result, Value* new_state) {
  const char* o = "rng_bit_generator";
  need(state, o);
  if (state.dtype() != ElementType::U64 || state.rank() != 1 ||
      (state.shape()[0] != 2 && state.shape()[0] != 3))
    bad(o, "PHILOX state must be tensor<2xui64> or tensor<3xui64>, got " + state.type.str());
  if (!is_integral(result.dtype) && !is_float(result.dtype))
    bad(o, "bits must be integers or floats, got " + result.str());
  auto outs = op_multi("stablehlo.rng_bit_generator", {state},
                       {state.type, result}, "rng_algorithm = #stablehlo<rng_algorithm PHILOX>", {});
  if (new_state) *new_state = outs[0];
  return outs[1];
}

}  // namespace torch_tpu::hlo
