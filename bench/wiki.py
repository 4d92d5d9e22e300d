"""Section ``wiki``: `kb build` at Wikipedia scale, and what the first score of a topic pays.

1. A synthetic Wikipedia of ``--wiki-pages`` pages (:mod:`bench.wiki_corpus`: the development
   pages' sentences recombined under new titles), as FActScore's knowledge DB and as a
   ``pages-articles`` XML dump. ``kb build`` (no vectors: the default) of the DB at a tenth and
   at the full size (is memory flat?), and of the first ``--wiki-dump-pages`` pages of the dump
   (wikitext parsing and chunking in 1 and in 2 worker processes), each a child process: pages/s
   and the load average beside them, CPU seconds per 1000 pages (main process, its serial
   indexing tail, workers) and from them pages/s on 2 dedicated cores, passages/s, store size,
   peak RSS, and the extrapolation to the 6.5 million pages of enwiki-20230401.
2. The first retrieval from a page of such a store embeds that page (int8 MiniLM, one thread)
   and keeps its vectors; the second reads them. Timed per topic on the real development
   pages (a lazy store of wiki-factscore-dev) and on pages of the synthetic store.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .common import REPO, bench_home, log, md_table, run_with_peak_rss
from .wiki_corpus import write_corpus

ENWIKI_PAGES = 6_500_000  # FActScore's enwiki-20230401 knowledge source
TOPICS = 20


def _loadavg() -> float:
    with open("/proc/loadavg", encoding="ascii") as f:
        return float(f.read().split()[0])


def dedicated_seconds(cpu: dict, workers: int, cores: int = 2) -> float:
    """Wall seconds of a build on ``cores`` cores of its own, from its CPU seconds (load-independent).

    The main process's loop (reading, writing SQLite) overlaps the chunking workers, so that part
    takes the longest of: the loop alone, the workers' share each (``workers`` processes), and
    all of it spread over the cores; the full-text indexing and compaction at the end
    (``finish``) then run on one thread with nothing beside them."""
    loop = cpu["main"] - cpu["finish"]
    if workers == 0:
        return cpu["main"]
    return max(loop, cpu["workers"] / workers, (loop + cpu["workers"]) / cores) + cpu["finish"]


def _build(src: Path, out: Path, workers: int) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    cmd = ["nice", "-n", "10", sys.executable, "-m", "fscore_lite", "kb", "build", str(src), "-o", str(out),
           "--quiet", "--workers", str(workers)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "FSCORE_LITE_THREADS": "1"}
    log(f"wiki: {' '.join(cmd[3:])}")
    load0 = _loadavg()
    res = run_with_peak_rss(cmd, env=env, cwd=REPO)
    load1 = _loadavg()
    if res["returncode"] != 0:
        raise RuntimeError(f"kb build failed: {res['stderr'][-2000:]}")
    stats = json.loads(res["stdout"])
    size = sum(p.stat().st_size for p in out.iterdir())
    pages, cpu = stats["pages"], stats["cpu_seconds"]
    dedicated = dedicated_seconds(cpu, workers)
    return {"source": src.name, "workers": workers, "pages": pages, "passages": stats["passages"],
            "aliases": stats["aliases"], "build_seconds": stats["seconds"], "wall_seconds": res["seconds"],
            "finish_seconds": stats["finish_seconds"], "cpu_seconds": cpu, "load_before": load0, "load_after": load1,
            "pages_per_s": pages / stats["seconds"], "passages_per_s": stats["passages"] / stats["seconds"],
            "cpu_ms_per_page": {k: v / pages * 1000 for k, v in cpu.items()},
            "dedicated_seconds": dedicated, "dedicated_pages_per_s": pages / dedicated,
            "store_bytes": size, "peak_rss_mib": res["peak_rss_mib"],
            "enwiki_hours": ENWIKI_PAGES / (pages / stats["seconds"]) / 3600,
            "enwiki_dedicated_hours": ENWIKI_PAGES / (pages / dedicated) / 3600,
            "enwiki_store_gb": size / pages * ENWIKI_PAGES / 1e9}


def _first_retrievals(store_path: Path, titles: list[str]) -> dict:
    """Seconds of the first (embed and keep) and second (read) page_vectors call per topic."""
    from fscore_lite.backends.embed import SentenceEmbedder
    from fscore_lite.manifest import Bundle
    from fscore_lite.settings import Settings
    from fscore_lite.store import open_store

    (store_path / "vectors.sqlite").unlink(missing_ok=True)
    with open_store(store_path) as store:
        emb = SentenceEmbedder.from_bundle(Bundle(Settings().models_dir), store.embed_model, 1)
        first, second, sizes = [], [], []
        for title in titles:
            t = time.perf_counter()
            vecs = store.page_vectors(title, emb)
            first.append(time.perf_counter() - t)
            t = time.perf_counter()
            store.page_vectors(title, emb)
            second.append(time.perf_counter() - t)
            sizes.append(len(vecs))
    return {"topics": len(titles), "passages_mean": statistics.mean(sizes),
            "first_median_s": statistics.median(first), "first_max_s": max(first),
            "first_per_passage_s": sum(first) / sum(sizes), "second_median_s": statistics.median(second)}


def run(args) -> tuple[str, dict]:
    n = 20_000 if args.quick else args.wiki_pages
    n_dump = min(n, 2_000 if args.quick else args.wiki_dump_pages)
    home = bench_home() / "wiki"
    t = time.perf_counter()
    corpus = write_corpus(args.data, n, home)
    small = write_corpus(args.data, n // 10, home)
    dump = write_corpus(args.data, n_dump, home)["dump"]  # the same pages as a prefix of the big corpus
    gen_s = time.perf_counter() - t
    builds = [_build(small["db"], home / "store-db-small", 0), _build(corpus["db"], home / "store-db", 0),
              _build(dump, home / "store-dump", 1), _build(dump, home / "store-dump", 2)]
    # the first score of a topic: real development pages, then pages of the synthetic Wikipedia
    real = home / "store-dev"
    _build_dev(args.data, real)
    with open(args.data / "wiki-factscore-dev" / "pages.jsonl", encoding="utf-8") as f:
        dev_titles = [json.loads(x)["title"] for x in f if x.strip()][:TOPICS]
    from fscore_lite.store import open_store

    with open_store(home / "store-db") as s:
        syn_titles = random.Random(7).sample(s.titles(), TOPICS)
    first = {"dev": _first_retrievals(real, dev_titles), "synthetic": _first_retrievals(home / "store-db", syn_titles)}
    result = {"pages": n, "dump_pages": n_dump, "generate_seconds": gen_s, "builds": builds, "first": first,
              "command": f"nice -n 10 python -m bench --only wiki --wiki-pages {n} --wiki-dump-pages {n_dump}"}
    return _markdown(result), result


def _build_dev(data: Path, out: Path) -> None:
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "fscore_lite", "kb", "build", str(data / "wiki-factscore-dev" / "pages.jsonl"),
                    "-o", str(out), "--quiet", "--workers", "0"], check=True, capture_output=True, cwd=REPO,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})


def _markdown(r: dict) -> str:
    rows = [[b["source"], b["workers"], f"{b['pages']:,}", f"{b['passages']:,}",
             f"{b['build_seconds']:.0f} s ({b['finish_seconds']:.0f} s)", f"{b['load_before']:.1f}–{b['load_after']:.1f}",
             f"{b['pages_per_s']:.0f}",
             f"{b['cpu_seconds']['main'] / b['pages'] * 1000:.2f} ({b['cpu_seconds']['finish'] / b['pages'] * 1000:.2f})",
             f"{b['cpu_seconds']['workers'] / b['pages'] * 1000:.2f}", f"**{b['dedicated_pages_per_s']:.0f}**",
             f"{b['store_bytes'] / 1e6:.0f} MB", f"{b['peak_rss_mib']:.0f} MiB",
             f"{b['enwiki_hours']:.1f} h", f"{b['enwiki_dedicated_hours']:.1f} h", f"{b['enwiki_store_gb']:.0f} GB"]
            for b in r["builds"]]
    table = md_table(["source", "workers", "pages", "passages", "wall (of it indexing)", "load avg",
                      "pages/s (wall)", "CPU s / 1000 pages: main (indexing)", "workers", "pages/s, 2 own cores",
                      "store", "peak RSS", "6.5M pages (wall)", "6.5M pages, 2 own cores", "6.5M store"], rows)
    first = [[k, v["topics"], f"{v['passages_mean']:.1f}", f"{v['first_median_s']:.2f} s", f"{v['first_max_s']:.2f} s",
              f"{v['first_per_passage_s'] * 1000:.0f} ms", f"{v['second_median_s'] * 1000:.1f} ms"]
             for k, v in r["first"].items()]
    return f"""`kb build` without vectors (the default) of a synthetic Wikipedia of {r['pages']:,} pages made from the
