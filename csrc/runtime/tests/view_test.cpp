// View reads and writes (runtime/view.h) against a host reference: element
// (i0, i1, ...) of a view is base[offset + sum(ik * stride_k)].
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "common/error.h"
#include "pjrt/tests/test_client.h"
#include "runtime/view.h"

namespace torch_tpu::runtime {
namespace {

using hlo::ElementType;
using testing::client;

std::vector<int64_t> flat_positions(const ViewGeometry& v) {
  std::vector<int64_t> pos;
  std::vector<int64_t> idx(v.sizes.size(), 0);
  int64_t n = v.numel();
  for (int64_t k = 0; k < n; ++k) {
    int64_t p = v.offset;
    for (size_t d = 0; d < idx.size(); ++d) p += idx[d] * v.strides[d];
    pos.push_back(p);
    for (int64_t d = static_cast<int64_t>(idx.size()) - 1; d >= 0; --d) {
      if (++idx[d] < v.sizes[d]) break;
      idx[d] = 0;
    }
  }
  return pos;
}

std::vector<float> run(hlo::Builder& b, hlo::Value result, const std::vector<float>& base,
                       const hlo::TensorType& base_type, const std::vector<float>& update = {},
                       const hlo::TensorType* update_type = nullptr) {
  auto exe = client().compile(b.module({result}), {result.type});
  std::vector<std::unique_ptr<pjrt::Buffer>> in;
  in.push_back(client().from_host(base.data(), base_type));
  if (update_type) in.push_back(client().from_host(update.data(), *update_type));
  std::vector<const pjrt::Buffer*> args;
  for (auto& p : in) args.push_back(p.get());
  auto out = exe->execute(args);
  std::vector<float> host(result.type.numel());
  out[0]->to_host(host.data());
  return host;
}

struct Case {
  const char* name;
  ViewGeometry view;
};

// base is f32[24] holding 0..23
std::vector<Case> cases() {
  auto f = ElementType::F32;
  return {
      {"contiguous offset", {{2, 3}, {3, 1}, 5, f}},
      {"column slice", {{4, 2}, {6, 1}, 1, f}},
      {"transpose", {{6, 4}, {1, 6}, 0, f}},
      {"row step", {{2, 6}, {12, 1}, 0, f}},
      {"select column", {{4}, {6}, 2, f}},
      {"expand", {{3, 4}, {0, 1}, 8, f}},
      {"diagonal", {{4}, {7}, 0, f}},
      {"permute 3d", {{3, 2, 4}, {1, 12, 3}, 0, f}},
      {"scalar", {{}, {}, 17, f}},
      {"size one dims", {{1, 4, 1}, {100, 2, 7}, 3, f}},
      {"overlapping unfold", {{5, 4}, {2, 1}, 0, f}},
      {"tail past end needs padding", {{3, 2}, {8, 1}, 6, f}},
  };
}

TEST(View, ReadsMatchTheHostReference) {
  hlo::TensorType base_type{ElementType::F32, {24}};
  std::vector<float> base(24);
  std::iota(base.begin(), base.end(), 0.f);
  for (const Case& c : cases()) {
    hlo::Builder b;
    hlo::Value p = b.parameter(base_type);
    hlo::Value r = read_view(b, p, c.view);
    ASSERT_EQ(r.shape(), c.view.sizes) << c.name;
    std::vector<float> got = run(b, r, base, base_type);
    std::vector<float> want;
    for (int64_t pos : flat_positions(c.view)) want.push_back(base[pos]);
    EXPECT_EQ(got, want) << c.name;
  }
}

TEST(View, WritesMatchTheHostReference) {
  hlo::TensorType base_type{ElementType::F32, {24}};
  std::vector<float> base(24);
  std::iota(base.begin(), base.end(), 0.f);
  for (const Case& c : cases()) {
    bool aliases = false;
    for (size_t d = 0; d < c.view.sizes.size(); ++d)
      aliases |= c.view.sizes[d] > 1 && c.view.strides[d] == 0;
    if (aliases || std::string(c.name) == "overlapping unfold") continue;
    hlo::TensorType update_type{ElementType::F32, c.view.sizes};
    std::vector<float> update(c.view.numel());
    std::iota(update.begin(), update.end(), 100.f);
    hlo::Builder b;
    hlo::Value p = b.parameter(base_type);
    hlo::Value u = b.parameter(update_type);
    hlo::Value r = write_view(b, p, c.view, u);
    ASSERT_EQ(r.type, base_type) << c.name;
    std::vector<float> got = run(b, r, base, base_type, update, &update_type);
    std::vector<float> want = base;
    auto pos = flat_positions(c.view);
    for (size_t k = 0; k < pos.size(); ++k) want[pos[k]] = update[k];
    EXPECT_EQ(got, want) << c.name;
  }
}

TEST(View, ReinterpretsTheBaseAsAnotherDtype) {
  // A float32 base read as int32 (same width) and as uint8 (narrower).
  hlo::TensorType base_type{ElementType::F32, {2}};
  std::vector<float> base{1.0f, -2.5f};
  hlo::Builder b;
  hlo::Value p = b.parameter(base_type);
  hlo::Value bytes = read_view(b, p, {{8}, {1}, 0, ElementType::U8});
  auto exe = client().compile(b.module({bytes}), {bytes.type});
  auto in = client().from_host(base.data(), base_type);
  auto out = exe->execute({in.get()});
  std::vector<uint8_t> got(8), want(8);
  out[0]->to_host(got.data());
  std::memcpy(want.data(), base.data(), 8);
  EXPECT_EQ(got, want);
}

TEST(View, WritableRefusesAliasingElements) {
  EXPECT_THROW(check_writable({{3, 4}, {0, 1}, 0, ElementType::F32}, "add_"), Error);
  EXPECT_NO_THROW(check_writable({{1, 4}, {0, 1}, 0, ElementType::F32}, "add_"));
}

TEST(View, IdentityAndCoverage) {
  hlo::TensorType base{ElementType::F32, {2, 3}};
  EXPECT_TRUE(is_identity({{2, 3}, {3, 1}, 0, ElementType::F32}, base));
  EXPECT_FALSE(is_identity({{3, 2}, {1, 3}, 0, ElementType::F32}, base));
  EXPECT_TRUE(covers_storage({{6}, {1}, 0, ElementType::F32}, 24));
  EXPECT_TRUE(covers_storage({{24}, {1}, 0, ElementType::U8}, 24));
  EXPECT_FALSE(covers_storage({{5}, {1}, 1, ElementType::F32}, 24));
}

}  // namespace
}  // namespace torch_tpu::runtime
