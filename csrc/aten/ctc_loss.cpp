// CTC loss (aten::_ctc_loss and _ctc_loss_backward, with the lengths as int
// lists or as tensors), composed of lowered ops: the alpha (forward) and beta
// (backward) recursions of Graves et al. (2006) in log space over the
// extended label sequence l' (blanks around and between the targets), one
// small step of ops per time step. Each step updates the batch at once; a
// sequence past its input length keeps its last value. The results follow
// the CPU kernel's: the loss is -log p(target | input), the gradient is
// taken with respect to log_probs (exp(lp) - exp(log(alpha beta) + nll - lp),
// zero past a sequence's input length, zero for an infinite loss with
// zero_infinity), and log_alpha is [batch, time, 2 * max target length + 1].
//
// The lengths are read on the host (the Tensor overloads copy them there, as
// the CPU's do): they decide the extended sequence's size and the checks.
#include <ATen/TensorUtils.h>

#include <limits>

#include "aten/pch.h"

namespace torch_tpu::aten {

namespace {

constexpr const char* kChecked = "ctc_loss_allocate_outputs";
const double kNegInf = -std::numeric_limits<double>::infinity();

// The arguments both directions share, checked as the CPU checks them, and
// the extended labels built from them.
struct Ctc {
  int64_t T = 0, B = 0, S = 0;  // time steps, batch, extended length (2 * max target + 1)
  at::Tensor labels;            // [B, S] int64: l'
  at::Tensor valid;             // [B, S] bool: s < 2 * target_length + 1
  at::Tensor skip;              // [B, S] bool: alpha may come from s - 2
  at::Tensor emit;              // [T, B, S]: log_probs[t, b, l'[b, s]]
  at::Tensor input_len, target_len;  // [B, 1] int64 on the device

  Ctc(const at::Tensor& log_probs, const at::Tensor& targets, c10::IntArrayRef input_lengths,
      c10::IntArrayRef target_lengths, int64_t blank) {
    at::checkDim(kChecked, at::TensorArg(log_probs, "log_probs", 1), 3);
    TORCH_CHECK_NOT_IMPLEMENTED(log_probs.scalar_type() == at::kFloat || log_probs.scalar_type() == at::kDouble,
                                "\"ctc_loss_cpu\" not implemented for '", log_probs.scalar_type(), "'");
    T = log_probs.size(0), B = log_probs.size(1);
    int64_t classes = log_probs.size(2);
    TORCH_CHECK(blank >= 0 && blank < classes, "blank must be in label range");
    TORCH_CHECK(static_cast<int64_t>(input_lengths.size()) == B, "input_lengths must be of size batch_size");
    TORCH_CHECK(static_cast<int64_t>(target_lengths.size()) == B, "target_lengths must be of size batch_size");
    at::TensorArg targets_arg(targets, "targets", 2);
    int64_t max_target = 0, total = 0;
    for (int64_t b = 0; b < B; ++b) {
      TORCH_CHECK(target_lengths[b] >= 0, "Expected target_lengths to have value at least 0, but got value ",
                  target_lengths[b], " (while checking arguments for ", kChecked, ")");
      max_target = std::max(max_target, target_lengths[b]);
      total += target_lengths[b];
    }
    // Where each sequence's targets start in `targets`, read row-major.
    std::vector<int64_t> starts(B);
    if (targets.dim() == 1) {
      at::checkSize(kChecked, targets_arg, 0, total);
      for (int64_t b = 0, pos = 0; b < B; pos += target_lengths[b++]) starts[b] = pos;
    } else {
      at::checkSize(kChecked, targets_arg, 0, B);
      TORCH_CHECK(targets.size(1) >= max_target, "Expected tensor to have size at least ", max_target,
                  " at dimension 1, but got size ", targets.size(1), " for ", targets_arg,
                  " (while checking arguments for ", kChecked, ")");
      for (int64_t b = 0; b < B; ++b) starts[b] = b * targets.size(1);
    }
    for (int64_t b = 0; b < B; ++b) {
      TORCH_CHECK(input_lengths[b] >= 0, "Expected input_lengths to have value at least 0, but got value ",
                  input_lengths[b], " (while checking arguments for ", kChecked, ")");
      TORCH_CHECK(input_lengths[b] <= T, "Expected input_lengths to have value at most ", T, ", but got value ",
                  input_lengths[b], " (while checking arguments for ", kChecked, ")");
    }
    S = 2 * max_target + 1;
    auto device = log_probs.device();
    auto longs = at::TensorOptions().dtype(at::kLong);
    input_len = at::tensor(input_lengths.vec(), longs).view({B, 1}).to(device);
    target_len = at::tensor(target_lengths.vec(), longs).view({B, 1}).to(device);
    // The padded targets [B, max_target]: positions past a sequence's length
    // read its first target (any valid one), then are masked by `valid`.
    std::vector<int64_t> positions(B * max_target, 0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < target_lengths[b]; ++i) positions[b * max_target + i] = starts[b] + i;
    at::Tensor padded = at::full({B, max_target}, blank, longs.device(device));
    if (targets.numel() > 0 && max_target > 0)
      padded = targets.reshape({-1}).to(device, at::kLong).take(
          at::tensor(positions, longs).view({B, max_target}).to(device));
    at::Tensor blanks = at::full({B, max_target, 1}, blank, longs.device(device));
    labels = at::cat({at::cat({blanks, padded.unsqueeze(2)}, 2).view({B, 2 * max_target}),
                      at::full({B, 1}, blank, longs.device(device))}, 1);
    at::Tensor s = at::arange(S, longs.device(device)).view({1, S});
    valid = s.lt(target_len * 2 + 1);
    skip = labels.ne(blank).logical_and(labels.ne(shift(labels, 2, blank)));
    emit = log_probs.gather(2, labels.unsqueeze(0).expand({T, B, S}));
  }

