// Builds one StableHLO module (`func.func @main`) as MLIR text in the generic
// operation form, which every StableHLO version parses the same way.
//
// Values are SSA numbers that are unique across the whole module, so a value
// may be used inside any region nested below where it was made. Regions
// (reduce, sort, scatter, select_and_scatter, while, case, all_reduce,
// reduce_scatter) are built by callbacks that receive the region's block
// arguments and return the values the region yields.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hlo/types.h"

namespace torch_tpu::hlo {

struct Value {
  int id = -1;
  TensorType type;
  bool valid() const { return id >= 0; }
  const Shape& shape() const { return type.shape; }
  ElementType dtype() const { return type.dtype; }
  int64_t rank() const { return type.rank(); }
};

enum class Compare { EQ, NE, LT, LE, GT, GE };

// How exactly float32 products are computed (StableHLO's precision_config).
// A TPU runs DEFAULT as one bfloat16 pass, HIGH as three (about TF32), and
// HIGHEST as full float32; PyTorch's float32_matmul_precision "medium",
// "high" and "highest" in that order. Plugins without the choice ignore it.
enum class DotPrecision : uint8_t { Default, High, Highest };
const char* precision_name(DotPrecision p);  // "DEFAULT", "HIGH", "HIGHEST"

class Builder;
using RegionFn = std::function<std::vector<Value>(Builder&, const std::vector<Value>& args)>;

class Builder {
 public:
  Builder();

  // ---- module interface
  // A parameter of @main, in order of creation. `donate_to_result` >= 0 marks
  // the parameter as aliased with that result (buffer donation).
  Value parameter(const TensorType& type);
  void alias_parameter(const Value& param, int result_index);
  // The module text, returning `results` from @main.
  std::string module(const std::vector<Value>& results) const;
  int num_parameters() const { return static_cast<int>(params_.size()); }
  // Functions printed beside @main (an embedded module's, hlo/embedded_module.h),
  // called with func.call. `symbol` names the group: adding it again does nothing.
  void add_functions(const std::string& symbol, const std::string& text);

  // ---- constants
  Value constant(double v, ElementType t);   // rank 0; floats printed exactly
  Value constant_int(int64_t v, ElementType t);
  Value constant_bool(bool v);
  // Broadcast of a scalar constant to `shape`.
  Value full(double v, ElementType t, const Shape& shape);
  Value zeros(ElementType t, const Shape& shape) { return full(0, t, shape); }
  // The largest / lowest finite-or-infinite value of t (inf for floats).
  Value max_value(ElementType t);
  Value min_value(ElementType t);

  // ---- elementwise
  Value add(Value a, Value b);
  Value sub(Value a, Value b);
  Value mul(Value a, Value b);
  Value div(Value a, Value b);
  Value rem(Value a, Value b);
  Value pow(Value a, Value b);
  Value max(Value a, Value b);
  Value min(Value a, Value b);
  Value and_(Value a, Value b);
  Value or_(Value a, Value b);
  Value xor_(Value a, Value b);
  Value shift_left(Value a, Value b);
  Value shift_right_arithmetic(Value a, Value b);
  Value shift_right_logical(Value a, Value b);
  Value atan2(Value a, Value b);
  Value neg(Value a);
  Value abs(Value a);
  Value exp(Value a);
  Value expm1(Value a);
  Value log(Value a);
  Value log1p(Value a);
  Value sqrt(Value a);
  Value rsqrt(Value a);
  Value cbrt(Value a);
  Value tanh(Value a);
  Value logistic(Value a);
  Value sine(Value a);
  Value cosine(Value a);
  Value tan(Value a);
  Value floor(Value a);
  Value ceil(Value a);
  Value round_nearest_even(Value a);
  Value round_nearest_afz(Value a);
  Value sign(Value a);
  Value not_(Value a);
  Value is_finite(Value a);  // -> i1
  Value popcnt(Value a);
  Value clz(Value a);
  Value real(Value a);
  Value imag(Value a);
  Value complex(Value re, Value im);
  // Generic unary/binary elementwise op by StableHLO name ("stablehlo.erf" is
  // chlo, so only stablehlo.* names belong here). Result type = a's type.
  Value unary(const char* name, Value a);
  Value binary(const char* name, Value a, Value b);

  Value compare(Value a, Value b, Compare dir);  // -> i1; float compare is TOTALORDER-free (IEEE)
  Value select(Value pred, Value on_true, Value on_false);
  Value clamp(Value lo, Value x, Value hi);
  Value convert(Value a, ElementType to);
  // Same-width reinterpretation keeps the shape; a narrower target appends a
  // trailing dimension, a wider target consumes the trailing dimension.
  Value bitcast_convert(Value a, const TensorType& to);

