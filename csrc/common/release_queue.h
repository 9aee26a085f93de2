// Freeing things off the calling thread.
//
// Some frees are slow or block: PJRT_Buffer_Destroy waits for the
// computations still reading the buffer (pjrt::Buffer's destructor), and a
// deferred graph of hundreds of nodes is thousands of small frees. Their
// owners drop them on the hot path (an op's dead input, the graph a step just
// launched), where the host should be recording the next op instead. Such
// frees are queued here and run by one thread of their own, in batches; a
// task may only touch what its owner has let go of.
#pragma once

#include <cstddef>
#include <functional>

namespace torch_tpu {

// Queues `task`, which frees about `nbytes` of memory. The thread wakes once a
// batch of tasks or of bytes is waiting (or at drain).
void release_later(std::function<void()> task, size_t nbytes);

// Returns once every task queued so far has run (synchronize uses it, so
// that memory is back when it returns).
void drain_releases();

}  // namespace torch_tpu
