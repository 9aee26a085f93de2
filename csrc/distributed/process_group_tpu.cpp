#include "distributed/process_group_tpu.h"

#include <ATen/core/ivalue.h>

#include "distributed/host_reduce.h"
#include "distributed/staging.h"

namespace torch_tpu::distributed {

namespace {

using R = c10d::ReduceOp::RedOpType;

// Gloo's Work throws on failure; waiting here keeps the staging synchronous.
void run(const c10::intrusive_ptr<c10d::Work>& w) { w->wait(); }

c10::intrusive_ptr<c10d::Work> completed(std::vector<at::Tensor> outputs) {
  auto fut = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
  fut->markCompleted(c10::IValue(std::move(outputs)));
  return c10d::Work::create_from_future(fut);
}

// PREMUL_SUM (FSDP2 divides gradients with it): each rank scales its own
// host copy by the factor (out of place: a contiguous CPU operand is its own
// "copy", and staging memory is reused), then the ranks SUM, as NCCL does.
R premultiply(at::Tensor& host, const c10d::ReduceOp& op) {
  if (op.op_ != R::PREMUL_SUM) return op.op_;
  auto* s = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(s != nullptr, "tpu_dist: PREMUL_SUM reduce op without its factor");
  host = host.mul(s->tensor_factor.defined() ? s->tensor_factor.to(at::kCPU).item<double>()
                                       : s->double_factor);
  return R::SUM;
}

int64_t nbytes(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

at::Tensor meta_like(c10::ScalarType dtype, c10::IntArrayRef sizes) {
  return at::empty(sizes, at::TensorOptions().dtype(dtype).device(c10::kMeta));
}

// A Gloo send/recv of bytes must not outlive the host buffer: the inner Work
// holds it, so returning that Work keeps the buffer alive until waited on.
struct SendWork final : c10d::Work {
  SendWork(c10::intrusive_ptr<c10d::Work> inner, std::function<void(const std::exception&)> fail)
      : inner_(std::move(inner)), fail_(std::move(fail)) {}
  bool isCompleted() override { return inner_->isCompleted(); }
  bool isSuccess() const override { return inner_->isSuccess(); }
  bool wait(std::chrono::milliseconds timeout) override {
    try {
      return inner_->wait(timeout);
    } catch (const std::exception& e) {
      fail_(e);
      throw;
    }
  }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return inner_->getFuture(); }
  c10::intrusive_ptr<c10d::Work> inner_;
  std::function<void(const std::exception&)> fail_;
};

}  // namespace

ProcessGroupTpu::ProcessGroupTpu(c10::intrusive_ptr<c10d::Backend> host_group, int rank,
                                 int size, std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size), host_(std::move(host_group)), timeout_(timeout) {
  TORCH_CHECK(host_, "tpu_dist: no host process group to stage collectives through");
  TORCH_CHECK(host_->getRank() == rank && host_->getSize() == size,
              "tpu_dist: host group has rank ", host_->getRank(), " of ", host_->getSize(),
              ", expected ", rank, " of ", size);
}

void ProcessGroupTpu::setTimeout(std::chrono::milliseconds timeout) {
  host_->setTimeout(timeout);  // the agreement and the staged collectives both wait in Gloo
  timeout_ = timeout;
}

void ProcessGroupTpu::rethrow(const std::string& collective, const std::exception& e) const {
  std::string what = e.what();
  if (auto* ce = dynamic_cast<const c10::Error*>(&e)) what = ce->what_without_backtrace();
  if (what.rfind("tpu_dist:", 0) == 0) TORCH_CHECK(false, what);
  TORCH_CHECK(false, "tpu_dist: ", collective, " failed on rank ", getRank(), " of ", getSize(),
              " (group timeout ", timeout_.count(),
              " ms; a peer may have exited, crashed or not called it): ", what);
}

void ProcessGroupTpu::check_device(const at::Tensor& t, const char* collective) const {
  TORCH_CHECK(on_tpu(t) || t.device().is_cpu(), "tpu_dist: ", collective,
              ": expected tpu or cpu tensors, got ", t.device());
  TORCH_CHECK(!t.is_sparse(), "tpu_dist: ", collective, ": sparse tensors are not supported");
}

template <typename F>
c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::collective(const Signature& sig,
                                                           std::vector<at::Tensor> outputs,
                                                           F&& body) {
  try {
    agree(*host_, sig);
    body();
  } catch (const std::exception& e) {
    rethrow(sig.collective, e);
  }
  return completed(std::move(outputs));
}

// ---- reductions ----------------------------------------------------------

at::Tensor ProcessGroupTpu::gather_stacked(const at::Tensor& t) {
  at::Tensor bytes = host_bytes(t);
  at::Tensor all = staging_bytes(getSize() * bytes.numel());
  c10d::AllgatherOptions o;
  run(host_->_allgather_base(all, bytes, o));
  std::vector<int64_t> shape{getSize()};
  shape.insert(shape.end(), t.sizes().begin(), t.sizes().end());
  return all.view(t.scalar_type()).reshape(shape);
}

void ProcessGroupTpu::reduce_into(const at::Tensor& t, const c10d::ReduceOp& rop,
                                  const char* collective) {
  if (t.numel() == 0) return;
  at::Tensor h;
  R op = rop.op_;
  if (op == R::PREMUL_SUM) {
    h = host_copy(t);
    op = premultiply(h, rop);
  }
  if (gloo_reduces(t.scalar_type(), op)) {
    if (!h.defined()) h = host_copy(t);
    c10d::AllreduceOptions o;
    o.reduceOp = c10d::ReduceOp(op);
    std::vector<at::Tensor> v{h};
    run(host_->allreduce(v, o));
    write_back(t, h);
  } else {
    write_back(t, reduce_stacked(gather_stacked(h.defined() ? h : t), op, collective));
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::allreduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::AllreduceOptions& opts) {
  Signature sig{"all_reduce", -1, static_cast<int64_t>(opts.reduceOp.op_), tensors};
  for (const auto& t : tensors) check_device(t, "all_reduce");
  return collective(sig, tensors, [&] {
    for (const auto& t : tensors) reduce_into(t, opts.reduceOp, "all_reduce");
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  Signature sig{"all_reduce_coalesced", -1, static_cast<int64_t>(opts.reduceOp.op_), tensors};
  for (const auto& t : tensors) check_device(t, "all_reduce_coalesced");
  return collective(sig, tensors, [&] {
    bool gloo = !tensors.empty();
    for (const auto& t : tensors)
      gloo = gloo && t.numel() > 0 && t.scalar_type() == tensors[0].scalar_type() &&
             gloo_reduces(t.scalar_type(), opts.reduceOp.op_);
    if (!gloo) {
      for (const auto& t : tensors) reduce_into(t, opts.reduceOp, "all_reduce_coalesced");
      return;
    }
    // One Gloo call for the lot, which also sums in Gloo's coalesced order.
    std::vector<at::Tensor> hosts;
    for (const auto& t : tensors) hosts.push_back(host_copy(t));
    run(host_->allreduce_coalesced(hosts, opts));
    for (size_t i = 0; i < tensors.size(); ++i) write_back(tensors[i], hosts[i]);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::reduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::ReduceOptions& opts) {
  Signature sig{"reduce", opts.rootRank, static_cast<int64_t>(opts.reduceOp.op_), tensors};
  if (tensors.size() != 1) sig.local_error = "expects exactly one tensor";
  for (const auto& t : tensors) check_device(t, "reduce");
  return collective(sig, tensors, [&] {
    const at::Tensor& t = tensors[0];
    if (t.numel() == 0) return;
    const bool root = getRank() == opts.rootRank;
    if (gloo_reduces(t.scalar_type(), opts.reduceOp.op_)) {
      at::Tensor h = host_copy(t);
      c10d::ReduceOptions o;
      o.reduceOp = opts.reduceOp;
      o.rootRank = opts.rootRank;
      std::vector<at::Tensor> v{h};
      run(host_->reduce(v, o));
      if (root) write_back(t, h);
    } else {
      at::Tensor r = reduce_stacked(gather_stacked(t), opts.reduceOp.op_, "reduce");
      if (root) write_back(t, r);
    }
  });
}

void ProcessGroupTpu::reduce_scatter_flat(const at::Tensor& output, at::Tensor flat_host,
                                          const c10d::ReduceOp& rop, const char* collective) {
  if (output.numel() == 0) return;
  const R op = premultiply(flat_host, rop);
  if (gloo_reduces(output.scalar_type(), op)) {
    at::Tensor h = staging_bytes(nbytes(output)).view(flat_host.scalar_type());
    c10d::ReduceScatterOptions o;
    o.reduceOp = c10d::ReduceOp(op);
    at::Tensor in = flat_host;
    run(host_->_reduce_scatter_base(h, in, o));
    write_back(output, h.view(output.sizes()));
  } else {
    at::Tensor all = reduce_stacked(gather_stacked(flat_host), op, collective);
    write_back(output, all.narrow(0, getRank() * output.numel(), output.numel()).view(output.sizes()));
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  Signature sig{"reduce_scatter", -1, static_cast<int64_t>(opts.reduceOp.op_), outputs};
  if (outputs.size() != 1 || inputs.size() != 1 ||
      inputs[0].size() != static_cast<size_t>(getSize())) {
    sig.local_error = c10::str("expects one output and a list of ", getSize(), " inputs");
  } else {
    for (const auto& t : inputs[0])
      if (t.numel() != outputs[0].numel() || t.scalar_type() != outputs[0].scalar_type())
        sig.local_error = c10::str("every input must match the output ", describe(outputs[0]),
                                   ", got ", describe(t));
  }
  for (const auto& t : outputs) check_device(t, "reduce_scatter");
  return collective(sig, outputs, [&] {
    const at::Tensor& out = outputs[0];
    if (out.numel() > 0 && gloo_reduces(out.scalar_type(), opts.reduceOp.op_)) {
      // Gloo's list form, so the summation order is the one Gloo users get.
      std::vector<std::vector<at::Tensor>> ins(1);
      for (const auto& t : inputs[0]) ins[0].push_back(host_copy(t));
      std::vector<at::Tensor> outs{
          staging_bytes(nbytes(out)).view(out.scalar_type()).view(out.sizes())};
      run(host_->reduce_scatter(outs, ins, opts));
      write_back(out, outs[0]);
      return;
    }
    std::vector<at::Tensor> parts;
    for (const auto& t : inputs[0]) parts.push_back(host_copy(t).reshape({-1}));
    reduce_scatter_flat(outputs[0], at::cat(parts), opts.reduceOp, "reduce_scatter");
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  Signature sig{"reduce_scatter_tensor", -1, static_cast<int64_t>(opts.reduceOp.op_),
                {input, output}};
  if (input.numel() != getSize() * output.numel() || input.scalar_type() != output.scalar_type())
    sig.local_error = c10::str("input ", describe(input), " must hold ", getSize(),
                               " times the output ", describe(output));
  check_device(input, "reduce_scatter_tensor");
  return collective(sig, {output}, [&] {
    reduce_scatter_flat(output, host_copy(input).reshape({-1}), opts.reduceOp,
                        "reduce_scatter_tensor");
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  std::vector<at::Tensor> all(inputs);
  all.insert(all.end(), outputs.begin(), outputs.end());
  Signature sig{"reduce_scatter_tensor_coalesced", -1, static_cast<int64_t>(opts.reduceOp.op_),
                all};
  if (outputs.size() != inputs.size()) sig.local_error = "needs as many outputs as inputs";
  for (size_t i = 0; i < outputs.size() && i < inputs.size(); ++i)
    if (inputs[i].numel() != getSize() * outputs[i].numel())
      sig.local_error = c10::str("input ", describe(inputs[i]), " must hold ", getSize(),
                                 " times the output ", describe(outputs[i]));
  return collective(sig, outputs, [&] {
    for (size_t i = 0; i < outputs.size(); ++i)
      reduce_scatter_flat(outputs[i], host_copy(inputs[i]).reshape({-1}), opts.reduceOp,
                          "reduce_scatter_tensor_coalesced");
  });
}

// ---- data movement (as bytes) -------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::broadcast(std::vector<at::Tensor>& tensors,
                                                          const c10d::BroadcastOptions& opts) {
  Signature sig{"broadcast", opts.rootRank, -1, tensors};
  for (const auto& t : tensors) check_device(t, "broadcast");
  return collective(sig, tensors, [&] {
    for (const auto& t : tensors) {
      if (t.numel() == 0) continue;
      at::Tensor b = host_bytes(t);
      c10d::BroadcastOptions o;
      o.rootRank = opts.rootRank;
      std::vector<at::Tensor> v{b};
      run(host_->broadcast(v, o));
      if (getRank() != opts.rootRank) write_back(t, from_bytes(b, t));
    }
  });
}

void ProcessGroupTpu::allgather_into(const at::Tensor& output, const at::Tensor& input) {
  if (input.numel() == 0) return;
  at::Tensor b = host_bytes(input);
  at::Tensor all = staging_bytes(getSize() * b.numel());
  c10d::AllgatherOptions o;
  run(host_->_allgather_base(all, b, o));
  write_back(output, from_bytes(all, output));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  Signature sig{"all_gather", -1, -1, inputs};
  if (inputs.size() != 1 || outputs.size() != 1 ||
      outputs[0].size() != static_cast<size_t>(getSize())) {
    sig.local_error = c10::str("expects one input and a list of ", getSize(), " outputs");
  } else {
    for (const auto& t : outputs[0])
      if (t.numel() != inputs[0].numel() || t.scalar_type() != inputs[0].scalar_type())
        sig.local_error = c10::str("every output must match the input ", describe(inputs[0]),
                                   ", got ", describe(t));
  }
  for (const auto& t : inputs) check_device(t, "all_gather");
  std::vector<at::Tensor> flat;
  for (const auto& l : outputs) flat.insert(flat.end(), l.begin(), l.end());
  return collective(sig, flat, [&] {
    const at::Tensor& in = inputs[0];
    if (in.numel() == 0) return;
    at::Tensor b = host_bytes(in);
    at::Tensor all = staging_bytes(getSize() * b.numel());
    c10d::AllgatherOptions o;
    run(host_->_allgather_base(all, b, o));
    for (int r = 0; r < getSize(); ++r) {
      const at::Tensor& out = outputs[0][r];
      write_back(out, from_bytes(all.narrow(0, r * b.numel(), b.numel()), out));
    }
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  Signature sig{"all_gather_into_tensor", -1, -1, {input, output}};
  if (output.numel() != getSize() * input.numel() || input.scalar_type() != output.scalar_type())
    sig.local_error = c10::str("output ", describe(output), " must hold ", getSize(),
                               " times the input ", describe(input));
  check_device(input, "all_gather_into_tensor");
  return collective(sig, {output}, [&] { allgather_into(output, input); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  std::vector<at::Tensor> all(inputs);
  all.insert(all.end(), outputs.begin(), outputs.end());
  Signature sig{"all_gather_into_tensor_coalesced", -1, -1, all};
  if (outputs.size() != inputs.size()) sig.local_error = "needs as many outputs as inputs";
  for (size_t i = 0; i < outputs.size() && i < inputs.size(); ++i)
    if (outputs[i].numel() != getSize() * inputs[i].numel())
      sig.local_error = c10::str("output ", describe(outputs[i]), " must hold ", getSize(),
                                 " times the input ", describe(inputs[i]));
  return collective(sig, outputs, [&] {
    for (size_t i = 0; i < outputs.size(); ++i) allgather_into(outputs[i], inputs[i]);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  Signature sig{"all_gather_coalesced", -1, -1, inputs};
  if (outputs.size() != 1) sig.local_error = "expects one list of outputs";
  else if (outputs[0].size() != inputs.size() * getSize())
    sig.local_error = c10::str("expects ", getSize(), " outputs per input");
  std::vector<at::Tensor> flat;
  for (const auto& l : outputs) flat.insert(flat.end(), l.begin(), l.end());
  return collective(sig, flat, [&] {
    // Outputs are rank-major: rank r's copy of input i is at r * n + i.
    const size_t n = inputs.size();
    for (size_t i = 0; i < n; ++i) {
      if (inputs[i].numel() == 0) continue;
      at::Tensor b = host_bytes(inputs[i]);
      at::Tensor all = staging_bytes(getSize() * b.numel());
      c10d::AllgatherOptions o;
      run(host_->_allgather_base(all, b, o));
      for (int r = 0; r < getSize(); ++r) {
        const at::Tensor& out = outputs[0][r * n + i];
        write_back(out, from_bytes(all.narrow(0, r * b.numel(), b.numel()), out));
      }
    }
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  Signature sig{"gather", opts.rootRank, -1, inputs};
  const bool root = getRank() == opts.rootRank;
  if (inputs.size() != 1) sig.local_error = "expects exactly one input";
  else if (root && (outputs.size() != 1 || outputs[0].size() != static_cast<size_t>(getSize())))
    sig.local_error = c10::str("the root needs a list of ", getSize(), " outputs");
  else if (!root && !outputs.empty() && !outputs[0].empty())
    sig.local_error = "only the root may pass outputs";
  std::vector<at::Tensor> flat;
  for (const auto& l : outputs) flat.insert(flat.end(), l.begin(), l.end());
  return collective(sig, flat, [&] {
    at::Tensor b = host_bytes(inputs[0]);
    if (b.numel() == 0) return;
    std::vector<std::vector<at::Tensor>> outs;
    if (root) {
      outs.emplace_back();
      for (int r = 0; r < getSize(); ++r) outs[0].push_back(at::empty_like(b));
    }
    std::vector<at::Tensor> ins{b};
    c10d::GatherOptions o;
    o.rootRank = opts.rootRank;
    run(host_->gather(outs, ins, o));
    if (root)
      for (int r = 0; r < getSize(); ++r)
        write_back(outputs[0][r], from_bytes(outs[0][r], outputs[0][r]));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  Signature sig{"scatter", opts.rootRank, -1, outputs};
  const bool root = getRank() == opts.rootRank;
  if (outputs.size() != 1) sig.local_error = "expects exactly one output";
  else if (root && (inputs.size() != 1 || inputs[0].size() != static_cast<size_t>(getSize())))
    sig.local_error = c10::str("the root needs a list of ", getSize(), " inputs");
  else if (root)
    for (const auto& t : inputs[0])
      if (t.numel() != outputs[0].numel() || t.scalar_type() != outputs[0].scalar_type())
        sig.local_error = c10::str("every input must match the output ", describe(outputs[0]),
                                   ", got ", describe(t));
  return collective(sig, outputs, [&] {
    const at::Tensor& out = outputs[0];
    if (out.numel() == 0) return;
    at::Tensor b = staging_bytes(nbytes(out));
    std::vector<std::vector<at::Tensor>> ins;
    if (root) {
      ins.emplace_back();
      for (const auto& t : inputs[0]) ins[0].push_back(host_bytes(t));
    }
    std::vector<at::Tensor> outs{b};
    c10d::ScatterOptions o;
    o.rootRank = opts.rootRank;
    run(host_->scatter(outs, ins, o));
    write_back(out, from_bytes(b, out));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
    std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) {
  const int world = getSize();
  Signature sig{"all_to_all_single", -1, -1, {}};
  auto rows_of = [&](const at::Tensor& t, const std::vector<int64_t>& splits,
                     std::vector<int64_t>& rows) {
    if (t.dim() == 0) {
      sig.local_error = "tensors need at least one dimension";
    } else if (splits.empty()) {
      if (t.size(0) % world != 0)
        sig.local_error = c10::str("dimension 0 of ", describe(t), " is not divisible by ", world);
      rows.assign(world, t.size(0) / world);
    } else if (splits.size() != static_cast<size_t>(world)) {
      sig.local_error = c10::str("expects ", world, " split sizes, got ", splits.size());
    } else {
      rows = splits;
      int64_t total = 0;
      for (int64_t s : splits) total += s;
      if (total != t.size(0))
        sig.local_error = c10::str("split sizes add up to ", total, " but ", describe(t),
                                   " has ", t.size(0), " rows");
    }
  };
  rows_of(input, input_splits, sig.send_rows);
  rows_of(output, output_splits, sig.recv_rows);
  if (input.scalar_type() != output.scalar_type() ||
      (input.dim() > 0 && output.dim() > 0 && input.sizes().slice(1) != output.sizes().slice(1)))
    sig.local_error = c10::str("input ", describe(input), " and output ", describe(output),
                               " must share dtype and trailing dimensions");
  if (input.dim() > 0) sig.matching.push_back(meta_like(input.scalar_type(), input.sizes().slice(1)));
  if (!sig.local_error.empty()) sig.send_rows.clear(), sig.recv_rows.clear();
  check_device(input, "all_to_all_single");
  return collective(sig, {output}, [&] {
    const int64_t row_bytes = input.size(0) ? nbytes(input) / input.size(0)
                                            : (output.size(0) ? nbytes(output) / output.size(0) : 0);
    std::vector<int64_t> in_b, out_b;
    for (int64_t s : sig.send_rows) in_b.push_back(s * row_bytes);
    for (int64_t s : sig.recv_rows) out_b.push_back(s * row_bytes);
    at::Tensor b = input.numel() ? host_bytes(input) : at::empty({0}, at::kByte);
    at::Tensor ob = staging_bytes(nbytes(output));
    c10d::AllToAllOptions o;
    run(host_->alltoall_base(ob, b, out_b, in_b, o));
    if (output.numel()) write_back(output, from_bytes(ob, output));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::alltoall(std::vector<at::Tensor>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::AllToAllOptions& opts) {
  const int world = getSize();
  Signature sig{"all_to_all", -1, -1, {}};
  if (inputs.size() != static_cast<size_t>(world) || outputs.size() != static_cast<size_t>(world)) {
    sig.local_error = c10::str("expects ", world, " inputs and ", world, " outputs");
  } else {
    for (int r = 0; r < world; ++r) {
      sig.send_rows.push_back(inputs[r].numel());
      sig.recv_rows.push_back(outputs[r].numel());
      if (inputs[r].scalar_type() != inputs[0].scalar_type() ||
          outputs[r].scalar_type() != inputs[0].scalar_type())
        sig.local_error = "all inputs and outputs must share one dtype";
    }
    sig.matching.push_back(meta_like(inputs[0].scalar_type(), {}));
  }
  if (!sig.local_error.empty()) sig.send_rows.clear(), sig.recv_rows.clear();
  return collective(sig, outputs, [&] {
    std::vector<at::Tensor> parts;
    std::vector<int64_t> in_b, out_b;
    int64_t out_total = 0;
    for (int r = 0; r < world; ++r) {
      parts.push_back(inputs[r].numel() ? host_bytes(inputs[r]) : at::empty({0}, at::kByte));
      in_b.push_back(nbytes(inputs[r]));
      out_b.push_back(nbytes(outputs[r]));
      out_total += nbytes(outputs[r]);
    }
    at::Tensor b = at::cat(parts);
    at::Tensor ob = staging_bytes(out_total);
    c10d::AllToAllOptions o;
    // Gloo may move from the split vectors it is handed.
    std::vector<int64_t> out_splits = out_b, in_splits = in_b;
    run(host_->alltoall_base(ob, b, out_splits, in_splits, o));
    int64_t off = 0;
    for (int r = 0; r < world; ++r) {
      if (out_b[r]) write_back(outputs[r], from_bytes(ob.narrow(0, off, out_b[r]), outputs[r]));
      off += out_b[r];
    }
  });
}

// ---- point to point and barrier -----------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::send(std::vector<at::Tensor>& tensors, int dst,
                                                     int tag) {
  TORCH_CHECK(tensors.size() == 1, "tpu_dist: send expects exactly one tensor");
  try {
    // Staged now (the caller may overwrite the tensor next); Gloo sends in
    // the background so paired send/recv exchanges cannot deadlock.
    std::vector<at::Tensor> v{host_bytes(tensors[0])};
    auto inner = host_->send(v, dst, tag);
    return c10::make_intrusive<SendWork>(
        inner, [this](const std::exception& e) { rethrow("send", e); });
  } catch (const std::exception& e) {
    rethrow("send", e);
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::recv(std::vector<at::Tensor>& tensors, int src,
                                                     int tag) {
  TORCH_CHECK(tensors.size() == 1, "tpu_dist: recv expects exactly one tensor");
  const at::Tensor& t = tensors[0];
  try {
    std::vector<at::Tensor> v{staging_bytes(nbytes(t))};
    run(host_->recv(v, src, tag));
    write_back(t, from_bytes(v[0], t));
  } catch (const std::exception& e) {
    rethrow("recv", e);
  }
  return completed(tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::endCoalescing() { return completed({}); }

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::barrier(const c10d::BarrierOptions& opts) {
  Signature sig{"barrier", -1, -1, {}};
  return collective(sig, {}, [&] {
    c10d::BarrierOptions o;
    run(host_->barrier(o));
  });
}

}  // namespace torch_tpu::distributed
