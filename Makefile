# Two commands do all the set-up: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench bench-views notebooks docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/asr-batch convert data/sample --out out
	@echo
	@echo "Example: tokens per model, with how many responses lack a final usage report"
	$(BIN)/asr-batch sql out "select model, count(*) as inferences, sum(output_total_tokens) as output_tokens, count(*) filter (where not usage_complete) as incomplete from inferences group by model order by inferences desc"

# the suite in up to four processes (pytest-xdist); `$(BIN)/python -m pytest` runs it in one
test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --maxprocesses 4

bench: $(STAMP)
	$(BIN)/python bench/run.py --floor --session-mb 1024 --long-line-mb 100 --executors local,dask --codex-mb 256 --baseline 580ae78 --upgrade-from 580ae78 --final-stage-mb 256,2048,8192 --driver-mb 2048,8192
	$(BIN)/python bench/agentsview.py --size-mb 256 --corpus

# Run every notebook headless against an output folder: make notebooks OUT=asr-out [CHARTS=dir for PNGs]
OUT ?= out
CHARTS ?=
notebooks: $(STAMP)
	@for nb in $(filter-out notebooks/common.py,$(wildcard notebooks/*.py)); do \
		echo "running $$nb on $(OUT)"; \
		MPLBACKEND=Agg $(BIN)/python $$nb -- --out $(OUT) $(if $(CHARTS),--charts $(CHARTS)) || exit 1; \
	done
	@echo "every notebook ran on $(OUT)$(if $(CHARTS),; charts in $(CHARTS),; no charts saved: add CHARTS=dir to save them as PNG files)."
	@echo "Read one interactively: $(BIN)/marimo edit notebooks/usage_and_cost.py -- --out $(OUT)"

# Time every view on the 2 GiB benchmark output next to the raw JSONL (see docs/performance.md)
bench-views: $(STAMP)
	$(BIN)/python bench/views.py --size-mb 2048

clean:
	rm -rf $(VENV) out .pytest_cache

docs: $(STAMP)
	$(BIN)/python -c "from batch.schema import write_docs; write_docs('docs/asr-tables.md')"
