# The README's commands: `make demo` and `make test`. Each installs what it
# needs (Debian and PyPI packages, then the extension) on a fresh machine.
PYTHON ?= python3
BUILD_LOCK = /tmp/torch_tpu_build.lock

.PHONY: install deps build test test-cpp test-py demo bench clean

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

demo: install
	$(PYTHON) examples/train_classifier.py

bench: install
	$(PYTHON) benchmarks/dispatch_overhead.py

clean:
	rm -rf build python/torch_tpu/_C*.so
