// The arguments a lowering receives: ATen's argument kinds, without ATen.
// aten/ fills everything but the tensor values; runtime/ turns each tensor
// into an hlo::Value (a parameter, read through its view) before calling the
// lowering.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "hlo/builder.h"

namespace torch_tpu::lowering {

// A number given by the caller, not a tensor. Its kind is its promotion
// category (a Python float is Float whatever its value).
struct Number {
  enum class Kind : uint8_t { Bool, Int, Float, Complex } kind = Kind::Int;
  double f = 0;   // Float, Complex (real part)
  double im = 0;  // Complex
  int64_t i = 0;  // Int, Bool
  double as_double() const { return kind == Kind::Int || kind == Kind::Bool ? double(i) : f; }
};

struct Arg {
  enum class Kind : uint8_t {
    None,
    Tensor,
    TensorList,   // entries may be absent (Tensor?[] of index)
    Int,
    IntList,
    Float,
    FloatList,
    Bool,
    BoolList,
    Number,       // a Scalar: fed to the program as a parameter
    DType,
    String,
    Rng,          // generator state: (seed, offset), fed as a ui64[2] parameter
    NumberList,   // a Scalar[] (_foreach_*.ScalarList): each fed as a parameter
  };
  Kind kind = Kind::None;
  int index = 0;  // position in the argument list
  // Whether a Tensor is a "wrapped number" (a Python scalar that PyTorch turned
  // into a 0-dim tensor): it promotes like a Number.
  bool wrapped_number = false;

  hlo::Value tensor;
  std::vector<std::optional<hlo::Value>> tensors;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<bool> bools;
  Number number;
  std::vector<Number> numbers;  // NumberList
  // A Number fed to the program as a parameter: one executable serves every
  // value, so a lowering that read this value (as_int, as_float) would bake
  // in the first call's. Reading it then is refused (ctx.number gives the
  // parameter; kStaticNumbers puts values in the cache key instead).
  bool fed = false;
  // A Number standing for element `element` of the NumberList argument
  // `index` (lowerings of list ops make these; the runtime feeds that element).
  int element = -1;
  hlo::ElementType dtype = hlo::ElementType::F32;
  std::string s;
  uint64_t rng_seed = 0, rng_offset = 0;

  bool is_none() const { return kind == Kind::None; }
  const hlo::Value& as_tensor() const;
  int64_t as_int() const;
  double as_float() const;
  bool as_bool() const;
  const std::vector<int64_t>& as_ints() const;
  hlo::ElementType as_dtype() const;
  std::optional<hlo::Value> opt_tensor() const;
  std::optional<int64_t> opt_int() const;
  std::optional<hlo::ElementType> opt_dtype() const;
};

using Args = std::vector<Arg>;

}  // namespace torch_tpu::lowering
