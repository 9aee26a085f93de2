// The PJRT layer against the CPU plugin: loading and its errors, discovery,
// buffers to and from the host, compile and execute, donation,
// serialization, client create options and replicated execution.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

#include "common/error.h"
#include "pjrt/discovery.h"
#include "pjrt/tests/test_client.h"

namespace torch_tpu::pjrt {
namespace {

using hlo::ElementType;
using testing::client;

const char kAddOne[] = R"(module @t {
  func.func public @main(%a: tensor<3xf32>) -> (tensor<3xf32>) {
    %c = "stablehlo.constant"() {value = dense<1.0> : tensor<3xf32>} : () -> tensor<3xf32>
    %r = "stablehlo.add"(%a, %c) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    "func.return"(%r) : (tensor<3xf32>) -> ()
  }
})";

const char kAddOneDonated[] = R"(module @t {
  func.func public @main(%a: tensor<3xf32> {tf.aliasing_output = 0 : i32}) -> (tensor<3xf32>) {
    %c = "stablehlo.constant"() {value = dense<1.0> : tensor<3xf32>} : () -> tensor<3xf32>
    %r = "stablehlo.add"(%a, %c) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    "func.return"(%r) : (tensor<3xf32>) -> ()
  }
})";

const hlo::TensorType kVec3{ElementType::F32, {3}};

std::vector<float> read(const Buffer& b) {
  std::vector<float> v(b.type().numel());
  b.to_host(v.data());
  return v;
}

TEST(Plugin, ReportsApiVersion) {
  const Plugin& p = client().plugin();
  EXPECT_EQ(p.api_major(), PJRT_API_MAJOR);
  EXPECT_GT(p.api_minor(), 0);
  EXPECT_NE(p.identity().find(testing::plugin_path()), std::string::npos);
}

// The CPU plugin reports the StableHLO versions its parser reads; custom
// kernels check JAX's modules against them.
TEST(Plugin, ReportsItsStablehloWindow) {
  auto w = client().plugin().stablehlo_window();
  ASSERT_TRUE(w.has_value());
  auto numeric = [](const std::string& v) {
    int dots = 0;
    for (char c : v) {
      if (c == '.') ++dots;
      else if (c < '0' || c > '9') return false;
    }
    return dots == 2;
  };
  EXPECT_TRUE(numeric(w->minimum)) << w->minimum;
  EXPECT_TRUE(numeric(w->current)) << w->current;
  EXPECT_NE(w->minimum, w->current);
}

TEST(Plugin, MissingPathNamesThePath) {
  try {
    Plugin::load({"/nonexistent/plugin.so", "test"});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/plugin.so"), std::string::npos);
  }
}

TEST(Plugin, LibraryWithoutGetPjrtApiIsRefused) {
  try {
    Plugin::load({"libm.so.6", "test"});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("libm.so.6"), std::string::npos);
    EXPECT_NE(msg.find("not a PJRT plugin"), std::string::npos);
  }
}

TEST(Discovery, OverrideWins) {
  PluginChoice c = discover_plugin(testing::plugin_path(), {});
  EXPECT_EQ(c.path, testing::plugin_path());
  EXPECT_EQ(c.reason, "TORCH_TPU_PJRT_PLUGIN");
}

TEST(Discovery, MissingOverrideIsAnError) {
  EXPECT_THROW(discover_plugin("/no/such/plugin.so", {}), Error);
}

TEST(Discovery, FindsTheCpuPluginUnderAPackageRoot) {
  // plugin_path() is <root>/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so
  std::string path = testing::plugin_path();
  std::string root = path.substr(0, path.find("/xla_plugins/"));
  PluginChoice c = discover_plugin("", {"/definitely/not/here", root});
  EXPECT_EQ(c.reason, "xla-cpu-pjrt");
  EXPECT_EQ(c.path, path);
}

TEST(Discovery, NothingFoundListsWhereItLooked) {
  try {
    discover_plugin("", {"/definitely/not/here"});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/definitely/not/here"), std::string::npos);
  }
}

TEST(Client, DescribesItsDevices) {
  EXPECT_GE(client().device_count(), 1);
  EXPECT_EQ(client().platform_name(), "cpu");
  DeviceInfo info = client().device_info(0);
  EXPECT_FALSE(info.kind.empty());
  EXPECT_THROW(client().device_info(client().device_count()), Error);
}

