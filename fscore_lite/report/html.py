"""One self-contained HTML report from ``score`` and ``q2`` outputs.

Everything is inline (CSS, script, SVG figures, data): the file opens from disk with no
network. Summary tables and figures are static HTML; each response is a one-line row, and
its details (highlighted sentences, facts, evidence, Q² questions) are rendered by the
script from an embedded JSON blob only when the row is opened, so large runs open fast.
"""
from __future__ import annotations

import json
from html import escape
from pathlib import Path

from .. import __version__
from ..errors import FscoreError
from ..io import atomic_write_text
from .assets import CSS, JS
from ..stats import LEVEL, N_BOOT, SEED
from .data import factscore_run, figure2_data, pairs, q2_classification, q2_run
from .figures import color, histogram_svg, line_chart, roc_svg
from .load import FACTSCORE, Q2, Run, load_run


def _pct(v, d=1) -> str:
    return "—" if v is None else f"{100 * v:.{d}f}"


def _num(v, d=3) -> str:
    return "—" if v is None else f"{v:.{d}f}"


def _attr(v) -> str:
    return "" if v is None else escape(repr(v) if isinstance(v, float) else str(v))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _short(h) -> str:
    return "—" if not h else f'<span class="hash" title="{escape(h)}">{escape(h[:12])}</span>'


def _statuses(st: dict) -> str:
    return " ".join(f'<span class="badge st-{escape(k)}">{escape(k)}: {v}</span>' for k, v in st.items())


# ---- passages -------------------------------------------------------------------------------
class PassageTexts:
    """Texts of evidence passages from the run's store (when it is on this machine and has the
    hash the summary records) or from ``--store``; keys ``"<store sha12>:<id>"``."""

    def __init__(self, store: str | Path | None = None):
        self.explicit = Path(store) if store else None
        self.texts: dict[str, dict] = {}
        self._run_store: dict[int, str | None] = {}

    def load_for(self, run: Run) -> None:
        path = self.explicit
        want = ((run.summary or {}).get("store") or {}).get("sha256")
        if path is None:
            p = ((run.summary or {}).get("store") or {}).get("path")
            path = Path(p) if p else None
        self._run_store[id(run)] = None
        if path is None or not path.is_dir():
            return
        from ..store import open_store

        try:
            store = open_store(path, verify=False)
        except Exception:  # a missing or damaged store only means no passage texts
            return
        try:
            if want and store.sha256 != want:
                return
            ids = {int(e["id"]) for r in run.records for d in (r.get("decisions") or [])
                   for e in (d.get("evidence") or []) if isinstance(e.get("id"), int)}
            tag = store.sha256[:12]
            for pid, p in store.passages_by_id(sorted(ids)).items():
                self.texts[f"{tag}:{pid}"] = {"title": p.title, "text": p.text}
            self._run_store[id(run)] = tag
        finally:
            store.close()

    def key(self, run: Run, pid) -> str | None:
        tag = self._run_store.get(id(run))
        k = f"{tag}:{pid}" if tag else None
        return k if k in self.texts else None


