# trainspeed: `make demo` runs a CPU sweep (installing into .venv first), `make test` runs the suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP_CACHE ?= $(HOME)/.cache/pip
export PJRT_DEVICE ?= CPU

.PHONY: venv demo test clean

$(BIN)/trainspeed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	PIP_CACHE_DIR=$(PIP_CACHE) $(BIN)/pip install --upgrade pip
	PIP_CACHE_DIR=$(PIP_CACHE) $(BIN)/pip install -r requirements.txt
	touch $@

venv: $(BIN)/trainspeed

demo: venv
	$(BIN)/trainspeed info
	$(BIN)/trainspeed bench --workload mahjong --size tiny \
		--targets cpu:eager:fp32,cpu:compile:fp32,xla:lazy:fp32 --baseline cpu:eager:fp32 \
		--batch-sizes 2^6..2^10 --threads 1 --windows 3 --min-window-s 0.3 --out results/demo.jsonl

test: venv
	$(BIN)/python -m pytest -q --durations=15 tests

clean:
	rm -rf results build *.egg-info
