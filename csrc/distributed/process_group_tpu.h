// `tpu_dist`: the c10d backend of the `tpu` device.
//
// Path (see collective_path.h): the runtime's PJRT client is local to this
// process, so collectives are staged through the host and run by a
// ProcessGroupGloo created on the same store. Each collective first agrees on
// its signature across ranks (agreement.h), then copies the operands to the
// host, runs Gloo and writes the results back into the `tpu` tensors before
// returning: the returned Work is complete and carries a completed future
// whose value is the output tensors (DDP's comm hooks read it). CPU tensors
// given to a `tpu_dist` group go to Gloo directly.
#pragma once

#include <string>

#include "aten/pch.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "distributed/agreement.h"

namespace torch_tpu::distributed {

class ProcessGroupTpu final : public c10d::Backend {
 public:
  ProcessGroupTpu(c10::intrusive_ptr<c10d::Backend> host_group, int rank, int size,
                  std::chrono::milliseconds timeout);

  const std::string getBackendName() const override { return "tpu_dist"; }
  // Collectives complete before they return, so a coalesced group is just
  // the ops issued inside it, in order.
  void startCoalescing() override {}
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  std::chrono::milliseconds timeout() const { return timeout_; }
  // torch.distributed.set_timeout (TorchTitan shortens it after the first
  // step): the host group's waits and the timeout our errors name.
  void setTimeout(std::chrono::milliseconds timeout) override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // Runs `body` after the ranks agreed on `sig`, turning any failure (a Gloo
  // timeout, a closed connection) into an error naming the collective.
  template <typename F>
  c10::intrusive_ptr<c10d::Work> collective(const Signature& sig,
                                            std::vector<at::Tensor> outputs, F&& body);
  [[noreturn]] void rethrow(const std::string& collective, const std::exception& e) const;
  void check_device(const at::Tensor& t, const char* collective) const;

  void reduce_into(const at::Tensor& t, const c10d::ReduceOp& op, const char* collective);
  at::Tensor gather_stacked(const at::Tensor& t);
  void reduce_scatter_flat(const at::Tensor& output, at::Tensor flat_host,
                           const c10d::ReduceOp& op, const char* collective);
  void allgather_into(const at::Tensor& output, const at::Tensor& input);

  c10::intrusive_ptr<c10d::Backend> host_;
  std::chrono::milliseconds timeout_;
};

}  // namespace torch_tpu::distributed
