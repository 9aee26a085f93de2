// Every op the builder emits is compiled and run on the CPU PJRT plugin and
// checked against values worked out by hand (or by libm for transcendentals).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>

#include "common/error.h"
#include "hlo/builder.h"
#include "pjrt/client.h"
#include "pjrt/tests/test_client.h"

namespace torch_tpu::hlo {
namespace {

using ET = ElementType;
const float kInf = std::numeric_limits<float>::infinity();
using testing::client;

using Bytes = std::vector<uint8_t>;

template <typename T>
Bytes bytes_of(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// One program: parameters with their host data, then the results of a run.
struct Prog {
  Builder b;
  std::vector<std::pair<TensorType, Bytes>> inputs;
  std::vector<Bytes> outputs;

  template <typename T>
  Value in(ET t, Shape s, std::vector<T> data) {
    TensorType type{t, std::move(s)};
    EXPECT_EQ(static_cast<int64_t>(data.size() * sizeof(T)), type.nbytes());
    inputs.emplace_back(type, bytes_of(data));
    return b.parameter(type);
  }

  void run(const std::vector<Value>& results) {
    std::string text = b.module(results);
    std::vector<TensorType> types;
    for (const auto& r : results) types.push_back(r.type);
    auto exe = client().compile(text, types);
    std::vector<std::unique_ptr<pjrt::Buffer>> bufs;
    std::vector<const pjrt::Buffer*> args;
    for (const auto& [t, data] : inputs) {
      bufs.push_back(client().from_host(data.data(), t));
      args.push_back(bufs.back().get());
    }
    outputs.clear();
    for (const auto& out : exe->execute(args)) {
      Bytes host(out->type().nbytes());
      out->to_host(host.data());
      outputs.push_back(std::move(host));
    }
  }

  template <typename T>
  std::vector<T> out(size_t i = 0) const {
    std::vector<T> v(outputs.at(i).size() / sizeof(T));
    std::memcpy(v.data(), outputs[i].data(), outputs[i].size());
    return v;
  }

  // Runs `results[0]` and returns it as T.
  template <typename T>
  std::vector<T> get(Value result) {
    run({result});
    return out<T>();
  }
};

using F = std::vector<float>;
using I32 = std::vector<int32_t>;
using I64 = std::vector<int64_t>;
using B = std::vector<uint8_t>;  // i1 is one byte per element

void expect_near(const F& got, const F& want, float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]))
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
    else if (std::isinf(want[i]))
      EXPECT_EQ(got[i], want[i]) << "at " << i;
    else
      EXPECT_NEAR(got[i], want[i], tol * std::max(1.0f, std::fabs(want[i]))) << "at " << i;
  }
}

// ---------------------------------------------------------------- printer

TEST(Printer, ExactModuleText) {
  Builder b;
  Value x = b.parameter({ET::F32, {2, 3}});
  Value s = b.parameter({ET::F32, {}});
  b.alias_parameter(x, 0);
  Value y = b.add(x, b.broadcast_in_dim(s, {2, 3}, {}));
  EXPECT_EQ(b.module({y}),
            "module @torch_tpu {\n"
            "  func.func public @main(%v0: tensor<2x3xf32> {tf.aliasing_output = 0 : i32}, "
            "%v1: tensor<f32>) -> (tensor<2x3xf32>) {\n"
            "    %v2 = \"stablehlo.broadcast_in_dim\"(%v1) {broadcast_dimensions = array<i64>} : "
            "(tensor<f32>) -> tensor<2x3xf32>\n"
            "    %v3 = \"stablehlo.add\"(%v0, %v2) : (tensor<2x3xf32>, tensor<2x3xf32>) -> "
            "tensor<2x3xf32>\n"
            "    \"func.return\"(%v3) : (tensor<2x3xf32>) -> ()\n"
            "  }\n"
            "}\n");
}

TEST(Printer, RegionText) {
  Builder b;
  Value x = b.parameter({ET::I32, {4}});
  Value r = b.reduce_sum(x, {0});
  EXPECT_EQ(b.module({r}),
            "module @torch_tpu {\n"
            "  func.func public @main(%v0: tensor<4xi32>) -> (tensor<i32>) {\n"
            "    %v1 = \"stablehlo.constant\"() {value = dense<0> : tensor<i32>} : () -> "
            "tensor<i32>\n"
            "    %v5 = \"stablehlo.reduce\"(%v0, %v1) ({\n"
            "    ^bb0(%v2: tensor<i32>, %v3: tensor<i32>):\n"
            "      %v4 = \"stablehlo.add\"(%v2, %v3) : (tensor<i32>, tensor<i32>) -> tensor<i32>\n"
            "      \"stablehlo.return\"(%v4) : (tensor<i32>) -> ()\n"
            "    }) {dimensions = array<i64: 0>} : (tensor<4xi32>, tensor<i32>) -> tensor<i32>\n"
            "    \"func.return\"(%v5) : (tensor<i32>) -> ()\n"
            "  }\n"
            "}\n");
}

TEST(Printer, CustomCallText) {
  Builder b;
  Value x = b.parameter({ET::F32, {2}});
  auto r = b.custom_call("my_kernel", {x}, {{ET::F32, {2}}, {ET::I64, {}}},
                         {Builder::FfiAttr::f32("scale", 0.5), Builder::FfiAttr::i64("n", -3),
                          Builder::FfiAttr::boolean("causal", true)});
  EXPECT_EQ(b.module(r),
            "module @torch_tpu {\n"
            "  func.func public @main(%v0: tensor<2xf32>) -> (tensor<2xf32>, tensor<i64>) {\n"
            "    %v1, %v2 = \"stablehlo.custom_call\"(%v0) {api_version = 4 : i32, backend_config = "
            "{scale = 0x3F000000 : f32, n = -3 : i64, causal = true}, call_target_name = \"my_kernel\"} : "
            "(tensor<2xf32>) -> (tensor<2xf32>, tensor<i64>)\n"
            "    \"func.return\"(%v1, %v2) : (tensor<2xf32>, tensor<i64>) -> ()\n"
            "  }\n"
            "}\n");
  EXPECT_THROW(b.custom_call("", {x}, {{ET::F32, {2}}}, {}), Error);
  EXPECT_THROW(b.custom_call("k", {x}, {{ET::F32, {2}}}, {Builder::FfiAttr::f32("s", kInf)}), Error);
}

