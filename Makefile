# Two commands on a fresh machine: `make run` (the service) and `make test` (the suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU wheel; override for a GPU host, e.g. `make TORCH_SPEC='torch==2.13.0' ...` with a CUDA index.
TORCH_SPEC ?= torch==2.13.0
HOST ?= 127.0.0.1
PORT ?= 5000
# constraints.txt pins every package of the install except torch (TORCH_SPEC chooses torch:
# the CPU wheel here, a CUDA build on a GPU host), so two deployments get the same versions.
# `make lock` recompiles it from pyproject.toml (Python 3.11, Linux x86_64).
LOCK_TORCH ?= torch==2.13.0+cpu
LOCK_FIND_LINKS ?= $(wildcard /opt/wheels)

.PHONY: run test install clean bench lock i18n docs

$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[server,test,docs]" -c constraints.txt
	touch $@

lock:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q "uv>=0.5"
	echo "$(LOCK_TORCH)" | $(VENV)/bin/uv pip compile pyproject.toml --extra server --extra test --extra docs --extra deploy \
	  --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	  $(if $(LOCK_FIND_LINKS),--find-links $(LOCK_FIND_LINKS)) -c /dev/stdin \
	  --no-emit-package torch --custom-compile-command "make lock" -o constraints.txt

# The interface's message catalogues (web/translations): extract the strings marked with _()
# and gettext(), merge them into the Russian and Chinese .po files, compile the .mo files
# that are committed with them. Translate new entries in the .po files, then run it again.
# The grader's feedback and the CLI's output have their own domain, `grader` (grader/translations,
# babel-grader.cfg), read with the standard library's gettext: the students' package needs no Babel.
i18n: install
	$(VENV)/bin/pybabel extract -F babel.cfg -k _l -k lazy_gettext -o web/translations/messages.pot --no-location --project attn-grader .
	$(VENV)/bin/pybabel update --no-fuzzy-matching -i web/translations/messages.pot -d web/translations
	$(VENV)/bin/pybabel compile -d web/translations --statistics
	$(VENV)/bin/pybabel extract -F babel-grader.cfg -k T -k N_ -k _ -o grader/translations/grader.pot \
	  --no-location --sort-output --project attn-grader .
	$(VENV)/bin/pybabel update --no-fuzzy-matching -D grader -i grader/translations/grader.pot -d grader/translations --ignore-obsolete
	$(VENV)/bin/pybabel compile -D grader -d grader/translations --statistics

install: $(VENV)/.installed

# The sandbox's bubblewrap and libseccomp and the CJK fonts, where this machine lets us install
# them (root with apt-get); `serve` then prints which isolation it grades with, and why.
# The student package's wheel, served by the site for the task pages' install line (attn-grader
# is not on a public index); rebuilt when the package's files change.
INSTANCE ?= $(or $(ATTN_GRADER_INSTANCE_PATH),instance)
$(INSTANCE)/dist/.built: pyproject.toml $(shell git ls-files grader questions web 2>/dev/null)
	rm -f $(INSTANCE)/dist/attn_grader-*.whl
	$(PY) -m pip wheel -q --no-deps --no-build-isolation . -w $(INSTANCE)/dist 2>/dev/null || \
	  $(PY) -m pip wheel -q --no-deps . -w $(INSTANCE)/dist
	touch $@

run: install $(INSTANCE)/dist/.built
	bash scripts/system-deps.sh service
	$(VENV)/bin/attn-grader db upgrade
	$(VENV)/bin/attn-grader serve --host $(HOST) --port $(PORT)

# pytest-xdist workers, each taking whole modules (their fixtures grade a corpus once); tests/conftest.py
# starts the longest modules first. One more worker than cores: the suite is bound by CPU, and the
# modules that wait (leases, restarts, time limits) left 7 % of it idle with a worker per core (on
# 2 cores: 783 s with 2 workers, 753 s with 3, idle 1.8 %). `make test PYTEST_WORKERS=0` runs in one process.
# The cores this process may run on (a container's or taskset's, as xdist's `auto` counts them), not the host's.
PYTEST_WORKERS ?= $(shell $(PYTHON) -c "import os; n = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count(); print((n or 1) + 1)")
test: install
	bash scripts/system-deps.sh
	bash scripts/services.sh
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The benchmarks' scaled row runs gunicorn (the deploy extra), which the tests do not need.
bench: install
	$(PY) -c "import gunicorn" 2>/dev/null || $(PY) -m pip install -q -e ".[server,deploy]" -c constraints.txt
	$(PY) benchmarks/run_all.py

# The documentation site, from docs/ and mkdocs.yml, into site/ (open site/index.html);
# `$(VENV)/bin/mkdocs serve` serves it with live reload while you write.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

clean:
	rm -rf $(VENV) build site *.egg-info .pytest_cache
