"""The report's inline stylesheet and script (no network: everything is in the one file)."""

CSS = r"""
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:14px 24px}
header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c8cdd6;font-size:12px}
main{padding:12px 24px 40px;max-width:1280px}
section{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:12px 18px;margin:14px 0}
h2{font-size:17px;margin:4px 0 10px}
h3{font-size:15px;margin:16px 0 6px}
table{border-collapse:collapse;font-size:13px}
.scroll{overflow-x:auto}
th,td{border-bottom:1px solid #e4e7ec;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f0f2f5;font-weight:600}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
table.summary td.ci,.hash{white-space:nowrap}
table.summary td.models{font-size:12px}
.hash{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;color:#555}
.note{color:#5b6372;font-size:12px;margin:4px 0}
.figs{display:flex;flex-wrap:wrap;gap:12px}
.chart{background:#fff;border:1px solid #eceff3;border-radius:4px}
.chart .grid{stroke:#e3e6eb;stroke-width:1}
.chart .tick{font-size:11px;fill:#4a5160}
.chart .ct{font-size:13px;font-weight:600;fill:#1d2330}
.controls{display:flex;flex-wrap:wrap;gap:14px;align-items:center;margin:8px 0;padding:8px;background:#f0f2f5;border-radius:4px}
.controls input[type=search]{padding:3px 6px;min-width:220px}
.resp{border:1px solid #e4e7ec;border-radius:4px;margin:4px 0;background:#fff}
.rhead{display:flex;gap:10px;align-items:baseline;padding:5px 10px;cursor:pointer;user-select:none}
.rhead:hover{background:#f5f7fa}
.rhead .topic{font-weight:600;min-width:220px}
.rhead .rn{color:#5b6372;font-size:12px}
.rhead .sc{margin-left:auto;font-variant-numeric:tabular-nums}
.rbody{padding:4px 12px 12px;border-top:1px solid #eef0f3}
.badge{display:inline-block;border-radius:3px;padding:0 6px;font-size:12px;background:#e6e9ee;color:#333}
.st-ok{background:#d9f2e1;color:#145a2a}
.st-abstained,.st-no_facts,.st-empty_output,.st-empty_response,.st-empty_knowledge{background:#fdf0cf;color:#6b4d00}
.st-topic_not_found,.st-output_too_long{background:#fde0e0;color:#8a1c1c}
.err{color:#8a1c1c;font-size:12px;margin:4px 0}
.text{line-height:1.9;margin:8px 0}
.sent{border-radius:3px;padding:2px 1px;cursor:pointer;box-decoration-break:clone;-webkit-box-decoration-break:clone}
.sent:hover{outline:1px solid #7a8599}
.sent.active{outline:2px solid #1d2330}
.sent.nofacts{background:#eceef1;color:#596070}
.facts{border-left:3px solid #c5ccd8;padding:2px 10px;margin:6px 0}
.fact{padding:4px 0;border-bottom:1px dashed #e4e7ec}
.fact .dec{display:inline-block;min-width:92px;font-size:12px;font-weight:600;border-radius:3px;padding:0 5px;text-align:center}
.fact.sup .dec{background:#d9f2e1;color:#145a2a}
.fact.unsup .dec{background:#fde0e0;color:#8a1c1c}
.num{color:#5b6372;font-size:12px;font-variant-numeric:tabular-nums}
.evs summary{cursor:pointer;color:#36506e;font-size:12px}
.evs ol{margin:4px 0;padding-left:20px}
.ev{margin:4px 0}
.ev .ptext{font-size:12.5px;color:#333;background:#fafbfc;border:1px solid #eef0f3;padding:4px 6px;border-radius:3px;margin-top:2px}
mark{background:#ffe58a;padding:0 1px}
.only-ns .fact.sup{display:none}
.hint{color:#5b6372;font-size:12px;margin:4px 0}
.legend span{display:inline-block;padding:0 6px;margin-right:4px;border-radius:3px;font-size:12px}
.know{font-size:13px;background:#fafbfc;border:1px solid #eef0f3;padding:6px;border-radius:3px}
.qspan{border-radius:3px;padding:1px 2px;cursor:pointer}
tr.qa.active td{background:#fff6cc}
.count{color:#5b6372;font-size:12px}
"""

