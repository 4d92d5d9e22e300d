"""Bench section "ray_scaling": scoring and passage embedding on Ray actors, 1 vs 2 actors.

One local Ray instance with as many CPUs as this process may use; every actor runs 1 thread.
FActScore: annotated bios with their human-made (InstructGPT) atomic facts given, the trained
verifier, no call cache, scored in this process (the local loop), then with 1 and 2 actors;
the three outputs must be the same bytes. Embedding: ``kb build`` of wiki pages with the local
``embed_page`` and with 1 and 2 embedding actors; the three stores must be the same bytes.

What the cost model in docs/RAY.md needs comes out of this run: seconds per bio and per
passage per actor, the actors' start-up, the driver's own share of a build (chunking, SQLite
and HNSW writes: the single writer) and the store's bytes per passage.
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from .common import bench_home, labeled_facts, log, md_table, usable_cores, wiki_pages, wiki_store


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _work() -> Path:
    path = bench_home() / "ray"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _score_runs(data: Path, n_bios: int, cpus: int) -> dict:
    from fscore_lite.distributed.ray_runner import RayExecutor, ScorerSpec
    from fscore_lite.factscore.pipeline import ScoreOptions, score_file
    from fscore_lite.settings import Settings

    store = wiki_store(data, n_bios)
    facts = labeled_facts(data)
    topics = [p["topic"] for p in wiki_pages(data, n_bios)]
    src = _work() / f"bios{n_bios}.jsonl"
    src.write_text("".join(json.dumps({"topic": t, "facts": facts[t]}, ensure_ascii=False) + "\n" for t in topics),
                   encoding="utf-8")
    n_facts = sum(len(facts[t]) for t in topics)
    settings = Settings(threads=1, store=store, use_cache=False)
    options = ScoreOptions(verifier="trained", progress=False)
    runs = []
    for actors in (0, 1, 2):  # 0: this process, the local loop
        out = _work() / f"out-{actors}.jsonl"
        executor, start_s = None, 0.0
        if actors:
            executor = RayExecutor(ScorerSpec("factscore", settings, options), "local", actors=min(actors, cpus))
            t = time.perf_counter()
            list(executor.map([]))  # starts the actors: each loads and verifies the models and the store
            start_s = time.perf_counter() - t
        try:
            t = time.perf_counter()
            summary = score_file(src, out, settings, options, executor=executor)
            secs = time.perf_counter() - t
        finally:
            if executor is not None:
                executor.close()
        log(f"ray_scaling: score with {actors or 'no'} actor(s): {secs:.1f} s")
        runs.append({"actors": actors, "seconds": secs, "actor_start_s": start_s, "bios": len(topics),
                     "facts": n_facts, "load_s": summary["timings"]["load_s"], "sha256": _sha(out)})
    return {"store": str(store), "input": str(src), "runs": runs}


def _embed_runs(data: Path, n_pages: int, cpus: int) -> dict:
    from fscore_lite.backends.embed import SentenceEmbedder
    from fscore_lite.distributed.ray_embed import RayEncoder
    from fscore_lite.manifest import Bundle
    from fscore_lite.settings import DEFAULT_EMBED, Settings
    from fscore_lite_index.build import build_store

    src = _work() / f"pages{n_pages}.jsonl"
    src.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in wiki_pages(data, n_pages)),
                   encoding="utf-8")
    settings = Settings(threads=1)
    embedder = SentenceEmbedder.from_bundle(Bundle(settings.models_dir), DEFAULT_EMBED, 1)
    runs = []
    for actors in (0, 1, 2):
        out = _work() / f"store-{actors}"
        encoder, start_s = None, 0.0
        if actors:
            encoder = RayEncoder(embedder, settings.models_dir, "local", actors=min(actors, cpus))
            t = time.perf_counter()
            encoder.start()
            start_s = time.perf_counter() - t
        try:
            flush = ({"embed_pages": encoder.embed_pages, "window_pages": RayEncoder.WINDOW_PAGES}  # as --ray
                     if encoder else {})
            stats = build_store(src, out, source_label="wiki-factscore-dev (bench)", snapshot="2026", threads=1,
                                embedder=embedder, progress=False, hnsw=True, overwrite=True, **flush)
        finally:
            if encoder is not None:
                encoder.close()
        size = sum(f.stat().st_size for f in out.iterdir())
        log(f"ray_scaling: kb build with {actors or 'no'} actor(s): {stats.seconds:.1f} s")
        runs.append({"actors": actors, "seconds": stats.seconds, "embed_seconds": stats.embed_seconds,
                     "actor_start_s": start_s, "pages": stats.pages, "passages": stats.passages,
                     "store_sha256": stats.store_sha256, "store_bytes": size})
    return {"input": str(src), "runs": runs}


def run(args) -> tuple[str, dict]:
    import ray

    from fscore_lite.distributed.ray_runner import connect

    data = Path(args.data)
    quick = bool(getattr(args, "quick", False))
    n_bios, n_pages = (3, 3) if quick else (getattr(args, "ray_bios", 12), 12)
    cpus = len(usable_cores())
    t = time.perf_counter()
    connect("local", num_cpus=cpus)
    ray_start = time.perf_counter() - t
    try:
        score = _score_runs(data, n_bios, cpus) if _verifier_installed() else None
        embed = _embed_runs(data, n_pages, cpus)
    finally:
        ray.shutdown()
    res = {"cpus": cpus, "ray_init_s": ray_start, "ray_version": ray.__version__, "score": score, "embed": embed}
    res["cost_model"] = cost_model(res)
    return _markdown(res), res


def _verifier_installed() -> bool:
    from fscore_lite.manifest import Bundle
    from fscore_lite.settings import Settings

    if Bundle(Settings().models_dir).first_for_role("verifier") is not None:
        return True
    log("ray_scaling: no trained verifier installed (make models-verifier): the FActScore part is not run")
    return False


CASE_STUDY_BIOS = 6_500  # FActScore's case study: 13 LMs × 500 bios
SNAPSHOT_PAGES = 6_500_000  # enwiki-20230401, FActScore's knowledge source
MACHINES = (1, 8, 64)


def cost_model(res: dict) -> dict:
    """Wall time and machine-hours on N machines like this one (its CPUs, 1-thread actors), from
    this run's figures: a machine does what the 2-actor run did per second; ``kb build`` adds the
    driver's serial work (chunking, SQLite, HNSW: the one writer) to every flush, which no
    number of machines shortens; the actors' start-up is paid once."""
    s, e = res["score"]["runs"] if res["score"] else None, res["embed"]["runs"]
    start = res["ray_init_s"] + (s or e)[2]["actor_start_s"]
    bio_s_machine = s[2]["seconds"] / s[2]["bios"] if s else None  # seconds per bio on one machine (all its actors)
    psg_s_machine = e[2]["embed_seconds"] / e[2]["passages"]
    driver_s = (e[0]["seconds"] - e[0]["embed_seconds"]) / e[0]["passages"]  # serial, per passage
    per_page = e[0]["passages"] / e[0]["pages"]
    passages = SNAPSHOT_PAGES * per_page
    rows = []
    for n in MACHINES:
        bios_wall = start + CASE_STUDY_BIOS * bio_s_machine / n if s else None
        embed_wall = start + passages * (psg_s_machine / n + driver_s)
        rows.append({"machines": n, "case_study_wall_h": bios_wall / 3600 if s else None,
                     "case_study_machine_h": n * bios_wall / 3600 if s else None,
                     "snapshot_wall_h": embed_wall / 3600, "snapshot_machine_h": n * embed_wall / 3600})
    return {"start_s": start, "bio_s_per_machine": bio_s_machine, "passage_s_per_machine": psg_s_machine,
            "driver_s_per_passage": driver_s, "passages_per_page": per_page, "snapshot_passages": passages,
            "store_bytes_per_passage": e[0]["store_bytes"] / e[0]["passages"], "rows": rows}


