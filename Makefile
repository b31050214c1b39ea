# dmlnb — two commands do everything on a fresh machine:
#   make book   create the environment, execute every notebook (papermill, default profile), build the HTML book
#   make test   create the environment, run the unit tests and the notebook tests (smoke profile)

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
RETRAIN ?=
TRAIN ?=
TRAIN_FLAGS := --processes $(PROCESSES) --profile $(PROFILE) $(if $(RETRAIN),--retrain)
# Omniglot's minimal splits live in the data root; ../shared/data is used when it exists.
DMLNB_DATA ?= $(if $(wildcard ../shared/data),$(abspath ../shared/data),)
export DMLNB_DATA
export OMP_NUM_THREADS ?= 2
export PYTHONHASHSEED ?= 0

# the protocol chapter last: it pools the run records of every other chapter (the optimism of
# test-set selection), so it renders after they are trained
PROTOCOL  := notebooks/00_protocol.ipynb
NOTEBOOKS := $(filter-out $(PROTOCOL),$(sort $(wildcard notebooks/*.ipynb))) $(PROTOCOL)
ENV_STAMP := $(VENV)/.dmlnb-env

.PHONY: env test book notebooks html clean help

help:
	@echo "make book   # environment + run notebooks (PROFILE=$(PROFILE), RETRAIN=1 to retrain every run or TRAIN=1 to train missing ones first, in PROCESSES=$(PROCESSES) processes) + HTML book in _build/html"
	@echo "make test   # environment + pytest (unit tests, notebooks at the smoke profile via papermill and nbval)"

env: $(ENV_STAMP)

$(ENV_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[book,test]"
	touch $@

test: env
	DMLNB_PROFILE=smoke $(BIN)/python -m pytest tests notebooks --nbval-lax -p no:cacheprovider

notebooks: env
	@for nb in $(NOTEBOOKS); do \
		if [ -n "$(RETRAIN)$(TRAIN)" ]; then \
			echo "python -m dmlnb train $$nb $(TRAIN_FLAGS)"; \
			$(BIN)/python -m dmlnb train "$$nb" $(TRAIN_FLAGS) || exit 1; \
		fi; \
		echo "papermill $$nb (profile=$(PROFILE))"; \
		DMLNB_PROGRESS=0 $(BIN)/papermill "$$nb" "$$nb" -k python3 --cwd notebooks -p profile $(PROFILE) --log-output --no-progress-bar || exit 1; \
	done

html: env
	$(BIN)/jupyter-book build . --builder html --warningiserror --keep-going

book: notebooks html
	@echo "book: open _build/html/index.html"

clean:
	rm -rf _build