  // ---- shape
  Value reshape(Value a, const Shape& shape);
  Value transpose(Value a, const std::vector<int64_t>& permutation);
  // The operand of a transpose by `permutation` that this builder emitted,
  // if `v` is its result (a transposed view, such as nn.Linear's weight.t()):
  // a lowering may fold it into the op that consumes it (matmul.cpp).
  std::optional<Value> transposed_from(Value v, const std::vector<int64_t>& permutation) const;
  // Result dimension dims[i] receives operand dimension i.
  Value broadcast_in_dim(Value a, const Shape& shape, const std::vector<int64_t>& dims);
  Value slice(Value a, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
              const std::vector<int64_t>& strides);
  Value dynamic_slice(Value a, const std::vector<Value>& start_indices, const Shape& sizes);
  Value dynamic_update_slice(Value a, Value update, const std::vector<Value>& start_indices);
  Value concatenate(const std::vector<Value>& values, int64_t dim);
  Value pad(Value a, Value pad_value, const std::vector<int64_t>& low,
            const std::vector<int64_t>& high, const std::vector<int64_t>& interior);
  Value reverse(Value a, const std::vector<int64_t>& dims);
  Value iota(const TensorType& type, int64_t dim);

  // ---- linear algebra
  // dot_general and convolution (lowering/convolution.cpp) of float32 or
  // complex64 operands carry this precision; other types carry none (a
  // half-precision product is already one pass). Highest unless set.
  void set_float32_precision(DotPrecision p) { float32_precision_ = p; }
  DotPrecision float32_precision() const { return float32_precision_; }
  // The `precision_config = [...]` attribute for operands of type t, or "".
  std::string precision_attr(ElementType t) const;
  Value dot_general(Value lhs, Value rhs, const std::vector<int64_t>& lhs_batch,
                    const std::vector<int64_t>& rhs_batch, const std::vector<int64_t>& lhs_contract,
                    const std::vector<int64_t>& rhs_contract, ElementType result);

  // ---- ops with regions
  // Reduces `inputs` over `dims` starting from `inits` (rank-0 values). The
  // body receives (acc_0..acc_n-1, x_0..x_n-1) as rank-0 values.
  std::vector<Value> reduce(const std::vector<Value>& inputs, const std::vector<Value>& inits,
                            const std::vector<int64_t>& dims, const RegionFn& body);
  // Shorthand for a single-input reduction with a binary body op. A float
  // sum of more than 16 elements is a cascade of reductions of 16 (see
  // builder.cpp).
  Value reduce_sum(Value a, const std::vector<int64_t>& dims);
  Value reduce_max(Value a, const std::vector<int64_t>& dims);
  Value reduce_min(Value a, const std::vector<int64_t>& dims);
  Value reduce_prod(Value a, const std::vector<int64_t>& dims);
  Value reduce_and(Value a, const std::vector<int64_t>& dims);
  Value reduce_or(Value a, const std::vector<int64_t>& dims);

  std::vector<Value> reduce_window(const std::vector<Value>& inputs, const std::vector<Value>& inits,
                                   const std::vector<int64_t>& window_dims,
                                   const std::vector<int64_t>& window_strides,
                                   const std::vector<int64_t>& base_dilations,
                                   const std::vector<int64_t>& window_dilations,
                                   const std::vector<std::pair<int64_t, int64_t>>& padding,
                                   const RegionFn& body);
  // The comparator receives (a_0, b_0, a_1, b_1, ...) as rank-0 values and returns one i1.
  std::vector<Value> sort(const std::vector<Value>& inputs, int64_t dim, bool is_stable,
                          const RegionFn& comparator);

  // Gather/scatter with the full StableHLO dimension numbers.
  struct GatherDims {
    std::vector<int64_t> offset_dims, collapsed_slice_dims, operand_batching_dims,
        start_indices_batching_dims, start_index_map;
    int64_t index_vector_dim = 0;
  };
  Value gather(Value operand, Value indices, const GatherDims& dims,
               const std::vector<int64_t>& slice_sizes, const Shape& result_shape);
  struct ScatterDims {
    std::vector<int64_t> update_window_dims, inserted_window_dims, input_batching_dims,
        scatter_indices_batching_dims, scatter_dims_to_operand_dims;
    int64_t index_vector_dim = 0;
  };
  // The update body receives (current, update) and returns the new value.
  Value scatter(Value operand, Value indices, Value updates, const ScatterDims& dims,
                const RegionFn& update);

  Value rng_bit_generator(Value state, const TensorType& result, Value* new_state);  // PHILOX

