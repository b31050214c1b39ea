# dmlnb — two commands do everything on a fresh machine:
#   make book   create the environment, execute every notebook (papermill, default profile), build the HTML book
#   make test   create the environment, lint (ruff check, ruff format --check), run the unit tests
#               and the notebook tests (smoke profile)

PYTHON  ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
PROFILE ?= default
# With RETRAIN=1 (retrain every run) or TRAIN=1 (train the runs whose records are missing or
# stale), `make notebooks` first trains each chapter's runs in PROCESSES processes (python -m dmlnb
# train). The render after it (papermill in place) never retrains: it reloads the records the pass
# wrote. Without either, the render alone reloads the committed records (and trains, in one
# process, only what is missing).
PROCESSES ?= 2
# `make test` runs tests/ in TEST_PROCESSES pytest workers (pytest-xdist; each keeps
# OMP_NUM_THREADS threads, so the re-render test's numbers round as a render alone does, and
# OMP_WAIT_POLICY=passive lets the threads that outnumber the cores sleep instead of spinning),
# then nbval over notebooks/ in one process: a notebook's cells depend on each other, and on the
# records tests/test_notebooks.py's smoke run of it hands to nbval's results folder.
TEST_PROCESSES ?= 2
RETRAIN ?=
TRAIN ?=
TRAIN_FLAGS := --processes $(PROCESSES) --profile $(PROFILE) $(if $(RETRAIN),--retrain)
# Omniglot's minimal splits live in the data root; ../shared/data is used when it exists.
DMLNB_DATA ?= $(if $(wildcard ../shared/data),$(abspath ../shared/data),)
export DMLNB_DATA
export OMP_NUM_THREADS ?= 2
export PYTHONHASHSEED ?= 0

# the protocol chapter last: it pools the run records of every other chapter (the optimism of
# test-set selection), so it is trained after them
PROTOCOL  := notebooks/00_protocol.ipynb
CHAPTERS  := $(filter-out $(PROTOCOL),$(sort $(wildcard notebooks/*.ipynb)))
NOTEBOOKS := $(CHAPTERS) $(PROTOCOL)
# The renders (papermill in place) run PROCESSES at a time: most of a render is one Python thread,
# so one at a time leaves a core idle. Each keeps OMP_NUM_THREADS threads, as a render alone has
# (a render's own evaluations round the same way, whatever else runs), and OMP_WAIT_POLICY=passive
# makes threads that outnumber the cores sleep instead of spinning. A render's cell outputs stay
# in the notebook (papermill prints a failing cell's error). After a training pass every
# record exists and all six render together; otherwise a render may train a missing run, so the
# protocol chapter, which pools every chapter's records, renders after the others.
RENDER_TOGETHER := $(if $(RETRAIN)$(TRAIN),$(NOTEBOOKS),$(CHAPTERS))
RENDER_AFTER    := $(if $(RETRAIN)$(TRAIN),,$(PROTOCOL))
PAPERMILL = DMLNB_PROGRESS=0 OMP_WAIT_POLICY=passive $(BIN)/papermill -k python3 --cwd notebooks -p profile $(PROFILE) --no-progress-bar
RENDER     = sh -c 'echo "papermill $$0 (profile=$(PROFILE))"; $(PAPERMILL) "$$0" "$$0" > /dev/null' {}
ENV_STAMP := $(VENV)/.dmlnb-env

.PHONY: env test book notebooks html clean help

help:
	@echo "make book   # environment + run notebooks (PROFILE=$(PROFILE), RETRAIN=1 to retrain every run or TRAIN=1 to train missing ones first, in PROCESSES=$(PROCESSES) processes) + HTML book in _build/html"
	@echo "make test   # environment + ruff (lint, format check) + pytest (unit tests, notebooks at the smoke profile via papermill and nbval)"

env: $(ENV_STAMP)

$(ENV_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[book,test]"
	touch $@

test: env
	$(BIN)/ruff check . && $(BIN)/ruff format --check .
	DMLNB_PROFILE=smoke OMP_WAIT_POLICY=passive $(BIN)/python -m pytest tests -p no:cacheprovider -n $(TEST_PROCESSES) --durations=20
	DMLNB_PROFILE=smoke $(BIN)/python -m pytest notebooks --nbval-lax -p no:cacheprovider

notebooks: env
	@if [ -n "$(RETRAIN)$(TRAIN)" ]; then for nb in $(NOTEBOOKS); do \
		echo "python -m dmlnb train $$nb $(TRAIN_FLAGS)"; \
		$(BIN)/python -m dmlnb train "$$nb" $(TRAIN_FLAGS) || exit 1; \
	done; fi
	@printf '%s\n' $(RENDER_TOGETHER) | xargs -P $(PROCESSES) -I {} $(RENDER)
	@printf '%s\n' $(RENDER_AFTER) | xargs -I {} $(RENDER)

html: env
	$(BIN)/jupyter-book build . --builder html --warningiserror --keep-going

book: notebooks html
	@echo "book: open _build/html/index.html"

clean:
	rm -rf _build
