"""Figures as hand-written inline SVG (no plotting dependency, no script).

* Figure 2 of the FActScore paper, from the data: FActScore by entity-frequency category and
  the share of supported facts by relative position of the fact in the generation, one line
  per run.
* Q²: the score distribution and, with gold labels, the ROC curve.

Every point carries ``data-*`` attributes with the counts behind it, so tests (and curious
readers) can check that the bins cover every fact exactly once.
"""
from __future__ import annotations

from html import escape

# The FActScore paper's frequency categories, rarest first (labels as in the annotated bios).
CATEGORY_ORDER = ("very rare", "rare", "medium", "freq", "frequent", "very freq", "very frequent")
NO_CATEGORY = "(none)"
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22")


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def category_of(record: dict, field: str) -> str:
    """The category of a record: the first element of a list field (``"cat": ["very rare", ...]``),
    a string field itself, else ``(none)``."""
    v = record.get(field)
    if isinstance(v, (list, tuple)):
        v = v[0] if v else None
    if v is None or (isinstance(v, str) and not v.strip()):
        return NO_CATEGORY
    return str(v)


def order_categories(cats) -> list[str]:
    cats = set(cats)
    known = [c for c in CATEGORY_ORDER if c in cats]
    rest = sorted(c for c in cats if c not in CATEGORY_ORDER and c != NO_CATEGORY)
    return known + rest + ([NO_CATEGORY] if NO_CATEGORY in cats else [])


def position_bin(index: int, n: int, bins: int) -> int:
    """Bin of the fact at ``index`` of ``n`` by its relative position (centre of its slot)."""
    return min(bins - 1, int((index + 0.5) / n * bins))


def category_bins(responses: list[dict], categories: list[str]) -> list[dict]:
    """Per category: responding items, their facts and FActScore (mean per-response score).

    ``responses``: dicts with ``cat``, ``score`` and ``supported`` (one bool per fact), only
    responding items."""
    out = []
    for c in categories:
        rs = [r for r in responses if r["cat"] == c]
        scores = [r["score"] for r in rs if r["score"] is not None]
        out.append({"label": c, "n_responses": len(rs), "n_facts": sum(len(r["supported"]) for r in rs),
                    "n_supported": sum(sum(r["supported"]) for r in rs),
                    "value": (100.0 * sum(scores) / len(scores)) if scores else None})
    return out


def position_bins(responses: list[dict], bins: int) -> list[dict]:
    """Per relative-position bin: facts in it and the share supported (%)."""
    n_facts, n_sup = [0] * bins, [0] * bins
    for r in responses:
        n = len(r["supported"])
        for i, s in enumerate(r["supported"]):
            b = position_bin(i, n, bins)
            n_facts[b] += 1
            n_sup[b] += 1 if s else 0
    out = []
    for b in range(bins):
        lo, hi = round(100 * b / bins), round(100 * (b + 1) / bins)
        out.append({"label": f"{lo}–{hi}%", "lo": lo, "hi": hi, "n_facts": n_facts[b], "n_supported": n_sup[b],
                    "value": (100.0 * n_sup[b] / n_facts[b]) if n_facts[b] else None})
    return out


def _fmt(v: float) -> str:
    return f"{v:.1f}"


def line_chart(x_labels: list[str], series: list[dict], *, title: str, y_label: str, chart_id: str,
               width: int = 460, height: int = 300, y_max: float = 100.0, x_title: str = "") -> str:
    """A line chart over categorical x positions; ``series``: ``{"name", "color", "points"}``
    where each point is a bin dict with ``value`` (None = no data) and counts."""
    left, right, top, bottom = 48, 12, 28, 62
    pw, ph = width - left - right, height - top - bottom
    nx = max(1, len(x_labels))

    def x(i):
        return left + (pw * (i + 0.5) / nx)

    def y(v):
        return top + ph * (1 - v / y_max)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{escape(chart_id)}" '
             f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
             f'aria-label="{escape(title)}">',
             f'<text x="{width / 2:.1f}" y="16" text-anchor="middle" class="ct">{escape(title)}</text>']
    for t in range(0, 101, 20):
        v = y_max * t / 100
        parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" class="grid"/>'
                     f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end" class="tick">{v:g}</text>')
    parts.append(f'<text transform="translate(12,{top + ph / 2:.1f}) rotate(-90)" text-anchor="middle" '
                 f'class="tick">{escape(y_label)}</text>')
    for i, lab in enumerate(x_labels):
        parts.append(f'<text x="{x(i):.1f}" y="{top + ph + 16}" text-anchor="middle" class="tick">{escape(lab)}</text>')
    if x_title:
        parts.append(f'<text x="{left + pw / 2:.1f}" y="{top + ph + 34}" text-anchor="middle" class="tick">'
                     f'{escape(x_title)}</text>')
    for si, s in enumerate(series):
        segs, cur = [], []
        for i, p in enumerate(s["points"]):
            if p["value"] is None:
                if cur:
                    segs.append(cur)
                cur = []
            else:
                cur.append(f"{x(i):.1f},{y(p['value']):.1f}")
        if cur:
            segs.append(cur)
        for seg in segs:
            if len(seg) > 1:
                parts.append(f'<polyline points="{" ".join(seg)}" fill="none" stroke="{s["color"]}" stroke-width="2"/>')
        for i, p in enumerate(s["points"]):
            attrs = " ".join(f'data-{k.replace("_", "-")}="{escape(str(v))}"' for k, v in p.items()
                             if k in ("n_facts", "n_supported", "n_responses", "label"))
            if p["value"] is None:
                parts.append(f'<g class="pt empty" data-run="{si}" {attrs}></g>')
                continue
            tip = f"{s['name']} · {p['label']}: {_fmt(p['value'])}"
            tip += "".join(f", {k.replace('n_', '')} {p[k]}" for k in ("n_responses", "n_facts") if k in p)
            parts.append(f'<g class="pt" data-run="{si}" {attrs}><circle cx="{x(i):.1f}" cy="{y(p["value"]):.1f}" '
                         f'r="3.5" fill="{s["color"]}"/><title>{escape(tip)}</title></g>')
    ly = height - 12
    lx = left
    for s in series:
        parts.append(f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" fill="{s["color"]}"/>'
                     f'<text x="{lx + 14}" y="{ly}" class="tick">{escape(s["name"])}</text>')
        lx += 24 + 7 * len(s["name"])
    parts.append("</svg>")
    return "".join(parts)


