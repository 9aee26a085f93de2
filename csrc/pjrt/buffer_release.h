// Destroying a PJRT buffer off the calling thread.
//
// PJRT_Buffer_Destroy waits for the computations still using the buffer (the
// XLA CPU plugin blocks until an execution that reads it has finished). Eager
// code drops tensors right after their last use -- an op's dead input, the
// parameters of a graph just launched -- so destroying them in place made the
// host wait for the device at almost every op and undid asynchronous
// execution. Destroys are therefore queued and run by one thread of their own;
// nothing else about a buffer changes, since its owner has let go of it.
#pragma once

#include <cstddef>

#include "pjrt/plugin.h"

namespace torch_tpu::pjrt {

// Queues `buffer` (of `nbytes`) for PJRT_Buffer_Destroy on the release
// thread, which runs once a batch of buffers or of bytes is waiting.
void release_buffer(const Api* api, PJRT_Buffer* buffer, size_t nbytes);

// Returns once every buffer queued so far has been destroyed (synchronize
// uses it, so that memory is back when it returns).
void drain_buffer_releases();

}  // namespace torch_tpu::pjrt
