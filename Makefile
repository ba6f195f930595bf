# The two commands the README opens with: `make demo` and `make test`. Each does its own set-up.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
MODEL  ?= resnet50
OUT    ?= out/$(MODEL)

# Installs come from requirements/lock.txt (exact versions, tested); `make lock` regenerates it from
# pyproject.toml's ranges. test-latest and test-oldest run the suite on the newest releases and on the
# lowest ones pyproject.toml admits (requirements/oldest.txt), each in a venv of its own.
LOCK   := requirements/lock.txt
PIP     = $(1)/bin/python -m pip install -q --disable-pip-version-check
# torch is locked to its CPU wheel (2.13.0+cpu), which PyPI does not serve: pip finds it in the machine's
# wheel links, or in PyTorch's CPU index given here (make setup TORCH_INDEX=https://download.pytorch.org/whl/cpu).
# A pin that cannot be met fails the install rather than pulling the multi-GB CUDA build.
TORCH_INDEX ?=
TORCH_SRC   = $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))

.PHONY: demo test test-nodes setup system-deps lint typecheck bench clean lock test-latest test-oldest

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(call PIP,$(VENV)) -c $(LOCK) pip setuptools wheel

# System packages, each installed only when missing and only as root with apt-get (one `apt-get update` for
# all); otherwise a note. libpfm4 resolves libpfm4 event strings (perf::..., PMU names; loaded with ctypes
# when used). chromium + chromium-driver run the HTML report's tests in a headless browser (~25 s to install,
# ~130 MB); without them those tests skip, or fail under CI (CI set): a green CI run must have run them.
system-deps:
	@pfm=; browser=; apt_ok=; \
	$(PYTHON) -c "import ctypes.util, sys; sys.exit(0 if ctypes.util.find_library('pfm') else 1)" 2>/dev/null \
	  || pfm="libpfm4"; \
	{ command -v chromium && command -v chromedriver; } >/dev/null 2>&1 \
	  || browser="chromium chromium-driver fonts-liberation"; \
	[ -n "$$pfm$$browser" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && apt-get update -qq && apt_ok=1; \
	apt_install() { [ -n "$$apt_ok" ] \
	  && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$$@" >/dev/null; }; \
	[ -z "$$pfm" ] || apt_install $$pfm \
	  || echo "note: libpfm4 not installed (apt-get install libpfm4); libpfm4 event strings will be unavailable"; \
	[ -z "$$browser" ] || apt_install $$browser \
	  || echo "note: chromium not installed (apt-get install chromium chromium-driver); the HTML report's" \
	          "browser tests will skip (and fail under CI)"

setup: $(BIN)/python system-deps
	$(call PIP,$(VENV)) -c $(LOCK) pip setuptools wheel
	$(call PIP,$(VENV)) -c $(LOCK) $(TORCH_SRC) --no-build-isolation -e '.[test,fast,torch,tvm,ray,parquet,predict]'

demo: setup
	$(BIN)/layerperf profile $(MODEL) --out $(OUT) --report

lint: setup
	$(BIN)/ruff check src tests benchmarks

typecheck: setup
	$(BIN)/mypy

# the suite on two processes, a test file to each at a time (its module fixtures and local services stay one
# process's): on two cores half the wall time of one
test: setup lint typecheck
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

# Every node test model of the onnx package, profiled or refused in one line: counts by outcome and reason.
test-nodes: setup
	$(BIN)/python benchmarks/node_tests.py

bench: setup
	$(BIN)/python benchmarks/overhead.py

# A fresh venv with the newest releases pyproject.toml admits, frozen into the lock.
lock:
	rm -rf .venv-lock
	$(PYTHON) -m venv .venv-lock
	$(call PIP,.venv-lock) --upgrade pip setuptools wheel
	$(call PIP,.venv-lock) $(TORCH_SRC) '.[test,fast,pandas,torch,tvm,ray,parquet,predict]'
	{ echo "# Exact versions \`make setup\` installs (a constraints file). Made by \`make lock\` with"; \
	  echo "# $$(.venv-lock/bin/python -V) on $$(date -u +%Y-%m-%d); regenerate on purpose, then run make test."; \
	  .venv-lock/bin/python -m pip freeze --all --exclude layerperf; } > $(LOCK).tmp
	mv $(LOCK).tmp $(LOCK)
	rm -rf .venv-lock

test-latest: system-deps
	[ -x .venv-latest/bin/python ] || $(PYTHON) -m venv .venv-latest
	$(call PIP,.venv-latest) --upgrade pip setuptools wheel
	$(call PIP,.venv-latest) --upgrade --upgrade-strategy eager -e '.[test,fast]'
	.venv-latest/bin/python -m pip list --disable-pip-version-check 2>/dev/null | grep -E '^(onnx|onnxruntime|numpy|protobuf|isal) '
	.venv-latest/bin/python -m pytest -q -n 2 --dist loadfile

test-oldest: system-deps
	[ -x .venv-oldest/bin/python ] || $(PYTHON) -m venv .venv-oldest
	$(call PIP,.venv-oldest) -c $(LOCK) pip setuptools wheel
	$(call PIP,.venv-oldest) -c requirements/oldest.txt --no-build-isolation -e '.[test]'
	.venv-oldest/bin/python -m pip list --disable-pip-version-check 2>/dev/null | grep -E '^(onnx|onnxruntime|numpy|protobuf) '
	.venv-oldest/bin/python -m pytest -q -n 2 --dist loadfile

clean:
	rm -rf $(VENV) .venv-latest .venv-oldest .venv-lock out build *.egg-info