# ---- sections ---------------------------------------------------------------------------------
def _factscore_section(fs: list[dict], runs: list[Run], *, bins: int, n_boot: int, seed: int, category_field: str) -> str:
    ranked = sorted(fs, key=lambda r: (r["score"] is None, -(r["score"] or 0), r["index"]))
    h = ['<section id="factscore"><h2>FActScore</h2>',
         f'<p class="note">Ranked by FActScore (×100). {int(LEVEL * 100)}% intervals: percentile bootstrap over '
         f'responding items, {n_boot} resamples, seed {seed}. % responding is over scored or abstained items '
         f'(unknown topics and input problems are counted apart).</p>',
         '<div class="scroll"><table class="summary" id="fs-summary"><tr><th>#</th><th>run</th><th class="n">FActScore</th>'
         '<th class="n">95% CI</th><th class="n">init score</th><th class="n">% responding</th>'
         '<th class="n">facts / response</th><th class="n">responding / items</th><th>statuses</th><th>mode</th>'
         '<th>verifier</th><th>models</th><th>store</th></tr>']
    for rank, r in enumerate(ranked, 1):
        ci = r["ci"]
        models = "<br>".join(f"{escape(role)}: {escape(str(m.get('name')))} {_short(m.get('sha256'))}"
                             for role, m in r["models"].items()) or "—"
        h.append(f'<tr class="run" data-run="{r["index"]}" data-rank="{rank}">'
                 f'<td class="n">{rank}</td><td><b title="{escape(r["path"])}">{escape(r["name"])}</b></td>'
                 f'<td class="n score" data-value="{_attr(r["score"])}">{_pct(r["score"])}</td>'
                 f'<td class="n ci" data-lo="{_attr(ci[0] if ci else None)}" data-hi="{_attr(ci[1] if ci else None)}">'
                 f'{(_pct(ci[0]) + "–" + _pct(ci[1])) if ci else "—"}</td>'
                 f'<td class="n">{_pct(r["init_score"])}</td><td class="n">{_pct(r["respond_ratio"])}</td>'
                 f'<td class="n">{_num(r["facts_per_response"], 1)}</td>'
                 f'<td class="n">{r["n_responding"]} / {r["n_items"]}</td><td>{_statuses(r["statuses"])}</td>'
                 f'<td>{escape(str(r["mode"] or "—"))}</td><td>{escape(str(r["verifier"] or "—"))}</td>'
                 f'<td class="models">{models}</td><td>{_short(r["store_sha256"])}</td></tr>')
    h.append("</table></div>")
    if len(fs) == 1 and not fs[0]["models"]:
        h.append('<p class="note">No summary JSON next to the run: models, store and mode are unknown.</p>')
    if len(fs) > 1:
        prs = pairs(ranked, n_boot, seed)
        h.append("<h3>Paired differences</h3>")
        if prs:
            h.append(f'<p class="note">FActScore difference (×100) over the topics both runs responded to, '
                     f'{int(LEVEL * 100)}% bootstrap interval over those topics (pairs resampled together).</p>'
                     '<table id="fs-pairs"><tr><th>run A</th><th>run B</th><th class="n">shared topics</th>'
                     '<th class="n">A − B</th><th class="n">95% CI</th><th>interval excludes 0</th></tr>')
            for p in prs:
                h.append(f'<tr class="pair" data-mean="{_attr(p["mean"])}" data-lo="{_attr(p["ci"][0])}" '
                         f'data-hi="{_attr(p["ci"][1])}" data-n="{p["n"]}"><td>{escape(p["a"])}</td>'
                         f'<td>{escape(p["b"])}</td><td class="n">{p["n"]}</td><td class="n">{100 * p["mean"]:+.1f}</td>'
                         f'<td class="n">{100 * p["ci"][0]:+.1f} – {100 * p["ci"][1]:+.1f}</td>'
                         f'<td>{"yes" if p["excludes_zero"] else "no"}</td></tr>')
            h.append("</table>")
        else:
            h.append('<p class="note">No topic is scored in two runs, so no paired difference.</p>')
    fig = figure2_data(fs, bins)
    series_c = [{"name": s["name"], "color": color(s["run"]), "points": s["by_category"]} for s in fig["series"]]
    series_p = [{"name": s["name"], "color": color(s["run"]), "points": s["by_position"]} for s in fig["series"]]
    h.append("<h3>Figure 2</h3>"
             f'<p class="note">As in the FActScore paper: left, FActScore of the responses in each entity-frequency '
             f'category (field <code>{escape(category_field)}</code>, first element); right, share of atomic facts '
             f'supported by the fact\'s relative position in the generation ({bins} bins). Hover a point for '
             f'its counts.</p><div class="figs" id="figure2">')
    h.append(line_chart(fig["categories"], series_c, title="FActScore by entity frequency", y_label="FActScore",
                        chart_id="fig2-category", x_title=f"category ({category_field})"))
    h.append(line_chart([f"{b['lo']}" for b in fig["series"][0]["by_position"]] if fig["series"] else [], series_p,
                        title="% supported by relative position", y_label="% facts supported",
                        chart_id="fig2-position", x_title="relative position of the fact (% of generation, bin start)"))
    h.append("</div>")
    h.append(_list_controls("factscore", fs, "only responses / facts not supported"))
    rows = []
    for r in fs:
        for i, resp in enumerate(r["responses"]):
            nf = len(resp["facts"])
            ns = sum(1 for f in resp["facts"] if not f["ok"])
            nsent = sum(1 for s in resp["sents"] or [] if s["f"])
            score = f'{_num(resp["s"])}' if resp["s"] is not None else ""
            rows.append(f'<div class="resp" data-kind="factscore" data-run="{r["index"]}" data-i="{i}" '
                        f'data-status="{escape(resp["st"])}" data-nf="{nf}" data-ns="{ns if resp["st"] == "ok" else "-"}" '
                        f'data-nsent="{nsent}" data-topic="{escape(resp["t"].lower())}"><div class="rhead">'
                        f'<span class="topic">{escape(resp["t"])}</span><span class="rn">{escape(r["name"])}</span>'
                        f'<span class="badge st-{escape(resp["st"])}">{escape(resp["st"])}</span>'
                        f'<span class="rn">{_plural(nf, "fact")}, {ns} not supported</span><span class="sc">{score}</span>'
                        f'</div><div class="rbody" hidden></div></div>')
    h.append('<div class="legend note">Sentence colour: share of its facts supported — '
             '<span style="background:hsl(0,70%,80%)">0%</span><span style="background:hsl(60,70%,80%)">50%</span>'
             '<span style="background:hsl(120,70%,80%)">100%</span><span style="background:#eceef1">no facts</span>'
             ' · click a response to open it, then a sentence to see its facts.</div>')
    h.append(f'<div id="factscore-list">{"".join(rows)}</div></section>')
    return "".join(h)


