# CalibMed — three commands are all a user needs:
#   make course   set up (if needed) and execute every notebook into runs/<time>-<profile>/
#   make test     set up (if needed) and run the unit tests plus every notebook in the smoke profile
#   make lab      set up (if needed) and open JupyterLab on notebooks/
PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
PROFILE ?=
SMOKE   := build/smoke
export MPLBACKEND ?= Agg

.PHONY: venv course reference-runs test unit notebooks-smoke lab bench clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --progress-bar off -e '.[dev,lab]'
	touch $@

# PROFILE=reference re-executes the committed notebooks from the stored runs in stored_runs/ (minutes);
# RETRAIN=1 trains every run again instead of loading it (hours on a CPU, minutes on a GPU).
course: venv
	$(if $(RETRAIN),CALIBMED_RETRAIN=1) $(PY) -m helpers.course run $(if $(PROFILE),--profile $(PROFILE))

# every run the notebooks declare in the reference profile, one at a time, each stored as it finishes (resumable)
reference-runs: venv
	$(if $(RETRAIN),CALIBMED_RETRAIN=1) $(PY) -m helpers.suites train --profile reference $(if $(WORKERS),--workers $(WORKERS))

test: unit notebooks-smoke

unit: venv
	$(PY) -m pytest tests

# papermill injects the smoke parameters, nbval (lax) executes the prepared copies and compares the cells
# marked NBVAL_CHECK_OUTPUT, then every notebook must have written its results JSON.
notebooks-smoke: venv
	rm -rf $(SMOKE)
	$(PY) -m helpers.course prepare --profile smoke --out $(SMOKE)
	$(PY) -m pytest --nbval-lax --nbval-current-env --nbval-cell-timeout 900 -p no:cacheprovider $(SMOKE)/notebooks
	$(PY) -m helpers.course check $(SMOKE)

lab: venv
	$(VENV)/bin/jupyter lab notebooks/

bench: venv
	$(PY) bench/bench_training.py
	$(PY) bench/bench_memory_format.py
	$(PY) bench/bench_metrics.py
	$(PY) bench/bench_multilabel_losses.py
	$(PY) bench/bench_paired_bootstrap.py

clean:
	rm -rf build runs
