// tpu_dist's StableHLO collective programs, run for real: the CPU plugin's
// client is created with several devices (cpu_device_count), each program is
// compiled for that many replicas and launched on all of them at once, and
// every replica's result is checked against a reduction worked out here on
// the host from the same inputs. Rank r's element i is a small integer
// chosen so that every dtype, including bf16 and f16, holds it and its sums,
// products and means exactly; results are compared exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <vector>

#include "common/error.h"
#include "distributed/programs/collectives.h"
#include "hlo/builder.h"
#include "pjrt/client.h"
#include "pjrt/tests/test_client.h"

namespace torch_tpu::distributed::programs {
namespace {

using hlo::ElementType;
using hlo::Shape;
using hlo::TensorType;
using ET = ElementType;
using Bytes = std::vector<uint8_t>;

pjrt::Client& client_with(int devices) {
  static std::map<int, std::unique_ptr<pjrt::Client>> clients;
  auto& c = clients[devices];
  if (!c) {
    c = std::make_unique<pjrt::Client>(
        pjrt::Plugin::load(pjrt::PluginChoice{testing::plugin_path(), "test"}),
        pjrt::CreateOptions{{{"cpu_device_count", devices}}});
  }
  return *c;
}

// ---- host encodings of the test values (all exactly representable)

uint16_t half_bits(float f) {  // exact for the small values used here
  if (f == 0) return std::signbit(f) ? 0x8000 : 0;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t exp = ((u >> 23) & 0xFF) - 127 + 15;
  return static_cast<uint16_t>(((u >> 16) & 0x8000) | (exp << 10) | ((u & 0x7FFFFF) >> 13));
}

float from_half(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  uint32_t u = (h & 0x7FFF) == 0 ? sign : sign | ((exp - 15 + 127) << 23) | (mant << 13);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <typename T>
void put(Bytes& out, T v) {
  size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

template <typename T>
T get(const Bytes& in, size_t i) {
  T v;
  std::memcpy(&v, in.data() + i * sizeof(T), sizeof(T));
  return v;
}

Bytes encode(ET t, const std::vector<double>& values) {
  Bytes out;
  for (double v : values) {
    float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    switch (t) {
      case ET::Bool: put<uint8_t>(out, v != 0); break;
      case ET::U8: put<uint8_t>(out, static_cast<uint8_t>(v)); break;
      case ET::I32: put<int32_t>(out, static_cast<int32_t>(v)); break;
      case ET::I64: put<int64_t>(out, static_cast<int64_t>(v)); break;
      case ET::F16: put<uint16_t>(out, half_bits(f)); break;
      case ET::BF16: put<uint16_t>(out, static_cast<uint16_t>(bits >> 16)); break;
      case ET::F32: put<float>(out, f); break;
      case ET::C64: put<float>(out, f), put<float>(out, -2 * f); break;
      default: ADD_FAILURE() << "no test encoding for " << hlo::mlir_name(t);
    }
  }
  return out;
}

// Complex values come back as their real parts; the imaginary part is
// checked to be -2x the real part (how encode() builds it).
std::vector<double> decode(ET t, const Bytes& in) {
  std::vector<double> out(in.size() / hlo::byte_size(t));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (t) {
      case ET::Bool: out[i] = get<uint8_t>(in, i) != 0; break;
      case ET::U8: out[i] = get<uint8_t>(in, i); break;
      case ET::I32: out[i] = get<int32_t>(in, i); break;
      case ET::I64: out[i] = static_cast<double>(get<int64_t>(in, i)); break;
      case ET::F16: out[i] = from_half(get<uint16_t>(in, i)); break;
      case ET::BF16: {
        uint32_t bits = static_cast<uint32_t>(get<uint16_t>(in, i)) << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        out[i] = f;
        break;
      }
      case ET::F32: out[i] = get<float>(in, i); break;
      case ET::C64: {
        float re = get<float>(in, 2 * i), im = get<float>(in, 2 * i + 1);
        EXPECT_EQ(im, -2 * re) << "imaginary part of element " << i;
        out[i] = re;
        break;
      }
      default: ADD_FAILURE() << "no test decoding for " << hlo::mlir_name(t);
    }
  }
  return out;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Rank r's element i: in [-3, 3] for signed types, [0, 6] for u8, 0/1 for
// bool, varying with both rank and position so min and max differ per element.
double value(ET t, int r, int64_t i) {
  double v = static_cast<double>((r * 5 + i * 3) % 7) - 3;
  if (t == ET::U8) return v + 3;
  if (t == ET::Bool) return v > 0;
  return v;
}

std::vector<double> values_of(ET t, int r, int64_t n) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = value(t, r, i);
  return v;
}

// Compiles `p` for p.world replicas on a client with that many devices,
// feeds replica r `inputs[r]`, and returns each replica's result.
std::vector<std::vector<double>> run(const Program& p,
                                     const std::vector<std::vector<double>>& inputs) {
  pjrt::Client& c = client_with(p.world);
  auto exe = c.compile_replicated(p.mlir, {p.output}, p.world);
  std::vector<std::unique_ptr<pjrt::Buffer>> bufs;
  std::vector<std::vector<const pjrt::Buffer*>> args(p.world);
  for (int r = 0; r < p.world; ++r) {
    Bytes data = encode(p.input.dtype, inputs.at(r));
    EXPECT_EQ(static_cast<int64_t>(data.size()), p.input.nbytes());
    bufs.push_back(c.from_host(data.data(), p.input, r));
    args[r].push_back(bufs.back().get());
  }
  auto outs = exe->execute_replicated(args);
  std::vector<std::vector<double>> results;
  for (const auto& o : outs) {
    EXPECT_EQ(o.size(), 1u);
    Bytes host(o[0]->type().nbytes());
    o[0]->to_host(host.data());
    results.push_back(decode(p.output.dtype, host));
  }
  return results;
}

// ---- host references

// Wraps like the device's integers of dtype t.
double wrap(ET t, double v) {
  if (t == ET::U8) return static_cast<uint8_t>(static_cast<int64_t>(v));
  if (t == ET::I32) return static_cast<int32_t>(static_cast<int64_t>(v));
  return v;
}

double reduce_ref(ReduceOp op, ET t, const std::vector<double>& xs) {
  const bool integral = hlo::is_integral(t);
  double acc = xs[0];
  for (size_t k = 1; k < xs.size(); ++k) {
    double x = xs[k];
    auto a = static_cast<int64_t>(acc), b = static_cast<int64_t>(x);
    switch (op) {
      case ReduceOp::Avg: case ReduceOp::Sum: acc = acc + x; break;
      case ReduceOp::Product: acc = acc * x; break;
      case ReduceOp::Min: acc = std::min(acc, x); break;
      case ReduceOp::Max: acc = std::max(acc, x); break;
      case ReduceOp::BitAnd: acc = static_cast<double>(a & b); break;
      case ReduceOp::BitOr: acc = static_cast<double>(a | b); break;
      case ReduceOp::BitXor: acc = static_cast<double>(a ^ b); break;
    }
  }
  if (op == ReduceOp::Avg) {
    double n = static_cast<double>(xs.size());
    acc = integral ? std::trunc(acc / n) : acc / n;
  }
  if (t == ET::Bool) return acc != 0;
  return integral ? wrap(t, acc) : acc;
}

// Bool under Gloo's rules: SUM/MAX/BOR any, PRODUCT/MIN/BAND all, BXOR parity.
double bool_ref(ReduceOp op, const std::vector<double>& xs) {
  int ones = 0;
  for (double x : xs) ones += x != 0;
  switch (op) {
    case ReduceOp::BitAnd: case ReduceOp::Min: case ReduceOp::Product:
      return ones == static_cast<int>(xs.size());
    case ReduceOp::BitXor: return ones % 2;
    default: return ones > 0;
  }
}

std::string op_label(ReduceOp op) {
  const char* names[] = {"avg", "band", "bor", "bxor", "max", "min", "product", "sum"};
  return names[static_cast<int>(op)];
}

const ET kFloatTypes[] = {ET::BF16, ET::F16, ET::F32};
const ET kIntTypes[] = {ET::I32, ET::I64, ET::U8};
const ReduceOp kArithmetic[] = {ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Product,
                                ReduceOp::Sum};
const ReduceOp kBitwise[] = {ReduceOp::BitAnd, ReduceOp::BitOr, ReduceOp::BitXor};
const int kWorlds[] = {2, 4};

void check_all_reduce(ReduceOp op, ET t, int world) {
  SCOPED_TRACE(op_label(op) + " " + hlo::mlir_name(t) + " world " + std::to_string(world));
  const Shape shape{2, 3};
  const int64_t n = numel(shape);
  std::vector<std::vector<double>> in;
  for (int r = 0; r < world; ++r) in.push_back(values_of(t, r, n));
  Program p = all_reduce(op, t, shape, world);
  EXPECT_EQ(p.output, (TensorType{t, shape}));
  auto out = run(p, in);
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> xs;
    for (int r = 0; r < world; ++r) xs.push_back(in[r][i]);
    double want = t == ET::Bool ? bool_ref(op, xs) : reduce_ref(op, t, xs);
    for (int r = 0; r < world; ++r) EXPECT_EQ(out[r][i], want) << "rank " << r << " element " << i;
  }
}

TEST(AllReduceProgram, ArithmeticOnFloatAndIntegerTypes) {
  for (int world : kWorlds)
    for (ReduceOp op : kArithmetic) {
      for (ET t : kFloatTypes) check_all_reduce(op, t, world);
      for (ET t : kIntTypes) check_all_reduce(op, t, world);
    }
}

TEST(AllReduceProgram, BitwiseOnIntegers) {
  for (ReduceOp op : kBitwise)
    for (ET t : kIntTypes) check_all_reduce(op, t, 4);
}

TEST(AllReduceProgram, BoolFollowsGloo) {
  for (int world : kWorlds)
    for (ReduceOp op : {ReduceOp::BitAnd, ReduceOp::BitOr, ReduceOp::BitXor, ReduceOp::Max,
                        ReduceOp::Min, ReduceOp::Product, ReduceOp::Sum})
      check_all_reduce(op, ET::Bool, world);
}

TEST(AllReduceProgram, ComplexSumAndMean) {
  for (ReduceOp op : {ReduceOp::Avg, ReduceOp::Sum}) check_all_reduce(op, ET::C64, 4);
}

TEST(AllReduceProgram, UndefinedCombinationsAreTypeErrors) {
  auto kind = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::Runtime;
  };
  EXPECT_EQ(kind([] { all_reduce(ReduceOp::Max, ET::C64, {2}, 2); }), ErrorKind::Type);
  EXPECT_EQ(kind([] { all_reduce(ReduceOp::BitOr, ET::F32, {2}, 2); }), ErrorKind::Type);
  EXPECT_EQ(kind([] { all_reduce(ReduceOp::Avg, ET::Bool, {2}, 2); }), ErrorKind::Type);
  EXPECT_EQ(kind([] { all_reduce(ReduceOp::Avg, ET::U64, {2}, 2); }), ErrorKind::NotImplemented);
  EXPECT_EQ(kind([] { all_reduce(ReduceOp::Sum, ET::F32, {2}, 0); }), ErrorKind::Value);
}

TEST(AllGatherProgram, EveryRankGetsEveryOperandInRankOrder) {
  for (int world : kWorlds)
    for (ET t : {ET::BF16, ET::Bool, ET::C64, ET::F16, ET::F32, ET::I32, ET::I64, ET::U8}) {
      SCOPED_TRACE(std::string(hlo::mlir_name(t)) + " world " + std::to_string(world));
      const Shape shape{2, 3};
      std::vector<std::vector<double>> in;
      for (int r = 0; r < world; ++r) in.push_back(values_of(t, r, 6));
      Program p = all_gather(t, shape, world);
      EXPECT_EQ(p.output, (TensorType{t, {world, 2, 3}}));
      auto out = run(p, in);
      for (int r = 0; r < world; ++r)
        for (int q = 0; q < world; ++q)
          for (int i = 0; i < 6; ++i)
            EXPECT_EQ(out[r][q * 6 + i], in[q][i]) << "rank " << r << " row " << q;
    }
}

void check_reduce_scatter(ReduceOp op, ET t, int world) {
  SCOPED_TRACE(op_label(op) + " " + hlo::mlir_name(t) + " world " + std::to_string(world));
  const Shape shape{3};
  std::vector<std::vector<double>> in;
  for (int r = 0; r < world; ++r) in.push_back(values_of(t, r, world * 3));
  Program p = reduce_scatter(op, t, shape, world);
  EXPECT_EQ(p.input, (TensorType{t, {world, 3}}));
  EXPECT_EQ(p.output, (TensorType{t, shape}));
  auto out = run(p, in);
  for (int r = 0; r < world; ++r)
    for (int i = 0; i < 3; ++i) {
      std::vector<double> xs;
      for (int q = 0; q < world; ++q) xs.push_back(in[q][r * 3 + i]);
      double want = t == ET::Bool ? bool_ref(op, xs) : reduce_ref(op, t, xs);
      EXPECT_EQ(out[r][i], want) << "rank " << r << " element " << i;
    }
}

TEST(ReduceScatterProgram, RankKeepsTheReductionOfItsRow) {
  for (int world : kWorlds)
    for (ET t : {ET::BF16, ET::F32, ET::I32, ET::I64})
      for (ReduceOp op : kArithmetic) check_reduce_scatter(op, t, world);
}

TEST(ReduceScatterProgram, BitwiseAndBool) {
  for (int world : kWorlds) {
    for (ReduceOp op : kBitwise) check_reduce_scatter(op, ET::I32, world);
    for (ReduceOp op : {ReduceOp::BitXor, ReduceOp::Max, ReduceOp::Min})
      check_reduce_scatter(op, ET::Bool, world);
  }
}

TEST(AllToAllProgram, BlockJOfRankIBecomesBlockIOfRankJ) {
  for (int world : kWorlds)
    for (ET t : {ET::Bool, ET::F16, ET::F32, ET::I64}) {
      SCOPED_TRACE(std::string(hlo::mlir_name(t)) + " world " + std::to_string(world));
      const int64_t rows = 2, cols = 3, block = rows * cols;
      const Shape shape{world * rows, cols};
      std::vector<std::vector<double>> in;
      for (int r = 0; r < world; ++r) in.push_back(values_of(t, r, world * block));
      auto out = run(all_to_all(t, shape, world), in);
      for (int j = 0; j < world; ++j)
        for (int i = 0; i < world; ++i)
          for (int64_t k = 0; k < block; ++k)
            EXPECT_EQ(out[j][i * block + k], in[i][j * block + k])
                << "rank " << j << " block " << i << " element " << k;
    }
  EXPECT_THROW(all_to_all(ET::F32, {3, 2}, 2), Error);
  EXPECT_THROW(all_to_all(ET::F32, {}, 2), Error);
}

TEST(BroadcastProgram, EveryRankGetsTheRootsOperand) {
  for (int world : kWorlds)
    for (int root : {0, world - 1})
      for (ET t : {ET::BF16, ET::Bool, ET::F32, ET::I32, ET::U8}) {
        SCOPED_TRACE(std::string(hlo::mlir_name(t)) + " world " + std::to_string(world) +
                     " root " + std::to_string(root));
        std::vector<std::vector<double>> in;
        for (int r = 0; r < world; ++r) in.push_back(values_of(t, r, 5));
        auto out = run(broadcast(t, {5}, world, root), in);
        for (int r = 0; r < world; ++r) EXPECT_EQ(out[r], in[root]) << "rank " << r;
      }
  EXPECT_THROW(broadcast(ET::F32, {5}, 4, 4), Error);
}

TEST(BroadcastProgram, CopiesBitsNotValues) {
  // -0.0 and NaN survive, which a sum with the other ranks' zeros would not.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Program p = broadcast(ET::F32, {3}, 4, 1);
  pjrt::Client& c = client_with(4);
  auto exe = c.compile_replicated(p.mlir, {p.output}, 4);
  const std::vector<float> root{-0.0f, nan, 7.5f}, other{1.0f, 2.0f, 3.0f};
  std::vector<std::unique_ptr<pjrt::Buffer>> bufs;
  std::vector<std::vector<const pjrt::Buffer*>> args(4);
  for (int r = 0; r < 4; ++r) {
    bufs.push_back(c.from_host((r == 1 ? root : other).data(), p.input, r));
    args[r] = {bufs.back().get()};
  }
  auto outs = exe->execute_replicated(args);
  for (int r = 0; r < 4; ++r) {
    std::vector<float> got(3);
    outs[r][0]->to_host(got.data());
    EXPECT_EQ(std::memcmp(got.data(), root.data(), sizeof(float) * 3), 0) << "rank " << r;
  }
}

TEST(SendRecvProgram, DestinationGetsTheSourcesOperandOthersKeepTheirs) {
  for (ET t : {ET::Bool, ET::F32, ET::I64}) {
    SCOPED_TRACE(hlo::mlir_name(t));
    const int world = 4, src = 3, dst = 1;
    std::vector<std::vector<double>> in;
    for (int r = 0; r < world; ++r) in.push_back(values_of(t, r, 4));
    auto out = run(send_recv(t, {2, 2}, world, src, dst), in);
    for (int r = 0; r < world; ++r) EXPECT_EQ(out[r], in[r == dst ? src : r]) << "rank " << r;
  }
  EXPECT_THROW(send_recv(ET::F32, {2}, 2, 1, 1), Error);
  EXPECT_THROW(send_recv(ET::F32, {2}, 2, 0, 2), Error);
}

// The builder's optional channel_handle, and groups smaller than the world:
// two groups of two, each summing only its own members.
TEST(BuilderCollectives, ChannelHandleAndSubgroups) {
  hlo::Builder b;
  hlo::Value x = b.parameter({ET::F32, {2}});
  hlo::Value y = b.all_reduce(
      x, {{0, 2}, {1, 3}},
      [](hlo::Builder& r, const std::vector<hlo::Value>& a) {
        return std::vector<hlo::Value>{r.add(a[0], a[1])};
      },
      /*channel=*/1);
  std::string text = b.module({y});
  EXPECT_NE(text.find("channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>"),
            std::string::npos);
  EXPECT_NE(text.find("replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>"),
            std::string::npos);
  Program p{text, {ET::F32, {2}}, y.type, 4};
  std::vector<std::vector<double>> in{{1, 10}, {2, 20}, {4, 40}, {8, 80}};
  auto out = run(p, in);
  EXPECT_EQ(out[0], (std::vector<double>{5, 50}));
  EXPECT_EQ(out[2], (std::vector<double>{5, 50}));
  EXPECT_EQ(out[1], (std::vector<double>{10, 100}));
  EXPECT_EQ(out[3], (std::vector<double>{10, 100}));
}

TEST(BuilderCollectives, CollectiveArgumentErrors) {
  hlo::Builder b;
  hlo::Value x = b.parameter({ET::F32, {3}});
  EXPECT_THROW(b.all_gather(x, 1, {{0, 1}}), Error);
  EXPECT_THROW(b.all_gather(x, 0, {{0, 1}, {1, 2}}), Error);
  EXPECT_THROW(b.all_gather(x, 0, {{0, 1}, {2}}), Error);
  EXPECT_THROW(b.all_to_all(x, 0, 0, {{0, 1}}), Error);
  EXPECT_THROW(b.collective_permute(x, {{0, 1}, {0, 2}}), Error);
  EXPECT_THROW(b.collective_permute(x, {{0, 1}, {2, 1}}), Error);
}

}  // namespace
}  // namespace torch_tpu::distributed::programs
