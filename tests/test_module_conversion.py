"""module.to("tpu") keeps Parameter identity, as .to("cuda") does.

nn.Module._apply assigns `param.data = moved` when
torch._has_compatible_shallow_copy_type(param, moved) holds, and makes a new
Parameter per module otherwise (csrc/aten/shallow_copy.cpp says why tpu answers
yes). These tests check what follows from it: tied weights stay one tensor,
optimizers built before the move train the device tensors, hooks and
parametrizations survive, and training matches the CPU.
"""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformers
from torch.nn.utils import parametrizations, parametrize

import torch_tpu

TPU = torch.device("tpu:0")


class TiedLM(nn.Module):
    """An embedding whose matrix is also the output head (as GPT-2, T5, Llama
    with tie_word_embeddings)."""

    def __init__(self, vocab=32, dim=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.norm = nn.LayerNorm(dim)
        self.mix = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight
        self.register_buffer("scale", torch.tensor(0.5))

    def forward(self, ids):
        h = self.embed(ids)
        h = h + self.scale * torch.tanh(self.mix(self.norm(h)))
        return self.head(h)


def tied_pairs(model):
    """(name, name) of parameters that are the same object."""
    seen, pairs = {}, []
    for mod_name, mod in model.named_modules():
        for p_name, p in mod.named_parameters(recurse=False):
            name = f"{mod_name}.{p_name}" if mod_name else p_name
            if id(p) in seen:
                pairs.append((seen[id(p)], name))
            else:
                seen[id(p)] = name
    return pairs


def test_shallow_copy_type_is_compatible_between_cpu_and_tpu():
    cpu, dev = torch.ones(2), torch.ones(2, device=TPU)
    assert torch._has_compatible_shallow_copy_type(cpu, dev)
    assert torch._has_compatible_shallow_copy_type(dev, cpu)
    assert torch._has_compatible_shallow_copy_type(dev, dev.double())
    # Layouts and backends PyTorch itself keeps apart stay apart.
    assert not torch._has_compatible_shallow_copy_type(dev, torch.ones(2, device="meta"))
    assert not torch._has_compatible_shallow_copy_type(dev, torch.ones(2).to_sparse())


def test_data_assignment_moves_a_tensor_in_place():
    p = nn.Parameter(torch.arange(4.0))
    version = p._version
    p.data = p.data.to(TPU)
    assert p.device == TPU and isinstance(p, nn.Parameter) and p.requires_grad
    torch.testing.assert_close(p.cpu(), torch.arange(4.0))
    (p * p).sum().backward()
    assert p.grad.device == TPU
    torch.testing.assert_close(p.grad.cpu(), 2 * torch.arange(4.0))
    assert p._version == version  # the version counter is the Parameter's own
    p.data = p.data.cpu()
    assert p.device.type == "cpu"
    torch.testing.assert_close(p.detach(), torch.arange(4.0))


@pytest.mark.parametrize("move", ["to", "tpu", "to_dtype", "swap"])
def test_move_keeps_parameter_identity_and_ties(move):
    torch.manual_seed(0)
    model = TiedLM()
    params = list(model.parameters())
    names = [n for n, _ in model.named_parameters()]
    pairs = tied_pairs(model)
    assert pairs == [("embed.weight", "head.weight")]
    expect = {n: p.detach().clone() for n, p in model.named_parameters()}
    if move == "to":
        out = model.to("tpu")
    elif move == "tpu":
        out = model.tpu()
    elif move == "to_dtype":
        out = model.to(TPU, torch.float64)
    else:
        # PyTorch's other conversion path (swap_tensors) must keep them too.
        old = torch.__future__.get_swap_module_params_on_conversion()
        torch.__future__.set_swap_module_params_on_conversion(True)
        try:
            out = model.to("tpu")
        finally:
            torch.__future__.set_swap_module_params_on_conversion(old)
    assert out is model
    assert all(a is b for a, b in zip(params, model.parameters()))
    assert [n for n, _ in model.named_parameters()] == names
    assert tied_pairs(model) == pairs
    assert model.head.weight is model.embed.weight
    assert model.head.weight.data_ptr() == model.embed.weight.data_ptr()
    for n, p in model.named_parameters():
        assert p.device == TPU and isinstance(p, nn.Parameter) and p.is_leaf
        torch.testing.assert_close(p.detach().cpu(), expect[n].to(p.dtype))
    assert model.scale.device == TPU


def test_half_bfloat16_and_back_to_cpu_keep_identity():
    model = TiedLM().to("tpu")
    params = list(model.parameters())
    for convert, dtype in ((nn.Module.half, torch.float16), (nn.Module.bfloat16, torch.bfloat16),
                           (nn.Module.float, torch.float32)):
        convert(model)
        assert all(a is b for a, b in zip(params, model.parameters()))
        assert model.head.weight is model.embed.weight
        assert all(p.dtype == dtype and p.device == TPU for p in model.parameters())
    model.cpu()
    assert all(a is b for a, b in zip(params, model.parameters()))
    assert model.head.weight is model.embed.weight
    assert all(p.device.type == "cpu" for p in model.parameters())


def test_gradient_accumulates_once_into_the_tied_weight():
    torch.manual_seed(0)
    cpu = TiedLM()
    dev = copy.deepcopy(cpu).to("tpu")
    ids = torch.randint(0, 32, (3, 5))
    cpu(ids).square().mean().backward()
    dev(ids.to(TPU)).square().mean().backward()
    assert dev.head.weight.grad is dev.embed.weight.grad
    torch.testing.assert_close(dev.embed.weight.grad.cpu(), cpu.embed.weight.grad,
                               rtol=1e-5, atol=1e-6)


def test_grad_moves_along_with_its_parameter():
    torch.manual_seed(0)
    model = TiedLM()
    model(torch.randint(0, 32, (2, 4))).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.to("tpu")
    for n, p in model.named_parameters():
        assert p.grad.device == TPU
        torch.testing.assert_close(p.grad.cpu(), grads[n])


def test_hooks_survive_the_move():
    model = nn.Linear(3, 2)
    seen, accumulated = [], []
    model.weight.register_hook(lambda g: seen.append(g.device))
    model.weight.register_post_accumulate_grad_hook(lambda p: accumulated.append(p.grad.device))
    fwd = []
    model.register_forward_hook(lambda m, i, o: fwd.append(o.device))
    model.to("tpu")
    model(torch.randn(4, 3, device=TPU)).sum().backward()
    assert seen == [TPU] and accumulated == [TPU] and fwd == [TPU]


def test_memory_counts_a_tied_weight_once():
    torch.tpu.synchronize()
    base = torch.tpu.memory_allocated()
    model = TiedLM(vocab=1024, dim=64)
    distinct = {p.data_ptr(): p for p in model.parameters()}
    expect = sum(p.numel() * p.element_size() for p in distinct.values())
    expect += sum(b.numel() * b.element_size() for b in model.buffers())
    model.to("tpu")
    torch.tpu.synchronize()
    assert torch.tpu.memory_allocated() - base == expect
    del model


def test_state_dict_of_a_tied_model_shares_storage_as_on_cpu():
    cpu = TiedLM()
    dev = copy.deepcopy(cpu).to("tpu")
    sd_cpu, sd_dev = cpu.state_dict(), dev.state_dict()
    assert list(sd_cpu) == list(sd_dev)
    assert sd_dev["embed.weight"].data_ptr() == sd_dev["head.weight"].data_ptr()
    assert (sd_dev["embed.weight"].untyped_storage().data_ptr()
            == sd_dev["head.weight"].untyped_storage().data_ptr())
    for k in sd_cpu:
        torch.testing.assert_close(sd_dev[k].cpu(), sd_cpu[k])
    # Loading it back into a fresh tpu model keeps that model's ties.
    fresh = TiedLM().to("tpu")
    fresh.load_state_dict(sd_dev)
    assert fresh.head.weight is fresh.embed.weight
    torch.testing.assert_close(fresh.embed.weight.cpu(), cpu.embed.weight)


def test_optimizer_built_before_the_move_trains_the_device_parameters():
    torch.manual_seed(0)
    cpu = TiedLM()
    dev = copy.deepcopy(cpu)
    opt_cpu = torch.optim.AdamW(cpu.parameters(), lr=1e-2)
    opt_dev = torch.optim.AdamW(dev.parameters(), lr=1e-2)  # before the move
    dev.to("tpu")
    ids = torch.randint(0, 32, (4, 6))
    for _ in range(3):
        for model, opt, x in ((cpu, opt_cpu, ids), (dev, opt_dev, ids.to(TPU))):
            opt.zero_grad()
            F.cross_entropy(model(x).flatten(0, 1), x.flatten()).backward()
            opt.step()
    for (n, a), b in zip(cpu.named_parameters(), dev.parameters()):
        assert b.device == TPU
        torch.testing.assert_close(b.detach().cpu(), a.detach(), rtol=1e-5, atol=1e-5, msg=n)
    assert all(s["exp_avg"].device == TPU for s in opt_dev.state.values())


def _train(model, device, steps, mode=None, compiled=False):
    if device != "cpu":
        model = model.to(device)
    assert model.head.weight is model.embed.weight
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, capturable=compiled)
    g = torch.Generator().manual_seed(1)
    vocab = model.embed.num_embeddings
    batches = [torch.randint(0, vocab, (4, 8), generator=g) for _ in range(steps)]

    def step(x):
        opt.zero_grad()
        loss = F.cross_entropy(model(x).flatten(0, 1), x.flatten())
        loss.backward()
        return loss

    run = torch.compile(step, backend="tpu") if compiled else step
    losses = []
    with torch_tpu.eager_mode(mode or torch_tpu.get_eager_mode()):
        for x in batches:
            losses.append(run(x.to(device)).item())
            opt.step()
    return losses, {n: p.detach().cpu() for n, p in model.named_parameters()}