  // x[:, s - k] (k > 0: from the left) or x[:, s + k] (k < 0), `fill` where
  // that falls outside.
  at::Tensor shift(const at::Tensor& x, int64_t k, double fill) const {
    int64_t n = std::min<int64_t>(std::abs(k), S);
    at::Tensor pad = at::full({B, n}, fill, x.options());
    at::Tensor kept = x.narrow(1, k > 0 ? 0 : n, S - n);
    return k > 0 ? at::cat({pad, kept}, 1) : at::cat({kept, pad}, 1);
  }

  at::Tensor neg_inf_like(const at::Tensor& x) const { return at::full_like(x, kNegInf); }

  // log(sum(exp)) of the three ways into (or out of) each position.
  static at::Tensor logsumexp3(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
    return at::logsumexp(at::stack({a, b, c}), 0);
  }
};

std::tuple<at::Tensor, at::Tensor> ctc_loss(const at::Tensor& log_probs, const at::Tensor& targets,
                                            c10::IntArrayRef input_lengths, c10::IntArrayRef target_lengths,
                                            int64_t blank, bool zero_infinity) {
  Ctc c(log_probs, targets, input_lengths, target_lengths, blank);
  at::Tensor ninf = at::full({c.B, c.S}, kNegInf, log_probs.options());
  // alpha_0: the first blank, and the first target when there is one.
  at::Tensor first_two = c.valid.logical_and(at::arange(c.S, c.labels.options()).lt(2));
  at::Tensor alpha = c.T > 0 ? at::where(first_two, c.emit[0], ninf) : ninf;
  std::vector<at::Tensor> alphas{alpha};
  for (int64_t t = 1; t < c.T; ++t) {
    at::Tensor from2 = at::where(c.skip, c.shift(alpha, 2, kNegInf), ninf);
    at::Tensor next = at::where(c.valid, Ctc::logsumexp3(alpha, c.shift(alpha, 1, kNegInf), from2) + c.emit[t], ninf);
    alpha = at::where(c.input_len.gt(t), next, alpha);
    alphas.push_back(alpha);
  }
  // log p = logaddexp(alpha[2L], alpha[2L - 1]) at each sequence's last step.
  at::Tensor last = alpha.gather(1, c.target_len * 2);
  at::Tensor before = at::where(c.target_len.gt(0), alpha.gather(1, (c.target_len * 2 - 1).clamp_min(0)),
                                c.neg_inf_like(last));
  at::Tensor log_likelihood = at::logsumexp(at::stack({last, before}), 0);
  // No input: probability 1 for an empty target, 0 otherwise.
  at::Tensor empty_input = at::where(c.target_len.eq(0), at::zeros_like(last), c.neg_inf_like(last));
  log_likelihood = at::where(c.input_len.eq(0), empty_input, log_likelihood);
  at::Tensor log_alpha = c.T > 0 ? at::stack(alphas, 1) : at::empty({c.B, 0, c.S}, log_probs.options());
  return {log_likelihood.view({c.B}).neg(), log_alpha};
}

at::Tensor ctc_loss_backward(const at::Tensor& grad, const at::Tensor& log_probs, const at::Tensor& targets,
                             c10::IntArrayRef input_lengths, c10::IntArrayRef target_lengths,
                             const at::Tensor& neg_log_likelihood, const at::Tensor& log_alpha, int64_t blank,
                             bool zero_infinity) {
  Ctc c(log_probs, targets, input_lengths, target_lengths, blank);
  if (c.T == 0 || c.B == 0) return at::zeros_like(log_probs);
  at::Tensor ninf = at::full({c.B, c.S}, kNegInf, log_probs.options());
  at::Tensor s = at::arange(c.S, c.labels.options()).view({1, c.S});
  // beta at each sequence's last step: the last blank and the last target.
  at::Tensor ends = c.valid.logical_and(s.eq(c.target_len * 2).logical_or(s.eq(c.target_len * 2 - 1)));
  at::Tensor skip_from = c.shift(c.skip.to(at::kByte), -2, 0).to(at::kBool);  // beta may come from s + 2
  at::Tensor beta = ninf;
  std::vector<at::Tensor> betas(c.T);
  for (int64_t t = c.T - 1; t >= 0; --t) {
    at::Tensor from2 = at::where(skip_from, c.shift(beta, -2, kNegInf), ninf);
    at::Tensor next = Ctc::logsumexp3(beta, c.shift(beta, -1, kNegInf), from2) + c.emit[t];
    at::Tensor start = at::where(ends, c.emit[t], ninf);
    beta = at::where(c.input_len.eq(t + 1), start, at::where(c.input_len.gt(t + 1), next, ninf));
    beta = at::where(c.valid, beta, ninf);
    betas[t] = beta;
  }
  // log(sum over s with l'[s] = k of alpha_t(s) beta_t(s)), per class k.
  at::Tensor ab = log_alpha.transpose(0, 1) + at::stack(betas);  // [T, B, S]
  at::Tensor top = ab.amax(2, /*keepdim=*/true);
  top = at::where(top.isinf(), at::zeros_like(top), top);
  at::Tensor sums = at::zeros_like(log_probs).scatter_add(2, c.labels.unsqueeze(0).expand({c.T, c.B, c.S}),
                                                          (ab - top).exp());
  at::Tensor lcab = sums.log() + top;
  at::Tensor nll = neg_log_likelihood.reshape({1, c.B, 1});
  at::Tensor g = (log_probs.exp() - (lcab + nll - log_probs).exp()) * grad.reshape({1, c.B, 1});
  at::Tensor t = at::arange(c.T, c.labels.options()).view({c.T, 1, 1});
  at::Tensor keep = t.lt(c.input_len.view({1, c.B, 1}));
  if (zero_infinity) keep = keep.logical_and(nll.isinf().logical_not());
  return at::where(keep, g, at::zeros_like(g));
}

std::vector<int64_t> host_lengths(const at::Tensor& lengths, const char* name) {
  TORCH_CHECK(at::isIntegralType(lengths.scalar_type(), /*includeBool=*/false), name, " must be integral");
  at::Tensor host = lengths.to(c10::kCPU, at::kLong).contiguous();
  return {host.const_data_ptr<int64_t>(), host.const_data_ptr<int64_t>() + host.numel()};
}

std::tuple<at::Tensor, at::Tensor> ctc_loss_tensor(const at::Tensor& log_probs, const at::Tensor& targets,
                                                   const at::Tensor& input_lengths, const at::Tensor& target_lengths,
                                                   int64_t blank, bool zero_infinity) {
  return ctc_loss(log_probs, targets, host_lengths(input_lengths, "input_lengths"),
                  host_lengths(target_lengths, "target_lengths"), blank, zero_infinity);
}

at::Tensor ctc_loss_backward_tensor(const at::Tensor& grad, const at::Tensor& log_probs, const at::Tensor& targets,
                                    const at::Tensor& input_lengths, const at::Tensor& target_lengths,
                                    const at::Tensor& neg_log_likelihood, const at::Tensor& log_alpha, int64_t blank,
                                    bool zero_infinity) {
  return ctc_loss_backward(grad, log_probs, targets, host_lengths(input_lengths, "input_lengths"),
                           host_lengths(target_lengths, "target_lengths"), neg_log_likelihood, log_alpha, blank,
                           zero_infinity);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_ctc_loss", TORCH_FN(ctc_loss));
  m.impl("_ctc_loss.Tensor", TORCH_FN(ctc_loss_tensor));
  m.impl("_ctc_loss_backward", TORCH_FN(ctc_loss_backward));
  m.impl("_ctc_loss_backward.Tensor", TORCH_FN(ctc_loss_backward_tensor));
}

}  // namespace torch_tpu::aten