def _list_controls(kind: str, runs: list[dict], ns_label: str) -> str:
    statuses = sorted({resp["st"] for r in runs for resp in r["responses"]})
    opts = "".join(f'<option value="{r["index"]}">{escape(r["name"])}</option>' for r in runs)
    sopts = "".join(f'<option value="{escape(s)}">{escape(s)}</option>' for s in statuses)
    return (f'<h3>Responses</h3><div class="controls"><label>run <select id="{kind}-run"><option value="all">all runs'
            f'</option>{opts}</select></label><label>status <select id="{kind}-status"><option value="all">all</option>'
            f'{sopts}</select></label><label><input type="checkbox" id="{kind}-ns"> {escape(ns_label)}</label>'
            f'<label>topic <input type="search" id="{kind}-search" placeholder="filter by topic"></label>'
            f'<span class="count" id="{kind}-count"></span></div>')


def _q2_section(q2: list[dict]) -> str:
    h = ['<section id="q2"><h2>Q²</h2>',
         '<div class="scroll"><table class="summary" id="q2-summary"><tr><th>run</th><th class="n">Q²</th><th class="n">Q² no NLI</th>'
         '<th class="n">E2E NLI</th><th class="n">scored / items</th><th class="n">no valid question</th>'
         '<th class="n">questions / response</th><th>statuses</th><th>backends</th></tr>']
    for r in q2:
        qpr = r["n_questions"] / r["n_scored"] if r["n_scored"] else None
        backends = "<br>".join(f"{escape(k)}: {escape(v)}" for k, v in r["backends"].items()) or "—"
        h.append(f'<tr class="run" data-run="{r["index"]}"><td><b title="{escape(r["path"])}">{escape(r["name"])}</b></td>'
                 f'<td class="n score" data-value="{_attr(r["Q2"])}">'
                 f'{_num(r["Q2"])}</td><td class="n">{_num(r["Q2_no_nli"])}</td><td class="n">{_num(r["e2e_nli"])}</td>'
                 f'<td class="n">{r["n_scored"]} / {r["n_items"]}</td><td class="n">{_pct(r["no_valid_question_share"])}%</td>'
                 f'<td class="n">{_num(qpr, 2)}</td><td>{_statuses(r["statuses"])}</td><td>{backends}</td></tr>')
    h.append("</table></div>")
    series = [{"name": r["name"], "color": color(r["index"]),
               "values": [x["q2"] for x in r["responses"] if x["st"] == "ok" and x["q2"] is not None]} for r in q2]
    h.append('<h3>Score distribution</h3><div class="figs">'
             + histogram_svg(series, title="Q² per response", chart_id="q2-hist") + "</div>")
    cls = q2_classification(q2)
    if cls:
        h.append('<h3>Against gold labels</h3><p class="note">Positive class: consistent (grounded). A response is '
                 'judged inconsistent when its score ≤ 0.5, as in the paper. Gold labels come from a label field of '
                 'the records or from the file name (<code>*_consistent</code> / <code>*_inconsistent</code>).</p>'
                 '<table id="q2-gold"><tr><th>group</th><th>score</th><th class="n">n</th><th class="n">consistent</th>'
                 '<th class="n">accuracy at 0.5</th><th class="n">ROC AUC</th></tr>')
        curves = []
        for g in cls:
            for key, m in g["metrics"].items():
                h.append(f'<tr class="gold" data-group="{escape(g["group"])}" data-score="{key}" '
                         f'data-accuracy="{_attr(m["accuracy"])}" data-auc="{_attr(m["auc"])}" data-n="{m["n"]}">'
                         f'<td>{escape(g["group"])}</td><td>{escape(m["label"])}</td><td class="n">{m["n"]}</td>'
                         f'<td class="n">{m["n_consistent"]}</td><td class="n">{m["accuracy"]:.1f}%</td>'
                         f'<td class="n">{_num(m["auc"])}</td></tr>')
            if "q2" in g["metrics"]:
                m = g["metrics"]["q2"]
                curves.append({"name": f"{g['group']} Q²", "color": color(len(curves)), "points": m["points"],
                               "auc": m["auc"]})
        h.append("</table>")
        h.append('<div class="figs">' + roc_svg(curves, title="ROC (Q²)", chart_id="q2-roc") + "</div>")
    h.append(_list_controls("q2", q2, "only inconsistent (Q² ≤ 0.5)"))
    rows = []
    for r in q2:
        for i, resp in enumerate(r["responses"]):
            low = resp["st"] == "ok" and resp["q2"] is not None and resp["q2"] <= 0.5
            label = resp.get("topic") or resp["r"][:80]
            rows.append(f'<div class="resp" data-kind="q2" data-run="{r["index"]}" data-i="{i}" '
                        f'data-status="{escape(resp["st"])}" data-nq="{len(resp["qs"])}" data-ns="{1 if low else 0}" '
                        f'data-topic="{escape((resp.get("topic") or "") .lower() + " " + resp["r"].lower())}">'
                        f'<div class="rhead"><span class="topic">{escape(label)}</span><span class="rn">{escape(r["name"])}'
                        f'</span><span class="badge st-{escape(resp["st"])}">{escape(resp["st"])}</span>'
                        f'<span class="rn">{_plural(len(resp["qs"]), "question")}</span><span class="sc">{_num(resp["q2"])}</span>'
                        f'</div><div class="rbody" hidden></div></div>')
    h.append(f'<div id="q2-list">{"".join(rows)}</div></section>')
    return "".join(h)


