"""The layers of robot_rl, from the bottom up, and the test that holds every import to them.

    assets  robot_rl.assets (the folder assets/): the cell's MJCF and textures, package data that the envs read by
            name; its one script (the board texture's generator) imports nothing of ours.
    envs    robot_rl.envs (the folder envs/): MuJoCo scene, arms, tasks, rendering, Gymnasium + TorchRL front-ends,
            their error type and Gymnasium registration. Imports nothing of the rest of robot_rl.
    core    what every stage shares: TensorDict keys, file I/O, locks, options and configs, the policy and its
            encoder, checkpoints and run folders, episodes and closed-loop rollouts, precision, videos, tables.
    stages  one command's work each: pretrain (the folder pretrain/: demos, BC, DAgger, LeRobot I/O), finetune
            (PPO), evaluate, export, demo. Stages are siblings: none imports another; what two share goes to core.
    app     what composes the stages: the CLI, the pipeline, info (robot-rl info and list: every stage's artefacts,
            read with that stage's reader) and the package root (robot_rl/__init__.py).

``LAYER_OF`` below places every module: a module takes the entry that names it or its package (the longest such
name; ``robot_rl`` names the root file only). The test fails, naming the file, line and import, on

  - a module missing from the table (a new module is placed on purpose), or an entry that places nothing;
  - an import that goes up a layer, or from one stage to another;
  - an import that closes a cycle between modules, or between the table's units (a unit is one entry: a package
    such as robot_rl.envs or robot_rl.pretrain, or a single module);
  - an import in robot_rl/__init__.py of anything but robot_rl.envs and modules that import nothing of ours: Python
    runs that file before any module of the package, robot_rl.envs included, so what it imports comes first.

Imports are read from the source with ``ast``, not run: module-level and function-level ``import`` and ``from``
statements (under ``if TYPE_CHECKING`` too), relative ones resolved. ``from package import name`` counts as an
import of the module ``package.name`` where there is one, else of ``package``. Not counted: the parent package
Python runs before a submodule (``robot_rl.envs.tasks`` before ``robot_rl.envs.tasks.lead_inspect``), and names
imported from strings (``importlib.import_module``, Gymnasium's entry points). Modules are found through the
``package-dir`` table of pyproject.toml (envs/ installs as robot_rl.envs, pretrain/ as robot_rl.pretrain).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "robot_rl"
LAYERS = ("assets", "envs", "core", "stages", "app")

LAYER_OF = {
    "robot_rl.assets": "assets",
    "robot_rl.envs": "envs",
    # core
    "robot_rl.errors": "core",
    "robot_rl.keys": "core",
    "robot_rl.learning_curves": "core",
    "robot_rl.io": "core",
    "robot_rl.locks": "core",
    "robot_rl.processes": "core",
    "robot_rl.options": "core",
    "robot_rl.configs": "core",
    "robot_rl.dataset": "core",
    "robot_rl.dataset_checks": "core",
    "robot_rl.tables": "core",
    "robot_rl.precision": "core",
    "robot_rl.compute": "core",  # the run's compute context, resolved once
    "robot_rl.encoder": "core",
    "robot_rl.policy": "core",
    "robot_rl.policy_io": "core",
    "robot_rl.artefact_schema": "core",
    "robot_rl.artefact_files": "core",  # every artefact's file names, spelled once
    "robot_rl.compat": "core",
    "robot_rl.provenance": "core",
    "robot_rl.checkpoints": "core",
    "robot_rl.stop": "core",  # the process's one stop request (Ctrl-C, SIGTERM)
    "robot_rl.run_folder": "core",
    "robot_rl.training_run": "core",  # the lifecycle every training run shares
    "robot_rl.recipe": "core",  # stages in order: skip-if-done, seconds across invocations
    "robot_rl.run_logs": "core",
    "robot_rl.episodes": "core",
    "robot_rl.closed_loop": "core",
    "robot_rl.video": "core",
    # stages
    "robot_rl.pretrain": "stages",
    "robot_rl.finetune": "stages",
    "robot_rl.evaluate": "stages",
    "robot_rl.export": "stages",
    "robot_rl.demo": "stages",
    # app
    "robot_rl.cli": "app",
    "robot_rl.pipeline": "app",
    "robot_rl.info": "app",  # robot-rl info and list: every stage's artefacts, read with that stage's reader
    "robot_rl": "app",  # the package root, robot_rl/__init__.py
}


class Import(NamedTuple):
    target: str  # the module imported
    where: str  # file:line of the import statement


# -- reading the source ------------------------------------------------------------------------------------------
def package_dirs(root: Path = ROOT) -> dict[str, Path]:
    """Top-level folder of each package of ours, from pyproject.toml's ``[tool.setuptools.package-dir]``."""
    with open(root / "pyproject.toml", "rb") as f:
        mapping = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    return {package: root / folder for package, folder in mapping.items()}


