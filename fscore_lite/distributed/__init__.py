"""Where the per-item scoring runs: in this process (the default) or on Ray actors.

``score_file`` and ``run_q2`` hand their pending items to an *executor*: an object with
``map(items) -> iterator of (line_no, record)``, where ``items`` is an iterable of
``(line_no, item)`` and the records come back in the order of ``items``. :class:`fscore_lite.driver.LocalExecutor`
is the plain loop; :class:`fscore_lite.distributed.ray_runner.RayExecutor` shards the items
over Ray actors. This module never imports ray: only ``--ray`` does.
"""
from __future__ import annotations

from contextlib import contextmanager

from ..errors import FscoreError


RAY_HELP = ("Score on Ray actors: local (start Ray on this machine), auto (the cluster `ray start` joined "
            "here) or a cluster address (HOST:PORT, ray://HOST:PORT); needs fscore-lite[ray]. Same output "
            "bytes as a local run with the same --threads (per actor).")
RAY_ACTORS_HELP = "Ray actors (default: the cluster's CPUs divided by --threads)."


@contextmanager
def executor_for(ray: str | None, actors: int | None, kind: str, settings, options, **extra):
    """The executor of a command: None (the local loop) without ``--ray``; else a
    :class:`~fscore_lite.distributed.ray_runner.RayExecutor`, closed on the way out."""
    if ray is None:
        yield None
        return
    _check_actors(actors)
    from .ray_runner import RayExecutor, ScorerSpec

    executor = RayExecutor(ScorerSpec(kind, settings, options, extra), ray, actors)
    try:
        yield executor
    finally:
        executor.close()


def ray_build_options(ray: str | None, actors: int | None, threads: int | None, models_dir=None,
                      embed: bool = True) -> dict:
    """``build_store`` arguments for ``kb build --embed --ray``: the driver's embedder, a
    :class:`~fscore_lite.distributed.ray_embed.RayEncoder` embedding windows of pages on the
    actors; ``{}`` without ``--ray``. The actors end with this process (Ray ends a job's actors
    with its driver)."""
    if ray is None:
        return {}
    if not embed:
        raise FscoreError("--ray embeds the passages on Ray actors: add --embed (without it no vectors are built)")
    _check_actors(actors)
    from ..backends.embed import SentenceEmbedder
    from ..manifest import Bundle
    from ..settings import DEFAULT_EMBED, Settings
    from .ray_embed import RayEncoder

    settings = Settings().with_(threads=threads, models_dir=models_dir)
    embedder = SentenceEmbedder.from_bundle(Bundle(settings.models_dir), DEFAULT_EMBED, settings.threads)
    encoder = RayEncoder(embedder, settings.models_dir, ray, actors)
    return {"embedder": embedder, "embed_pages": encoder.embed_pages, "window_pages": RayEncoder.WINDOW_PAGES}


def _check_actors(actors: int | None) -> None:
    if actors is not None and actors < 1:
        raise FscoreError(f"--ray-actors must be 1 or more, not {actors}")
