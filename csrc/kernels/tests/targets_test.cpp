// kernels::target against the CPU plugin: the handler it registers runs in a
// program built with Builder::custom_call, on a first client and again on a
// client created after the first is gone (the plugin's registry is the
// process's); an unknown kernel is an error naming the ones there are.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/error.h"
#include "hlo/builder.h"
#include "kernels/kernels.h"
#include "pjrt/client.h"
#include "pjrt/tests/test_client.h"

namespace torch_tpu::kernels {
namespace {

using hlo::Builder;
using ET = hlo::ElementType;

std::vector<float> read(const pjrt::Buffer& b) {
  std::vector<float> v(b.type().numel());
  b.to_host(v.data());
  return v;
}

TEST(KernelTargets, RegisteredOnceServesARestartedClient) {
  for (int round = 0; round < 2; ++round) {
    pjrt::Client c(pjrt::Plugin::load(pjrt::PluginChoice{testing::plugin_path(), "test"}));
    std::string target = kernels::target("sdpa_forward", c.plugin(), c.platform_name());
    if (target.empty()) GTEST_SKIP() << "built without XLA's FFI header (no jaxlib): no handler to register";
    EXPECT_EQ(target, "torch_tpu_sdpa_forward");
    // One head, two queries and keys of size 2, causal: query 0 sees key 0
    // alone; query 1 is zero, so it weighs both keys equally.
    const hlo::TensorType t{ET::F32, {1, 1, 2, 2}};
    Builder b;
    hlo::Value q = b.parameter(t), k = b.parameter(t), v = b.parameter(t);
    hlo::Value no_mask = b.zeros(ET::F32, {0, 0, 0, 0}), dropout_key = b.constant_int(0, ET::U64);
    auto r = b.custom_call(target, {q, k, v, no_mask, dropout_key}, {t, {ET::F32, {1, 1, 2}}},
                           {Builder::FfiAttr::f32("scale", 1.0), Builder::FfiAttr::boolean("causal", true),
                            Builder::FfiAttr::f32("dropout", 0.0), Builder::FfiAttr::f32("rescale", 1.0)});
    auto exe = c.compile(b.module(r), {r[0].type, r[1].type});
    std::vector<float> qh{1, 2, 0, 0}, kh{3, -1, 5, 7}, vh{1, 2, 3, 4};
    auto qb = c.from_host(qh.data(), t), kb = c.from_host(kh.data(), t), vb = c.from_host(vh.data(), t);
    auto out = exe->execute({qb.get(), kb.get(), vb.get()});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(read(*out[0]), (std::vector<float>{1, 2, 2, 3}));
    auto lse = read(*out[1]);
    EXPECT_FLOAT_EQ(lse[0], 1.0f);  // q0 . k0
    EXPECT_FLOAT_EQ(lse[1], std::log(2.0f));
  }
}

TEST(KernelTargets, AnUnknownKernelNamesTheKernels) {
  auto& c = testing::client();
  try {
    kernels::target("no_such_kernel", c.plugin(), c.platform_name());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Value);
    EXPECT_NE(std::string(e.what()).find("no platform kernel named 'no_such_kernel'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("sdpa_forward"), std::string::npos);
  }
}

}  // namespace
}  // namespace torch_tpu::kernels