@pytest.mark.parametrize("mode", ["strict", "debug", "defer_and_fuse", "compile"])
def test_tied_model_trains_as_on_cpu(mode):
    # In float64: AdamW divides by sqrt(v), which turns float32 rounding of
    # near-zero gradient entries (a different summation order) into visible
    # weight differences; float64 leaves only the tie itself to check (before
    # the fix the two copies diverged from the second step on).
    torch.manual_seed(0)
    init = TiedLM().double()
    ref_losses, ref_w = _train(copy.deepcopy(init), "cpu", 10)
    losses, w = _train(copy.deepcopy(init), TPU, 10,
                       mode=None if mode == "compile" else mode, compiled=mode == "compile")
    torch.testing.assert_close(losses, ref_losses, rtol=1e-5, atol=1e-5)
    for n in ref_w:
        torch.testing.assert_close(w[n], ref_w[n], rtol=1e-5, atol=1e-5, msg=n)


def _tiny_gpt2():
    cfg = transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=32,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                  bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(cfg)


def _tiny_t5():
    cfg = transformers.T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                num_heads=4, dropout_rate=0.0, tie_word_embeddings=True)
    return transformers.T5ForConditionalGeneration(cfg)


def _tiny_llama():
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64,
                                   tie_word_embeddings=True)
    return transformers.LlamaForCausalLM(cfg)


