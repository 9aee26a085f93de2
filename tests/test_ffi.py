"""torch_tpu.ffi: a user's XLA FFI handler, built here with jaxlib's headers into
a shared library, as an operator on tpu against the same computation on the
CPU: every eager mode, torch.compile, captured programs, and each bad input."""
import ctypes
import os
import shutil
import subprocess
import textwrap

import numpy as np
import pytest
import torch

import torch_tpu
from torch_tpu.compile.capture import CapturedFunction

HANDLERS = textwrap.dedent("""
    #include "xla/ffi/api/ffi.h"
    namespace ffi = xla::ffi;

    // y = alpha * x; a negative alpha is the handler's error.
    static ffi::Error Scale(ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> y, float alpha) {
      if (alpha < 0) return ffi::Error::InvalidArgument("alpha must not be negative");
      for (size_t i = 0; i < x.element_count(); ++i) y->typed_data()[i] = alpha * x.typed_data()[i];
      return ffi::Error::Success();
    }
    XLA_FFI_DEFINE_HANDLER_SYMBOL(scale, Scale,
        ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::F32>>().Attr<float>("alpha"));

    // (sum over the last dim, a + offset) of an f32 matrix and an i64 offset.
    static ffi::Error RowSums(ffi::Buffer<ffi::F32> a, ffi::ResultBuffer<ffi::F32> sums,
                              ffi::ResultBuffer<ffi::F32> shifted, int64_t offset) {
      auto dims = a.dimensions();
      int64_t rows = dims[0], cols = dims[1];
      for (int64_t r = 0; r < rows; ++r) {
        float s = 0;
        for (int64_t c = 0; c < cols; ++c) {
          float v = a.typed_data()[r * cols + c];
          s += v;
          shifted->typed_data()[r * cols + c] = v + float(offset);
        }
        sums->typed_data()[r] = s;
      }
      return ffi::Error::Success();
    }
    XLA_FFI_DEFINE_HANDLER_SYMBOL(row_sums, RowSums,
        ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::F32>>()
            .Attr<int64_t>("offset"));
""")


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    import jaxlib  # the headers' home (requirements.txt installs it)
    include = os.path.join(os.path.dirname(jaxlib.__file__), "include")
    compiler = shutil.which("g++") or shutil.which("c++")
    assert compiler, "a C++ compiler builds the extension itself; none found"
    folder = tmp_path_factory.mktemp("ffi")
    (folder / "handlers.cc").write_text(HANDLERS)
    out = folder / "libhandlers.so"
    subprocess.run([compiler, "-std=c++17", "-O2", "-shared", "-fPIC", "-w", f"-I{include}",
                    str(folder / "handlers.cc"), "-o", str(out)], check=True)
    torch_tpu.ffi.register_ffi_target("test_scale", torch_tpu.ffi.load_handler(out, "scale"))
    torch_tpu.ffi.register_ffi_target("test_row_sums", torch_tpu.ffi.load_handler(out, "row_sums"))
    return out


@pytest.fixture(scope="module")
def scale(library):
    return torch_tpu.ffi.ffi_op("test_ffi::scale", "test_scale", lambda x: x, attributes={"alpha": np.float32(2.5)},
                                nargs=1)


@pytest.fixture(scope="module")
def row_sums(library):
    def results(a):
        dtype, (rows, cols) = a
        return [(dtype, (rows,)), (dtype, (rows, cols))]
    return torch_tpu.ffi.ffi_op("test_ffi::row_sums", "test_row_sums", results, attributes={"offset": 3})


def reference(x):
    return 2.5 * x