def find_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of ours by its import name (``robot_rl.envs.scene``), and its file."""
    dirs = package_dirs(root)
    mapped = set(dirs.values())
    modules = {}
    for package, folder in dirs.items():
        for path in folder.rglob("*.py"):
            # A subfolder installed under a name of its own is read under that name.
            if any(parent in mapped for parent in path.parents if parent != folder and folder in parent.parents):
                continue
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([package, *parts])] = path
    return modules


def _known(name: str, modules: set[str]) -> str | None:
    """``name`` or its longest prefix that is a module of ours (``robot_rl.envs.keys.PIXELS`` -> ...keys)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def imports_of(module: str, path: Path, modules: set[str]) -> list[Import]:
    """The modules of ours that ``module`` (read from ``path``) imports, at any depth of its code."""
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        where = f"{path.relative_to(ROOT) if ROOT in path.parents else path}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: len(module.split(".")) - node.level + is_package]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            names = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                     for alias in node.names]
        else:
            continue
        for name in names:
            target = _known(name, modules) if name.split(".")[0] == PACKAGE else None
            if target is not None and target != module and Import(target, where) not in found:
                found.append(Import(target, where))
    return found


def import_graph(root: Path = ROOT) -> dict[str, list[Import]]:
    modules = find_modules(root)
    return {name: imports_of(name, path, set(modules)) for name, path in sorted(modules.items())}


# -- the rules ---------------------------------------------------------------------------------------------------
def unit_of(module: str) -> str | None:
    """The ``LAYER_OF`` entry that places ``module``: its own name or its package's, the longest; None if none."""
    if module == PACKAGE:
        return PACKAGE
    names = [name for name in LAYER_OF if name != PACKAGE and (module == name or module.startswith(name + "."))]
    return max(names, key=len, default=None)


def layer_index(module: str) -> int:
    return LAYERS.index(LAYER_OF[unit_of(module)])


def placement_errors(graph: dict[str, list[Import]]) -> list[str]:
    unplaced = [f"{module}: not in LAYER_OF (place it in a layer)" for module in graph if unit_of(module) is None]
    unused = [f"LAYER_OF[{name!r}] places no module" for name in LAYER_OF
              if not any(unit_of(module) == name for module in graph)]
    return unplaced + unused


def _placed(graph: dict[str, list[Import]]) -> dict[str, list[Import]]:
    """``graph`` without the modules (and imports of modules) that no entry places: ``placement_errors`` names them."""
    return {module: [i for i in imports if unit_of(i.target)] for module, imports in graph.items() if unit_of(module)}


def direction_errors(graph: dict[str, list[Import]]) -> list[str]:
    """Imports that go up a layer, or from one stage to another."""
    errors = []
    for module, imports in _placed(graph).items():
        for target, where in imports:
            source_layer, target_layer = LAYER_OF[unit_of(module)], LAYER_OF[unit_of(target)]
            if layer_index(target) > layer_index(module):
                errors.append(f"{where}: {module} ({source_layer}) imports {target} ({target_layer}), a layer "
                              f"above it (bottom up: {', '.join(LAYERS)})")
            elif source_layer == target_layer == "stages" and unit_of(module) != unit_of(target):
                errors.append(f"{where}: {module} imports {target}: stages are siblings; move what they share "
                              "to core")
    return errors


