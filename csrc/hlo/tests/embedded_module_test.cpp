// Embedded modules: the signature read from @main, symbols renamed, and two
// modules (one with a helper function and JAX-style attributes and
// locations) called from one builder program, compiled and run on the CPU
// plugin against values worked out by hand.
#include <gtest/gtest.h>

#include <cstring>

#include "common/error.h"
#include "hlo/builder.h"
#include "hlo/embedded_module.h"
#include "pjrt/client.h"
#include "pjrt/tests/test_client.h"

namespace torch_tpu::hlo {
namespace {

using ET = ElementType;
using testing::client;

const char* kScale = R"(#loc1 = loc("x")
module @jit_scale attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3xf32> loc("x"), %arg1: tensor<f32>) -> (tensor<3xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> tensor<3xf32> loc(#loc1)
    %1 = call @"<lambda>"(%0) : (tensor<3xf32>) -> tensor<3xf32>
    %2 = stablehlo.multiply %arg0, %1 : tensor<3xf32>
    return %2 : tensor<3xf32>
  } loc(#loc1)
  func.func private @"<lambda>"(%x: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.add %x, %x : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}
#loc = loc(unknown)
)";

const char* kNegate = R"(func.func @main(%a: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xi32>) {
  %0 = stablehlo.negate %a : tensor<3xf32>
  %1 = stablehlo.convert %a : (tensor<3xf32>) -> tensor<3xi32>
  return %0, %1 : tensor<3xf32>, tensor<3xi32>
}
)";

TEST(EmbeddedModule, ReadsSignatureAndRenamesSymbols) {
  EmbeddedModule m = embed_module(kScale, "k7_");
  EXPECT_EQ(m.entry, "k7_main");
  ASSERT_EQ(m.inputs.size(), 2u);
  EXPECT_EQ(m.inputs[0], (TensorType{ET::F32, {3}}));
  EXPECT_EQ(m.inputs[1], (TensorType{ET::F32, {}}));
  ASSERT_EQ(m.outputs.size(), 1u);
  EXPECT_EQ(m.outputs[0], (TensorType{ET::F32, {3}}));
  EXPECT_NE(m.functions.find("func.func private @k7_main("), std::string::npos);
  EXPECT_NE(m.functions.find("call @\"k7_<lambda>\"("), std::string::npos);  // quoted names too
  EXPECT_EQ(m.functions.find("loc("), std::string::npos);
  EXPECT_EQ(m.functions.find("public"), std::string::npos);
  EXPECT_EQ(m.functions.find("@main"), std::string::npos);
}

TEST(EmbeddedModule, TwoModulesInOneProgramRun) {
  EmbeddedModule scale = embed_module(kScale, "k1_");
  EmbeddedModule neg = embed_module(kNegate, "k2_");
  Builder b;
  Value x = b.parameter({ET::F32, {3}});
  Value s = b.constant(1.5, ET::F32);
  b.add_functions(scale.entry, scale.functions);
  b.add_functions(scale.entry, scale.functions);  // a second call adds nothing
  b.add_functions(neg.entry, neg.functions);
  Value y = b.op_multi("func.call", {x, s}, scale.outputs, "callee = @" + scale.entry, {})[0];
  auto n = b.op_multi("func.call", {y}, neg.outputs, "callee = @" + neg.entry, {});
  std::string text = b.module({n[0], n[1]});
  const std::string def = "func.func private @\"k1_<lambda>\"(";
  EXPECT_EQ(text.find(def), text.rfind(def));  // defined once
  EXPECT_NE(text.find(def), std::string::npos);
  auto exe = client().compile(text, {n[0].type, n[1].type});
  std::vector<float> in = {1.0f, -2.0f, 0.5f};
  auto buf = client().from_host(in.data(), x.type);
  auto outs = exe->execute({buf.get()});
  ASSERT_EQ(outs.size(), 2u);
  std::vector<float> neg_out(3);
  std::vector<int32_t> int_out(3);
  outs[0]->to_host(neg_out.data());
  outs[1]->to_host(int_out.data());
  // x * (1.5 + 1.5), negated; then truncated toward zero.
  EXPECT_EQ(neg_out, (std::vector<float>{-3.0f, 6.0f, -1.5f}));
  EXPECT_EQ(int_out, (std::vector<int32_t>{3, -6, 1}));
}

TEST(EmbeddedModule, RejectsWhatItCannotCall) {
  auto message = [](const std::string& text) {
    try {
      embed_module(text, "p_");
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Value);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("module {\n}\n").find("no 'func.func @main'"), std::string::npos);
  EXPECT_NE(message("func.func @main(%a: tensor<?xf32>) -> tensor<?xf32> {}").find("dynamic"),
            std::string::npos);
  EXPECT_NE(message("func.func @main(%a: tuple<f32>) -> tensor<f32> {}").find("only tensor types"),
            std::string::npos);
  EXPECT_NE(message("func.func @main(%a: tensor<f32>) {}").find("returns nothing"),
            std::string::npos);
  EXPECT_NE(message("module { func.func @main(").find("unbalanced"), std::string::npos);
  EXPECT_EQ(parse_tensor_type("tensor<2x3xbf16>"), (TensorType{ET::BF16, {2, 3}}));
  EXPECT_EQ(parse_tensor_type("tensor<complex<f32>>"), (TensorType{ET::C64, {}}));
  EXPECT_EQ(parse_tensor_type("tensor<0x4xui8>"), (TensorType{ET::U8, {0, 4}}));
}

}  // namespace
}  // namespace torch_tpu::hlo
