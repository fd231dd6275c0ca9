"""Import rules of the package layout (docs/architecture.md): kernels by kind, methods by paper.

* **base** modules import only base modules;
* **kernels** import base modules and kernels, never a method and never the top layer
  (``guirl.config``, ``guirl.runner``, ...); type-only imports under ``if TYPE_CHECKING:`` are
  allowed, they do not run;
* a **method** imports base modules, kernels, :mod:`guirl.methods.registry` and its own folder,
  never another method and never the top layer;
* everything else is the **top** layer (config, report, runner, workflow, stages, notebooks' glue).

The rules are checked on every ``import`` statement (function-level ones too) and, at run time,
by importing every kernel in a fresh interpreter and looking at ``sys.modules``.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "lib" / "guirl"

BASE = {"paths", "geometry", "imaging", "textmatch", "configbase"}
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
    if first in BASE:
        return ("base", first)
    if first in KERNELS:
        return ("kernel", first)
    return ("top", first)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every guirl import in ``path``, skipping ``if TYPE_CHECKING:`` blocks."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                for inner in ast.walk(sub):
                    skip.add(id(inner))
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("guirl")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("guirl"):
                names = [a.name for a in node.names]
                if node.module == "guirl":  # "from guirl import methods" imports guirl.methods
                    out += [(node.lineno, f"guirl.{n}") for n in names]
                else:
                    out.append((node.lineno, node.module))
    return out


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
            if layer == "base" and target not in BASE:
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
    monkeypatch.setattr(sys.modules[__name__], "LIB", fake)
    bad = _violations()
    assert any("metrics/bad.py:1" in b for b in bad)
    assert any("methods/ccpo/x.py:1" in b and "another method" in b for b in bad)


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