@pytest.mark.parametrize("mode", ["strict", "debug", "defer_and_fuse"])
def test_handler_runs_in_every_eager_mode(scale, row_sums, mode):
    x = torch.randn(4, 6)
    with torch_tpu.eager_mode(mode):
        y = scale(x.to("tpu").relu()) + 1          # between lowered ops: fused with them under defer_and_fuse
        sums, shifted = row_sums(y)
    torch.testing.assert_close(y.cpu(), reference(x.relu()) + 1)
    torch.testing.assert_close(sums.cpu(), (reference(x.relu()) + 1).sum(1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(shifted.cpu(), reference(x.relu()) + 4)


def test_one_program_per_signature(scale):
    for n in (3, 5, 3):
        x = torch.randn(n)
        torch.testing.assert_close(scale(x.to("tpu")).cpu(), reference(x))
    assert len(scale._modules) >= 2


def test_compiled_and_captured(scale, row_sums, fresh_dynamo):
    def f(x):
        s, _ = row_sums(scale(x).tanh())
        return s * 2

    x = torch.randn(3, 5)
    expected = (reference(x).tanh().sum(1)) * 2
    compiled = torch.compile(f, backend="tpu", fullgraph=True)   # fullgraph: the op is no graph break
    torch.testing.assert_close(compiled(x.to("tpu")).cpu(), expected, rtol=1e-5, atol=1e-5)
    captured = CapturedFunction(lambda t: [f(t)], "ffi test")
    for _ in range(2):
        torch.testing.assert_close(captured([x.to("tpu")])[0].cpu(), expected, rtol=1e-5, atol=1e-5)


def test_a_failing_handler_is_the_ops_exception(library):
    bad = torch_tpu.ffi.ffi_op("test_ffi::negative", "test_scale", lambda x: x, attributes={"alpha": np.float32(-1)},
                               nargs=1)
    y = bad(torch.ones(3, device="tpu"))
    with pytest.raises(RuntimeError, match="test_ffi::negative.*alpha must not be negative"):
        y.cpu()
    assert torch.equal((torch.ones(2, device="tpu") * 3).cpu(), torch.full((2,), 3.0))  # the process goes on


def test_registration_is_idempotent_and_guards_its_names(library):
    handler = torch_tpu.ffi.load_handler(library, "scale")
    torch_tpu.ffi.register_ffi_target("test_scale", handler)             # again: nothing happens
    address = ctypes.cast(handler, ctypes.c_void_p).value
    torch_tpu.ffi.register_ffi_target("test_scale", address)             # an int address is the same handler
    with pytest.raises(ValueError, match="registered already, with another handler"):
        torch_tpu.ffi.register_ffi_target("test_scale", torch_tpu.ffi.load_handler(library, "row_sums"))
    with pytest.raises(FileNotFoundError, match="no shared library at '/nonexistent/libx.so'"):
        torch_tpu.ffi.load_handler("/nonexistent/libx.so", "scale")
    with pytest.raises(ValueError, match="has no symbol 'not_there'"):
        torch_tpu.ffi.load_handler(library, "not_there")
    with pytest.raises(TypeError, match="ctypes function, a PyCapsule or an address"):
        torch_tpu.ffi.register_ffi_target("test_other", "scale")
    with pytest.raises(ValueError, match="target name"):
        torch_tpu.ffi.register_ffi_target("bad name!", handler)


def test_bad_calls_are_clear(scale, library):
    with pytest.raises(RuntimeError, match="test_ffi::scale: the kernel runs on tpu"):
        scale(torch.ones(3))
    with pytest.raises(TypeError, match="expected 1 tensor arguments, got 2"):
        scale(torch.ones(3, device="tpu"), torch.ones(3, device="tpu"))
    with pytest.raises(TypeError, match="attribute 'alpha' is list"):
        torch_tpu.ffi.ffi_op("test_ffi::bad_attr", "test_scale", lambda x: x, attributes={"alpha": [1.0]})
    with pytest.raises(ValueError, match="must be finite"):
        torch_tpu.ffi.ffi_op("test_ffi::inf_attr", "test_scale", lambda x: x, attributes={"alpha": float("inf")})
    unknown = torch_tpu.ffi.ffi_op("test_ffi::unknown", "no_such_target", lambda x: x, nargs=1)
    with pytest.raises(ValueError, match="No FFI handler registered for no_such_target"):
        unknown(torch.ones(2, device="tpu"))
    shapeless = torch_tpu.ffi.ffi_op("test_ffi::shapeless", "test_scale", lambda x: "nope", nargs=1)
    with pytest.raises(TypeError, match=r"result_types must give \[\(dtype, shape\), ...\]"):
        shapeless(torch.ones(2, device="tpu"))


def test_platform_names_the_handlers_platform():
    assert torch_tpu.ffi.platform() == {"cpu": "Host", "cuda": "CUDA"}[torch_tpu.platform()["platform_name"]]
