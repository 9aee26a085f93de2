#!/usr/bin/env bash
# Installs what building and testing torch_tpu needs, skipping what is there.
set -euo pipefail
need_apt=()
command -v cmake >/dev/null || need_apt+=(cmake)
command -v ninja >/dev/null || need_apt+=(ninja-build)
command -v ccache >/dev/null || need_apt+=(ccache)
command -v flock >/dev/null || need_apt+=(util-linux)
[ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi
python3 -m pip install -q -r "$(dirname "$0")/../requirements.txt"
# TorchTitan on tpu (tests/test_torchtitan.py, make titan-debug), in its own venv.
bash "$(dirname "$0")/install_titan.sh"
