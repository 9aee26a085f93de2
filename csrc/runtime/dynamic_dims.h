// Dynamic dimensions: one program for every size up to a bound.
//
// A tensor whose size along one dimension changes from call to call (a KV
// cache growing by a token, generate()'s input_ids, a batch of any length)
// would cost one compilation per size. Instead its buffer is padded along
// that dimension to a bucket (the power of two from 16 above the size), and the true size
// travels as a Number parameter. The tensor, its storage and PyTorch see the
// true size; only the buffer is larger (DeviceBuffer::padding()).
//
// An op reads a padded input in one of three ways:
//  - whole, padded, when the op has a rule in lowering/padded.h and its input
//    is the whole tensor: the program depends on the bucket, not the size,
//    and its results are padded again (to the bucket of their true size);
//  - as a box of fixed extent along the padded dimension (input_ids[:, -1:]),
//    cut out at a runtime offset by a program that depends on the bucket;
//  - otherwise exact: a slice program (one per size) replaces the storage's
//    buffer by the exact one first. This is always right, never faster.
// Padding appears where a tensor is marked (torch_tpu.dynamic_dims) and where
// a cat sees a new size along its dimension for the second time (the growing
// tensors of decoding).
// In strict mode a growing tensor's next bucket compiles in the background
// before the tensor reaches it (compile_next_buckets in the .cpp).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "runtime/executor.h"
#include "runtime/padded_view.h"

namespace torch_tpu::runtime {

int64_t bucket_of(int64_t size);

// Runs `call` with its padded inputs read whole or as boxes where it can;
// nullopt when the caller should record it as it is (its remaining padded
// inputs are then read exact). `staged` keeps the storages of boxes alive
// until then.
std::optional<std::vector<std::shared_ptr<DeviceBuffer>>> run_padded(
    OpCall& call, std::vector<std::unique_ptr<Storage>>& staged);

// The view of `in` (whose storage's base is padded) as a view of the padded
// buffer itself, when it is one (runtime/padded_view.h).
std::optional<PaddedView> padded_view_of(const TensorInput& in);

// Replaces a padded base by the exact buffer.
void unpad(Storage& s);

// Copies the rows of a host array of type `logical` between layouts padded
// along `dim` to `from_extent` and `to_extent` entries (either may be the
// true size): how padding is added and dropped on the host.
void copy_rows(const void* from, int64_t from_extent, void* to, int64_t to_extent,
               const hlo::TensorType& logical, int dim);

// The tensor `src` as a new buffer padded along `dim` to the bucket of its
// size (through the host: no program is compiled for a new size).
std::shared_ptr<DeviceBuffer> pad_dimension(const TensorInput& src, int dim);
// Host data of `type` uploaded as a buffer padded along `dim`.
std::shared_ptr<DeviceBuffer> upload_padded(const void* data, const hlo::TensorType& type, int dim, int device);

}  // namespace torch_tpu::runtime