TEST(Printer, Literals) {
  EXPECT_EQ(literal(kInf, ET::F32), "0x7F800000");
  EXPECT_EQ(literal(1.0, ET::BF16), "0x3F80");
  EXPECT_EQ(literal(1.0, ET::F16), "0x3C00");
  // Halfway cases round to even, in both 16-bit formats.
  EXPECT_EQ(literal(1 + std::ldexp(1.0, -8), ET::BF16), "0x3F80");
  EXPECT_EQ(literal(1 + 3 * std::ldexp(1.0, -8), ET::BF16), "0x3F82");
  EXPECT_EQ(literal(1 + std::ldexp(1.0, -11), ET::F16), "0x3C00");
  EXPECT_EQ(literal(1 + 3 * std::ldexp(1.0, -11), ET::F16), "0x3C02");
  EXPECT_EQ(literal(-2.0, ET::F16), "0xC000");
  EXPECT_EQ(literal(65504.0, ET::F16), "0x7BFF");
  EXPECT_EQ(literal(1e6, ET::F16), "0x7C00");
  EXPECT_EQ(literal(std::ldexp(1.0, -24), ET::F16), "0x0001");  // smallest subnormal
  EXPECT_EQ(literal(1.0, ET::F64), "0x3FF0000000000000");
  EXPECT_EQ(literal(1.0, ET::C64), "(0x3F800000, 0x00000000)");
  EXPECT_EQ(literal(-7, ET::I32), "-7");
  EXPECT_EQ(literal(255, ET::U8), "255");
  EXPECT_EQ(literal(1, ET::Bool), "true");
  EXPECT_THROW(literal(256, ET::U8), Error);
  EXPECT_THROW(literal(-1, ET::U32), Error);
}

TEST(Types, NamesAndSizes) {
  EXPECT_STREQ(mlir_name(ET::U16), "ui16");
  EXPECT_STREQ(mlir_name(ET::Bool), "i1");
  EXPECT_STREQ(mlir_name(ET::C128), "complex<f64>");
  EXPECT_STREQ(short_name(ET::BF16), "bfloat16");
  EXPECT_EQ(byte_size(ET::C64), 8);
  EXPECT_TRUE(is_unsigned(ET::Bool));
  EXPECT_FALSE(is_integral(ET::Bool));
  EXPECT_TRUE(is_integral(ET::U64));
  EXPECT_EQ((TensorType{ET::F32, {2, 3}}).str(), "tensor<2x3xf32>");
  EXPECT_EQ((TensorType{ET::Bool, {}}).str(), "tensor<i1>");
  EXPECT_EQ(shape_str({2, 3}), "[2, 3]");
}

// ---------------------------------------------------------------- errors

TEST(Errors, ShapeAndDtypeMismatchesThrowValueError) {
  Builder b;
  Value x = b.parameter({ET::F32, {2, 3}});
  Value y = b.parameter({ET::F32, {3, 2}});
  Value i = b.parameter({ET::I32, {2, 3}});
  auto kind_of = [](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("hlo."), std::string::npos) << e.what();
      return e.kind();
    }
    return ErrorKind::Runtime;
  };
  EXPECT_EQ(kind_of([&] { b.add(x, y); }), ErrorKind::Value);
  EXPECT_EQ(kind_of([&] { b.add(x, i); }), ErrorKind::Value);
  EXPECT_EQ(kind_of([&] { b.reshape(x, {4}); }), ErrorKind::Value);
  EXPECT_EQ(kind_of([&] { b.transpose(x, {0, 0}); }), ErrorKind::Value);
  EXPECT_EQ(kind_of([&] { b.broadcast_in_dim(x, {3, 3}, {0, 1}); }), ErrorKind::Value);
  EXPECT_EQ(kind_of([&] { b.slice(x, {0, 0}, {3, 3}, {1, 1}); }), ErrorKind::Value);
  EXPECT_NO_THROW(b.dot_general(x, x, {}, {}, {1}, {1}, ET::F32));
  EXPECT_EQ(kind_of([&] { b.dot_general(x, x, {}, {}, {1}, {0}, ET::F32); }), ErrorKind::Value);
  EXPECT_EQ(kind_of([&] { b.shift_left(x, x); }), ErrorKind::Value);
  EXPECT_EQ(kind_of([&] { b.floor(i); }), ErrorKind::Value);
  EXPECT_EQ(kind_of([&] { b.select(x, x, x); }), ErrorKind::Value);
  EXPECT_EQ(kind_of([&] { b.concatenate({x, y}, 0); }), ErrorKind::Value);
  EXPECT_EQ(kind_of([&] { b.reduce_sum(x, {2}); }), ErrorKind::Value);
  EXPECT_EQ(kind_of([&] { b.bitcast_convert(x, {ET::I16, {2, 3}}); }), ErrorKind::Value);
  EXPECT_EQ(kind_of([&] { b.add(x, Value{}); }), ErrorKind::Value);
  EXPECT_EQ(kind_of([&] {
              b.reduce({x}, {b.constant(0, ET::F32)}, {0}, [](Builder& r, const std::vector<Value>& a) {
                return std::vector<Value>{r.convert(r.add(a[0], a[1]), ET::F64)};
              });
            }),
            ErrorKind::Value);
  // A failed region leaves the builder usable.
  Value ok = b.add(x, x);
  b.alias_parameter(x, 0);
  EXPECT_NO_THROW(b.module({ok}));
  EXPECT_THROW(b.module({i}), Error);  // aliased f32 parameter vs i32 result
}

