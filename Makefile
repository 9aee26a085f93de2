# The README's commands: `make demo` and `make test`. Each installs what it
# needs (Debian and PyPI packages, then the extension) on a fresh machine.
PYTHON ?= python3
BUILD_LOCK = /tmp/torch_tpu_build.lock

.PHONY: install deps build test test-cpp test-py vllm-env test-vllm test-vllm-fast helion-env test-helion test-helion-fast ray-env test-ray test-ray-fast test-dist4 test-faults test-faults-full test-docs demo bench clean titan-env titan-debug

deps:
	bash scripts/install_deps.sh

# Configure and build both the extension and the C++ tests (serialized: the
# machine is small and several people may build at once).
build:
	flock $(BUILD_LOCK) sh -c 'cmake -S . -B build -G Ninja -DPython3_EXECUTABLE=$$(command -v $(PYTHON)) >/dev/null && cmake --build build'

install: deps
	$(PYTHON) -m pip install --no-build-isolation --no-deps -e . -q
	$(MAKE) build

test-cpp: build
	cd build && ctest --output-on-failure

test-py: build
	$(PYTHON) -m pytest tests

test: install
	$(MAKE) test-cpp
	$(MAKE) test-py
	$(MAKE) test-vllm-fast
	$(MAKE) test-ray-fast
	$(MAKE) test-helion-fast

# vLLM on tpu (python/torch_tpu/integrations/vllm): vLLM lives in its own venv,
# .venv-vllm (scripts/install_vllm.sh says why); its tests are tests_vllm/, run
# with that venv's python. -fast is the CI slice (one tiny model, the server,
# paged attention, n-gram speculative decoding, the refusals of untested options,
# a tiny Qwen3-MoE and MoE routing, two LoRA adapters in a batch and refused
# adapters, online fp8_per_tensor, fp8_per_block's kernel, an fp8 KV cache, int8 MoE
# experts, W8A8-int8, W4A16 and AWQ checkpoints, two workers in
# tensor and in pipeline parallelism, Qwen3-MoE's experts split over two
# workers); test-vllm adds
# the other models (MoE too), batching, preemption,
# prefix caching, warm-up, draft models, EAGLE, quantization, structured output, LoRA
# adapters added and evicted at run time.
VLLM_PYTHON = .venv-vllm/bin/python
vllm-env: build
	PYTHON=$(PYTHON) bash scripts/install_vllm.sh

test-vllm-fast: vllm-env
	$(VLLM_PYTHON) -m pytest -q tests_vllm -m "not slow"

test-vllm: vllm-env
	$(VLLM_PYTHON) -m pytest -q tests_vllm

# Helion on tpu (torch_tpu._internal, docs/custom_kernels.md): Helion 1.5.1 in
# its own venv, .venv-helion (scripts/install_helion.sh); its tests are
# tests_helion/, run with that venv's python. -fast is the CI slice (Helion's
# examples on tpu against the CPU, the launcher contract); test-helion runs
# Helion's own Pallas suite on tpu and in interpret mode and prints both pass rates.
HELION_PYTHON = .venv-helion/bin/python
helion-env: build
	PYTHON=$(PYTHON) bash scripts/install_helion.sh

test-helion-fast: helion-env
	$(HELION_PYTHON) -m pytest -q tests_helion

test-helion: helion-env
	$(HELION_PYTHON) tests_helion/run_pallas_suite.py

# Ray Train on tpu (torch_tpu._loader, TPU_VISIBLE_CHIPS, docs/ray.md): Ray lives
# in its own venv, .venv-ray (scripts/install_ray.sh); its tests are tests_ray/,
# run with that venv's python. -fast is the CI slice (the contract with Ray's
# call sites, one 2-worker DDP run); test-ray adds FSDP2, Ray choosing tpu_dist
# itself, and tpu_dist on workers without TPU resources.
RAY_PYTHON = .venv-ray/bin/python
ray-env: build
	PYTHON=$(PYTHON) bash scripts/install_ray.sh

test-ray-fast: ray-env
	$(RAY_PYTHON) -m pytest -q tests_ray -m "not slow"

test-ray: ray-env
	$(RAY_PYTHON) -m pytest -q tests_ray

# tpu_dist with 4 processes (the default suite runs 2).
test-dist4: build
	$(PYTHON) -m pytest -q tests/distributed -m dist4

# The fault suite (tests/faults/, each fault in its own subprocess): the CI
# slice runs with every `make test`; -full adds the long trials (3000 more
# cache fuzz trials, every kind of damage to every entry).
test-faults: build
	$(PYTHON) -m pytest -q tests/faults

test-faults-full: build
	$(PYTHON) -m pytest -q tests/faults -m "faults_full or not faults_full"

# The code blocks of README.md and docs/*.md marked runnable (docs/layout.md says how
# they are marked); `make test` runs them with the rest of tests/.
test-docs: build
	$(PYTHON) -m pytest -q tests/test_docs_examples.py

demo: install
	$(PYTHON) examples/train_classifier.py
	$(PYTHON) examples/train_hf_trainer.py

# TorchTitan in its own venv ($(TITAN_VENV) or ~/.cache/torch_tpu/venv-titan);
# titan-debug: the full llama3 debug model, 20 steps, on the CPU, 1 tpu process
# and FSDP2 over 2, then resumed from step 10 (docs/torchtitan.md).
titan-env:
	bash scripts/install_titan.sh

titan-debug: titan-env build
	$(PYTHON) examples/torchtitan_llama3.py

bench: install
	$(PYTHON) benchmarks/dispatch_overhead.py

clean:
	rm -rf build python/torch_tpu/_C*.so

# ---- OpInfo coverage (tests/opinfo/): PyTorch's op database on tpu vs the CPU,
# zero CPU fallback. Reports go to tests/opinfo/report/ (git-ignored).
# opinfo-report: the CI slice of ~40 common ops x (float32, bfloat16), all samples;
# opinfo-full: every OpInfo x every dtype, OPINFO_MAX_SAMPLES samples per
# (op, dtype) (plus as many reference inputs); 0 = all of them.
OPINFO_MAX_SAMPLES ?= 4
OPINFO_MODES ?= strict,debug,defer_and_fuse
.PHONY: opinfo-report opinfo-full coverage-table
opinfo-report: build
	env -u TORCH_TPU_CPU_FALLBACK $(PYTHON) tests/opinfo/run.py --ops slice --dtypes ci --max-samples 0

opinfo-full: build
	env -u TORCH_TPU_CPU_FALLBACK $(PYTHON) tests/opinfo/run.py --ops all --dtypes all --modes $(OPINFO_MODES) --max-samples $(OPINFO_MAX_SAMPLES)

# docs/coverage.md from the registry (tests/opinfo/test_coverage_table.py fails when it is stale).
coverage-table: build
	$(PYTHON) scripts/coverage_table.py --write