def histogram_svg(series: list[dict], *, bins: int = 10, title: str, chart_id: str, width: int = 460,
                  height: int = 260) -> str:
    """Score distribution in [0, 1]: ``series`` ``{"name", "color", "values"}``, drawn as step lines
    of the share of responses per bin (%)."""
    pts = []
    for s in series:
        counts = [0] * bins
        for v in s["values"]:
            counts[min(bins - 1, max(0, int(v * bins)))] += 1
        n = len(s["values"])
        pts.append({"name": s["name"], "color": s["color"],
                    "points": [{"label": f"{b / bins:.1f}", "n_responses": counts[b],
                                "value": (100.0 * counts[b] / n) if n else None} for b in range(bins)]})
    labels = [f"{b / bins:.1f}–{(b + 1) / bins:.1f}" if bins <= 5 else f"{b / bins:.1f}" for b in range(bins)]
    return line_chart(labels, pts, title=title, y_label="% of responses", chart_id=chart_id, width=width,
                      height=height, x_title="score bin (lower edge)")


def roc_points(pairs: list[tuple[float, bool]]) -> list[tuple[float, float]]:
    """(FPR, TPR) for predicting the positive class when score > t, over every threshold."""
    pos = sum(1 for _, y in pairs if y)
    neg = len(pairs) - pos
    if not pos or not neg:
        return []
    pts = [(0.0, 0.0)]
    tp = fp = 0
    ordered = sorted(pairs, key=lambda p: -p[0])
    i = 0
    while i < len(ordered):
        j = i
        while j < len(ordered) and ordered[j][0] == ordered[i][0]:
            if ordered[j][1]:
                tp += 1
            else:
                fp += 1
            j += 1
        pts.append((fp / neg, tp / pos))
        i = j
    return pts


def roc_svg(curves: list[dict], *, title: str, chart_id: str, size: int = 300) -> str:
    """ROC curves: ``curves`` ``{"name", "color", "points": [(fpr, tpr), ...], "auc"}``."""
    left, top, pad = 44, 26, 40
    w = size - left - 12
    h = size - top - pad

    def px(fx):
        return left + w * fx

    def py(fy):
        return top + h * (1 - fy)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{escape(chart_id)}" '
             f'viewBox="0 0 {size} {size + 16 * len(curves)}" width="{size}" height="{size + 16 * len(curves)}" '
             f'role="img" aria-label="{escape(title)}">',
             f'<text x="{size / 2:.1f}" y="16" text-anchor="middle" class="ct">{escape(title)}</text>',
             f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="none" class="grid"/>',
             f'<line x1="{px(0):.1f}" y1="{py(0):.1f}" x2="{px(1):.1f}" y2="{py(1):.1f}" class="grid" '
             f'stroke-dasharray="4 3"/>']
    for t in (0, 0.5, 1):
        parts.append(f'<text x="{px(t):.1f}" y="{top + h + 14}" text-anchor="middle" class="tick">{t:g}</text>'
                     f'<text x="{left - 5}" y="{py(t) + 4:.1f}" text-anchor="end" class="tick">{t:g}</text>')
    parts.append(f'<text x="{left + w / 2:.1f}" y="{top + h + 30}" text-anchor="middle" class="tick">'
                 f'false positive rate</text>'
                 f'<text transform="translate(12,{top + h / 2:.1f}) rotate(-90)" text-anchor="middle" '
                 f'class="tick">true positive rate</text>')
    for i, c in enumerate(curves):
        pts = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in c["points"])
        parts.append(f'<polyline class="roc" points="{pts}" fill="none" stroke="{c["color"]}" stroke-width="2"/>')
        label = f"{c['name']} (AUC {c['auc']:.3f})" if c.get("auc") is not None else c["name"]
        y0 = size + 16 * i
        parts.append(f'<rect x="{left}" y="{y0 - 9}" width="10" height="10" fill="{c["color"]}"/>'
                     f'<text x="{left + 14}" y="{y0}" class="tick">{escape(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)
