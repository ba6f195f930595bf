# The two commands the README opens with: `make demo` and `make test`. Each does its own set-up.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
MODEL  ?= resnet50
OUT    ?= out/$(MODEL)

.PHONY: demo test setup system-deps lint typecheck bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# libpfm4 resolves libpfm4 event strings (perf::..., PMU names); loaded with ctypes when used.
system-deps:
	@$(PYTHON) -c "import ctypes.util, sys; sys.exit(0 if ctypes.util.find_library('pfm') else 1)" 2>/dev/null \
	  || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	       && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libpfm4 >/dev/null) \
	       || echo "note: libpfm4 not installed (apt-get install libpfm4); libpfm4 event strings will be unavailable"; }

setup: $(BIN)/python system-deps
	$(BIN)/python -m pip install -q -e '.[test]'

demo: setup
	$(BIN)/layerperf profile $(MODEL) --out $(OUT)

lint: setup
	$(BIN)/ruff check src tests benchmarks

typecheck: setup
	$(BIN)/mypy

test: setup lint typecheck
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python benchmarks/overhead.py

clean:
	rm -rf $(VENV) out build *.egg-info