TEST(Buffer, RoundTripsThroughTheDevice) {
  std::vector<float> host{1.5f, -2.0f, 3.25f};
  auto b = client().from_host(host.data(), kVec3);
  b->await_ready();
  EXPECT_EQ(read(*b), host);
  EXPECT_FALSE(b->is_deleted());
}

TEST(Executable, CompilesAndRuns) {
  auto exe = client().compile(kAddOne, {kVec3});
  std::vector<float> host{1, 2, 3};
  auto in = client().from_host(host.data(), kVec3);
  auto out = exe->execute({in.get()});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(read(*out[0]), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(read(*in), host);  // not donated: the input survives
}

TEST(Executable, InvalidProgramIsAnErrorNotACrash) {
  EXPECT_THROW(client().compile("module { this is not mlir }", {kVec3}), Error);
}

TEST(Executable, DonatedInputIsConsumed) {
  auto exe = client().compile(kAddOneDonated, {kVec3});
  std::vector<float> host{1, 2, 3};
  auto in = client().from_host(host.data(), kVec3);
  auto out = exe->execute({in.get()}, {true});
  EXPECT_EQ(read(*out[0]), (std::vector<float>{2, 3, 4}));
  EXPECT_TRUE(in->is_deleted());
}

TEST(Executable, NonDonatedAliasedInputSurvives) {
  auto exe = client().compile(kAddOneDonated, {kVec3});
  std::vector<float> host{1, 2, 3};
  auto in = client().from_host(host.data(), kVec3);
  auto out = exe->execute({in.get()}, {false});
  EXPECT_EQ(read(*out[0]), (std::vector<float>{2, 3, 4}));
  EXPECT_FALSE(in->is_deleted());
  EXPECT_EQ(read(*in), host);
}

TEST(Executable, SerializesAndDeserializes) {
  auto exe = client().compile(kAddOne, {kVec3});
  std::string bytes = exe->serialize();
  ASSERT_FALSE(bytes.empty());
  auto again = client().deserialize(bytes, {kVec3});
  std::vector<float> host{10, 20, 30};
  auto in = client().from_host(host.data(), kVec3);
  EXPECT_EQ(read(*again->execute({in.get()})[0]), (std::vector<float>{11, 21, 31}));
}

// Each replica adds its replica id to its own argument, so the result shows
// both which arguments and which replica index each device got.
const char kAddReplicaId[] = R"(module @t {
  func.func public @main(%a: tensor<2xui32>) -> (tensor<2xui32>) {
    %id = "stablehlo.replica_id"() : () -> tensor<ui32>
    %b = "stablehlo.broadcast_in_dim"(%id) {broadcast_dimensions = array<i64>} : (tensor<ui32>) -> tensor<2xui32>
    %r = "stablehlo.add"(%a, %b) : (tensor<2xui32>, tensor<2xui32>) -> tensor<2xui32>
    "func.return"(%r) : (tensor<2xui32>) -> ()
  }
})";

Client& three_device_client() {
  static Client* c = new Client(Plugin::load(PluginChoice{testing::plugin_path(), "test"}),
                                CreateOptions{{{"cpu_device_count", 3}}});
  return *c;
}

TEST(Client, CreateOptionsReachThePlugin) {
  Client& c = three_device_client();
  EXPECT_EQ(c.device_count(), 3);
  std::set<int> ids;
  for (int d = 0; d < 3; ++d) ids.insert(c.device_info(d).id);
  EXPECT_EQ(ids.size(), 3u);
}

// The runtime's client: the count reaches the CPU plugin both when it was
// discovered and when TORCH_TPU_PJRT_PLUGIN names it (the reason "test" here,
// which create_client learns from the client's platform name).
TEST(Client, RuntimeClientHasTheCpuDevicesAskedFor) {
  std::string path = testing::plugin_path();
  for (const char* reason : {"xla-cpu-pjrt", "test"}) {
    for (int64_t n : {1, 2}) {
      auto c = create_client(Plugin::load(PluginChoice{path, reason}), n);
      EXPECT_EQ(c->device_count(), n) << reason;
      EXPECT_EQ(c->platform_name(), "cpu");
    }
  }
}

// kAddReplicaId on `n` replicas of `c`, replica r given {100r, 100r + 1} on
// device r: each result and the device it lands on are checked. Returns the
// executable and its argument lists.
struct ReplicatedRun {
  std::unique_ptr<Executable> exe;
  std::vector<std::unique_ptr<Buffer>> ins;
  std::vector<std::vector<const Buffer*>> args;
};

