"""Side-by-side benchmarks of fscore-lite (``make bench`` → ``python -m bench --data ../shared/data``).

Each section is a module with ``run(args) -> (markdown, data)``; :mod:`bench.__main__` runs
the chosen sections and rewrites only their parts of ``docs/BENCHMARKS.md``. ``args`` has:
``data`` (Path of the shared data folder), ``threads`` (list of thread counts, e.g. [1, 2]),
``quick`` (bool: smoke-size run), ``passages`` (int: size of the synthetic store),
``llm_models`` (list of bundle names for ``llm_runtime``) and ``prompts`` (int).

Sections: ``factscore``, ``verifier``, ``atomic_facts``, ``q2_runtime``, ``llm_runtime``, ``int8_fp32``,
``store``, ``dist`` and ``ray_scaling``. Raw results also go to ``out/bench/<section>.json``. The benchmarks use
the runtime's public methods only; :mod:`bench.q2_stages` times Q² stage by stage.
"""
