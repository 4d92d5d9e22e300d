"""Packaging: the build step (models/, index_builder/) installs under the project's own names.

The folders stay where they are; pyproject.toml maps them to ``fscore_lite_models`` and
``fscore_lite_index`` so that they never collide with another project's top-level ``models``.
Build and runtime stay apart: imports are read with :mod:`ast` in both directions.
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from .conftest import REPO

MAPPED = {"fscore_lite": "fscore_lite", "fscore_lite_models": "models", "fscore_lite_index": "index_builder"}
OLD_IMPORT = re.compile(r"^\s*(?:from|import)\s+(?:models|index_builder)(?:[.\s,]|$)", re.M)


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def _package_inits(folder: str) -> list[Path]:
    """The __init__.py files under ``folder`` that git tracks (what a fresh clone has), or all of
    them outside a git checkout. A package listed in pyproject.toml but missing from a clone
    breaks every install, so a folder still being written (untracked) does not count yet."""
    proc = subprocess.run(["git", "ls-files", "--", f"{folder}/**/__init__.py", f"{folder}/__init__.py"], cwd=REPO,
                          capture_output=True, text=True)
    if proc.returncode == 0 and proc.stdout.strip():
        return [REPO / line for line in proc.stdout.splitlines()]
    return list((REPO / folder).rglob("__init__.py"))


def test_every_package_folder_is_listed_under_its_installed_name():
    """pyproject.toml lists packages one by one (a mapped folder cannot be found by name):
    a new sub-package (a folder with __init__.py) must be added there, or wheels leave it out."""
    conf = _pyproject()
    assert conf["package-dir"] == {"fscore_lite_models": "models", "fscore_lite_index": "index_builder"}
    found = set()
    for name, folder in MAPPED.items():
        for init in _package_inits(folder):
            rel = init.parent.relative_to(REPO / folder)
            found.add(".".join([name, *rel.parts]))
    assert set(conf["packages"]) == found
    for package in conf["packages"]:  # each listed package exists
        top, *rest = package.split(".")
        assert (REPO / MAPPED[top]).joinpath(*rest, "__init__.py").is_file(), package


def _sources():
    for folder in ("fscore_lite", "models", "index_builder", "tests", "bench"):
        yield from (REPO / folder).rglob("*.py")


def test_nothing_imports_the_old_top_level_names():
    bad = [f"{p.relative_to(REPO)}: {m.group().strip()}" for p in _sources()
           for m in OLD_IMPORT.finditer(p.read_text(encoding="utf-8"))]
    assert bad == []


GATE = "fscore_lite.build_step"  # the one runtime module that reaches the build packages
BUILD_PACKAGES = ("fscore_lite_models", "fscore_lite_index")
# The layers that drive everything: the CLI and its commands, meta-evaluation, the report and the
# gate. The build step stands on the runtime's core (manifest, store, backends, scoring, training,
# statistics) and never on these; only the build commands and meta-evaluation's wiki store pass
# through the gate.
DRIVERS = ("fscore_lite.cli", "fscore_lite.commands", "fscore_lite.metaeval", "fscore_lite.report", GATE)


def _module_name(path: Path) -> str:
    """The installed dotted name of a source file (models/ and index_builder/ under their installed names)."""
    for name, folder in MAPPED.items():
        if path.is_relative_to(REPO / folder):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            return ".".join([name, *parts]).removesuffix(".__init__")
    raise ValueError(path)


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(imported module, line, at module level?) for every import of a file, relative imports
    resolved; ``from a import b`` gives both ``a`` and ``a.b`` (b may be a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    top = {id(n) for n in tree.body}
    for node in tree.body:  # imports under a module-level `if`/`try` also run at import time
        if isinstance(node, (ast.If, ast.Try)):
            top |= {id(n) for n in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            found.append((base, node.lineno, id(node) in top))
            found += [(f"{base}.{a.name}", node.lineno, id(node) in top) for a in node.names]
    return found


def _within(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _files(*folders: str) -> list[Path]:
    return [p for folder in folders for p in sorted((REPO / folder).rglob("*.py"))]


def test_imports_are_read_from_every_source_file():
    """The guards below see the build step's and the runtime's imports (a parse that found none
    would make them pass vacuously)."""
    gate = _imports(REPO / "fscore_lite" / "build_step.py")
    assert any(_within(m, ["fscore_lite_index.build"]) and not top for m, _, top in gate)
    assert any(m == "fscore_lite.errors" and top for m, _, top in gate)
    kb = _imports(REPO / "fscore_lite" / "commands" / "kb.py")
    assert any(m == GATE for m, _, _ in kb)
    build = _imports(REPO / "models" / "verifier" / "build.py")
    assert any(_within(m, ["fscore_lite.training"]) for m, _, _ in build)


def test_only_the_gate_imports_the_build_step_and_only_when_called():
    """The runtime never loads build code: no fscore_lite module but the gate imports the build
    packages, and the gate imports them inside its functions, never when it is imported."""
    bad = []
    for p in _files("fscore_lite"):
        for module, line, at_top in _imports(p):
            if _within(module, BUILD_PACKAGES) and (_module_name(p) != GATE or at_top):
                bad.append(f"{p.relative_to(REPO)}:{line}: {module}")
    assert bad == []


def test_only_the_build_commands_and_meta_evaluation_pass_the_gate():
    """``score``, ``q2``, the report and the library never reach the build step: only the commands,
    meta-evaluation and the verifier's training code (run by ``models train verifier`` and meta-eval) do."""
    passing = ["fscore_lite.commands", "fscore_lite.metaeval", "fscore_lite.training"]
    bad = [f"{p.relative_to(REPO)}:{line}" for p in _files("fscore_lite") for module, line, _ in _imports(p)
           if _within(module, [GATE]) and not _within(_module_name(p), passing)]
    assert bad == []


def test_the_build_step_imports_the_runtime_core_only():
    """models/ and index_builder/ import the runtime's core one way: never the CLI, the commands,
    meta-evaluation, the report or the gate back into themselves. A package's ``__main__`` is a
    program's entry point, above every layer, and may start the CLI."""
    bad = [f"{p.relative_to(REPO)}:{line}: {module}" for p in _files("models", "index_builder")
           if p.name != "__main__.py" for module, line, _ in _imports(p) if _within(module, DRIVERS)]
    assert bad == []


def test_installed_names_import_from_outside_the_repo(tmp_path):
    code = ("import importlib.util as u, fscore_lite_models.defaults, fscore_lite_index.build, fscore_lite_index.writer\n"
            "assert u.find_spec('models') is None and u.find_spec('index_builder') is None, 'old names still installed'\n"
            "print(fscore_lite_models.__file__)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr + "\n(reinstall: make install-test)"
    assert proc.stdout.strip().startswith(str(REPO / "models"))
