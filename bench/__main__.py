"""``python -m bench``: run benchmark sections and update docs/BENCHMARKS.md.

Sections not run keep their previous text in the file, so ``--only store`` refreshes one
section without erasing the others. See :mod:`bench` for the sections and ``args``.
"""
from __future__ import annotations

import os

# OpenMP runtimes (torch's, llama.cpp's) busy-wait between parallel regions by default; on a
# machine shared with other jobs that makes 2 threads many times slower than 1, so they wait
# passively here, as in fscore-lite's runtime (fscore_lite/__init__.py). onnxruntime sessions keep
# the runtime's own bounded spin (fscore_lite/backends/onnx_session.py). Must be set before torch
# or llama_cpp is loaded.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import importlib  # noqa: E402
import re  # noqa: E402
import shlex  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

from fscore_lite.backends.onnx_session import SPIN_ENV, session_spin  # noqa: E402

from .common import REPO, fmt_s, log, machine_info, machine_markdown, md_table, now, save_json  # noqa: E402

SECTIONS = {  # name: title, in document order
    "factscore": "FActScore throughput (facts/s, retrieval, shared context vs parity)",
    "verifier": "Trained verifier vs the LLM judge: facts/s at 1 thread, peak RSS",
    "atomic_facts": "Atomic facts: one generation at a time vs 3 decoded together; bios per hour end to end",
    "decomposer": "Decomposer: bios per hour end to end, the default decomposer vs each other one",
    "llm_kernels": "llama.cpp CPU kernels: prompt and decode tokens/s, bios per hour of facts (portable vs auto)",
    "llm_batching": "llama.cpp decoding steps with 1-4 sequences: cost, and whether the bits change",
    "q2_runtime": "Q² per response: ONNX int8 vs transformers fp32",
    "llm_runtime": "FActScore verification: llama.cpp Q4_K_M vs transformers fp32",
    "int8_fp32": "int8 vs fp32 agreement",
    "store": "Passage store: build, retrieval latency, HNSW at scale, peak RSS",
    "wiki": "Wikipedia-scale kb build (no vectors) and the first score of a topic",
    "dist": "Stand-alone binary: size and start-up",
    "ray_scaling": "Ray: scoring and passage embedding with 1 and 2 actors (cost model: docs/RAY.md)",
}
DEFAULT = [s for s in SECTIONS]
BEGIN, END = "<!-- bench:{} -->", "<!-- /bench:{} -->"
HAND = "<!-- by hand: everything below is kept as it is by `make bench` -->"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=Path("../shared/data"), help="shared data folder")
    p.add_argument("--only", default="", help=f"comma-separated sections ({', '.join(SECTIONS)}); default all")
    p.add_argument("--threads", default="1,2", help="thread counts to measure, e.g. 1,2")
    p.add_argument("--quick", action="store_true", help="smoke-size run (few inputs, small synthetic store)")
    p.add_argument("--out", type=Path, default=REPO / "docs" / "BENCHMARKS.md", help="markdown file to update")
    p.add_argument("--passages", type=int, default=1_000_000, help="size of the synthetic HNSW store")
    p.add_argument("--fresh", action="store_true", help="rebuild the cached synthetic store")
    p.add_argument("--wiki-pages", type=int, default=200_000, help="pages of the synthetic Wikipedia (wiki section)")
    p.add_argument("--wiki-dump-pages", type=int, default=20_000,
                   help="of which this many are built from the XML dump (wikitext parsing is the slow path)")
    p.add_argument("--llm-models", default="", help="llm_runtime models (0.5b, 1.5b or bundle names); "
                                                    "default 0.5b,1.5b (quick: 0.5b)")
    p.add_argument("--e2e-llm", default="1.5b", help="decomposer section: the LLM (0.5b, 1.5b, a bundle name "
                                                     "or a .gguf path); default 1.5b, the default bundle's")
    p.add_argument("--kernels", default="", help="llm_kernels: kernels measured besides portable and auto, "
                   "e.g. skylakex,icelake")
    p.add_argument("--prompts", type=int, default=10, help="verification prompts for llm_runtime")
    p.add_argument("--ray-bios", type=int, default=12, help="ray_scaling: bios scored locally and with 1 and 2 actors")
    args = p.parse_args(argv)
    args.threads = sorted({int(t) for t in args.threads.split(",") if t.strip()})
    args.llm_models = [m.strip() for m in args.llm_models.split(",") if m.strip()]
    args.sections = [s.strip() for s in args.only.split(",") if s.strip()] or DEFAULT
    unknown = [s for s in args.sections if s not in SECTIONS]
    if unknown:
        p.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    args.data = args.data.resolve()
    return args


