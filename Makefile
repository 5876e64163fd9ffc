# Two commands do all set-up on a fresh machine: `make demo` (the main job) and `make test` (the test suite).
# Each creates .venv and installs the project into it when missing or when pyproject.toml changed.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export MUJOCO_GL ?= egl

.PHONY: demo test test-slow docs docs-render bench bench-quality bench-bc-vs-scratch bench-arms-tasks lint sysdeps clean

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

demo: $(STAMP)
	$(BIN)/robot-rl pipeline --preset quick

test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

# The generated docs pages and README tables, from benchmarks/results/*.json and the code; then the site.
docs-render: $(STAMP)
	$(BIN)/python benchmarks/render_docs.py

docs: docs-render
	$(BIN)/mkdocs build --strict --site-dir site

bench: $(STAMP)
	$(BIN)/python benchmarks/env_throughput.py
	$(BIN)/python benchmarks/bc_throughput.py
	$(BIN)/python benchmarks/collector_scaling.py
	$(BIN)/python benchmarks/export_latency.py

# What the README says BC and the demo achieve: the demo from a fresh clone, the BC recipe, the BC-loss ablation.
bench-quality: $(STAMP)
	$(BIN)/python benchmarks/quick_demo.py
	$(BIN)/python benchmarks/bc_quality.py
	$(BIN)/python benchmarks/bc_loss_ablation.py
	$(BIN)/python benchmarks/robustness.py

bench-bc-vs-scratch: $(STAMP)
	$(BIN)/python benchmarks/bc_vs_scratch.py --preset few --arms bc
	$(BIN)/python benchmarks/bc_vs_scratch.py --preset few --arms scratch
	$(BIN)/python benchmarks/finetune_stability.py --part start
	$(BIN)/python benchmarks/finetune_stability.py --part ppo
	$(BIN)/python benchmarks/ppo_throughput.py
	$(BIN)/python benchmarks/bc_vs_scratch.py --preset cpu
	$(BIN)/python benchmarks/few_demo_bc.py
	$(BIN)/python benchmarks/finetune_ablation.py

# Arms, tasks and formats: the experts per arm and task, BC on them, PPO on the lead task, LeRobot's own loader.
bench-arms-tasks: $(STAMP)
	$(BIN)/python benchmarks/arms.py
	$(BIN)/python benchmarks/arms.py --task lead-inspect --difficulties easy default hard --out benchmarks/results/arms_lead_inspect.json
	$(BIN)/python benchmarks/bc_quality.py --arm panda --data data/demos-panda --run-dir runs/bc-panda --out benchmarks/results/bc_quality_panda.json
	$(BIN)/python benchmarks/bc_quality.py --task lead-inspect --data data/demos-lead --run-dir runs/bc-lead --out benchmarks/results/bc_quality_lead_inspect.json
	$(BIN)/python benchmarks/bc_vs_scratch.py --preset lead-few --arms bc
	$(BIN)/python benchmarks/lead_inspect.py
	$(BIN)/python benchmarks/bc_vs_scratch.py --preset lead-dagger --arms bc
	$(BIN)/python benchmarks/lerobot_validation.py

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache site