def root_errors(graph: dict[str, list[Import]]) -> list[str]:
    """Imports of the package root other than robot_rl.envs and modules that import nothing of ours."""
    graph = _placed(graph)
    return [f"{where}: {PACKAGE} imports {target}, which imports {graph[target][0].target}: the root runs before "
            f"every module, so it imports only {PACKAGE}.envs and modules that import nothing of ours"
            for target, where in graph.get(PACKAGE, []) if unit_of(target) != f"{PACKAGE}.envs" and graph[target]]


def _cycles(edges: dict[str, dict[str, str]]) -> list[list[str]]:
    """One shortest cycle through each strongly connected component of ``edges`` (node -> {node: where})."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    cycles = []
    for component in components:
        # Breadth-first from the component's first node: the first node reached that imports it closes the
        # shortest cycle through it.
        start = min(component)
        paths, order = {start: [start]}, [start]
        for node in order:
            if start in edges[node]:
                cycles.append([*paths[node], start])
                break
            for nxt in sorted(edges[node]):
                if nxt in component and nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    order.append(nxt)
    return cycles


def _describe(cycle: list[str], edges: dict[str, dict[str, str]]) -> str:
    steps = [f"{a} -> {b} ({edges[a][b]})" for a, b in zip(cycle, cycle[1:])]
    return "; ".join(steps)


def cycle_errors(graph: dict[str, list[Import]]) -> list[str]:
    """Import cycles between modules, then between units (``LAYER_OF`` entries), each named with its imports."""
    graph = _placed(graph)
    module_edges: dict[str, dict[str, str]] = {module: {} for module in graph}
    unit_edges: dict[str, dict[str, str]] = {}
    for module, imports in graph.items():
        for target, where in imports:
            module_edges[module].setdefault(target, where)
            unit, target_unit = unit_of(module), unit_of(target)
            unit_edges.setdefault(unit, {})
            unit_edges.setdefault(target_unit, {})
            if unit != target_unit:
                unit_edges[unit].setdefault(target_unit, f"{where}: {module} imports {target}")
    return ([f"module cycle: {_describe(cycle, module_edges)}" for cycle in _cycles(module_edges)]
            + [f"unit cycle: {_describe(cycle, unit_edges)}" for cycle in _cycles(unit_edges)])


# -- the tests ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def graph():
    return import_graph()


def test_the_modules_are_found_through_the_package_dir_mapping(graph):
    assert {"robot_rl", "robot_rl.cli", "robot_rl.envs", "robot_rl.envs.registration", "robot_rl.envs.tasks",
            "robot_rl.envs.tasks.pcb_inspect.board", "robot_rl.pretrain.bc", "robot_rl.finetune.trainer"} <= set(graph)
    assert find_modules()["robot_rl.envs.scene"] == ROOT / "envs" / "scene.py"
    assert "robot_rl.envs.keys" in {target for target, _ in graph["robot_rl.keys"]}


def test_every_module_has_a_layer(graph):
    assert placement_errors(graph) == []


def test_imports_go_down_the_layers(graph):
    assert direction_errors(graph) == []


def test_the_package_root_imports_only_envs_and_leaf_modules(graph):
    assert root_errors(graph) == []


def test_no_import_closes_a_cycle(graph):
    assert cycle_errors(graph) == []


def test_envs_imports_nothing_of_the_rest_of_robot_rl(graph):
    outside = [(module, target) for module, imports in graph.items() if unit_of(module) == "robot_rl.envs"
               for target, _ in imports if unit_of(target) != "robot_rl.envs"]
    assert outside == []


# -- the checker itself, on small made-up graphs -----------------------------------------------------------------
def test_an_import_up_a_layer_is_named_with_its_place():
    graph = {"robot_rl.envs.scene": [Import("robot_rl.errors", "envs/scene.py:7")], "robot_rl.errors": []}
    (error,) = direction_errors(graph)
    assert error.startswith("envs/scene.py:7: robot_rl.envs.scene (envs) imports robot_rl.errors (core)")


def test_an_import_between_stages_is_refused_and_within_a_stage_allowed():
    graph = {"robot_rl.evaluate": [Import("robot_rl.pretrain.bc", "robot_rl/evaluate.py:3")],
             "robot_rl.pretrain.dagger": [Import("robot_rl.pretrain.bc", "pretrain/dagger.py:9")],
             "robot_rl.pretrain.bc": []}
    (error,) = direction_errors(graph)
    assert "robot_rl/evaluate.py:3" in error and "stages are siblings" in error


def test_a_cycle_is_named_with_each_import_that_closes_it():
    graph = {"robot_rl.configs": [Import("robot_rl.policy", "robot_rl/configs.py:193")],
             "robot_rl.policy": [Import("robot_rl.configs", "robot_rl/policy.py:24")],
             "robot_rl.keys": [Import("robot_rl.envs.keys", "robot_rl/keys.py:3")], "robot_rl.envs.keys": []}
    assert cycle_errors(graph) == [
        "module cycle: robot_rl.configs -> robot_rl.policy (robot_rl/configs.py:193); "
        "robot_rl.policy -> robot_rl.configs (robot_rl/policy.py:24)",
        "unit cycle: robot_rl.configs -> robot_rl.policy (robot_rl/configs.py:193: robot_rl.configs imports "
        "robot_rl.policy); robot_rl.policy -> robot_rl.configs (robot_rl/policy.py:24: robot_rl.policy imports "
        "robot_rl.configs)"]


def test_a_cycle_between_packages_is_found_where_the_modules_have_none():
    graph = {"robot_rl.envs.a": [Import("robot_rl.io", "envs/a.py:1")], "robot_rl.io": [],
             "robot_rl.envs.b": [], "robot_rl.locks": [Import("robot_rl.envs.b", "robot_rl/locks.py:2")],
             "robot_rl.envs.c": [Import("robot_rl.locks", "envs/c.py:3")]}
    errors = cycle_errors(graph)
    assert errors == ["unit cycle: robot_rl.envs -> robot_rl.locks (envs/c.py:3: robot_rl.envs.c imports "
                      "robot_rl.locks); robot_rl.locks -> robot_rl.envs (robot_rl/locks.py:2: robot_rl.locks "
                      "imports robot_rl.envs.b)"]


def test_the_root_may_import_envs_and_leaf_modules_only():
    graph = {"robot_rl": [Import("robot_rl.processes", "robot_rl/__init__.py:1"),
                          Import("robot_rl.envs.registration", "robot_rl/__init__.py:2"),
                          Import("robot_rl.io", "robot_rl/__init__.py:3")],
             "robot_rl.processes": [], "robot_rl.envs.registration": [],
             "robot_rl.io": [Import("robot_rl.errors", "robot_rl/io.py:9")], "robot_rl.errors": []}
    (error,) = root_errors(graph)
    assert error.startswith("robot_rl/__init__.py:3: robot_rl imports robot_rl.io, which imports robot_rl.errors")


def test_relative_and_function_level_imports_are_read(tmp_path):
    source = tmp_path / "pretrain" / "bc.py"
    source.parent.mkdir()
    source.write_text("from . import dataset\nfrom .. import keys\n\ndef f():\n    from robot_rl.cli import main\n")
    modules = {"robot_rl", "robot_rl.keys", "robot_rl.cli", "robot_rl.pretrain", "robot_rl.pretrain.dataset"}
    targets = [target for target, _ in imports_of("robot_rl.pretrain.bc", source, modules)]
    assert targets == ["robot_rl.pretrain.dataset", "robot_rl.keys", "robot_rl.cli"]
