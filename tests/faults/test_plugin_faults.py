"""Plugin faults: a plugin file that cannot be loaded, a library that is not
a PJRT plugin, and a plugin whose client creation fails each give a clear
RuntimeError naming the plugin, never a crash."""
import shutil
import subprocess

import pytest
import torch_tpu

USE = """
import torch, torch_tpu
try:
    (torch.ones(2, device="tpu") + 1).cpu()
    print("NO ERROR")
except RuntimeError as e:
    print("RuntimeError:", e)
print("available:", torch.tpu.is_available())
"""


def check(fault, plugin, *expect):
    r = fault.run(code=USE, TORCH_TPU_PJRT_PLUGIN=plugin, expect_ok=False)
    text = r.stdout + r.stderr
    assert "NO ERROR" not in text
    for e in expect:
        assert e in text, text[-3000:]
    return r


def test_unloadable_plugin(fault):
    bad = fault.tmp / "garbage.so"
    bad.write_bytes(b"this is not a shared library\n" * 10)
    check(fault, bad, "cannot load PJRT plugin", str(bad))


def test_library_without_the_pjrt_entry_point(fault):
    import ctypes.util
    libm = ctypes.util.find_library("m")
    path = subprocess.run(["sh", "-c", f"ldconfig -p | grep -m1 '{libm} ' | sed 's/.*=> //'"],
                          capture_output=True, text=True).stdout.strip()
    assert path
    check(fault, path, "is not a PJRT plugin", "GetPjrtApi")


FAILING_CLIENT = r"""
#include <dlfcn.h>
#include <string.h>
#include "pjrt_c_api.h"
static PJRT_Api api;
static const PJRT_Api* real;
// The real plugin refuses a malformed argument struct: a genuine PJRT error.
static PJRT_Error* create(PJRT_Client_Create_Args* args) {
  PJRT_Client_Create_Args bad = *args;
  bad.struct_size = 1;
  return real->PJRT_Client_Create(&bad);
}
extern "C" const PJRT_Api* GetPjrtApi() {
  void* h = dlopen(REAL_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  real = ((const PJRT_Api* (*)())dlsym(h, "GetPjrtApi"))();
  memcpy(&api, real, real->struct_size < sizeof api ? real->struct_size : sizeof api);
  api.PJRT_Client_Create = create;
  return &api;
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the failing plugin")
def test_plugin_failing_at_client_creation(fault):
    import os
    real = torch_tpu.platform()["plugin_path"]
    src = fault.tmp / "failing.cpp"
    src.write_text(FAILING_CLIENT)
    so = fault.tmp / "failing_client.so"
    include = os.path.join(os.path.dirname(real), "include")
    subprocess.run(["g++", "-shared", "-fPIC", "-O1", f"-I{include}", f'-DREAL_PLUGIN="{real}"',
                    str(src), "-o", str(so), "-ldl"], check=True)
    r = check(fault, so, "Client_Create")
    assert "available: False" in r.stdout