development pages' sentences (`bench/wiki_corpus.py`, generated in {r['generate_seconds']:.0f} s), as FActScore's
knowledge DB (passages kept) and, for its first {r['dump_pages']:,} pages, as a `pages-articles` XML dump
(wikitext parsed and chunked in 1 and in 2 worker processes). Each build is a child process under `nice -n 10`
on cores shared with other jobs, so the wall figures move with the load average (`/proc/loadavg`, 1 min, before
and after). The CPU seconds (user + system, `getrusage` in `kb build`: the main process, of it the serial
full-text indexing and compaction at the end, and the chunking workers) do not; "2 own cores" turns them into
the wall time on 2 dedicated cores: the main process's loop overlaps the workers (the longest of the loop, a
worker's share, and loop + workers over 2 cores), then the indexing runs alone (`bench/wiki.py:
dedicated_seconds`). "6.5M pages"
extrapolates linearly to enwiki-20230401.

{table}

First retrieval from a page (embeds its passages with int8 MiniLM on 1 thread and keeps them) and second (reads
them), per topic; "dev" are the real wiki-factscore-dev pages, "synthetic" random pages of the store above:

{md_table(["pages", "topics", "passages/page", "first: median", "first: max", "first: per passage", "second: median"], first)}

Command: `{r['command']}`
"""