@pytest.mark.parametrize("make", [_tiny_gpt2, _tiny_t5, _tiny_llama], ids=["gpt2", "t5", "llama"])
def test_hf_tied_models_stay_tied(make):
    torch.manual_seed(0)
    model = make()
    pairs = tied_pairs(model)
    assert pairs, "the config ties the input embedding and the output head"
    params = list(model.parameters())
    model.to("tpu")
    assert tied_pairs(model) == pairs
    assert all(a is b for a, b in zip(params, model.parameters()))
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    out, inp = model.get_output_embeddings().weight, model.get_input_embeddings().weight
    assert out.data_ptr() == inp.data_ptr()


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_hf_gpt2_tied_training_matches_cpu(mode):
    torch.manual_seed(0)
    init = _tiny_gpt2()
    g = torch.Generator().manual_seed(2)
    batches = [torch.randint(0, 64, (2, 16), generator=g) for _ in range(10)]

    def train(model, device):
        model.to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        losses = []
        for x in batches:
            opt.zero_grad()
            loss = model(input_ids=x.to(device), labels=x.to(device)).loss
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, model.transformer.wte.weight.detach().cpu()

    ref_losses, ref_wte = train(copy.deepcopy(init), "cpu")
    with torch_tpu.eager_mode(mode):
        losses, wte = train(copy.deepcopy(init), TPU)
    torch.testing.assert_close(losses, ref_losses, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(wte, ref_wte, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("norm", ["weight_norm", "spectral_norm"])
def test_parametrized_modules_move_and_train(norm):
    torch.manual_seed(0)
    wrap = getattr(parametrizations, norm)
    cpu = nn.Sequential(wrap(nn.Linear(6, 5)), nn.Tanh(), wrap(nn.Linear(5, 3)))
    dev = copy.deepcopy(cpu)
    originals = [p for n, p in dev.named_parameters() if "original" in n]
    opt_dev = torch.optim.SGD(dev.parameters(), lr=0.1)
    opt_cpu = torch.optim.SGD(cpu.parameters(), lr=0.1)
    dev.to("tpu")
    assert parametrize.is_parametrized(dev[0], "weight")
    assert [p for n, p in dev.named_parameters() if "original" in n] == originals
    x = torch.randn(8, 6)
    for _ in range(3):
        for model, opt, inp in ((cpu, opt_cpu, x), (dev, opt_dev, x.to(TPU))):
            opt.zero_grad()
            model(inp).square().mean().backward()
            opt.step()
    torch.testing.assert_close(dev[0].weight.detach().cpu(), cpu[0].weight.detach(),
                               rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(dev(x.to(TPU)).detach().cpu(), cpu(x).detach(),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dim", [0, -1])
def test_weight_norm_interface_matches_cpu(dim):
    torch.manual_seed(0)
    v = torch.randn(5, 4, 3, requires_grad=True)
    d = dim % v.dim()
    g = torch.randn([v.shape[i] if i == d else 1 for i in range(v.dim())], requires_grad=True)
    w, norms = torch._weight_norm_interface(v, g, d)
    grad = torch.randn_like(w)
    gv, gg = torch.autograd.grad(w, (v, g), grad)
    vt, gt = v.detach().to(TPU).requires_grad_(), g.detach().to(TPU).requires_grad_()
    wt, nt = torch._weight_norm_interface(vt, gt, d)
    gvt, ggt = torch.autograd.grad(wt, (vt, gt), grad.to(TPU))
    for got, want in ((wt, w), (nt, norms), (gvt, gv), (ggt, gg)):
        assert got.shape == want.shape and got.dtype == want.dtype
        torch.testing.assert_close(got.cpu(), want.detach(), rtol=1e-5, atol=1e-5)


def test_weight_norm_bfloat16_keeps_norms_in_float():
    v = torch.randn(4, 3).bfloat16()
    g = torch.randn(4, 1).bfloat16()
    w, norms = torch._weight_norm_interface(v, g, 0)
    wt, nt = torch._weight_norm_interface(v.to(TPU), g.to(TPU), 0)
    assert nt.dtype == norms.dtype == torch.float32
    torch.testing.assert_close(nt.cpu(), norms)
    torch.testing.assert_close(wt.cpu(), w)


def test_weight_norm_interface_refuses_a_middle_dim_as_the_cpu_does():
    v, g = torch.randn(5, 4, 3), torch.randn(1, 4, 1)
    with pytest.raises(RuntimeError, match="first or last dim"):
        torch._weight_norm_interface(v, g, 1)
    with pytest.raises(RuntimeError, match="first or last dim"):
        torch._weight_norm_interface(v.to(TPU), g.to(TPU), 1)
    # The module path takes the composite form for a middle dim, on both.
    torch.testing.assert_close(torch._weight_norm(v.to(TPU), g.to(TPU), 1).cpu(),
                               torch._weight_norm(v, g, 1))


def test_weight_norm_rejects_a_mismatched_g():
    with pytest.raises(RuntimeError, match="weight_norm"):
        torch._weight_norm_interface(torch.randn(4, 3, device=TPU),
                                     torch.randn(3, 1, device=TPU), 0)


def test_non_leaf_parameter_moves_as_with_a_compatible_conversion():
    # A tensor with history put straight into _parameters (bypassing
    # register_parameter's check). PyTorch moves it with set_data where the
    # types are compatible (CUDA, or a CPU dtype change) and asserts "param
    # must be a Parameter" where it would have to make a new one; tpu now takes
    # the first path, as CUDA does.
    for target in (torch.float64, TPU):
        model = nn.Linear(2, 2)
        bad = nn.Parameter(torch.randn(2, 2)) * 2
        model._parameters["weight"] = bad
        with pytest.warns(UserWarning, match="not a leaf"):
            model.to(target)
        assert model.weight is bad and bad.grad_fn is not None
        assert (bad.dtype if target is torch.float64 else bad.device) == target


def test_mixed_devices_inside_a_module_raise_pytorchs_error():
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    model[0].to("tpu")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        model(torch.randn(2, 3, device=TPU))
