# Two commands on a fresh machine: `make run` (the service) and `make test` (the suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU wheel; override for a GPU host, e.g. `make TORCH_SPEC='torch==2.13.0' ...` with a CUDA index.
TORCH_SPEC ?= torch==2.13.0
HOST ?= 127.0.0.1
PORT ?= 5000

.PHONY: run test install clean bench

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[test]"
	touch $@

install: $(VENV)/.installed

run: install
	$(VENV)/bin/attn-grader db upgrade
	$(VENV)/bin/attn-grader serve --host $(HOST) --port $(PORT)

test: install
	bash scripts/system-deps.sh
	bash scripts/services.sh
	$(PY) -m pytest $(PYTEST_ARGS)

bench: install
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