// ---------------------------------------------------------------- constants

TEST(Constants, ExactFloatBitsSurvive) {
  Prog p;
  Value inf = p.b.constant(kInf, ET::F32);
  Value nan = p.b.constant(std::nan(""), ET::F32);
  Value tiny = p.b.constant(1e-45, ET::F32);  // smallest f32 subnormal
  Value d = p.b.constant(0.1, ET::F64);
  p.run({inf, nan, tiny, d});
  EXPECT_EQ(p.out<float>(0)[0], kInf);
  EXPECT_TRUE(std::isnan(p.out<float>(1)[0]));
  EXPECT_EQ(p.out<float>(2)[0], std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(p.out<double>(3)[0], 0.1);
}

TEST(Constants, HalfTypes) {
  Prog p;
  p.run({p.b.constant(1.5, ET::BF16), p.b.constant(-0.25, ET::F16), p.b.max_value(ET::F16),
         p.b.min_value(ET::BF16)});
  EXPECT_EQ(p.out<uint16_t>(0)[0], 0x3FC0);
  EXPECT_EQ(p.out<uint16_t>(1)[0], 0xB400);
  EXPECT_EQ(p.out<uint16_t>(2)[0], 0x7C00);
  EXPECT_EQ(p.out<uint16_t>(3)[0], 0xFF80);
}

TEST(Constants, IntsBoolsComplexAndLimits) {
  Prog p;
  p.run({p.b.constant_int(-5, ET::I8), p.b.max_value(ET::U64), p.b.min_value(ET::I64),
         p.b.constant_bool(true), p.b.constant(2.5, ET::C64), p.b.max_value(ET::U8),
         p.b.constant_int(7, ET::F32)});
  EXPECT_EQ(p.out<int8_t>(0)[0], -5);
  EXPECT_EQ(p.out<uint64_t>(1)[0], std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(p.out<int64_t>(2)[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(p.out<uint8_t>(3)[0], 1);
  EXPECT_EQ(p.out<float>(4), (F{2.5f, 0.0f}));
  EXPECT_EQ(p.out<uint8_t>(5)[0], 255);
  EXPECT_EQ(p.out<float>(6)[0], 7.0f);
}

TEST(Constants, FullAndZeros) {
  Prog p;
  p.run({p.b.full(3.0, ET::I32, {2, 2}), p.b.zeros(ET::F32, {3})});
  EXPECT_EQ(p.out<int32_t>(0), (I32{3, 3, 3, 3}));
  EXPECT_EQ(p.out<float>(1), (F{0, 0, 0}));
}

// ---------------------------------------------------------------- elementwise

using Bin = Value (Builder::*)(Value, Value);
using Un = Value (Builder::*)(Value);

TEST(Elementwise, FloatBinary) {
  F a{1.5f, -2.0f, 7.0f, 0.5f}, c{0.5f, 3.0f, -2.0f, 2.0f};
  struct Case {
    const char* name;
    Bin fn;
    F want;
  } cases[] = {
      {"add", &Builder::add, {2.0f, 1.0f, 5.0f, 2.5f}},
      {"sub", &Builder::sub, {1.0f, -5.0f, 9.0f, -1.5f}},
      {"mul", &Builder::mul, {0.75f, -6.0f, -14.0f, 1.0f}},
      {"div", &Builder::div, {3.0f, -2.0f / 3.0f, -3.5f, 0.25f}},
      {"rem", &Builder::rem, {0.0f, -2.0f, 1.0f, 0.5f}},
      {"pow", &Builder::pow, {std::pow(1.5f, 0.5f), -8.0f, 1.0f / 49.0f, 0.25f}},
      {"max", &Builder::max, {1.5f, 3.0f, 7.0f, 2.0f}},
      {"min", &Builder::min, {0.5f, -2.0f, -2.0f, 0.5f}},
      {"atan2", &Builder::atan2,
       {std::atan2(1.5f, 0.5f), std::atan2(-2.0f, 3.0f), std::atan2(7.0f, -2.0f),
        std::atan2(0.5f, 2.0f)}},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.name);
    Prog p;
    Value x = p.in(ET::F32, {4}, a), y = p.in(ET::F32, {4}, c);
    expect_near(p.get<float>((p.b.*k.fn)(x, y)), k.want);
  }
  Prog p;  // the generic entry point
  Value x = p.in(ET::F32, {4}, a), y = p.in(ET::F32, {4}, c);
  expect_near(p.get<float>(p.b.binary("stablehlo.subtract", x, y)), cases[1].want);
}

TEST(Elementwise, IntBinary) {
  I32 a{7, -7, 12, -1}, c{2, 2, 3, 28};
  struct Case {
    const char* name;
    Bin fn;
    I32 want;
  } cases[] = {
      {"add", &Builder::add, {9, -5, 15, 27}},
      {"div", &Builder::div, {3, -3, 4, 0}},  // truncates toward zero
      {"rem", &Builder::rem, {1, -1, 0, -1}},  // sign of the dividend
      {"pow", &Builder::pow, {49, 49, 1728, 1}},
      {"and", &Builder::and_, {2, 0, 0, 28}},
      {"or", &Builder::or_, {7, -5, 15, -1}},
      {"xor", &Builder::xor_, {5, -5, 15, -29}},
      {"shl", &Builder::shift_left, {28, -28, 96, -268435456}},
      {"sra", &Builder::shift_right_arithmetic, {1, -2, 1, -1}},
      {"srl", &Builder::shift_right_logical, {1, 1073741822, 1, 15}},
      {"max", &Builder::max, {7, 2, 12, 28}},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.name);
    Prog p;
    Value x = p.in(ET::I32, {4}, a), y = p.in(ET::I32, {4}, c);
    EXPECT_EQ(p.get<int32_t>((p.b.*k.fn)(x, y)), k.want);
  }
}

TEST(Elementwise, BoolLogic) {
  Prog p;
  Value x = p.in(ET::Bool, {4}, B{0, 0, 1, 1}), y = p.in(ET::Bool, {4}, B{0, 1, 0, 1});
  p.run({p.b.and_(x, y), p.b.or_(x, y), p.b.xor_(x, y), p.b.not_(x)});
  EXPECT_EQ(p.out<uint8_t>(0), (B{0, 0, 0, 1}));
  EXPECT_EQ(p.out<uint8_t>(1), (B{0, 1, 1, 1}));
  EXPECT_EQ(p.out<uint8_t>(2), (B{0, 1, 1, 0}));
  EXPECT_EQ(p.out<uint8_t>(3), (B{1, 1, 0, 0}));
}

TEST(Elementwise, FloatUnary) {
  F a{0.25f, 1.5f, 2.5f, 4.0f};
  F n{-2.5f, -0.5f, 0.5f, 1.5f};
  auto map = [](const F& v, float (*f)(float)) {
    F r;
    for (float x : v) r.push_back(f(x));
    return r;
  };
  struct Case {
    const char* name;
    Un fn;
    const F& in;
    F want;
  } cases[] = {
      {"neg", &Builder::neg, n, {2.5f, 0.5f, -0.5f, -1.5f}},
      {"abs", &Builder::abs, n, {2.5f, 0.5f, 0.5f, 1.5f}},
      {"exp", &Builder::exp, a, map(a, std::exp)},
      {"expm1", &Builder::expm1, a, map(a, std::expm1)},
      {"log", &Builder::log, a, map(a, std::log)},
      {"log1p", &Builder::log1p, a, map(a, std::log1p)},
      {"sqrt", &Builder::sqrt, a, {0.5f, std::sqrt(1.5f), std::sqrt(2.5f), 2.0f}},
      {"rsqrt", &Builder::rsqrt, a, {2.0f, 1 / std::sqrt(1.5f), 1 / std::sqrt(2.5f), 0.5f}},
      {"cbrt", &Builder::cbrt, a, map(a, std::cbrt)},
      {"tanh", &Builder::tanh, n, map(n, std::tanh)},
      {"logistic", &Builder::logistic, n, {1 / (1 + std::exp(2.5f)), 1 / (1 + std::exp(0.5f)),
                                           1 / (1 + std::exp(-0.5f)), 1 / (1 + std::exp(-1.5f))}},
      {"sine", &Builder::sine, n, map(n, std::sin)},
      {"cosine", &Builder::cosine, n, map(n, std::cos)},
      {"tan", &Builder::tan, n, map(n, std::tan)},
      {"floor", &Builder::floor, n, {-3.0f, -1.0f, 0.0f, 1.0f}},
      {"ceil", &Builder::ceil, n, {-2.0f, -0.0f, 1.0f, 2.0f}},
      {"round_even", &Builder::round_nearest_even, n, {-2.0f, -0.0f, 0.0f, 2.0f}},
      {"round_afz", &Builder::round_nearest_afz, n, {-3.0f, -1.0f, 1.0f, 2.0f}},
      {"sign", &Builder::sign, n, {-1.0f, -1.0f, 1.0f, 1.0f}},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.name);
    Prog p;
    expect_near(p.get<float>((p.b.*k.fn)(p.in(ET::F32, {4}, k.in))), k.want);
  }
  Prog p;
  expect_near(p.get<float>(p.b.unary("stablehlo.exponential", p.in(ET::F32, {4}, a))),
              map(a, std::exp));
}

TEST(Elementwise, IntUnary) {
  Prog p;
  Value x = p.in(ET::I32, {4}, I32{0, 1, -3, 255});
  p.run({p.b.neg(x), p.b.abs(x), p.b.sign(x), p.b.not_(x), p.b.popcnt(x), p.b.clz(x)});
  EXPECT_EQ(p.out<int32_t>(0), (I32{0, -1, 3, -255}));
  EXPECT_EQ(p.out<int32_t>(1), (I32{0, 1, 3, 255}));
  EXPECT_EQ(p.out<int32_t>(2), (I32{0, 1, -1, 1}));
  EXPECT_EQ(p.out<int32_t>(3), (I32{-1, -2, 2, -256}));
  EXPECT_EQ(p.out<int32_t>(4), (I32{0, 1, 31, 8}));
  EXPECT_EQ(p.out<int32_t>(5), (I32{32, 31, 0, 24}));
}

TEST(Elementwise, IsFinite) {
  Prog p;
  Value x = p.in(ET::F32, {4}, F{1.0f, kInf, -kInf, std::nanf("")});
  Value r = p.b.is_finite(x);
  EXPECT_EQ(r.dtype(), ET::Bool);
  EXPECT_EQ(p.get<uint8_t>(r), (B{1, 0, 0, 0}));
}

TEST(Elementwise, Complex) {
  Prog p;
  Value re = p.in(ET::F32, {2}, F{3.0f, -1.0f}), im = p.in(ET::F32, {2}, F{4.0f, 2.0f});
  Value z = p.b.complex(re, im);
  EXPECT_EQ(z.dtype(), ET::C64);
  Value z2 = p.b.mul(z, z);  // (3+4i)^2 = -7+24i, (-1+2i)^2 = -3-4i
  p.run({z2, p.b.real(z2), p.b.imag(z2), p.b.abs(z)});
  EXPECT_EQ(p.out<float>(0), (F{-7, 24, -3, -4}));
  EXPECT_EQ(p.out<float>(1), (F{-7, -3}));
  EXPECT_EQ(p.out<float>(2), (F{24, -4}));
  expect_near(p.out<float>(3), F{5.0f, std::sqrt(5.0f)});
}

TEST(Elementwise, Compare) {
  struct Case {
    Compare dir;
    B want;
  } cases[] = {{Compare::EQ, {0, 1, 0}}, {Compare::NE, {1, 0, 1}}, {Compare::LT, {1, 0, 0}},
               {Compare::LE, {1, 1, 0}}, {Compare::GT, {0, 0, 1}}, {Compare::GE, {0, 1, 1}}};
  for (const auto& k : cases) {
    Prog p;
    // Signed, unsigned (where 0xFFFFFFFF is large) and float comparisons.
    Value f = p.b.compare(p.in(ET::F32, {3}, F{-1, 2, 3}), p.in(ET::F32, {3}, F{0, 2, -kInf}), k.dir);
    Value s = p.b.compare(p.in(ET::I32, {3}, I32{-1, 2, 3}), p.in(ET::I32, {3}, I32{0, 2, -5}), k.dir);
    Value u = p.b.compare(p.in(ET::U32, {3}, std::vector<uint32_t>{1, 2, 0xFFFFFFFF}),
                          p.in(ET::U32, {3}, std::vector<uint32_t>{5, 2, 7}), k.dir);
    p.run({f, s, u});
    SCOPED_TRACE(static_cast<int>(k.dir));
    EXPECT_EQ(p.out<uint8_t>(0), k.want);
    EXPECT_EQ(p.out<uint8_t>(1), k.want);
    EXPECT_EQ(p.out<uint8_t>(2), k.want);
  }
}

TEST(Elementwise, SelectAndClamp) {
  Prog p;
  Value pred = p.in(ET::Bool, {3}, B{1, 0, 1});
  Value x = p.in(ET::F32, {3}, F{1, 2, 3}), y = p.in(ET::F32, {3}, F{-1, -2, -3});
  Value lo = p.b.constant(-1.5, ET::F32), hi = p.b.full(2.5, ET::F32, {3});
  Value scalar_pred = p.b.constant_bool(false);
  p.run({p.b.select(pred, x, y), p.b.select(scalar_pred, x, y),
         p.b.clamp(lo, p.b.add(x, y), hi), p.b.clamp(lo, y, hi)});
  EXPECT_EQ(p.out<float>(0), (F{1, -2, 3}));
  EXPECT_EQ(p.out<float>(1), (F{-1, -2, -3}));
  EXPECT_EQ(p.out<float>(2), (F{0, 0, 0}));
  EXPECT_EQ(p.out<float>(3), (F{-1, -1.5, -1.5}));
}

TEST(Elementwise, Convert) {
  Prog p;
  Value f = p.in(ET::F32, {4}, F{-1.7f, 0.0f, 2.9f, 0.25f});
  p.run({p.b.convert(f, ET::I32), p.b.convert(f, ET::Bool), p.b.convert(p.b.convert(f, ET::Bool), ET::F32),
         p.b.convert(f, ET::BF16), p.b.convert(f, ET::C64)});
  EXPECT_EQ(p.out<int32_t>(0), (I32{-1, 0, 2, 0}));
  EXPECT_EQ(p.out<uint8_t>(1), (B{1, 0, 1, 1}));  // nonzero -> true
  EXPECT_EQ(p.out<float>(2), (F{1, 0, 1, 1}));
  EXPECT_EQ(p.out<uint16_t>(3)[3], 0x3E80);
  EXPECT_EQ(p.out<float>(4), (F{-1.7f, 0, 0, 0, 2.9f, 0, 0.25f, 0}));
}

TEST(Elementwise, BitcastConvert) {
  Prog p;
  Value f = p.in(ET::F32, {2}, F{1.0f, -2.0f});
  Value same = p.b.bitcast_convert(f, {ET::U32, {2}});
  Value narrow = p.b.bitcast_convert(f, {ET::U16, {2, 2}});
  Value wide = p.b.bitcast_convert(narrow, {ET::F32, {2}});
  p.run({same, narrow, wide});
  EXPECT_EQ(p.out<uint32_t>(0), (std::vector<uint32_t>{0x3F800000, 0xC0000000}));
  EXPECT_EQ(p.out<uint16_t>(1), (std::vector<uint16_t>{0, 0x3F80, 0, 0xC000}));  // little endian
  EXPECT_EQ(p.out<float>(2), (F{1.0f, -2.0f}));
}

// ---------------------------------------------------------------- shape

TEST(Shape, ReshapeTransposeReverse) {
  Prog p;
  Value x = p.in(ET::I32, {2, 3}, I32{1, 2, 3, 4, 5, 6});
  Value r = p.b.reshape(x, {3, 2});
  Value t = p.b.transpose(x, {1, 0});
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  p.run({r, t, p.b.reverse(x, {1}), p.b.reverse(x, {0, 1})});
  EXPECT_EQ(p.out<int32_t>(0), (I32{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(p.out<int32_t>(1), (I32{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(p.out<int32_t>(2), (I32{3, 2, 1, 6, 5, 4}));
  EXPECT_EQ(p.out<int32_t>(3), (I32{6, 5, 4, 3, 2, 1}));
}

TEST(Shape, TransposedFromSeesThroughIdentityReshapes) {
  Builder b;
  Value x = b.parameter({ET::F32, {2, 3}});
  Value t = b.transpose(x, {1, 0});
  Value same = b.reshape(b.reshape(t, {3, 2}), {3, 2});
  ASSERT_TRUE(b.transposed_from(same, {1, 0}).has_value());
  EXPECT_EQ(b.transposed_from(same, {1, 0})->id, x.id);
  EXPECT_FALSE(b.transposed_from(t, {0, 1}).has_value());     // another permutation
  EXPECT_FALSE(b.transposed_from(b.reshape(t, {6}), {1, 0}).has_value());  // a real reshape
  EXPECT_FALSE(b.transposed_from(x, {1, 0}).has_value());     // not a transpose
}

TEST(Shape, BroadcastInDim) {
  Prog p;
  Value col = p.in(ET::I32, {2, 1}, I32{1, 2});
  Value row = p.in(ET::I32, {3}, I32{10, 20, 30});
  p.run({p.b.broadcast_in_dim(col, {2, 3}, {0, 1}), p.b.broadcast_in_dim(row, {2, 3}, {1})});
  EXPECT_EQ(p.out<int32_t>(0), (I32{1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(p.out<int32_t>(1), (I32{10, 20, 30, 10, 20, 30}));
}

TEST(Shape, Slice) {
  Prog p;
  Value x = p.in(ET::I32, {2, 5}, I32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  Value s = p.b.slice(x, {0, 1}, {2, 5}, {1, 2});
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  EXPECT_EQ(p.get<int32_t>(s), (I32{1, 3, 6, 8}));
}

TEST(Shape, DynamicSliceAndUpdate) {
  Prog p;
  Value x = p.in(ET::I32, {3, 3}, I32{0, 1, 2, 3, 4, 5, 6, 7, 8});
  Value i = p.in(ET::I64, {}, I64{1}), j = p.in(ET::I64, {}, I64{5});  // j clamps to 1
  Value u = p.b.full(-1, ET::I32, {2, 2});
  p.run({p.b.dynamic_slice(x, {i, j}, {2, 2}), p.b.dynamic_update_slice(x, u, {i, j})});
  EXPECT_EQ(p.out<int32_t>(0), (I32{4, 5, 7, 8}));
  EXPECT_EQ(p.out<int32_t>(1), (I32{0, 1, 2, 3, -1, -1, 6, -1, -1}));
}

TEST(Shape, Concatenate) {
  Prog p;
  Value a = p.in(ET::F32, {2, 1}, F{1, 2});
  Value c = p.in(ET::F32, {2, 2}, F{3, 4, 5, 6});
  Value r = p.b.concatenate({a, c, a}, 1);
  EXPECT_EQ(r.shape(), (Shape{2, 4}));
  EXPECT_EQ(p.get<float>(r), (F{1, 3, 4, 1, 2, 5, 6, 2}));
}

TEST(Shape, Pad) {
  Prog p;
  Value x = p.in(ET::I32, {2}, I32{1, 2});
  Value r = p.b.pad(x, p.b.constant_int(9, ET::I32), {1}, {2}, {1});
  EXPECT_EQ(r.shape(), (Shape{6}));
  Value neg = p.b.pad(p.in(ET::I32, {3}, I32{1, 2, 3}), p.b.constant_int(0, ET::I32), {-1}, {0}, {0});
  p.run({r, neg});
  EXPECT_EQ(p.out<int32_t>(0), (I32{9, 1, 9, 2, 9, 9}));
  EXPECT_EQ(p.out<int32_t>(1), (I32{2, 3}));
}

TEST(Shape, Iota) {
  Prog p;
  p.run({p.b.iota({ET::I32, {2, 3}}, 1), p.b.iota({ET::F32, {2, 2}}, 0)});
  EXPECT_EQ(p.out<int32_t>(0), (I32{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(p.out<float>(1), (F{0, 0, 1, 1}));
}

// ---------------------------------------------------------------- linalg

TEST(Linalg, Matmul) {
  Prog p;
  Value a = p.in(ET::F32, {2, 3}, F{1, 2, 3, 4, 5, 6});
  Value c = p.in(ET::F32, {3, 2}, F{7, 8, 9, 10, 11, 12});
  Value r = p.b.dot_general(a, c, {}, {}, {1}, {0}, ET::F32);
  EXPECT_EQ(r.shape(), (Shape{2, 2}));
  EXPECT_EQ(p.get<float>(r), (F{58, 64, 139, 154}));
}

TEST(Linalg, BatchedWithFreeDimsOrder) {
  Prog p;
  // lhs [batch=2, k=2, m=1], rhs [n=2, batch=2, k=2] -> [batch, m, n]
  Value a = p.in(ET::I32, {2, 2, 1}, I32{1, 2, 3, 4});
  Value c = p.in(ET::I32, {2, 2, 2}, I32{1, 0, 0, 1, 1, 1, 2, 2});
  Value r = p.b.dot_general(a, c, {0}, {1}, {1}, {2}, ET::I32);
  EXPECT_EQ(r.shape(), (Shape{2, 1, 2}));
  // batch 0: lhs [1,2], rhs rows n=0 [1,0], n=1 [1,1] -> 1, 3
  // batch 1: lhs [3,4], rhs rows n=0 [0,1], n=1 [2,2] -> 4, 14
  EXPECT_EQ(p.get<int32_t>(r), (I32{1, 3, 4, 14}));
}

TEST(Linalg, MixedResultType) {
  Prog p;
  Value a = p.in(ET::BF16, {1, 2}, std::vector<uint16_t>{0x3F80, 0x4000});  // 1, 2
  Value c = p.in(ET::BF16, {2, 1}, std::vector<uint16_t>{0x4040, 0x4080});  // 3, 4
  EXPECT_EQ(p.get<float>(p.b.dot_general(a, c, {}, {}, {1}, {0}, ET::F32)), (F{11}));
}

// A float32 product carries the builder's precision (HIGHEST unless set),
// and the plugin compiles every setting; other operand types carry none.
TEST(Linalg, PrecisionConfig) {
  for (DotPrecision prec : {DotPrecision::Default, DotPrecision::High, DotPrecision::Highest}) {
    Prog p;
    p.b.set_float32_precision(prec);
    Value a = p.in(ET::F32, {2, 3}, F{1, 2, 3, 4, 5, 6});
    Value c = p.in(ET::F32, {3, 2}, F{7, 8, 9, 10, 11, 12});
    Value r = p.b.dot_general(a, c, {}, {}, {1}, {0}, ET::F32);
    std::string one = std::string("#stablehlo<precision ") + precision_name(prec) + ">";
    EXPECT_NE(p.b.module({r}).find("precision_config = [" + one + ", " + one + "]"), std::string::npos);
    EXPECT_EQ(p.get<float>(r), (F{58, 64, 139, 154}));  // small integers: exact in bfloat16 too
  }
  Builder b;
  EXPECT_NE(b.precision_attr(ET::F32).find("HIGHEST"), std::string::npos);
  EXPECT_NE(b.precision_attr(ET::C64).find("HIGHEST"), std::string::npos);
  for (ET t : {ET::BF16, ET::F16, ET::F64, ET::I32}) EXPECT_EQ(b.precision_attr(t), "");
  {
    b.set_float32_precision(DotPrecision::Default);
    ExactProducts exact(b);
    EXPECT_EQ(b.float32_precision(), DotPrecision::Highest);
  }
  EXPECT_EQ(b.float32_precision(), DotPrecision::Default);
}

// ---------------------------------------------------------------- regions

TEST(Reduce, Shorthands) {
  Prog p;
  Value x = p.in(ET::F32, {2, 3}, F{1, -2, 3, 4, 5, -6});
  Value b = p.in(ET::Bool, {2, 2}, B{1, 1, 0, 1});
  p.run({p.b.reduce_sum(x, {1}), p.b.reduce_max(x, {0}), p.b.reduce_min(x, {0, 1}),
         p.b.reduce_prod(x, {1}), p.b.reduce_and(b, {1}), p.b.reduce_or(b, {0}),
         p.b.reduce_max(p.b.convert(x, ET::I32), {1})});
  EXPECT_EQ(p.out<float>(0), (F{2, 3}));
  EXPECT_EQ(p.out<float>(1), (F{4, 5, 3}));
  EXPECT_EQ(p.out<float>(2), (F{-6}));
  EXPECT_EQ(p.out<float>(3), (F{-6, -120}));
  EXPECT_EQ(p.out<uint8_t>(4), (B{1, 0}));
  EXPECT_EQ(p.out<uint8_t>(5), (B{1, 1}));
  EXPECT_EQ(p.out<int32_t>(6), (I32{3, 5}));
}

TEST(Reduce, VariadicArgmax) {
  Prog p;
  Value x = p.in(ET::F32, {2, 3}, F{1, 9, 3, 7, 5, 6});
  Value idx = p.b.iota({ET::I32, {2, 3}}, 1);
  auto r = p.b.reduce({x, idx}, {p.b.min_value(ET::F32), p.b.constant_int(0, ET::I32)}, {1},
                      [](Builder& b, const std::vector<Value>& a) {
                        // a = (acc_val, acc_idx, val, idx)
                        Value take = b.compare(a[2], a[0], Compare::GT);
                        return std::vector<Value>{b.select(take, a[2], a[0]),
                                                  b.select(take, a[3], a[1])};
                      });
  p.run(r);
  EXPECT_EQ(p.out<float>(0), (F{9, 7}));
  EXPECT_EQ(p.out<int32_t>(1), (I32{1, 0}));
}

TEST(Reduce, Window) {
  Prog p;
  Value x = p.in(ET::F32, {4}, F{1, 2, 3, 4});
  auto add = [](Builder& b, const std::vector<Value>& a) { return std::vector<Value>{b.add(a[0], a[1])}; };
  Value zero = p.b.constant(0, ET::F32);
  Value sums = p.b.reduce_window({x}, {zero}, {2}, {1}, {}, {}, {}, add)[0];
  Value padded = p.b.reduce_window({x}, {zero}, {2}, {2}, {}, {}, {{1, 1}}, add)[0];
  Value dilated = p.b.reduce_window({x}, {zero}, {2}, {1}, {}, {2}, {}, add)[0];
  EXPECT_EQ(sums.shape(), (Shape{3}));
  EXPECT_EQ(padded.shape(), (Shape{3}));
  EXPECT_EQ(dilated.shape(), (Shape{2}));
  p.run({sums, padded, dilated});
  EXPECT_EQ(p.out<float>(0), (F{3, 5, 7}));
  EXPECT_EQ(p.out<float>(1), (F{1, 5, 4}));
  EXPECT_EQ(p.out<float>(2), (F{4, 6}));
}

TEST(Sort, StableMultiOperand) {
  Prog p;
  Value keys = p.in(ET::F32, {2, 3}, F{3, 1, 2, 5, 5, 4});
  Value vals = p.b.iota({ET::I32, {2, 3}}, 1);
  auto r = p.b.sort({keys, vals}, 1, true, [](Builder& b, const std::vector<Value>& a) {
    return std::vector<Value>{b.compare(a[0], a[1], Compare::LT)};
  });
  p.run(r);
  EXPECT_EQ(p.out<float>(0), (F{1, 2, 3, 4, 5, 5}));
  EXPECT_EQ(p.out<int32_t>(1), (I32{1, 2, 0, 2, 0, 1}));
}

TEST(Gather, RowsByIndex) {
  Prog p;
  Value x = p.in(ET::F32, {3, 2}, F{0, 1, 10, 11, 20, 21});
  Value idx = p.in(ET::I32, {4, 1}, I32{2, 0, 2, 1});
  Builder::GatherDims d;
  d.offset_dims = {1};
  d.collapsed_slice_dims = {0};
  d.start_index_map = {0};
  d.index_vector_dim = 1;
  Value g = p.b.gather(x, idx, d, {1, 2}, {4, 2});
  EXPECT_EQ(p.get<float>(g), (F{20, 21, 0, 1, 20, 21, 10, 11}));
  EXPECT_THROW(p.b.gather(x, idx, d, {1, 2}, {2, 4}), Error);
}

TEST(Gather, BatchingDims) {
  Prog p;
  // Per batch b, pick x[b, idx[b]]: take_along_dim with one index per row.
  Value x = p.in(ET::I32, {2, 3}, I32{0, 1, 2, 10, 11, 12});
  Value idx = p.in(ET::I32, {2, 1}, I32{2, 0});
  Builder::GatherDims d;
  d.collapsed_slice_dims = {1};
  d.operand_batching_dims = {0};
  d.start_indices_batching_dims = {0};
  d.start_index_map = {1};
  d.index_vector_dim = 1;
  EXPECT_EQ(p.get<int32_t>(p.b.gather(x, idx, d, {1, 1}, {2})), (I32{2, 10}));
}

TEST(Scatter, AddRows) {
  Prog p;
  Value x = p.in(ET::F32, {3, 2}, F{0, 0, 0, 0, 0, 0});
  Value idx = p.in(ET::I32, {3, 1}, I32{2, 0, 2});
  Value upd = p.in(ET::F32, {3, 2}, F{1, 2, 3, 4, 5, 6});
  Builder::ScatterDims d;
  d.update_window_dims = {1};
  d.inserted_window_dims = {0};
  d.scatter_dims_to_operand_dims = {0};
  d.index_vector_dim = 1;
  Value r = p.b.scatter(x, idx, upd, d, [](Builder& b, const std::vector<Value>& a) {
    return std::vector<Value>{b.add(a[0], a[1])};
  });
  EXPECT_EQ(p.get<float>(r), (F{3, 4, 0, 0, 6, 8}));
  Value bad_upd = p.in(ET::F32, {2, 2}, F{1, 2, 3, 4});
  EXPECT_THROW(p.b.scatter(x, idx, bad_upd, d, nullptr), Error);
}

TEST(Random, RngBitGeneratorIsDeterministicAndAdvances) {
  auto draw = [](uint64_t seed) {
    Prog p;
    Value state = p.in(ET::U64, {2}, std::vector<uint64_t>{seed, 0});
    Value next;
    Value bits = p.b.rng_bit_generator(state, {ET::U32, {8}}, &next);
    p.run({bits, next});
    return std::make_pair(p.out<uint32_t>(0), p.out<uint64_t>(1));
  };
  auto [a, sa] = draw(42);
  auto [b, sb] = draw(42);
  auto [c, sc] = draw(43);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(sa, (std::vector<uint64_t>{42, 0}));
  std::set<uint32_t> distinct(a.begin(), a.end());
  EXPECT_GT(distinct.size(), 6u);
}

// ---------------------------------------------------------------- generic ops

TEST(Generic, OpWithCustomAttributes) {
  Prog p;
  Value x = p.in(ET::F32, {2, 2}, F{1, 2, 3, 4});
  Value y = p.b.op("stablehlo.transpose", {x}, {ET::F32, {2, 2}}, "permutation = array<i64: 1, 0>");
  EXPECT_EQ(p.get<float>(y), (F{1, 3, 2, 4}));
}

TEST(Generic, WhileLoopWithTwoRegionsAndCapture) {
  Prog p;
  Value step = p.in(ET::I32, {}, I32{3});
  Value i0 = p.b.constant_int(0, ET::I32), acc0 = p.b.constant_int(1, ET::I32);
  TensorType s = scalar_type(ET::I32);
  auto cond = [](Builder& b, const std::vector<Value>& a) {
    return std::vector<Value>{b.compare(a[0], b.constant_int(4, ET::I32), Compare::LT)};
  };
  auto body = [step](Builder& b, const std::vector<Value>& a) {
    // `step` is defined outside the loop: values are visible in nested regions.
    return std::vector<Value>{b.add(a[0], b.constant_int(1, ET::I32)), b.mul(a[1], step)};
  };
  auto r = p.b.op_multi("stablehlo.while", {i0, acc0}, {s, s}, "", {{{s, s}, cond}, {{s, s}, body}});
  p.run(r);
  EXPECT_EQ(p.out<int32_t>(0), (I32{4}));
  EXPECT_EQ(p.out<int32_t>(1), (I32{81}));
}

// ---------------------------------------------------------------- donation

TEST(Donation, AliasedParameterIsConsumed) {
  for (bool alias : {false, true}) {
    Builder b;
    Value x = b.parameter({ET::F32, {4}});
    if (alias) b.alias_parameter(x, 0);
    Value y = b.mul(x, b.full(2, ET::F32, {4}));
    std::string text = b.module({y});
    EXPECT_EQ(text.find("tf.aliasing_output = 0 : i32") != std::string::npos, alias);
    auto exe = client().compile(text, {y.type});
    F host{1, 2, 3, 4};
    auto in = client().from_host(host.data(), x.type);
    auto out = exe->execute({in.get()}, {true});
    F got(4);
    out[0]->to_host(got.data());
    EXPECT_EQ(got, (F{2, 4, 6, 8}));
    EXPECT_EQ(in->is_deleted(), alias) << "alias=" << alias;
  }
}

}  // namespace
}  // namespace torch_tpu::hlo