ReplicatedRun run_add_replica_id(Client& c, uint32_t n) {
  const hlo::TensorType vec2{ElementType::U32, {2}};
  ReplicatedRun run{c.compile_replicated(kAddReplicaId, {vec2}, static_cast<int>(n)), {}, {}};
  EXPECT_EQ(run.exe->num_replicas(), static_cast<int>(n));
  for (uint32_t r = 0; r < n; ++r) {
    std::vector<uint32_t> host{100 * r, 100 * r + 1};
    run.ins.push_back(c.from_host(host.data(), vec2, static_cast<int>(r)));
    run.args.push_back({run.ins.back().get()});
  }
  auto outs = run.exe->execute_replicated(run.args);
  EXPECT_EQ(outs.size(), n);
  for (uint32_t r = 0; r < n && r < outs.size(); ++r) {
    std::vector<uint32_t> got(2);
    outs[r][0]->to_host(got.data());
    EXPECT_EQ(got, (std::vector<uint32_t>{101 * r, 101 * r + 1})) << "replica " << r;
    EXPECT_EQ(c.device_of(*outs[r][0]), static_cast<int>(r)) << "replica " << r;
  }
  return run;
}

TEST(Executable, ReplicatedRunsEveryReplicaOnItsDevice) {
  ReplicatedRun run = run_add_replica_id(three_device_client(), 3);
  // The single-device launch and a wrong number of argument lists are refused.
  EXPECT_THROW(run.exe->execute({run.ins[0].get()}), Error);
  EXPECT_THROW(run.exe->execute_replicated({run.args[0]}), Error);
}

TEST(Executable, MoreReplicasThanDevicesIsAnError) {
  EXPECT_THROW(three_device_client().compile_replicated(kAddOne, {kVec3}, 4), Error);
}

TEST(Buffer, CopiesBetweenDevicesWithoutTheHost) {
  Client& c = three_device_client();
  std::vector<float> host{4.0f, -1.5f, 0.25f};
  auto on0 = c.from_host(host.data(), kVec3, 0);
  EXPECT_EQ(c.device_of(*on0), 0);
  auto on2 = c.copy_to_device(*on0, 2);
  on0.reset();  // the copy no longer needs its source
  EXPECT_EQ(c.device_of(*on2), 2);
  EXPECT_EQ(read(*on2), host);
  EXPECT_THROW(c.copy_to_device(*on2, 3), Error);
}

// TPU_VISIBLE_CHIPS's selection (runtime/visible_chips.h): the kept devices,
// in the order given, are the client's devices 0, 1... for every call.
TEST(Client, KeepsTheDevicesAskedForInTheirOrder) {
  Client c(Plugin::load(PluginChoice{testing::plugin_path(), "test"}), CreateOptions{{{"cpu_device_count", 3}}});
  const int id0 = c.device_info(0).id, id2 = c.device_info(2).id;
  EXPECT_THROW(c.keep_devices({0, 3}), Error);
  EXPECT_THROW(c.keep_devices({1, 1}), Error);
  EXPECT_THROW(c.keep_devices({}), Error);
  EXPECT_EQ(c.device_count(), 3);  // a refused selection changes nothing
  c.keep_devices({2, 0});
  ASSERT_EQ(c.device_count(), 2);
  EXPECT_EQ(c.device_info(0).id, id2);
  EXPECT_EQ(c.device_info(1).id, id0);
  // Uploads, launches and replicas follow the new numbering.
  std::vector<float> host{1.0f, 2.0f, 3.0f};
  auto on1 = c.from_host(host.data(), kVec3, 1);
  EXPECT_EQ(c.device_of(*on1), 1);
  auto out = c.compile(kAddOne, {kVec3}, 1)->execute({on1.get()}, {}, 1);
  EXPECT_EQ(c.device_of(*out[0]), 1);
  EXPECT_EQ(read(*out[0]), (std::vector<float>{2.0f, 3.0f, 4.0f}));
  run_add_replica_id(c, 2);
  EXPECT_THROW(c.compile_replicated(kAddOne, {kVec3}, 3), Error);
}

TEST(Buffer, UploadThatKeepsReadingTheHostSignalsWhenDone) {
  std::vector<float> host{7.0f, 8.0f, 9.0f};
  std::unique_ptr<Event> host_done;
  auto b = client().from_host(host.data(), kVec3, 0, &host_done);
  if (host_done) host_done->await();  // after this the host memory is free to change
  std::vector<float> expected = host;
  host.assign(3, 0.0f);
  EXPECT_EQ(read(*b), expected);
}

}  // namespace
}  // namespace torch_tpu::pjrt