JS = r"""
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("report-data").textContent);
  var P = DATA.passages || {};
  var ESC = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"};
  function esc(s) { return String(s == null ? "" : s).replace(/[&<>"']/g, function (c) { return ESC[c]; }); }
  function num(v, d) { return v == null ? "—" : Number(v).toFixed(d); }
  function shareColor(share) { return "hsl(" + Math.round(share * 120) + ",70%,80%)"; }
  var STOP = new Set(("the a an of in on at to for and or is was were be been by with as from that this his her " +
    "its their he she it they has have had who which also are not into than then there these those").split(" "));
  var WORD = /([\p{L}\p{N}]+)/u;
  function words(s) { return String(s).toLowerCase().match(/[\p{L}\p{N}]+/gu) || []; }
  function emphasise(text, fact) {
    var keep = new Set(words(fact).filter(function (w) { return w.length > 2 && !STOP.has(w); }));
    return String(text).replace(/<\/?s>/g, " ").split(WORD).map(function (tok, i) {
      return (i % 2 === 1 && keep.has(tok.toLowerCase())) ? "<mark>" + esc(tok) + "</mark>" : esc(tok);
    }).join("");
  }

  // ---- FActScore ----------------------------------------------------------------------------
  function factHtml(f, idx) {
    var conf = [];
    if (f.p != null) conf.push("p(supported) " + num(f.p, 3));
    if (f.m != null) conf.push("margin " + (f.m >= 0 ? "+" : "") + num(f.m, 3));
    if (f.np != null) conf.push("NP " + num(f.np, 3));
    if (f.r) conf.push("rule: " + esc(f.r));
    var ev = f.ev.map(function (e, k) {
      var p = e.k ? P[e.k] : null;
      return '<li class="ev"><b>' + esc(e.ti) + '</b> <span class="num">passage ' + esc(e.id) + " · retrieval " +
        num(e.sc, 3) + (e.ps != null ? " · passage score " + num(e.ps, 3) : "") + "</span>" +
        (p ? '<div class="ptext">' + emphasise(p.text, f.a) + "</div>" : "") + "</li>";
    }).join("");
    return '<div class="fact ' + (f.ok ? "sup" : "unsup") + '" data-fact="' + idx + '"><span class="dec">' +
      (f.ok ? "supported" : "not supported") + '</span> <span class="atom">' + esc(f.a) + '</span> <span class="num">' +
      conf.join(" · ") + "</span>" + (f.ev.length ? '<details class="evs"><summary>evidence (' + f.ev.length +
      " passages; words shared with the fact marked)</summary><ol>" + ev + "</ol></details>" : "") + "</div>";
  }
  function renderFs(run, i, body) {
    var r = DATA.factscore[run].responses[i], h = [];
    h.push('<div class="num">status <span class="badge st-' + esc(r.st) + '">' + esc(r.st) + "</span>" +
      (r.s != null ? " · score " + num(r.s, 3) + " · unpenalised " + num(r.i, 3) : "") +
      " · " + r.facts.length + " facts · category " + esc(r.cat) + "</div>");
    if (r.err) h.push('<div class="err">' + esc(r.err) + "</div>");
    if (r.sents) {
      h.push('<p class="text">' + r.sents.map(function (s, j) {
        var n = s.f.length, k = s.f.filter(function (x) { return r.facts[x].ok; }).length;
        return '<span class="sent' + (n ? "" : " nofacts") + '" data-sent="' + j + '" data-n="' + n + '" data-sup="' +
          k + '" title="' + k + " of " + n + ' facts supported"' + (n ? ' style="background:' + shareColor(k / n) + '"' : "") +
          ">" + esc(s.x) + "</span>";
      }).join(" ") + '</p><div class="facts" data-sent="none"><p class="hint">Click a sentence to see its atomic facts.</p></div>');
    } else {
      if (r.out) h.push('<p class="text plain">' + esc(r.out) + "</p>");
      if (r.facts.length) h.push('<div class="facts all"><p class="hint">Facts given with the input (no sentences).</p>' +
        r.facts.map(factHtml).join("") + "</div>");
    }
    body.innerHTML = h.join("");
  }
  function showSentence(el) {
    var row = el.closest(".resp"), run = +row.dataset.run, i = +row.dataset.i, j = +el.dataset.sent;
    var r = DATA.factscore[run].responses[i], s = r.sents[j], panel = row.querySelector(".facts");
    row.querySelectorAll(".sent.active").forEach(function (x) { x.classList.remove("active"); });
    el.classList.add("active");
    panel.dataset.sent = j;
    var k = s.f.filter(function (x) { return r.facts[x].ok; }).length;
    panel.innerHTML = '<p class="hint">Sentence ' + (j + 1) + ": " + (s.f.length ? k + " of " + s.f.length +
      " facts supported" : "no atomic facts") + "</p>" + s.f.map(function (x) { return factHtml(r.facts[x], x); }).join("");
  }

  // ---- Q² -------------------------------------------------------------------------------------
  function q2Color(s) { return s == null ? "#eceef1" : shareColor(Math.max(0, Math.min(1, s))); }
  function renderQ2(run, i, body) {
    var r = DATA.q2[run].responses[i], h = [], spans = [], low = String(r.r).toLowerCase();
    r.qs.forEach(function (q, qi) {
      var c = String(q.c || ""), at = c ? low.indexOf(c.toLowerCase()) : -1;
      while (at >= 0 && spans.some(function (s) { return at < s[1] && at + c.length > s[0]; })) at = low.indexOf(c.toLowerCase(), at + 1);
      if (at >= 0) spans.push([at, at + c.length, qi]);
    });
    spans.sort(function (a, b) { return a[0] - b[0]; });
    var pos = 0, text = "";
    spans.forEach(function (s) {
      text += esc(r.r.slice(pos, s[0])) + '<mark class="qspan" data-q="' + s[2] + '" style="background:' +
        q2Color(r.qs[s[2]].s) + '" title="question ' + (s[2] + 1) + '">' + esc(r.r.slice(s[0], s[1])) + "</mark>";
      pos = s[1];
    });
    text += esc(r.r.slice(pos));
    h.push('<div class="num">status <span class="badge st-' + esc(r.st) + '">' + esc(r.st) + "</span> · Q² " + num(r.q2, 3) +
      " · Q² no NLI " + num(r.q2n, 3) + (r.e2e != null ? " · E2E NLI " + num(r.e2e, 3) : "") +
      (r.gold != null ? " · gold: " + (r.gold ? "consistent" : "inconsistent") : "") + "</div>");
    if (r.message) h.push('<p class="hint">Previous turn: ' + esc(r.message) + "</p>");
    h.push('<p class="text"><b>Response:</b> ' + text + '</p><div class="know"><b>Knowledge:</b> ' + esc(r.k) + "</div>");
    if (r.qs.length) {
      h.push('<table class="qs"><tr><th>#</th><th>answer span</th><th>question</th><th>answer on response</th>' +
        '<th>answer on knowledge</th><th class="n">F1</th><th>NLI</th><th class="n">score</th></tr>' +
        r.qs.map(function (q, qi) {
          return '<tr class="qa" data-q="' + qi + '"><td>' + (qi + 1) + "</td><td>" + esc(q.c) + "</td><td>" + esc(q.q) +
            "</td><td>" + esc(q.ra) + "</td><td>" + (q.kna ? "<i>no answer</i>" : esc(q.ka)) + '</td><td class="n">' +
            num(q.f1, 3) + "</td><td>" + esc(q.nli || "—") + '</td><td class="n">' + num(q.s, 3) + "</td></tr>";
        }).join("") + "</table>");
    } else if (r.st === "ok") {
      h.push('<p class="hint">No valid question' + (r.fb ? ": end-to-end NLI fallback, label " + esc(r.fb.label) +
        ", score " + num(r.fb.score, 3) : "") + ".</p>");
    }
    body.innerHTML = h.join("");
  }

  // ---- list, filters, clicks --------------------------------------------------------------
  function toggle(row) {
    var body = row.querySelector(".rbody");
    if (!body.dataset.done) {
      (row.dataset.kind === "q2" ? renderQ2 : renderFs)(+row.dataset.run, +row.dataset.i, body);
      body.dataset.done = "1";
      body.hidden = false;
    } else {
      body.hidden = !body.hidden;
    }
  }
  function applyFilters(kind) {
    var box = document.getElementById(kind + "-list");
    if (!box) return;
    var run = document.getElementById(kind + "-run").value, st = document.getElementById(kind + "-status").value;
    var q = document.getElementById(kind + "-search").value.trim().toLowerCase();
    var ns = document.getElementById(kind + "-ns").checked, shown = 0, rows = box.children;
    document.getElementById(kind).classList.toggle("only-ns", ns);
    for (var i = 0; i < rows.length; i++) {
      var d = rows[i].dataset;
      var ok = (run === "all" || d.run === run) && (st === "all" || d.status === st) &&
        (!q || d.topic.indexOf(q) >= 0) && (!ns || d.ns !== "0");
      rows[i].hidden = !ok;
      if (ok) shown++;
    }
    document.getElementById(kind + "-count").textContent = "showing " + shown + " of " + rows.length;
  }
  document.addEventListener("click", function (ev) {
    var t = ev.target;
    var sent = t.closest(".sent");
    if (sent) { showSentence(sent); return; }
    var qs = t.closest(".qspan");
    if (qs) {
      var row = qs.closest(".resp");
      row.querySelectorAll("tr.qa").forEach(function (tr) { tr.classList.toggle("active", tr.dataset.q === qs.dataset.q); });
      return;
    }
    var head = t.closest(".rhead");
    if (head) toggle(head.parentNode);
  });
  ["factscore", "q2"].forEach(function (kind) {
    if (!document.getElementById(kind + "-list")) return;
    ["run", "status", "ns"].forEach(function (k) {
      document.getElementById(kind + "-" + k).addEventListener("change", function () { applyFilters(kind); });
    });
    document.getElementById(kind + "-search").addEventListener("input", function () { applyFilters(kind); });
    applyFilters(kind);
  });
  window.fscoreReport = {data: DATA, toggle: toggle, applyFilters: applyFilters};
  document.documentElement.dataset.ready = "1";
})();
"""
