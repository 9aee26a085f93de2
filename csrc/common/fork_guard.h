// Fork safety. A PJRT client does not survive fork(): the child has a copy
// of its memory but none of its threads (the plugin's thread pools, our
// compile and release workers), so the first call that waits for one of
// them hangs forever. Once the runtime has started, a pthread_atfork child
// handler marks every forked child "bad": there, anything that would reach
// the plugin raises a RuntimeError naming the 'spawn' start method (as CUDA
// does), and frees that would call into the plugin are skipped (the child's
// copy of that memory dies with it). A child that never touches tpu runs
// normally, DataLoader workers included (torch.tpu._is_in_bad_fork() tells
// torch.manual_seed to leave tpu alone there).
#pragma once

namespace torch_tpu {

// Called once the runtime has created its PJRT client.
void arm_fork_guard();
// In a child forked after the runtime started.
bool in_bad_fork();
// Throws torch_tpu::Error (RuntimeError) in such a child.
void check_not_forked();

}  // namespace torch_tpu
