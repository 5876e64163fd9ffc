# Two commands do all set-up on a fresh machine: `make demo` (the main job) and `make test` (the test suite).
# Each creates .venv and installs the project into it when missing or when pyproject.toml changed.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export MUJOCO_GL ?= egl

.PHONY: demo test test-slow docs docs-render bench-list bench bench-quality bench-bc-vs-scratch bench-arms-tasks \
	bench-rl-budgets bench-test-suite bench-perception bench-gpu gpu-bundle lint \
	sysdeps clean

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory sysdeps
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,bench,ray,panda]'
	touch $@

# Headless OpenGL for MuJoCo: Mesa's EGL (or OSMesa). Installed with apt when missing and we are root.
sysdeps:
	@if ldconfig -p 2>/dev/null | grep -qE 'libEGL\.so\.1|libOSMesa\.so'; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libegl1 libegl-mesa0 libgl1-mesa-dri; \
	else echo "warning: no EGL/OSMesa library found; install Mesa's libegl1 and libegl-mesa0" >&2; fi

# make demo TASK=lead-inspect: the same pipeline on another task (its DAgger stage where it pays); ENCODER=on|off
# overrides the pipeline's --encoder auto.
demo: $(STAMP)
	$(BIN)/robot-rl pipeline --preset quick $(if $(TASK),--task $(TASK)) $(if $(ENCODER),--encoder $(ENCODER))

test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

# The generated docs pages and README tables, from benchmarks/results/*.json and the code; then the site.
docs-render: $(STAMP)
	$(BIN)/python docs/render_docs.py

docs: docs-render
	$(BIN)/mkdocs build --strict --site-dir site

# Every benchmark script runs through benchmarks/harness.py: `--variant NAME` is a named command line of the
# script, `make bench-list` prints them all. Results land in benchmarks/results/ in one schema.
bench-list: $(STAMP)
	$(BIN)/python benchmarks/harness.py --list

bench: $(STAMP)
	$(BIN)/python benchmarks/env_step.py --variant all

# What the README says BC and the demo achieve: the demo from a fresh clone and the BC recipe.
bench-quality: $(STAMP)
	$(BIN)/python benchmarks/quick_demo.py --variant fresh-clone
	$(BIN)/python benchmarks/bc_quality.py --variant recipe

bench-bc-vs-scratch: $(STAMP)
	$(BIN)/python benchmarks/bc_vs_scratch.py --variant few-bc
	$(BIN)/python benchmarks/bc_vs_scratch.py --variant few-scratch
	$(BIN)/python benchmarks/ppo_throughput.py --variant few
	$(BIN)/python benchmarks/bc_vs_scratch.py --variant cpu
	$(BIN)/python benchmarks/finetune_ablation.py --variant all

# Arms and tasks: BC on the Panda and on the lead task, PPO on the lead task, and the lead start as PPO samples it.
bench-arms-tasks: $(STAMP)
	$(BIN)/python benchmarks/bc_quality.py --variant panda
	$(BIN)/python benchmarks/bc_quality.py --variant lead-inspect
	$(BIN)/python benchmarks/bc_vs_scratch.py --variant lead-encoder-bc
	$(BIN)/python benchmarks/sampled_start.py --variant lead-flat
	$(BIN)/python benchmarks/quick_demo.py --variant lead-fresh-clone

# The budgets RL needs: PPO to 1,048,576 frames from the demo's start and the lead task's, each against scratch
# (about 2 hours per seed on 2 CPU cores, scratch up to 3x that; a stopped run resumes where it was), and the lead
# start with waiting at the view made to cost (lead-dwell-1m).
bench-rl-budgets: $(STAMP)
	$(BIN)/python benchmarks/bc_vs_scratch.py --variant few-1m-bc
	$(BIN)/python benchmarks/bc_vs_scratch.py --variant lead-encoder-1m-bc
	$(BIN)/python benchmarks/bc_vs_scratch.py --variant lead-dwell-1m-bc
	$(BIN)/python benchmarks/bc_vs_scratch.py --variant few-1m-scratch
	$(BIN)/python benchmarks/bc_vs_scratch.py --variant lead-encoder-1m-scratch

# How long `make test` takes on a fresh clone of HEAD (run it alone: about 15 minutes on 2 CPU cores).
bench-test-suite: $(STAMP)
	$(BIN)/python benchmarks/test_suite.py --variant fresh-clone

# Encoder pretraining and recolouring under the perturbation suite (about 17 hours on 2 CPU cores); then what a
# camera that sets its own exposure hands a policy at the view (minutes).
bench-perception: $(STAMP)
	$(BIN)/python benchmarks/perception.py --variant all
	$(BIN)/python benchmarks/exposure_loop.py --variant rectified

# The GPU fast path (exits 2 without CUDA).
bench-gpu: $(STAMP)
	$(BIN)/python benchmarks/gpu_benchmark.py --variant cuda

# For a GPU machine without a package index: the wheels and EGL libraries it lacks, into .whl/ and .gl/ (carried
# with the checkout; there: bash benchmarks/gpu_bundle.sh run OUT).
gpu-bundle:
	bash benchmarks/gpu_bundle.sh fetch

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache site
