"""Import rules of the package layout (docs/architecture.md): kernels by kind, methods by paper.

* **base** modules import only base modules;
* **kernels** import base modules and kernels, never a method and never the top layer
  (``guirl.config``, ``guirl.runner``, ...), not even under ``if TYPE_CHECKING:`` (a type-only
  import is an import: kernels and methods annotate a run config with
  :class:`guirl.configbase.RunConfig`);
* a **method** imports base modules, kernels, :mod:`guirl.methods.registry` and its own folder,
  never another method and never the top layer;
* the **studies** (``guirl/studies/``) are the top of the top layer: one module per notebook
  (``notebooks/NN_name.ipynb`` <-> ``studies/name.py``) that imports anything below it and
  :mod:`guirl.studies.shared`, never another notebook's study; a study's stage-level parts may
  live in ``studies/parts/<name>/``, which belongs to that study alone (only ``studies/<name>.py``
  and the package's own modules import it); ``studies/shared`` imports no notebook's study;
  nothing else in ``lib/guirl`` imports a study (notebooks and tests do);
* everything else is the **top** layer (config, report, runner, stages, papers).

The rules are checked on every ``import`` statement (function-level and type-only ones too) and,
at run time, by importing every kernel in a fresh interpreter and looking at ``sys.modules``.
``lib/guirl`` has no import circle, between modules or between units (a kernel, a method, a
top-level module), type-only imports included.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "lib" / "guirl"
NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

BASE = {"paths", "geometry", "imaging", "textmatch", "configbase", "contenthash", "timing"}
KERNELS = {
    "actions",
    "matching",
    "metrics",
    "rewards",
    "rl",
    "rollout",
    "train",
    "env",
    "data",
    "models",
    "analysis",
    "prompts",
}


def _top_name(module: str) -> str | None:
    """``guirl.metrics.step`` -> ``metrics``; ``None`` for modules outside guirl."""
    parts = module.split(".")
    if parts[0] != "guirl" or len(parts) < 2:
        return None
    return parts[1]


def _layer_of_file(path: Path) -> tuple[str, str]:
    """(layer, unit) of a source file: unit is the kernel name or the method name."""
    rel = path.relative_to(LIB).with_suffix("")
    first = rel.parts[0]
    if first == "methods":
        if len(rel.parts) == 2:  # methods/__init__.py, methods/registry.py: the registry itself
            return ("registry" if rel.parts[1] == "__init__" else "method-base", rel.parts[1])
        return ("method", rel.parts[1])
    if first == "studies":
        if len(rel.parts) == 2 and rel.parts[1] != "__init__":
            return ("study", rel.parts[1])
        if rel.parts[1] == "parts" and len(rel.parts) > 3:  # studies/parts/<name>/...: study <name>'s own parts
            return ("study", rel.parts[2])
        return ("study-shared", "shared")
    if first in BASE:
        return ("base", first)
    if first in KERNELS:
        return ("kernel", first)
    return ("top", first)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every guirl import in ``path``: module-level, function-level and type-only
    (``if TYPE_CHECKING:``) ones alike."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("guirl")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("guirl"):
                names = [a.name for a in node.names]
                if node.module in ("guirl", "guirl.studies"):  # "from guirl import methods": guirl.methods
                    out += [(node.lineno, f"{node.module}.{n}") for n in names]
                else:
                    out.append((node.lineno, node.module))
    return out


def _study_of(module: str) -> str | None:
    """``guirl.studies.sft.x`` -> ``sft``; ``guirl.studies.parts.sft.x`` -> ``sft`` (a study's own parts);
    ``shared`` for the shared study modules and the packages."""
    parts = module.split(".")
    if parts[:2] != ["guirl", "studies"]:
        return None
    if len(parts) > 3 and parts[2] == "parts":
        return parts[3]
    return "shared" if len(parts) == 2 or parts[2] in ("shared", "parts") else parts[2]


def _violations() -> list[str]:
    bad: list[str] = []
    for path in sorted(LIB.rglob("*.py")):
        layer, unit = _layer_of_file(path)
        rel = path.relative_to(LIB.parent)
        for line, module in _imports(path):
            target = _top_name(module)
            if target is None:
                continue
            where = f"{rel}:{line}: imports {module}"
            study = _study_of(module)
            if study is not None and layer not in ("study", "study-shared"):
                bad.append(f"{where} (nothing in lib/guirl imports a study; only notebooks and tests do)")
                continue
            if layer == "study-shared" and study not in (None, "shared"):
                bad.append(f"{where} (guirl.studies.shared may not import a notebook's study)")
            elif layer == "study" and study not in (None, "shared", unit):
                bad.append(
                    f"{where} (study '{unit}' may not import another notebook's study; share it in studies/shared)"
                )
            elif layer == "base" and target not in BASE:
                bad.append(f"{where} (a base module imports only base modules)")
            elif layer == "kernel" and target not in BASE | KERNELS:
                bad.append(f"{where} (kernel '{unit}' may import base modules and kernels only)")
            elif layer in ("method", "method-base"):
                if target == "methods":
                    parts = module.split(".")
                    other = parts[2] if len(parts) > 2 else None
                    if other not in (unit, "registry"):
                        bad.append(f"{where} (method '{unit}' may not import another method or the registry)")
                elif target not in BASE | KERNELS:
                    bad.append(f"{where} (a method may import base modules, kernels and guirl.methods.registry)")
    return bad


def test_import_rules_hold_statically():
    # Every import statement of lib/guirl obeys the layer rules (the message lists each offence).
    bad = _violations()
    assert not bad, "layer rule violations:\n" + "\n".join(bad)


def test_rule_checker_catches_a_kernel_importing_a_method(tmp_path, monkeypatch):
    # The checker itself can fail: a fake kernel file that imports a method is reported.
    fake = tmp_path / "guirl"
    (fake / "metrics").mkdir(parents=True)
    (fake / "metrics" / "bad.py").write_text("from guirl.methods.ccpo import casc\n")
    (fake / "methods" / "ccpo").mkdir(parents=True)
    (fake / "methods" / "ccpo" / "x.py").write_text("import guirl.methods.coepg.reward\n")
    (fake / "studies" / "shared").mkdir(parents=True)
    (fake / "studies" / "ccpo_rl.py").write_text(
        "from guirl.studies import sft\nfrom guirl.studies.shared import inputs\n"
    )
    (fake / "studies" / "shared" / "inputs.py").write_text("import guirl.studies.sft\n")
    (fake / "studies" / "parts" / "sft").mkdir(parents=True)
    (fake / "studies" / "parts" / "sft" / "loop.py").write_text(
        "from guirl.studies.parts.sft import models\nimport guirl.studies.ccpo_rl\n"
    )
    (fake / "studies" / "sft.py").write_text("from guirl.studies.parts.sft.loop import x\n")
    (fake / "studies" / "coepg.py").write_text("from guirl.studies.parts.sft.loop import x\n")
    (fake / "runner.py").write_text("from guirl.studies.shared.inputs import dataset_dir\n")
    monkeypatch.setattr(sys.modules[__name__], "LIB", fake)
    bad = _violations()
    assert any("metrics/bad.py:1" in b for b in bad)
    assert any("methods/ccpo/x.py:1" in b and "another method" in b for b in bad)
    assert any("studies/ccpo_rl.py:1" in b and "another notebook's study" in b for b in bad)
    assert not any("studies/ccpo_rl.py:2" in b for b in bad)  # a study may import the shared modules
    assert any("studies/shared/inputs.py:1" in b and "may not import a notebook's study" in b for b in bad)
    assert any("guirl/runner.py:1" in b and "nothing in lib/guirl imports a study" in b for b in bad)
    assert not any("studies/sft.py:1" in b or "studies/parts/sft/loop.py:1" in b for b in bad)  # its own parts
    assert any("studies/parts/sft/loop.py:2" in b and "another notebook's study" in b for b in bad)
    assert any("studies/coepg.py:1" in b and "another notebook's study" in b for b in bad)  # another study's parts


def test_kernels_do_not_load_methods_or_the_top_layer_at_run_time():
    # Importing every kernel package in a fresh interpreter loads no method and no top-layer module.
    kernels = sorted(k for k in KERNELS if (LIB / k).is_dir() or (LIB / f"{k}.py").is_file())
    code = (
        "import importlib, json, sys\n"
        f"for k in {kernels!r}: importlib.import_module('guirl.' + k)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('guirl.'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = json.loads(out.strip().splitlines()[-1])
    offenders = [m for m in loaded if _top_name(m) not in BASE | KERNELS]
    assert not offenders, f"kernels pulled in: {offenders}"


@pytest.mark.parametrize("name", ["agentcpm", "androidlong", "ccpo", "ces", "coepg", "semi_online"])
def test_each_method_imports_alone(name):
    # A method imports without any other method being loaded (methods do not depend on each other).
    code = (
        "import importlib, json, sys\n"
        f"importlib.import_module('guirl.methods.{name}')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('guirl.methods.'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = json.loads(out.strip().splitlines()[-1])
    others = [m for m in loaded if m.split(".")[2] not in (name, "registry")]
    assert not others, f"guirl.methods.{name} loaded {others}"


def test_registry_lists_the_six_methods():
    # The registry exposes one record per paper folder, each bound to registered kernels.
    import guirl.methods as methods
    from guirl.actions.formats import FORMAT_NAMES
    from guirl.metrics.protocols import PROTOCOLS

    assert methods.names() == ["agentcpm", "androidlong", "ccpo", "ces", "coepg", "semi_online"]
    folders = sorted(p.name for p in (LIB / "methods").iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == methods.names()
    for m in methods.all_methods():
        assert m.output_format in FORMAT_NAMES, m.name
        assert m.eval_protocol is None or m.eval_protocol in PROTOCOLS, m.name
    with pytest.raises(KeyError, match="known methods"):
        methods.get("nope")


def test_a_role_is_named_after_its_method() -> None:
    # roles are unique across methods because each starts with its method's name; the record refuses others
    import dataclasses

    import guirl.methods as methods

    ccpo = methods.get("ccpo")
    with pytest.raises(ValueError, match=r"role 'ces.coordinator' must be named 'ccpo' or 'ccpo.<part>'"):
        dataclasses.replace(ccpo, hooks={"ces.coordinator": lambda cfg, inputs: None})
    assert set(methods.role_names()) >= {"grpo", "ccpo", "semi_online"} and methods.role_names()[0] == "grpo"
    with pytest.raises(KeyError, match="known roles: grpo"):
        methods.get_role("nope")


# ----------------------------------------------------------------------------- studies <-> notebooks
def test_one_study_module_per_notebook() -> None:
    # notebooks/NN_name.ipynb <-> lib/guirl/studies/name.py, both ways; studies/parts/<name>/ only for a study
    notebooks = {p.stem.split("_", 1)[1] for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")}
    studies = {p.stem for p in (LIB / "studies").glob("*.py") if p.stem != "__init__"}
    assert notebooks == studies, (
        f"notebooks without a study: {notebooks - studies}; studies without a notebook: {studies - notebooks}"
    )
    parts = {p.name for p in (LIB / "studies" / "parts").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert parts <= studies, f"studies/parts/ folders without a study module: {parts - studies}"


def test_studies_derive_configs_only_through_replace() -> None:
    # Config.replace validates; pydantic's model_copy(update=...) does not
    offenders = [
        f"{p.relative_to(LIB.parent)}:{node.lineno}"
        for p in sorted(LIB.rglob("*.py"))
        if p.name != "config.py"
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute) and node.attr in ("model_copy", "model_construct")
    ]
    assert not offenders, f"derive configs with Config.replace: {offenders}"


# ----------------------------------------------------------------------------- import circles
def _module_name(path: Path, lib: Path) -> str:
    parts = list(path.relative_to(lib.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(lib: Path) -> dict[str, set[str]]:
    """Module -> the lib modules it imports (function-level and type-only imports included);
    ``from a.b import c`` counts ``a.b.c`` when that is a module."""
    modules = {_module_name(p, lib): p for p in lib.rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {module for _, module in _imports(path)}
        for node in ast.walk(tree):  # "from guirl.x import y" where y is a module
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("guirl") and node.level == 0:
                names |= {f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules}
        graph[mod] = {t for t in map(resolve, names) if t and t != mod}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _unit(module: str) -> str:
    """A module's unit: ``guirl.methods.<name>`` for a method, else ``guirl.<first part>``."""
    parts = module.split(".")
    return ".".join(parts[:3]) if len(parts) > 2 and parts[1] in ("methods", "studies") else ".".join(parts[:2])


def _unit_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    units: dict[str, set[str]] = {}
    for mod, targets in graph.items():
        units.setdefault(_unit(mod), set())
        for t in targets:
            if _unit(t) != _unit(mod):
                units[_unit(mod)].add(_unit(t))
    return units


def _all_circles(lib: Path) -> list[list[str]]:
    graph = _import_graph(lib)
    return _circles(graph) + _circles(_unit_graph(graph))


def test_lib_has_no_import_circles() -> None:
    circles = _all_circles(LIB)
    assert circles == [], "import circles in lib/guirl:\n" + "\n".join(" <-> ".join(c) for c in circles)


def _write(root: Path, files: Iterable[tuple[str, str]]) -> None:
    for rel, text in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_circle_checker_finds_module_and_unit_circles(tmp_path: Path) -> None:
    fake = tmp_path / "guirl"
    _write(
        fake,
        [
            ("__init__.py", ""),
            ("rl/__init__.py", ""),
            ("rl/a.py", "def f():\n    from guirl.train.b import g\n"),  # a function-level import counts
            ("train/__init__.py", ""),
            ("train/b.py", "from guirl.rl.c import h\n"),
            ("rl/c.py", "x = 1\n"),  # no module circle, but rl -> train -> rl between units
            ("env/__init__.py", "from guirl.env import core\n"),
            ("env/core.py", "from guirl.env import apps\n"),  # core imports the package that imports core
            ("env/apps.py", ""),
            # a type-only import counts: config -> methods -> rl -> config under TYPE_CHECKING is a circle
            ("config.py", "def f():\n    import guirl.methods\n"),
            ("methods/__init__.py", "import guirl.metrics.hooks\n"),
            (
                "metrics/hooks.py",
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from guirl.config import Config\n",
            ),
            ("ok/__init__.py", "import guirl.env.apps\n"),  # imports into a circle without closing one
        ],
    )
    circles = _all_circles(fake)
    assert ["guirl.env", "guirl.env.core"] in circles
    assert ["guirl.rl", "guirl.train"] in circles
    assert ["guirl.config", "guirl.methods", "guirl.metrics"] in circles  # a unit circle through a type-only import
    assert ["guirl.config", "guirl.methods", "guirl.metrics.hooks"] in circles  # and its module circle
    assert not any("guirl.ok" in c for c in circles)