def _markdown(res: dict) -> str:
    md = [f"Ray {res['ray_version']}, one local instance with {res['cpus']} CPUs (`ray.init` {res['ray_init_s']:.1f} s), "
          "1 thread per actor.", ""]
    if res["score"]:
        md += _score_markdown(res["score"]["runs"])
    else:
        md += ["**FActScore**: not run (no trained verifier was installed: `make models-verifier`).", ""]
    e = res["embed"]["runs"]
    same_e = "yes" if len({r["store_sha256"] for r in e}) == 1 else "**NO**"
    rows = []
    for r in e:
        rows.append([r["actors"] or "none (local encode)", r["pages"], r["passages"], f"{r['seconds']:.1f} s",
                     f"{r['embed_seconds']:.1f} s", f"{r['passages'] / r['seconds']:.1f}",
                     f"{r['passages'] / max(1e-9, r['seconds'] - r['embed_seconds']):.0f}",
                     f"{r['actor_start_s']:.1f} s" if r["actors"] else "—"])
    md += ["**Passage embedding** (`kb build --ray local --threads 1 --hnsw`, wiki-factscore-dev pages, reference "
           "chunking; the driver chunks, writes SQLite and inserts into HNSW):", "",
           md_table(["actors", "pages", "passages", "build", "waiting for vectors", "passages/s",
                     "driver ceiling (passages/s outside embedding)", "actors' start-up"], rows), "",
           f"2 actors / 1 actor: **{e[1]['seconds'] / e[2]['seconds']:.2f}×** the passages per second. Stores "
           f"byte-identical: {same_e}; {e[0]['store_bytes'] / e[0]['passages']:.0f} bytes per passage on disk "
           "(with HNSW).", ""]
    c = res["cost_model"]

    def hours(x, fmt):
        return "—" if x is None else format(x, fmt)

    rows = [[r["machines"], hours(r["case_study_wall_h"], ".2f"), hours(r["case_study_machine_h"], ".2f"),
             hours(r["snapshot_wall_h"], ",.0f"), hours(r["snapshot_machine_h"], ",.0f")] for r in c["rows"]]
    per_bio = f"{c['bio_s_per_machine']:.2f} s per bio and " if c["bio_s_per_machine"] else ""
    md += [f"**Cost model** (docs/RAY.md): machines like this one ({res['cpus']} CPUs, {res['cpus']} actors); "
           f"{per_bio}{c['passage_s_per_machine'] * 1000:.0f} ms per passage per machine (the 2-actor runs), "
           f"{c['driver_s_per_passage'] * 1000:.1f} ms per passage of serial driver work, {c['start_s']:.0f} s "
           f"start-up; {CASE_STUDY_BIOS:,} bios with given facts; the snapshot as {SNAPSHOT_PAGES:,} pages × "
           f"{c['passages_per_page']:.1f} passages per page (these pages' mean) = "
           f"{c['snapshot_passages'] / 1e6:.0f} M passages, a "
           f"{c['snapshot_passages'] * c['store_bytes_per_passage'] / 1e9:,.0f} GB store:", "",
           md_table(["machines", "case study: wall (h)", "machine-hours", "snapshot embedding: wall (h)",
                     "machine-hours"], rows), ""]
    return "\n".join(md)


def _score_markdown(s: list[dict]) -> list[str]:
    same = "yes" if len({r["sha256"] for r in s}) == 1 else "**NO**"
    rows = [[r["actors"] or "none (local loop)", r["bios"], r["facts"], f"{r['seconds']:.1f} s",
             f"{r['seconds'] / r['bios']:.2f} s", f"{r['facts'] / r['seconds']:.1f}",
             f"{r['actor_start_s']:.1f} s" if r["actors"] else "—"] for r in s]
    return ["**FActScore**: annotated bios with their human-made atomic facts given, trained verifier, no call "
            "cache (`score --ray local --threads 1`):", "",
            md_table(["actors", "bios", "facts", "time", "per bio", "facts/s", "actors' start-up"], rows), "",
            f"2 actors / 1 actor: **{s[1]['seconds'] / s[2]['seconds']:.2f}×** the bios per second; 1 actor / local "
            f"loop: {s[0]['seconds'] / s[1]['seconds']:.2f}×. Outputs byte-identical: {same}.", ""]