# ---- the report --------------------------------------------------------------------------------
def _json_for_script(obj) -> str:
    """JSON safe inside <script>: no '<' can end the element or open a comment."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


MAX_BOOTSTRAP = 100_000  # resamples: the 95% interval's ends settle long before this
MAX_POSITION_BINS = 1000  # Figure 2's bins: each is a table column and a point of the plot


def check_report_options(n_boot: int, position_bins: int) -> None:
    """``--bootstrap`` 1 to :data:`MAX_BOOTSTRAP` and ``--position-bins`` 1 to :data:`MAX_POSITION_BINS`
    (memory grows with both), checked before any run is read."""
    if not 1 <= n_boot <= MAX_BOOTSTRAP:
        raise FscoreError(f"--bootstrap must be 1 or more resamples, at most {MAX_BOOTSTRAP}, not {n_boot}")
    if not 1 <= position_bins <= MAX_POSITION_BINS:
        raise FscoreError(f"--position-bins must be 1 or more, at most {MAX_POSITION_BINS}, not {position_bins}")


def build_report(runs: list, *, labels: list[str] | None = None, category_field: str = "cat",
                 position_bins: int = 10, n_boot: int = N_BOOT, seed: int = SEED, store: str | Path | None = None,
                 title: str | None = None, human: str | Path | None = None) -> str:
    """The report as an HTML string; ``runs``: paths of ``score``/``q2`` output JSONL (or :class:`Run`)."""
    if not runs:
        raise FscoreError("no runs given")
    check_report_options(n_boot, position_bins)
    if labels and len(labels) != len(runs):
        raise FscoreError(f"{len(labels)} labels for {len(runs)} runs")
    loaded = [r if isinstance(r, Run) else load_run(r, labels[i] if labels else None) for i, r in enumerate(runs)]
    if human is not None:  # the annotated bios' human FActScore beside each run of an annotated subject
        from .human import with_human_runs

        loaded = with_human_runs(loaded, human, category_field)
    names = [r.name for r in loaded]
    for i, r in enumerate(loaded):  # distinct names for the tables and legends
        if names.count(r.name) > 1:
            r.name = f"{r.name} ({i + 1})"
    texts = PassageTexts(store)
    fs, q2 = [], []
    for r in loaded:
        if r.kind == FACTSCORE:
            texts.load_for(r)
            fs.append(factscore_run(r, len(fs), category_field=category_field, bins=position_bins, n_boot=n_boot,
                                    seed=seed, passage_key=texts.key))
        else:
            q2.append(q2_run(r, len(q2)))
    body = []
    if fs:
        body.append(_factscore_section(fs, loaded, bins=position_bins, n_boot=n_boot, seed=seed,
                                       category_field=category_field))
    if q2:
        body.append(_q2_section(q2))
    keep = ("name", "path", "responses")
    data = {"version": __version__, "factscore": [{k: r[k] for k in keep} for r in fs],
            "q2": [{k: r[k] for k in keep} for r in q2], "passages": texts.texts}
    title = title or ("fscore-lite report: " + ", ".join(r.name for r in loaded))
    sources = ", ".join(escape(str(r.path)) for r in loaded)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "script-src 'unsafe-inline'; img-src data:\">"
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
            f"<header><h1>{escape(title)}</h1><p>fscore-lite {escape(__version__)} · {len(loaded)} run(s): {sources}</p>"
            f"</header><main>{''.join(body)}</main>"
            f'<script type="application/json" id="report-data">{_json_for_script(data)}</script>'
            f"<script>{JS}</script></body></html>\n")


def write_report(runs: list, out_path: str | Path, **kwargs) -> Path:
    """Write the self-contained HTML report of ``runs`` to ``out_path``; returns the path.

    Keyword arguments as :func:`build_report`: ``labels``, ``category_field`` ("cat"),
    ``position_bins`` (10), ``n_boot`` (1000), ``seed`` (0), ``store``, ``title``, ``human``
    (a data folder with ``factscore-labeled/``: adds the human FActScore of the same bios)."""
    out = Path(out_path)
    atomic_write_text(out, build_report(runs, **kwargs))
    return out
