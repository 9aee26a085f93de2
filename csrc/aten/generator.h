// The `tpu` random generator: a Philox key (the seed) and a counter offset.
// Random ops receive (seed, offset) as a program parameter and advance the
// offset by the number of values they draw, so the same seed replays the same
// stream and no executable depends on the seed.
#pragma once

#include "aten/pch.h"

namespace torch_tpu::aten {

struct TpuGenerator final : public c10::GeneratorImpl {
  explicit TpuGenerator(c10::DeviceIndex index);
  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  // Returns (seed, offset) for one op and reserves `count` values.
  std::pair<uint64_t, uint64_t> take(uint64_t count);

 private:
  TpuGenerator* clone_impl() const override;
  uint64_t seed_ = 67280421310721ULL;
  uint64_t offset_ = 0;
};

const at::Generator& default_generator(c10::DeviceIndex index);

}  // namespace torch_tpu::aten