  // ---- collectives across the replicas of one program (hlo/collectives.cpp)
  // `groups` lists replica ids; replicas in one group communicate, and every
  // group has the same size. A positive `channel` adds a channel_handle (kept
  // for plugins that want one); without it the ops run in cross-replica mode.
  using ReplicaGroups = std::vector<std::vector<int64_t>>;
  // The combiner receives (a, b) as rank-0 values and returns one value.
  Value all_reduce(Value a, const ReplicaGroups& groups, const RegionFn& combine,
                   int64_t channel = 0);
  // Dimension `dim` is split into group-size pieces; replica k of a group
  // keeps the combination of everyone's k-th piece.
  Value reduce_scatter(Value a, int64_t dim, const ReplicaGroups& groups, const RegionFn& combine,
                       int64_t channel = 0);
  // Concatenates the group's operands along `dim`, in group order.
  Value all_gather(Value a, int64_t dim, const ReplicaGroups& groups, int64_t channel = 0);
  // Splits `split_dim` into group-size pieces, sends piece k to the group's
  // k-th replica, and concatenates what arrives along `concat_dim`.
  Value all_to_all(Value a, int64_t split_dim, int64_t concat_dim, const ReplicaGroups& groups,
                   int64_t channel = 0);
  // Each (source, target) pair sends the source's operand to the target;
  // replicas that are no target receive zeros.
  Value collective_permute(Value a, const std::vector<std::pair<int64_t, int64_t>>& pairs,
                           int64_t channel = 0);
  Value replica_id();  // -> tensor<ui32>

  // ---- typed-FFI custom calls (hlo/builder_custom_call.cpp)
  // `stablehlo.custom_call @target` with api_version = 4: the handler
  // registered under `target` runs inside the program, binding `attrs` with
  // .Attr<T>(name) from the call's backend_config dictionary.
  struct FfiAttr {
    std::string name, text;  // text: the attribute's MLIR literal with its type
    static FfiAttr f32(const std::string& name, double v);
    static FfiAttr i64(const std::string& name, int64_t v);
    static FfiAttr boolean(const std::string& name, bool v);
  };
  std::vector<Value> custom_call(const std::string& target, const std::vector<Value>& operands,
                                 const std::vector<TensorType>& results, const std::vector<FfiAttr>& attrs);

  // Emit any op: `attrs` is the text inside `{...}` (may be empty).
  Value op(const std::string& name, const std::vector<Value>& operands, const TensorType& result,
           const std::string& attrs = "");
  std::vector<Value> op_multi(const std::string& name, const std::vector<Value>& operands,
                              const std::vector<TensorType>& results, const std::string& attrs,
                              const std::vector<std::pair<std::vector<TensorType>, RegionFn>>& regions);

 private:
  struct Block {
    std::string text;
    int indent = 4;
  };
  Value fresh(const TensorType& t);
  std::string region_text(const std::vector<TensorType>& arg_types, const RegionFn& fn);
  void emit(const std::string& line);

  int next_id_ = 0;
  DotPrecision float32_precision_ = DotPrecision::Highest;
  std::vector<TensorType> params_;
  std::vector<int> param_ids_;
  std::vector<int> param_alias_;  // result index or -1
  std::vector<Block> blocks_;     // stack; blocks_[0] is @main's body
  // Result id -> (operand, permutation) of each transpose emitted.
  std::unordered_map<int, std::pair<Value, std::vector<int64_t>>> transposes_;
  std::unordered_map<int, Value> same_values_;  // an identity reshape's result id -> its operand
  std::vector<std::pair<std::string, std::string>> functions_;  // (symbol, text)
};

// While alive, the builder's float32 products are HIGHEST: for a lowering
// whose dot_general is an exact reduction in disguise (an average as a
// product with a weight matrix), not a matmul the user's precision governs.
class ExactProducts {
 public:
  explicit ExactProducts(Builder& b) : b_(b), saved_(b.float32_precision()) {
    b.set_float32_precision(DotPrecision::Highest);
  }
  ~ExactProducts() { b_.set_float32_precision(saved_); }
  ExactProducts(const ExactProducts&) = delete;
  ExactProducts& operator=(const ExactProducts&) = delete;

 private:
  Builder& b_;
  DotPrecision saved_;
};

// Type of a rank-0 tensor of t.
inline TensorType scalar_type(ElementType t) { return TensorType{t, {}}; }

// Prints a number as the MLIR literal of element type t (hex for floats so
// that inf, nan and every bit pattern survive).
std::string literal(double v, ElementType t);

// Inclusive range of an integer (or bool) type, as long double so that u64
// fits; any other type gets int64's.
std::pair<long double, long double> int_range(ElementType t);

}  // namespace torch_tpu::hlo
