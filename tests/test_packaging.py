"""Packaging: the build step (models/, index_builder/) installs under the project's own names.

The folders stay where they are; pyproject.toml maps them to ``fscore_lite_models`` and
``fscore_lite_index`` so that they never collide with another project's top-level ``models``.
"""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from .conftest import REPO

MAPPED = {"fscore_lite": "fscore_lite", "fscore_lite_models": "models", "fscore_lite_index": "index_builder"}
OLD_IMPORT = re.compile(r"^\s*(?:from|import)\s+(?:models|index_builder)(?:[.\s,]|$)", re.M)
BUILD_IMPORT = re.compile(r"^\s*(?:from|import)\s+(?:fscore_lite_models|fscore_lite_index)\b", re.M)


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


def test_runtime_modules_do_not_import_the_build_step():
    """Only the CLI layer (fscore_lite/commands) and meta-eval's store build may reach it."""
    allowed = {REPO / "fscore_lite" / "metaeval" / "factscore_er.py"}
    bad = [str(p.relative_to(REPO)) for p in (REPO / "fscore_lite").rglob("*.py")
           if "commands" not in p.relative_to(REPO / "fscore_lite").parts and p not in allowed
           and BUILD_IMPORT.search(p.read_text(encoding="utf-8"))]
    assert bad == []


def test_installed_names_import_from_outside_the_repo(tmp_path):
    code = ("import importlib.util as u, fscore_lite_models.defaults, fscore_lite_index.build, fscore_lite_index.writer\n"
            "assert u.find_spec('models') is None and u.find_spec('index_builder') is None, 'old names still installed'\n"
            "print(fscore_lite_models.__file__)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr + "\n(reinstall: make install-test)"
    assert proc.stdout.strip().startswith(str(REPO / "models"))
