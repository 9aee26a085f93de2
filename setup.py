# The C++ layers are built by CMake (see CMakeLists.txt); this only drives it
# so that `pip install --no-build-isolation -e .` builds the extension.
import os
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def run(self):
        build_dir = os.path.join(ROOT, "build")
        subprocess.check_call(
            ["cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja",
             f"-DPython3_EXECUTABLE={sys.executable}"])
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "torch_tpu_C"])
        if not self.inplace:
            # A regular (non-editable) install copies the built module in.
            import glob
            import shutil
            for so in glob.glob(os.path.join(ROOT, "python", "torch_tpu", "_C*.so")):
                target = os.path.join(self.build_lib, "torch_tpu")
                os.makedirs(target, exist_ok=True)
                shutil.copy(so, target)


setup(ext_modules=[Extension("torch_tpu._C", sources=[])], cmdclass={"build_ext": CMakeBuild})
