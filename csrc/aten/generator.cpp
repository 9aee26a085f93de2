#include "aten/generator.h"

#include <mutex>
#include <random>

#include "aten/tensor_bridge.h"
#include "runtime/runtime.h"

namespace torch_tpu::aten {

TpuGenerator::TpuGenerator(c10::DeviceIndex index)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, index),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}

void TpuGenerator::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}
void TpuGenerator::set_offset(uint64_t offset) { offset_ = offset; }
uint64_t TpuGenerator::get_offset() const { return offset_; }
uint64_t TpuGenerator::current_seed() const { return seed_; }

uint64_t TpuGenerator::seed() {
  uint64_t s = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  set_current_seed(s);
  return s;
}

// State layout: 16 bytes, seed then offset (little endian uint64), as a CPU
// uint8 tensor like CUDA's generator state.
c10::intrusive_ptr<c10::TensorImpl> TpuGenerator::get_state() const {
  at::Tensor state = at::empty({16}, at::TensorOptions().dtype(at::kByte));
  auto* p = state.data_ptr<uint8_t>();
  std::memcpy(p, &seed_, 8);
  std::memcpy(p + 8, &offset_, 8);
  return state.getIntrusivePtr();
}

void TpuGenerator::set_state(const c10::TensorImpl& state) {
  TORCH_CHECK(state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && state.numel() == 16,
              "tpu generator state must be a uint8 tensor of 16 bytes, got ", state.numel(),
              " elements of ", state.dtype());
  const auto* p = static_cast<const uint8_t*>(state.data());
  std::memcpy(&seed_, p, 8);
  std::memcpy(&offset_, p + 8, 8);
}

TpuGenerator* TpuGenerator::clone_impl() const {
  auto* g = new TpuGenerator(device().index());
  g->seed_ = seed_;
  g->offset_ = offset_;
  return g;
}

std::pair<uint64_t, uint64_t> TpuGenerator::take(uint64_t count) {
  std::pair<uint64_t, uint64_t> r{seed_, offset_};
  // Philox yields four 32-bit words per counter value.
  offset_ += (count + 3) / 4 + 1;
  return r;
}

const at::Generator& default_generator(c10::DeviceIndex index) {
  static std::mutex mu;
  static auto& gens = *new std::vector<std::unique_ptr<at::Generator>>;  // never destroyed: used during exit
  std::lock_guard<std::mutex> lock(mu);
  if (index < 0) index = static_cast<c10::DeviceIndex>(current_device());
  if (static_cast<size_t>(index) >= gens.size()) gens.resize(index + 1);
  if (!gens[index])
    gens[index] = std::make_unique<at::Generator>(at::make_generator<TpuGenerator>(index));
  return *gens[index];
}

}  // namespace torch_tpu::aten