# --- the dist section (small enough to live here) --------------------------------------------
def run_dist(args) -> tuple[str, dict]:
    binary = REPO / "dist" / "fscore-lite"
    if not binary.exists():
        raise FileNotFoundError(f"{binary} is not built (make dist)")
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
    for key in ("FSCORE_LITE_HOME", "FSCORE_LITE_MODELS"):
        if key in os.environ:
            env[key] = os.environ[key]
    bundle = binary.with_name("fscore-lite.d")  # the one-folder bundle behind the launcher
    size = sum(f.stat().st_size for f in bundle.rglob("*") if f.is_file() and not f.is_symlink()) if bundle.is_dir() else 0
    res = {"size_mb": (binary.stat().st_size + size) / 1e6, "commands": {}}
    for cmd in (["--help"], ["models", "list"]):
        times = []
        for _ in range(1 if args.quick else 5):
            t = time.perf_counter()
            proc = subprocess.run([str(binary), *cmd], env=env, capture_output=True)
            times.append(time.perf_counter() - t)
            if proc.returncode != 0:
                raise RuntimeError(f"{binary} {' '.join(cmd)} failed: {proc.stderr.decode()[-500:]}")
        res["commands"][" ".join(cmd)] = {"median_s": statistics.median(times), "min_s": min(times), "runs": len(times)}
    py = [sys.executable, "-m", "fscore_lite", "--help"]
    t = time.perf_counter()
    subprocess.run(py, capture_output=True)
    res["python_help_s"] = time.perf_counter() - t
    rows = [[f"`dist/fscore-lite {c}`", fmt_s(v["median_s"]), fmt_s(v["min_s"]), v["runs"]]
            for c, v in res["commands"].items()]
    rows.append(["`python -m fscore_lite --help` (venv, for comparison)", fmt_s(res["python_help_s"]), "", 1])
    md = (f"`dist/fscore-lite` and its bundle `dist/fscore-lite.d`: {res['size_mb']:.0f} MB (PyInstaller one-folder "
          "behind a launcher script). Clean environment (PATH=/usr/bin:/bin).\n\n"
          + md_table(["command", "median wall time", "fastest", "runs"], rows) + "\n")
    return md, res


# --- assembling docs/BENCHMARKS.md --------------------------------------------------------
def previous_sections(text: str) -> dict[str, str]:
    out = {}
    for name in SECTIONS:
        m = re.search(re.escape(BEGIN.format(name)) + r"\n(.*?)\n" + re.escape(END.format(name)), text, re.S)
        if m:
            out[name] = m.group(1)
    return out


def header(info: dict, command: str) -> str:
    return f"""# Benchmarks

Generated by `make bench` (`python -m bench --data ../shared/data`); rerun one part with
`python -m bench --only SECTION[,SECTION]` (sections: {', '.join(f'`{s}`' for s in SECTIONS)}), a smoke-size
run with `--quick`. Every comparison runs both sides in the same process, on the same pinned cores,
interleaved input by input, and is reported as a ratio. Raw numbers: `out/bench/<section>.json`.
Each section says when and with which command it was measured.

Last run ({now()}, `{command}`):

{machine_markdown(info)}

The machine is shared with other jobs: expect noise between runs; ratios are more stable than
absolute times. OpenMP runtimes (torch, llama.cpp) run with `OMP_WAIT_POLICY={os.environ.get("OMP_WAIT_POLICY", "")}`
(no busy-waiting): with busy-waiting, 2 threads on 2 shared cores were up to 16× slower than 1
thread for torch. fscore-lite's onnxruntime sessions with more than one thread let idle workers spin
for {session_spin(2)} µs before they sleep (`{SPIN_ENV}`; `fscore_lite/backends/onnx_session.py`), as at run time.
"""


def assemble(path: Path, new: dict[str, str], info: dict, command: str) -> str:
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    old = previous_sections(text)
    parts = [header(info, command)]
    for name, title in SECTIONS.items():
        body = new.get(name, old.get(name))
        if body is None:
            continue
        parts.append(f"{BEGIN.format(name)}\n{body}\n{END.format(name)}\n")
    if HAND in text:  # measurements taken by hand: kept as written
        parts.append(text[text.index(HAND):])
    return "\n".join(parts)


def section_text(name: str, markdown: str, info: dict, command: str, seconds: float) -> str:
    return (f"## {SECTIONS[name]}\n\n_Measured {now()} on {info['cpu']} ({info['usable_cores']} usable cores), "
            f"`{command}`, {seconds / 60:.1f} min._\n\n{markdown.strip()}\n")


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    command = "python -m bench " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    info = machine_info()
    new, failed = {}, []
    for name in args.sections:
        if name == "dist":
            fn = run_dist
        else:
            try:
                fn = importlib.import_module(f"bench.{name}").run
            except ModuleNotFoundError as e:
                if e.name != f"bench.{name}":
                    raise
                log(f"section {name}: bench/{name}.py is not there; skipped")
                continue
        log(f"section {name}: start")
        t0 = time.perf_counter()
        try:
            markdown, data = fn(args)
        except Exception:  # noqa: BLE001 - report, keep the other sections going
            log(f"section {name} FAILED:\n{traceback.format_exc()}")
            failed.append(name)
            continue
        secs = time.perf_counter() - t0
        save_json(name, {"machine": info, "command": command, "seconds": secs, "result": data})
        new[name] = section_text(name, markdown, info, command, secs)
        log(f"section {name}: done in {secs / 60:.1f} min")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(assemble(args.out, new, info, command), encoding="utf-8")  # after each section
    if new:
        log(f"wrote {args.out} ({', '.join(new)})")
    if failed:
        log(f"failed sections: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
