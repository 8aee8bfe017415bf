# CalibMed — three commands are all a user needs:
#   make course   set up (if needed) and execute every notebook into runs/<time>-<profile>/
#   make test     set up (if needed) and run the unit tests, every notebook in the smoke profile, and the website
#                 and its live widgets in a real browser
#   make lab      set up (if needed) and open JupyterLab on notebooks/
# and for teachers: make book (the website in build/site/), make student (build/student/notebooks/).
# make test and make course first check the data (python -m helpers.course check-data): DermaMNIST is downloaded
# when missing and the network answers, else they stop with one message; make data downloads it alone.
PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
PROFILE ?=
SMOKE   := build/smoke
export MPLBACKEND ?= Agg

.PHONY: venv data smoke-data course reference-runs test lint unit notebooks-smoke lab bench clean book browser site-test \
	student clean-outputs

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --progress-bar off -e '.[dev,lab,book,scale]'
	touch $@

# A data set from its official source into the data directory ($CALIBMED_DATA_DIR, else data/): DermaMNIST by
# default; DATASET=chestmnist SIZE=64 for another MedMNIST file, DATASET=isic2018 for the ISIC 2018 archives (their
# size is said first), DATASET=chestxray14 for what to download from the NIH and where to put it.
data: venv
	$(PY) -m helpers.data fetch $(or $(DATASET),dermamnist) $(if $(SIZE),--size $(SIZE))

# Before any notebook runs: the MedMNIST files the notebooks need are downloaded when missing (else one message
# says which file, where to put it and the fetch command, and nothing runs); a notebook whose real-image data
# (ISIC 2018 for 12) are absent is named in one line and skipped (CI: CALIBMED_REQUIRE_ALL_DATA=1 forbids skips).
smoke-data: venv
	$(stage_begin)
	$(PY) -m helpers.course check-data --profile smoke
	$(stage_end)

# PROFILE=reference re-executes the committed notebooks from the stored runs in stored_runs/ (minutes);
# RETRAIN=1 trains again every stored run that older training code produced (hours on a CPU, minutes on a GPU).
course: venv
	$(PY) -m helpers.course check-data $(if $(PROFILE),--profile $(PROFILE))
	$(if $(RETRAIN),CALIBMED_RETRAIN=1) $(PY) -m helpers.course run $(if $(PROFILE),--profile $(PROFILE))

# every run the notebooks declare in the reference profile, one at a time, each stored as it finishes (resumable).
# Selectors: NOTEBOOKS="02 03", and with RETRAIN=1 ONLY="recipe=well-regularised dataset=dermamnist" (retrain only
# those older runs; the others are loaded as they are). In the background of a session: nice, one torch thread.
reference-runs: venv
	$(if $(RETRAIN),CALIBMED_RETRAIN=1) $(if $(ONLY),CALIBMED_RETRAIN_ONLY="$(ONLY)") $(PY) -m helpers.course.train_runs train --profile reference $(if $(NOTEBOOKS),--notebooks $(NOTEBOOKS)) $(if $(WORKERS),--workers $(WORKERS))

test: smoke-data lint unit notebooks-smoke site-test

# Each stage of make test prints its seconds when it ends and adds them to $(STAGE_TIMES), which .ci/run prints at
# the end (CI must stay well under 20 minutes on a 2-core machine; the unit stage is the one to watch).
STAGE_TIMES := build/stage-times.txt
stage_begin = @mkdir -p build && date +%s > build/.stage-$@
stage_end = @seconds=$$(( $$(date +%s) - $$(cat build/.stage-$@) )); echo "stage $@: $$seconds s" | tee -a $(STAGE_TIMES)

# ruff (pyflakes, pycodestyle, import order, pyupgrade, bugbear; settings in pyproject.toml) and its format check
lint: venv
	$(stage_begin)
	$(VENV)/bin/ruff check helpers tests bench scripts
	$(VENV)/bin/ruff format --check helpers tests bench scripts
	$(stage_end)

unit: venv
	$(stage_begin)
	$(PY) -m pytest tests -m "not browser"
	$(stage_end)

# papermill injects the smoke parameters, nbval (lax) executes the prepared copies and compares the cells
# marked NBVAL_CHECK_OUTPUT, then every notebook must have written its results JSON.
notebooks-smoke: venv smoke-data
	$(stage_begin)
	rm -rf $(SMOKE)
	$(PY) -m helpers.course prepare --profile smoke --out $(SMOKE)
	CALIBMED_PROGRESS=final CALIBMED_HEADLESS=1 $(PY) -m pytest --nbval-lax --nbval-current-env --nbval-cell-timeout 900 -p no:cacheprovider $(SMOKE)/notebooks
	$(PY) -m helpers.course check $(SMOKE)
	$(stage_end)

# The website: the committed, executed notebooks as they are (never re-executed), the notes in docs/, the README as
# the landing page, and the API reference generated from the docstrings of helpers/ (autosummary writes its pages
# into book/generated/, rebuilt here). -W: any warning (broken reference, missing image, unknown output, a docstring
# that is not valid reStructuredText) fails the build.
book: venv
	$(stage_begin)
	rm -rf build/site book/generated
	$(PY) -m sphinx -W --keep-going -q -b html -c book . build/site
	@echo "website: build/site/index.html"
	$(stage_end)

# Debian's Chromium for the browser test, installed once (nothing to do when it is there).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else echo "chromium is missing: run 'sudo apt-get install chromium' (Debian/Ubuntu)" >&2; exit 1; fi; }
	@chromium --version 2>/dev/null

# Every page of build/site in Chromium (console errors, figures, math, next/prev links, screenshots in
# build/site-screenshots/), then the widgets of 01, 02 and 08 moved in a live JupyterLab.
site-test: book browser
	$(stage_begin)
	CALIBMED_REQUIRE_BROWSER=1 $(PY) -m pytest -m browser -p no:cacheprovider tests/test_site.py
	$(stage_end)

# Student versions: solution cells replaced by stubs, check cells kept (helpers/course/student.py).
student: venv
	$(PY) -m helpers.course.student --out build/student

# Strip progress bars, widget state, absolute path prefixes and the execution's paths and times (metadata) from
# the committed notebooks (in place).
clean-outputs: venv
	$(PY) -m helpers.course clean-outputs

lab: venv
	$(VENV)/bin/jupyter lab notebooks/

bench: venv
	$(PY) bench/bench_training.py
	$(PY) bench/bench_memory_format.py
	$(PY) bench/bench_metrics.py
	$(PY) bench/bench_multilabel_losses.py
	$(PY) bench/bench_paired_bootstrap.py
	$(PY) bench/bench_seed_interval_coverage.py
	$(PY) bench/bench_determinism.py

clean:
	rm -rf build runs
