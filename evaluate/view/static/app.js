/* eval.py view: one page over the viewer's JSON API (evaluate/view/server.py).
   Every text that comes from a run (answers, questions, references, judge replies, model, category and
   file names, notes) reaches the page through textContent or an attribute set as text: the DOM is built
   element by element and never from an HTML string. The API needs the token the address carried. */
(function () {
  "use strict";

  var TOKEN_KEY = "eval-view-token";
  var PER_PAGE = 50;
  var FILTERS = ["pair", "cat", "score", "model", "lo", "hi", "flipped", "disagree", "invalid", "labelled", "q"];
  var token = new URLSearchParams(location.search).get("token") || "";
  try {
    if (token) localStorage.setItem(TOKEN_KEY, token); else token = localStorage.getItem(TOKEN_KEY) || "";
  } catch (e) { /* storage refused: the address's token is enough */ }

  // who labels (issue 44): a name the browser remembers, sent with every label ("anonymous" when empty)
  var WHO_KEY = "eval-view-annotator", QUEUE_KEY = "eval-view-queue";
  var who = document.getElementById("annotator");
  function stored(k, fallback) { try { return localStorage.getItem(k) || fallback; } catch (e) { return fallback; } }
  function store(k, v) { try { localStorage.setItem(k, v); } catch (e) { /* storage refused: this page only */ } }
  if (who) {
    who.value = stored(WHO_KEY, "");
    who.addEventListener("change", function () { store(WHO_KEY, who.value.trim()); });
  }
  function annotator() { return who ? who.value.trim() : ""; }
  // which queue Label next draws from: battles (A / B / tie) or scores on one GPT metric; the design
  function queueChoice() {
    var q = {};
    try { q = JSON.parse(stored(QUEUE_KEY, "{}")) || {}; } catch (e) { q = {}; }
    return { kind: q.kind === "rating" ? "rating" : "battle", metric: q.metric || "", design: q.design === "active" ? "active" : "uniform" };
  }

  var main = document.getElementById("main");
  var crumb = document.getElementById("crumb");
  var runs = {};  // run id -> /api/run's answer (headline, models, keys, labels summary)
  var list = { key: null, ids: [] };  // the ids the filters keep, for j / k on an item
  var keys = null;  // the current page's key handler
  var onNext = null;  // `n`: Label next, on a run's page and an item's
  var seq = 0;  // the render in progress; an older one's answers are dropped
  var listSeq = 0;  // the item list asked for last; an older answer is dropped

  // --- building blocks ------------------------------------------------------------------------------
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function add(parent) {
    for (var i = 1; i < arguments.length; i++) {
      var c = arguments[i];
      if (c === null || c === undefined || c === false) continue;
      parent.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    }
    return parent;
  }
  function a(href, text, cls) { var e = el("a", cls, text); e.setAttribute("href", href); return e; }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
  function fmt(x) {
    if (x === null || x === undefined || typeof x !== "number" || !isFinite(x)) return "–";
    var m = Math.abs(x);
    return m >= 1000 ? x.toFixed(0) : m >= 100 ? x.toFixed(1) : m >= 10 ? x.toFixed(2) : x.toFixed(3);
  }
  function ci(iv) { return iv && iv.length === 2 && iv[0] !== null ? "[" + fmt(iv[0]) + ", " + fmt(iv[1]) + "]" : "–"; }
  function option(sel, value, label, chosen) {
    var o = el("option", null, label); o.value = value; if (String(chosen) === String(value)) o.selected = true;
    sel.appendChild(o); return o;
  }
  function table(head, cls) {
    var t = el("table", cls), tr = el("tr");
    head.forEach(function (h) { add(tr, typeof h === "string" ? el("th", null, h) : h); });
    add(t, add(el("thead"), tr));
    var body = el("tbody"); t.appendChild(body);
    return { table: t, body: body };
  }
  function row(cells) {
    var tr = el("tr");
    cells.forEach(function (c) { add(tr, c instanceof Node ? c : el("td", null, c)); });
    return tr;
  }
  function td(text, cls) { return el("td", cls, text); }
  function toast(msg, err) {
    var t = document.getElementById("toast");
    t.textContent = msg; t.className = "show" + (err ? " err" : "");
    clearTimeout(toast.timer);
    toast.timer = setTimeout(function () { t.className = ""; }, err ? 5000 : 1800);
  }
  function problems(list, title) {
    if (!list || !list.length) return null;
    var box = add(el("div", "problems"), el("strong", null, title)), ul = el("ul");
    list.forEach(function (p) { add(ul, el("li", null, p)); });
    return add(box, ul);
  }

  // --- the API --------------------------------------------------------------------------------------
  // A busy viewer answers 503 (Retry-After) and a dropped connection fails the fetch: both are tried
  // again after these pauses (ms), `onRetry(n, of)` told before each; then the error is thrown.
  var RETRY_PAUSES = [250, 500, 1000, 2000, 4000];
  function api(path, params, body, onRetry) {
    var qs = new URLSearchParams();
    Object.keys(params || {}).forEach(function (k) {
      if (params[k] !== undefined && params[k] !== null && params[k] !== "") qs.set(k, params[k]);
    });
    var opts = { headers: { "X-Token": token }, cache: "no-store" };
    if (body !== undefined) {
      opts.method = "POST"; opts.body = JSON.stringify(body); opts.headers["Content-Type"] = "application/json";
    }
    var url = "/api/" + path + (qs.toString() ? "?" + qs : "");
    function again(i, why) {
      if (i >= RETRY_PAUSES.length) throw new Error(why);
      if (onRetry) onRetry(i + 1, RETRY_PAUSES.length);
      return new Promise(function (ok) { setTimeout(ok, RETRY_PAUSES[i]); }).then(function () { return attempt(i + 1); });
    }
    function attempt(i) {
      return fetch(url, opts).then(function (r) {
        if (r.status === 503) return again(i, "the viewer stayed busy (HTTP 503)");
        return r.json().catch(function () { return { error: "HTTP " + r.status }; }).then(function (d) {
          if (!r.ok) throw new Error(d.error || ("HTTP " + r.status));
          return d;
        });
      }, function (err) { return again(i, "the viewer did not answer (" + err.message + ")"); });
    }
    return attempt(0);
  }
  function fileHref(rid, path) {
    return "/api/file?" + new URLSearchParams({ run: rid, path: path, token: token });
  }

  // --- routes: #/, #/run/<rid>?filters, #/run/<rid>/item/<id>?filters, #/compare/<a>/<b> -------------
  function parse() {
    var h = location.hash.replace(/^#/, "") || "/";
    var q = h.indexOf("?"), path = q >= 0 ? h.slice(0, q) : h;
    var params = new URLSearchParams(q >= 0 ? h.slice(q + 1) : "");
    var parts = path.split("/").filter(function (p) { return p !== ""; }).map(decodeURIComponent);
    if (parts[0] === "run" && parts.length >= 2) {
      if (parts[2] === "item" && parts.length >= 4) return { view: "item", rid: parts[1], id: parts[3], params: params };
      return { view: "run", rid: parts[1], params: params };
    }
    if (parts[0] === "compare" && parts.length >= 3) return { view: "compare", a: parts[1], b: parts[2], params: params };
    return { view: "runs", params: params };
  }
  function runHash(rid, params) {
    var p = params ? params.toString() : "";
    return "#/run/" + encodeURIComponent(rid) + (p ? "?" + p : "");
  }
  function itemHash(rid, id, params) {
    var p = params ? params.toString() : "";
    return "#/run/" + encodeURIComponent(rid) + "/item/" + encodeURIComponent(id) + (p ? "?" + p : "");
  }
  function filterParams(params) {
    var out = new URLSearchParams();
    FILTERS.forEach(function (k) { if (params.get(k)) out.set(k, params.get(k)); });
    return out;
  }
  function listQuery(rid, params) {
    var q = { run: rid };
    FILTERS.forEach(function (k) { if (params.get(k)) q[k] = params.get(k); });
    return q;
  }

  function render() {
    var r = parse(), my = ++seq;
    keys = null; onNext = null;
    clear(main);
    crumb.textContent = "";
    keyHint(r.view);
    if (!token) {
      add(main, el("p", "error", "No access token: open the address `eval.py view` printed (it ends in ?token=...)."));
      return;
    }
    var done = function (p) { return p.catch(function (err) { if (my === seq) add(main, el("p", "error", err.message)); }); };
    if (r.view === "run") done(runPage(r, my));
    else if (r.view === "item") done(itemPage(r, my));
    else if (r.view === "compare") done(comparePage(r, my));
    else done(runsPage(my));
  }

  // the key line under the title: on the compare page A and B are runs, not the models a label names
  function keyHint(view) {
    var p = document.querySelector("header .keys");
    if (!p) return;
    var kbd = function (k) { return el("kbd", null, k); };
    clear(p);
    add(p, "keys: ", kbd("j"), " / ", kbd("k"), " next / previous, ", kbd("Enter"), " open, ", kbd("Esc"), " back");
    if (view === "compare") add(p, "; here A and B are the two runs (A the earlier, B the later), not models: labels are given on an item page of one run");
    else add(p, ", on an item ", kbd("a"), " ", kbd("b"), " ", kbd("t"), " label it (A better, B better, tie: A and B the pair's two models), ",
             kbd("1"), "–", kbd("5"), " score it on the metric chosen, ", kbd("n"), " label next (the next item of the label queue)");
  }

  function runInfo(rid, fresh) {
    if (runs[rid] && !fresh) return Promise.resolve(runs[rid]);
    return api("run", { run: rid }).then(function (d) { runs[rid] = d; return d; });
  }

  // --- the runs -----------------------------------------------------------------------------------
  function runsPage(my) {
    document.title = "Runs: eval.py view";
    return api("runs").then(function (d) {
      if (my !== seq) return;
      add(main, el("h2", null, "Runs under " + d.folders.join(", ") + " (" + d.runs.length + ", newest first)"));
      if (!d.runs.length) { add(main, el("p", null, "No save path (a folder with manifest.json or results/) here.")); return; }
      var chosen = [];
      var cmp = el("button", null, "Compare the two runs ticked");
      cmp.disabled = true;
      cmp.id = "compare-runs";
      var t = table(["", "run", "time", "status", "models", "categories", "items", "judge", "judge check", "labels"], "list runs");
      var rows = [];
      d.runs.forEach(function (r) {
        var box = el("input"); box.type = "checkbox"; box.setAttribute("aria-label", "compare " + r.name);
        box.addEventListener("click", function (ev) { ev.stopPropagation(); });
        box.addEventListener("change", function () {
          if (box.checked) chosen.push(r); else chosen = chosen.filter(function (x) { return x !== r; });
          cmp.disabled = chosen.length !== 2;
        });
        var trust = el("td");
        if (r.trust && r.trust.verdict) {
          add(trust, el("span", r.trust.trustworthy === true ? "good" : r.trust.trustworthy === false ? "bad" : "muted",
                        r.trust.trustworthy === true ? "trustworthy" : r.trust.trustworthy === false ? "NOT trustworthy" : "not checked"));
          trust.title = r.trust.verdict + (r.trust.note ? " (" + r.trust.note + ")" : "");
          if (r.trust.source === "labels") add(trust, el("span", "muted", " (your labels)"));
        } else add(trust, el("span", "muted", r.judge ? "not checked" : "–"));
        var name = add(el("td"), a(runHash(r.rid), r.name, "run-link"));
        if (r.problems && r.problems.length) add(name, el("div", "inv", r.problems.join("; ")));
        var cats = el("td", null, r.categories.length + " ");
        cats.title = r.categories.join(", ");
        var tr = row([add(el("td"), box), name, td((r.finished || r.started || "–").replace("T", " ").replace("+00:00", " UTC")),
                      td(r.status || "–"), td(r.models.join(", ")), cats, td(r.items === null ? "–" : r.items, "num"),
                      td(r.judge || "none"), trust, td(r.labels || "", "num")]);
        tr.addEventListener("click", function () { location.hash = runHash(r.rid); });
        rows.push(tr);
        t.body.appendChild(tr);
      });
      cmp.addEventListener("click", function () {
        var pair = chosen.slice().sort(function (x, y) {
          return String(x.finished || x.started || "").localeCompare(String(y.finished || y.started || ""));
        });
        location.hash = "#/compare/" + encodeURIComponent(pair[0].rid) + "/" + encodeURIComponent(pair[1].rid);
      });
      add(main, add(el("div", "scroll"), t.table), add(el("p"), cmp, " ", el("span", "muted", "the older run is A, the newer B")));
      listKeys(rows, function (i) { location.hash = runHash(d.runs[i].rid); });
      var trends = add(el("section"), el("h2", null, "Trends: runs of the same models"), el("p", "muted", "Comparing consecutive runs…"));
      trends.id = "trends";
      add(main, trends);
      return api("trends").then(function (t) { if (my === seq) trendSection(trends, t.groups); });
    });
  }

  // drawn on `scale` ([low, high]: the score's own, shared by every row of that score), never on the row's
  // own range, which made 3.477 -> 3.480 look as steep as 0.833 -> 1.000
  function spark(values, steps, scale) {
    var NS = "http://www.w3.org/2000/svg", svg = document.createElementNS(NS, "svg");
    svg.setAttribute("class", "spark"); svg.setAttribute("viewBox", "0 0 160 36");
    var pts = values.map(function (v, i) { return [i, v]; }).filter(function (p) { return typeof p[1] === "number"; });
    if (!pts.length) return svg;
    var lo = scale ? scale[0] : Math.min.apply(null, pts.map(function (p) { return p[1]; }));
    var hi = scale ? scale[1] : Math.max.apply(null, pts.map(function (p) { return p[1]; }));
    if (scale) svg.setAttribute("data-scale", lo + " " + hi);
    var x = function (i) { return 8 + (values.length > 1 ? i * 144 / (values.length - 1) : 72); };
    var y = function (v) { return hi > lo ? 30 - (v - lo) / (hi - lo) * 24 : 18; };
    var line = document.createElementNS(NS, "polyline");
    line.setAttribute("points", pts.map(function (p) { return x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1); }).join(" "));
    svg.appendChild(line);
    pts.forEach(function (p) {
      var c = document.createElementNS(NS, "circle"), s = p[0] > 0 ? steps[p[0] - 1] : null;
      c.setAttribute("cx", x(p[0]).toFixed(1)); c.setAttribute("cy", y(p[1]).toFixed(1)); c.setAttribute("r", "3");
      if (s && (s.word === "worse" || s.word === "better")) c.setAttribute("class", s.word);
      svg.appendChild(c);
    });
    return svg;
  }

  function trendSection(box, groups) {
    clear(box);
    add(box, el("h2", null, "Trends: runs of the same models"));
    if (!groups.length) {
      add(box, el("p", "muted", "No two runs of the same models here: a trend needs at least two."));
      return;
    }
    add(box, el("p", "muted", "Each primary score over the runs, oldest first; between two runs the paired verdict of " +
      "eval.py compare (the later run B against the earlier A, over the items both hold)."));
    groups.forEach(function (g) {
      var sec = add(el("div", "pair trend"), el("h3", null, g.models.join(", ") + ": " + g.runs.length + " runs"),
                    el("p", "muted", g.categories.length + " categories: " + g.categories.join(", ") +
                       (g.language ? "; language " + g.language : "") + "; judge " + (g.judge || "none") +
                       " (runs are grouped when their scores are made the same way: language, lists, options, prompts, judge)"));
      var head = ["model", "score", "trend"];
      g.runs.forEach(function (r, i) {
        var th = el("th", "num");
        add(th, a(runHash(r.rid), r.name));
        if (i > 0) {
          var prev = g.runs[i - 1];
          add(th, " ", a("#/compare/" + encodeURIComponent(prev.rid) + "/" + encodeURIComponent(r.rid), "vs previous", "muted"));
        }
        head.push(th);
      });
      var t = table(head, "trend");
      var news = [];
      g.series.forEach(function (s) {
        var line = add(el("td"), spark(s.values, s.steps, s.scale));
        if (s.scale) line.title = "drawn on " + fmt(s.scale[0]) + " to " + fmt(s.scale[1]) + " (" + s.scale_from + ")";
        var cells = [td(s.model), td(s.score), line];
        s.values.forEach(function (v, i) {
          var c = el("td", "num", fmt(v));
          var st = i > 0 ? s.steps[i - 1] : null;
          if (st) {
            var word = st.word === "worse" ? "▼ worse" : st.word === "better" ? "▲ better" : st.word === "not comparable" ? "not comparable" : "= no detectable difference";
            add(c, el("div", "step " + st.word.replace(/ /g, "-"), word));
            c.title = st.text;
          }
          cells.push(c);
        });
        t.body.appendChild(row(cells));
        var last = s.steps[s.steps.length - 1];
        if (last) news.push(last);
      });
      if (!g.series.length) add(sec, el("p", "muted no-series", "No primary score could be compared between these runs (the items they share, or their scores' signatures, differ)."));
      else add(sec, add(el("div", "scroll"), t.table));
      var ul = el("ul", "news");
      news.forEach(function (st) { add(ul, el("li", "step-text " + st.word.replace(/ /g, "-"), st.text)); });
      add(sec, el("p", null, "Latest run against the one before:"), ul);
      if (g.errors.length) add(sec, problems(g.errors, "Not compared:"));
      add(box, sec);
    });
  }

  // --- a run ----------------------------------------------------------------------------------------
  function runPage(r, my) {
    return runInfo(r.rid, true).then(function (info) {
      if (my !== seq) return;
      document.title = info.name + ": eval.py view";
      crumb.textContent = "› " + info.name;
      add(main, el("h2", null, info.name));
      var meta = el("p", "muted", "run " + (info.run_id || "–") + " · " + (info.status || "no manifest") + " · " +
        (info.finished || info.started || "") + " · " + info.models.join(", ") + " · judge: " + (info.judge || "none") + " · ");
      if (info.report) { var rep = a(fileHref(r.rid, "report.html"), "report.html"); rep.target = "_blank"; rep.rel = "noopener noreferrer"; add(meta, rep); }
      add(main, meta);
      headlineSection(info);
      var lp = el("div", "panel labels-panel"); lp.id = "labels-panel";
      add(main, lp);
      labelsPanel(lp, info.labels, r.rid, info);
      onNext = function () { labelNext(r.rid, info); };
      var params = r.params;
      var pair = pairOf(params, info);
      add(main, filterBar(r.rid, info, params));
      var listBox = el("div"); listBox.id = "list";
      add(main, listBox);
      return loadList(r.rid, info, params, listBox, pair);
    });
  }

  function pairOf(params, info) {
    var p = (params.get("pair") || "0,1").split(",").map(Number);
    if (p.length !== 2 || p[0] === p[1] || !(p[0] >= 0 && p[1] >= 0 && p[0] < info.models.length && p[1] < info.models.length)) p = [0, 1];
    return p;
  }

  function headlineSection(info) {
    var h = info.headline, sec = add(el("section"), el("h3", null, "Headline"));
    sec.id = "headline";
    if (h.warnings.length) {
      var w = add(el("div", "warn"), el("strong", null, "Do not trust the judge's verdicts without checking:")), ul = el("ul");
      h.warnings.forEach(function (x) { add(ul, el("li", null, x)); });
      add(sec, add(w, ul));
    }
    add(sec, problems(h.problems, "Files that could not be read:"));
    if (!h.pairs.length) add(sec, el("p", null, "One model (" + info.models.join(", ") + "): no pair to compare."));
    h.pairs.forEach(function (p, i) {
      var box = add(el("details", "pair"), add(el("summary"), add(el("h3"), p.a, el("span", "muted", " vs "), p.b)));
      box.open = i === 0;
      var c = p.comparison;
      if (c) {
        add(box, add(el("p"), el("span", "tag a", p.a + " better on " + c.counts.a), " ",
                     el("span", "tag b", p.b + " better on " + c.counts.b), " ",
                     el("span", "tag", "no detectable difference on " + c.counts.none), " ",
                     el("span", "muted", "of " + c.confirmatory.length + " confirmatory comparisons (primary scores over all items)")));
        var t = table(["score (all items)", "n", p.a, p.b, "A − B", "interval", "p_adj", "verdict"], "headline");
        c.confirmatory.forEach(function (x) {
          var tr = row([x.score, td(x.n, "num"), td(fmt(x.mean_a), "num"), td(fmt(x.mean_b), "num"), td(fmt(x.diff), "num"),
                        td(x.ci_text, "num"), td(x.p_text, "num"), x.sig ? add(el("td"), el("strong", null, x.sentence)) : td(x.short + " · " + x.detect)]);
          tr.title = x.sentence; if (x.sig) tr.className = "sig";
          t.body.appendChild(tr);
        });
        add(box, add(el("div", "scroll"), t.table));
        if (c.leads.length) add(box, el("p", "muted", c.leads.length + " exploratory leads (unadjusted intervals excluding 0: leads to test on new items, not findings): " +
          c.leads.map(function (x) { return x.category + " " + x.score + " (" + x.short + ")"; }).join("; ")));
        add(box, el("p", "muted", c.family || ""));
      } else if (p.means.length) {
        add(box, el("p", "muted", "No paired comparison file for this pair (eval.py report writes it): each model's overall mean."));
        var tm = table(["score (all items)", p.a, p.b]);
        p.means.forEach(function (m) { tm.body.appendChild(row([m.key, td(fmt(m.a), "num"), td(fmt(m.b), "num")])); });
        add(box, tm.table);
      }
      if (p.battle) {
        var b = p.battle;
        add(box, el("p", null, "Judge battle: " + p.a + " wins " + b.wins + " · ties " + b.ties + " · " + p.b + " wins " + b.losses +
          " · invalid " + b.invalid + " of " + b.n_items + "; win rate of " + p.a + " " + fmt(b.win_rate) + " 95% CI " + ci(b.win_rate_ci95) +
          (b.lc_win_rate !== null && b.lc_win_rate !== undefined ? "; length-controlled " + fmt(b.lc_win_rate) + " " + (b.lc_ci ? ci(b.lc_ci) : "(no interval: too few items)") : "")));
      }
      add(sec, box);
    });
    var jc = h.judge_check;
    add(sec, add(el("p"), "Judge check: ", jc ? el("strong", jc.trustworthy ? "good" : "bad", jc.trustworthy ? "trustworthy" : "NOT trustworthy") : el("strong", null, "not checked"),
                 jc ? el("span", "muted", " — " + (jc.verdict || "") + (jc.source === "labels" && jc.note ? " (" + jc.note + ")" : "")) : el("span", "muted", info.judge ? " (label items below, then eval.py judge-check --labels SAVE_PATH)" : "")));
    add(main, sec);
  }

  // --- labels: Label next, the label-corrected verdicts -------------------------------------------------
  function ratingKeysOf(keys, scales) {
    return (keys || []).filter(function (k) { return k.split("/")[0] === "GPT" && k.indexOf("@") < 0 && scales && scales[k]; });
  }
  function metricName(k) { var i = k.indexOf("/"); return i >= 0 ? k.slice(i + 1) : k; }

  // the next item of the save path's label queue this annotator has not labelled, opened at its pair
  function labelNext(rid, info) {
    var q = queueChoice(), keys_ = ratingKeysOf(info.keys, info.scales);
    var kind = q.kind === "rating" && keys_.length ? "rating" : "battle";
    var metric = kind === "rating" ? (keys_.indexOf(q.metric) >= 0 ? q.metric : keys_[0]) : "";
    var state = document.getElementById("queue-state");
    return api("next", { run: rid, annotator: annotator(), kind: kind, design: q.design, metric: metric }).then(function (d) {
      if (!d.unit) { if (state) state.textContent = d.why; toast(d.why); return; }
      var p = new URLSearchParams();
      if (d.unit.pair && d.unit.pair.join(",") !== "0,1") p.set("pair", d.unit.pair.join(","));
      p.set("from", "queue");
      if (d.unit.kind === "rating") { p.set("rate", String(d.unit.model_index)); p.set("metric", metric); }
      var target = itemHash(rid, d.unit.id, p);
      if (location.hash === target) toast("the queue's next item for " + d.annotator + " is this one: label it first");
      else location.hash = target;
    }).catch(function (err) { if (state) state.textContent = "Label next: " + err.message; toast("label next: " + err.message, true); });
  }

  function queueControls(rid, info) {
    var q = queueChoice(), keys_ = ratingKeysOf(info.keys, info.scales);
    var box = add(el("p", "queue"));
    var go = el("button", "label-next", "Label next (n)"); go.id = "label-next";
    go.addEventListener("click", function () { labelNext(rid, info); });
    var ks = el("select"); ks.id = "queue-kind";
    if (info.models.length > 1) option(ks, "battle", "verdicts on pairs (a / b / t)", q.kind === "battle" ? "battle" : "");
    keys_.forEach(function (k) { option(ks, "rating:" + k, "scores on " + k + " (1–5 keys)", q.kind === "rating" ? "rating:" + q.metric : ""); });
    var ds = el("select"); ds.id = "queue-design";
    option(ds, "uniform", "uniform draw", q.design); option(ds, "active", "active: where the judge is unsure", q.design);
    var save = function () {
      var v = ks.value || "battle";
      store(QUEUE_KEY, JSON.stringify({ kind: v === "battle" ? "battle" : "rating", metric: v === "battle" ? "" : v.slice(7), design: ds.value }));
      if (document.activeElement && document.activeElement.blur) document.activeElement.blur();  // n works at once
    };
    ks.addEventListener("change", save); ds.addEventListener("change", save);
    var state = el("span", "muted"); state.id = "queue-state";
    add(box, go, " ", add(el("label"), "from the queue of ", ks), " ", add(el("label"), "drawn by ", ds), " ", state);
    add(box, el("span", "muted", " Only labels of items the queue drew count toward the label-corrected estimate; the others still grade the judge."));
    return box;
  }

  function iv(x) { return x && typeof x.low === "number" ? "[" + fmt(x.low) + ", " + fmt(x.high) + "]" : "–"; }
  var ROWS = [["label_corrected", "label-corrected"], ["labels_only", "labels only"], ["judge_only", "judge only: if the judge were right"]];
  function threeRows(x, what, level) {
    var t = table([what, "estimate", level + " interval"], "corrected-rows");
    ROWS.forEach(function (r) {
      var tr = row([r[1], td(fmt((x[r[0]] || {}).estimate), "num est"), td(iv(x[r[0]]), "num iv")]);
      tr.setAttribute("data-row", r[0]);
      t.body.appendChild(tr);
    });
    return t.table;
  }
  function worth(x) {
    return (x.labels_used || 0) + " labels used" + (x.items ? " of " + x.items + " items" : "") + "; worth " +
      (typeof x.effective_labels === "number" ? fmt(x.effective_labels) : "–") + " effective labels (how many labels alone give the same width)";
  }
  function decideText(x) {
    if (x.labels_to_decide === 0) return "Decided: the interval excludes one half.";
    if (typeof x.labels_to_decide === "number") return "About " + x.labels_to_decide + " more labels would decide the pair (the interval excluding one half), at the current estimate and variance.";
    return (x.labels_used || 0) ? "The estimate sits at one half: no number of labels foreseen decides it." : "No labels from the queue yet: press n (Label next).";
  }
  // {reason: count} or {reason: [names]} or {reason: {n, ids | models}}: each reason with its count and names
  function leftOutText(lo) {
    var parts = [];
    Object.keys(lo || {}).forEach(function (why) {
      var v = lo[why], n = 0, names = [];
      if (typeof v === "number") n = v;
      else if (Array.isArray(v)) { n = v.length; names = v; }
      else if (v && typeof v === "object") {
        n = typeof v.n === "number" ? v.n : typeof v.count === "number" ? v.count : 0;
        names = v.ids || v.names || v.models || v.items || [];
        if (!n) n = names.length;
      }
      if (!n) return;
      var shown = names.slice(0, 8).map(String).join(", ") + (names.length > 8 ? ", …" : "");
      parts.push(n + " " + why + (shown ? " (" + shown + ")" : ""));
    });
    return parts.length ? "Left out of the corrected estimate: " + parts.join("; ") + "." : "";
  }

  function correctedSection(box, c) {
    clear(box);
    add(box, el("h4", null, "What people would say: label-corrected verdicts"));
    if (!c) { add(box, el("p", "muted", "Computing…")); return; }
    if (c.error) { add(box, el("p", "muted corrected-error", c.error)); box.setAttribute("data-ready", "error"); return; }
    var level = Math.round((c.level || 0.95) * 100) + "%";
    (c.pairs || []).forEach(function (p) {
      var sec = add(el("div", "corrected-pair"), el("h5", null, p.model_a + " vs " + p.model_b + ": the win rate of " + p.model_a + " (ties half)"));
      sec.setAttribute("data-pair", p.model_a + " vs " + p.model_b);
      sec.setAttribute("data-labels-used", String(p.labels_used || 0));
      add(sec, threeRows(p, "win rate of " + p.model_a, level));
      add(sec, el("p", "muted worth", worth(p)), el("p", "decide", decideText(p)));
      var lo = leftOutText(p.left_out);
      if (lo) add(sec, el("p", "muted left-out", lo));
      if ((p.categories || []).length) {
        var ct = table(["category", "labels", "label-corrected", level + " interval", "labels only", "judge only"], "corrected-categories");
        p.categories.forEach(function (x) {
          ct.body.appendChild(row([x.category, td(String(x.labels_used), "num"), td(fmt((x.label_corrected || {}).estimate), "num"),
            td(iv(x.label_corrected), "num"), td(fmt((x.labels_only || {}).estimate), "num"), td(fmt((x.judge_only || {}).estimate), "num")]));
        });
        add(sec, add(el("details"), el("summary", null, "per category (where a category has enough labels)"), ct.table));
      }
      add(box, sec);
    });
    if (!(c.pairs || []).length && !(c.ratings || []).length) add(box, el("p", "muted", "No pair or rating has labels from the queue yet: press n (Label next)."));
    if ((c.not_in_run || []).length) {  // labels naming an item, pair, model or metric the run does not have
      var ul = el("ul");
      c.not_in_run.slice(0, 20).forEach(function (x) {
        add(ul, el("li", null, "item " + x.id + (x.category ? " (" + x.category + ")" : "") + ", " +
          (x.model_a ? x.model_a + " vs " + x.model_b : (x.model || "") + (x.metric ? " on " + x.metric : "")) +
          (x.annotator ? ", by " + x.annotator : "") + (x.why ? ": " + x.why : "")));
      });
      if (c.not_in_run.length > 20) add(ul, el("li", "muted", "and " + (c.not_in_run.length - 20) + " more"));
      add(box, add(el("div", "problems not-in-run"), el("strong", null, "Labels left out, not in the run:"), ul));
    }
    if ((c.ratings || []).length) {
      var rt = table(["rating", "label-corrected", level + " interval", "labels only", "judge only: if the judge were right", "labels", "effective"], "corrected-ratings");
      c.ratings.forEach(function (x) {
        var d = x.difference || x, what = x.metric + ": " + (x.difference ? x.model_a + " − " + x.model_b : x.model);
        var tr = row([what, td(fmt((d.label_corrected || {}).estimate), "num est"), td(iv(d.label_corrected), "num"),
          td(fmt((d.labels_only || {}).estimate) + " " + iv(d.labels_only), "num"), td(fmt((d.judge_only || {}).estimate) + " " + iv(d.judge_only), "num"),
          td(String(x.labels_used === undefined ? d.labels_used || "" : x.labels_used), "num"),
          td(fmt(x.effective_labels === undefined ? d.effective_labels : x.effective_labels), "num")]);
        tr.setAttribute("data-rating", what);
        rt.body.appendChild(tr);
      });
      add(box, el("h5", null, "Ratings: the mean score people would give, and the paired difference"), add(el("div", "scroll"), rt.table));
    }
    var an = c.annotators;
    if (an && (an.names || []).length) {
      var who_ = add(el("div", "annotators"), el("h5", null, "Annotators: " + an.names.join(", ")));
      if ((an.kappa || []).length) {
        var kt = table(["annotator", "annotator", "items both labelled", "Cohen's kappa"], "annotator-kappa");
        an.kappa.forEach(function (k) {
          var tr = row([k.a, k.b, td(String(k.items), "num"), td(k.kappa === null || k.kappa === undefined ? "undefined" : fmt(k.kappa), "num kappa-value")]);
          tr.setAttribute("data-annotators", k.a + "|" + k.b);
          kt.body.appendChild(tr);
        });
        add(who_, kt.table);
      } else if (an.names.length > 1) add(who_, el("p", "muted", "No item labelled by two annotators yet: no inter-annotator kappa."));
      if (typeof an.fleiss === "number") add(who_, el("p", "fleiss", "Fleiss' kappa over the annotators: " + fmt(an.fleiss)));
      var ag = an.agreement_with_judge || {};
      if (Object.keys(ag).length) {
        var at = table(["annotator", "items", "agreement with the judge"], "annotator-judge");
        Object.keys(ag).forEach(function (name) {
          var tr = row([name, td(String(ag[name].items), "num"), td(fmt(ag[name].agreement), "num")]);
          tr.setAttribute("data-annotator", name);
          at.body.appendChild(tr);
        });
        add(who_, at.table);
      }
      add(box, who_);
    }
    box.setAttribute("data-ready", String(Date.now()));
  }

  function labelsPanel(box, s, rid, info, corrected) {
    clear(box);
    var head = add(el("p"), el("strong", null, "Your labels: "), el("span", "label-count", String(s.count)),
                   " (" + s.items + " items" + (s.count > s.items ? "; the latest label of an item counts" : "") + ")");
    var pp = Object.keys(s.per_pair || {});
    if (pp.length) add(head, el("span", "muted", " · " + pp.map(function (k) { return k + ": " + s.per_pair[k]; }).join(", ")));
    add(box, head);
    if (!s.battles) add(box, el("p", "muted", "This run has no battle verdicts, so labels cannot be held against the judge here."));
    else if (!s.agreement) {
      add(box, el("p", "muted agreement-wait", (s.with_judge || 0) + " of the " + s.min_labels + " labels with a judge verdict needed " +
        "before the judge's agreement with you is shown (" + (s.min_labels - (s.with_judge || 0)) + " more); label with a, b, t on an item."));
    } else {
      var g = s.agreement;
      add(box, add(el("p", "agreement"), ((s.judges || []).length ? "The panel" : "The judge") + " agrees with you on ", el("strong", null, fmt(g.accuracy)), " of " + g.n +
        " decided items (95% CI " + ci(g.ci95) + "; a judge tie counts half; your " + s.label_ties + " ties left out); Cohen's kappa ",
        el("strong", "kappa", g.kappa === null ? "undefined" : fmt(g.kappa)), " " + ci(g.kappa_ci95) + " (" + g.kappa_strength + ")."));
      if ((s.judges || []).length) {  // a panel of judges: each one against your labels too
        var jt = table(["judge of the panel", "agreement", "95% CI", "n", "kappa"], "panel-judges");
        s.judges.forEach(function (x) {
          var tr = row([x.name, td(fmt(x.accuracy), "num"), td(ci(x.ci95)), td(String(x.n), "num"),
                        td(x.kappa === null ? "undefined" : fmt(x.kappa), "num")]);
          tr.setAttribute("data-judge", x.name);
          jt.body.appendChild(tr);
        });
        add(box, el("p", "muted", "The verdicts above are the panel's vote; each of its judges on the same labels:"));
        add(box, jt.table);
      }
      var best = (s.rules || []).filter(function (x) { return x.best; })[0];
      var t = table(["rule", "agreement", "kappa"], "rules");
      (s.rules || []).forEach(function (x) {
        var tr = row([x.words + (x.best ? " (best rule)" : ""), td(fmt(x.accuracy), "num"), td(x.kappa === null ? "undefined" : fmt(x.kappa), "num")]);
        if (x.best) tr.className = "sel";
        t.body.appendChild(tr);
      });
      if (best) add(box, el("p", "best-rule", "Best trivial rule beside it: " + best.words + ", " + fmt(best.accuracy) + "."));
      add(box, add(el("details"), el("summary", null, "every trivial rule"), t.table));
      add(box, el("p", s.trustworthy === true ? "good verdict" : s.trustworthy === false ? "bad verdict" : "muted verdict", s.verdict || ""));
    }
    add(box, problems(s.problems, "Lines of labels.jsonl skipped:"));
    if (!rid) return;
    if ((info.battles || []).length || ratingKeysOf(info.keys, info.scales).length) add(box, queueControls(rid, info));
    else add(box, el("p", "muted", "Label next needs the judge's battle verdicts or GPT ratings to correct; this run has neither."));
    var cbox = el("div", "corrected"); cbox.id = "corrected";
    add(box, cbox);
    if (corrected) { correctedSection(cbox, corrected); return; }
    correctedSection(cbox, null);
    var my = seq;
    api("corrected", { run: rid }).then(function (c) { if (my === seq && cbox.isConnected) correctedSection(cbox, c); })
      .catch(function (err) { if (cbox.isConnected) correctedSection(cbox, { error: err.message }); });
  }

  function filterBar(rid, info, params) {
    var bar = el("div", "filters"); bar.id = "filters";
    var update = function () {
      var p = new URLSearchParams();
      bar.querySelectorAll("[data-f]").forEach(function (c) {
        var v = c.type === "checkbox" ? (c.checked ? "1" : "") : c.value;
        if (v) p.set(c.getAttribute("data-f"), v);
      });
      if (p.get("pair") === "0,1") p.delete("pair");
      history.replaceState(null, "", runHash(rid, p));
      var box = document.getElementById("list");
      loadList(rid, info, p, box, pairOf(p, info));
    };
    var ctl = function (label, node, name) {
      node.setAttribute("data-f", name); node.id = "f-" + name;
      var fire = function (delay) { clearTimeout(update.timer); update.timer = setTimeout(update, delay); };
      if (node.tagName === "INPUT" && node.type !== "checkbox") node.addEventListener("input", function () { fire(250); });  // a typing pause
      node.addEventListener("change", function () { fire(0); });  // a choice, Enter, or leaving the box: at once
      var l = el("label", node.type === "search" ? "grow" : null);
      if (node.type === "checkbox") add(l, node, " " + label); else add(l, label + " ", node);
      return l;
    };
    if (info.models.length > 2) {
      var ps = el("select");
      info.models.forEach(function (m, i) { info.models.forEach(function (n, j) { if (i < j) option(ps, i + "," + j, m + " vs " + n, params.get("pair") || "0,1"); }); });
      add(bar, ctl("pair", ps, "pair"));
    }
    var cs = el("select"); option(cs, "", "every category", params.get("cat") || "");
    info.categories.forEach(function (c) { option(cs, c, c, params.get("cat") || ""); });
    add(bar, ctl("category", cs, "cat"));
    var ks = el("select"); option(ks, "", "score: " + (info.list_key || "–"), params.get("score") || "");
    info.keys.forEach(function (k) { option(ks, k, k, params.get("score") || ""); });
    add(bar, ctl("score", ks, "score"));
    var ms = el("select"); option(ms, "", "any model", params.get("model") || "");
    info.models.forEach(function (m, i) { option(ms, String(i), m, params.get("model") || ""); });
    add(bar, ctl("of", ms, "model"));
    ["lo", "hi"].forEach(function (n) {
      var inp = el("input", "num"); inp.type = "number"; inp.step = "any"; inp.value = params.get(n) || "";
      inp.placeholder = n === "lo" ? "min" : "max";
      add(bar, ctl(n === "lo" ? "from" : "to", inp, n));
    });
    [["flipped", "verdict flips with the order"], ["disagree", "judge and metrics disagree"], ["invalid", "invalid replies"]].forEach(function (x) {
      var cb = el("input"); cb.type = "checkbox"; cb.checked = params.get(x[0]) === "1";
      add(bar, ctl(x[1], cb, x[0]));
    });
    var ls = el("select"); option(ls, "", "labelled or not", params.get("labelled") || "");
    option(ls, "yes", "labelled", params.get("labelled") || ""); option(ls, "no", "not labelled", params.get("labelled") || "");
    add(bar, ctl("", ls, "labelled"));
    var q = el("input"); q.type = "search"; q.placeholder = "search questions, answers, references, ids"; q.value = params.get("q") || "";
    add(bar, ctl("search", q, "q"));
    return bar;
  }

  function verdictText(v, models, pair) {
    if (v === "A") return models[pair[0]];
    if (v === "B") return models[pair[1]];
    return v || "–";
  }

  function loadList(rid, info, params, box, pair) {
    var my = seq, mine = ++listSeq;
    var page = Math.max(0, parseInt(params.get("page") || "0", 10) || 0);
    var q = listQuery(rid, params);
    q.offset = page * PER_PAGE; q.limit = PER_PAGE;
    var t0 = performance.now();
    return api("items", q).then(function (d) {
      if (my !== seq || mine !== listSeq) return;
      list = { key: rid + "?" + filterParams(params).toString(), ids: d.ids };
      clear(box);
      var pages = Math.max(1, Math.ceil(d.total / PER_PAGE));
      if (page >= pages && page > 0) { params.set("page", String(pages - 1)); return loadList(rid, info, params, box, pair); }
      add(box, el("p", "count", d.total + " of " + info.items + " items" + (d.total > PER_PAGE ? " · page " + (page + 1) + " of " + pages : "")));
      var head = ["id", "category", "question"];
      info.models.forEach(function (m) { head.push(el("th", "num", m)); });
      var paired = info.models.length > 1;
      if (paired) head.push("judge (" + info.models[pair[0]] + " vs " + info.models[pair[1]] + ")", "", "your label");
      else head.push("");
      var t = table(head, "list items");
      var rows = [];
      d.rows.forEach(function (it) {
        var marks = [];
        if (it.f) marks.push("⇄ flips");
        if (it.d) marks.push("≠ metrics");
        if (it.x) marks.push("! invalid");
        var cells = [td(it.id), td(it.c), td(it.q, "qx")];
        it.s.forEach(function (s) { cells.push(td(fmt(s), "num")); });
        if (paired) cells.push(td(verdictText(it.v, info.models, pair) + (it.vs === "rating" && it.v ? " (rating)" : "")), td(marks.join(" "), "inv marks"),
                               td(it.l ? verdictText(it.l, info.models, pair) : ""));
        else cells.push(td(marks.join(" "), "inv marks"));
        var tr = row(cells);
        tr.setAttribute("data-id", it.id);
        tr.addEventListener("click", function () { location.hash = itemHash(rid, it.id, params); });
        rows.push(tr); t.body.appendChild(tr);
      });
      if (d.rows.length) add(box, add(el("div", "scroll"), t.table));
      else add(box, el("p", "muted", "No item matches these filters."));
      var go = function (p) { params.set("page", String(p)); if (!p) params.delete("page"); history.replaceState(null, "", runHash(rid, params)); loadList(rid, info, params, box, pair); };
      var prev = el("button", null, "← previous page"), next = el("button", null, "next page →");
      prev.disabled = page === 0; next.disabled = page + 1 >= pages;
      prev.addEventListener("click", function () { go(page - 1); });
      next.addEventListener("click", function () { go(page + 1); });
      add(box, add(el("div", "pager"), prev, next, el("span", "muted", "shown in " + Math.round(performance.now() - t0) + " ms")));
      box.setAttribute("data-ready", String(Date.now()));
      box.setAttribute("data-ms", String(Math.round(performance.now())));  // since the page's navigation began
      listKeys(rows, function (i) { location.hash = itemHash(rid, d.rows[i].id, params); }, {
        next: page + 1 < pages ? function () { go(page + 1); } : null, prev: page > 0 ? function () { go(page - 1); } : null });
    });
  }

  // j / k over the rows of a list, Enter opens; past the last row of a page, the next page
  function listKeys(rows, open, pages) {
    var sel = -1;
    var show = function (i) {
      if (sel >= 0 && rows[sel]) rows[sel].classList.remove("sel");
      sel = i; rows[sel].classList.add("sel");
      rows[sel].scrollIntoView({ block: "nearest" });
    };
    keys = function (k) {
      if (!rows.length) return false;
      if (k === "j") { if (sel + 1 < rows.length) show(sel + 1); else if (pages && pages.next) pages.next(); return true; }
      if (k === "k") { if (sel > 0) show(sel - 1); else if (sel < 0) show(0); else if (pages && pages.prev) pages.prev(); return true; }
      if (k === "Enter" || k === "o") { if (sel >= 0) open(sel); return true; }
      return false;
    };
  }

  // --- an item --------------------------------------------------------------------------------------
  function idsFor(rid, params) {
    var key = rid + "?" + filterParams(params).toString();
    if (list.key === key) return Promise.resolve(list.ids);
    var q = listQuery(rid, params); q.limit = 1;
    return api("items", q).then(function (d) { list = { key: key, ids: d.ids }; return d.ids; });
  }

  function itemPage(r, my) {
    var params = filterParams(r.params);
    return runInfo(r.rid).then(function (info) {
      var pair = pairOf(params, info);
      return Promise.all([api("item", { run: r.rid, id: r.id, pair: pair.join(",") }), idsFor(r.rid, params)]).then(function (res) {
        if (my !== seq) return;
        showItem(r.rid, info, res[0], res[1], params, pair,
                 { from: r.params.get("from"), rate: r.params.get("rate"), metric: r.params.get("metric") });
      });
    });
  }

  function showItem(rid, info, it, ids, params, pair, queued) {
    document.title = it.id + " · " + info.name + ": eval.py view";
    crumb.textContent = "› " + info.name + " › " + it.id;
    var pos = ids.indexOf(it.id);
    var back = function () { location.hash = runHash(rid, params); };
    var step = function (d) { if (pos >= 0 && ids[pos + d] !== undefined) location.hash = itemHash(rid, ids[pos + d], params); };
    var nav = add(el("div", "itemnav"), a(runHash(rid, params), "← the list (Esc)"),
                  el("span", "muted position", pos >= 0 ? "item " + (pos + 1) + " of " + ids.length + " the filters keep" : "not among the items the filters keep"));
    var prev = el("button", null, "← previous (k)"), next = el("button", null, "next (j) →");
    prev.disabled = !(pos > 0); next.disabled = !(pos >= 0 && pos + 1 < ids.length);
    prev.addEventListener("click", function () { step(-1); }); next.addEventListener("click", function () { step(1); });
    add(nav, prev, next, a(itemHash(rid, it.id, params), "link to this item", "permalink"));
    if (info.models.length > 2) {
      var ps = el("select"); ps.id = "item-pair";
      if (pair[0] > pair[1]) option(ps, pair.join(","), info.models[pair[0]] + " vs " + info.models[pair[1]], pair.join(","));  // as the queue handed it out
      info.models.forEach(function (m, i) { info.models.forEach(function (n, j) { if (i < j) option(ps, i + "," + j, m + " vs " + n, pair.join(",")); }); });
      ps.addEventListener("change", function () { params.set("pair", ps.value); location.hash = itemHash(rid, it.id, params); });
      add(nav, add(el("label"), "pair ", ps));
    }
    add(main, nav);
    var A = it.models[pair[0]], B = it.models[pair[1]];
    var sec = add(el("section", "item"), el("h2", null, "Item " + it.id + " · " + it.category));
    sec.id = "item"; sec.setAttribute("data-id", it.id);
    add(sec, el("h3", null, "Question"), el("div", "q question", it.question || "(no instruction)"));
    if (it.input) add(sec, el("h3", null, "Input"), el("div", "txt input", it.input));
    if (it.targets.length) { add(sec, el("h3", null, "Reference" + (it.targets.length > 1 ? "s" : ""))); it.targets.forEach(function (t) { add(sec, el("div", "txt reference", t)); }); }
    // the labels first: the person reads, then says
    var paired = info.models.length > 1;
    var lbar = paired ? labelBar(rid, info, it, pair, queued) : null;
    var rbar = ratingBar(rid, info, it, pair, queued);
    if (queued.from === "queue") {
      add(sec, el("p", "muted from-queue", "Handed out by the label queue (Label next): " +
        (queued.rate !== null ? "score it on " + (queued.metric || "the metric") + " with the keys" : "label it with a, b or t") + ", then n for the next."));
    }
    add(sec, lbar, rbar);
    var side = el("div", paired ? "side answers" : "answers");
    var shown = paired ? [[A, "m1", it.diff ? it.diff.a : null], [B, "m2", it.diff ? it.diff.b : null]] : [[A, "m1", null]];
    shown.forEach(function (x, k) {
      var m = x[0], box = add(el("div"), el("h3", x[1], (k ? "B: " : "A: ") + m.name));
      if (m.missing) add(box, el("p", "muted", "no answer of this model for this item"));
      else if (m.turns && m.turns.length) m.turns.forEach(function (t, i) { add(box, el("div", "muted", "turn " + (i + 1) + ": " + t.user), el("div", "txt answer", t.assistant)); });
      else {
        var txt = el("div", "txt answer");
        if (x[2] && !it.diff.identical) x[2].forEach(function (seg) { add(txt, seg[0] ? document.createTextNode(seg[1]) : el("mark", null, seg[1])); });
        else txt.textContent = m.output;
        add(box, txt);
      }
      add(side, box);
    });
    add(sec, el("h3", null, "Answers"));
    if (it.diff) add(sec, el("p", "muted diff-note", it.diff.identical ? "The two answers are identical." :
      "Near-identical answers (word similarity " + fmt(it.diff.ratio) + "): the words that differ are marked."));
    add(sec, side);
    // every score of every model
    var head = ["score"]; it.models.forEach(function (m) { head.push(el("th", "num", m.name)); });
    var st = table(head, "scores");
    it.keys.forEach(function (k) {
      var cells = [td(k)];
      it.models.forEach(function (m) {
        if (m.missing) { cells.push(td("")); return; }
        if (m.invalid && m.invalid[k]) cells.push(td("invalid", "num inv"));
        else cells.push(td(fmt((m.scores || {})[k]), "num"));
      });
      st.body.appendChild(row(cells));
    });
    add(sec, el("h3", null, "Scores"), add(el("div", "scroll"), st.table));
    // the judge in both orders
    var j = add(el("div", "judge"), el("h3", null, paired ? "The judge on " + A.name + " vs " + B.name : "The judge"));
    if (it.battle) {
      var bt = it.battle;
      add(j, el("p", "verdict", "Verdict (both orders): " + verdictText(bt.verdict, info.models, pair) +
        (bt.weighted ? " · probability-weighted: " + verdictText(bt.weighted, info.models, pair) : "") +
        (bt.flipped ? " · the winner flips with the order" : bt.inconsistent ? " · the orders disagree" : "") +
        (it.disagree ? " · the headline metric favours the other answer" : "")));
      bt.orders.forEach(function (o) {
        var box = add(el("div", "order"), el("h4", null, o.first + " shown first (" + o.order + "): " + verdictText(o.verdict, info.models, pair) +
          (o.scores ? " · scores " + A.name + " " + fmt(o.scores[0]) + ", " + B.name + " " + fmt(o.scores[1]) : "")));
        if (o.reason) add(box, el("p", "inv", "invalid: " + o.reason));
        add(box, el("pre", "raw", o.raw || "(empty reply)"));
        add(j, box);
      });
    } else if (it.judge) {
      add(j, el("p", null, "No battle of this pair; the judge's headline rating favours " + verdictText(it.judge, info.models, pair) + "."));
    } else add(j, el("p", "muted", paired ? "No judge verdict on this pair." : "One model: no pair to judge."));
    add(sec, j);
    // invalid replies with their reasons, and the details of each score
    var inv = el("div", "invalids");
    it.models.forEach(function (m) {
      Object.keys(m.invalid || {}).forEach(function (k) {
        add(inv, add(el("div"), el("h4", "inv", m.name + " · " + k + ": invalid — " + m.invalid[k].reason), el("pre", "raw", m.invalid[k].raw || "(no raw reply)")));
      });
    });
    if (inv.childNodes.length) add(sec, el("h3", null, "Invalid replies"), inv);
    var det = add(el("details"), el("summary", null, "details of each score (judge replies, probabilities, flags)"));
    it.models.forEach(function (m) {
      if (m.missing) return;
      var d = m.details || {};
      Object.keys(d).forEach(function (k) { add(det, el("h4", null, m.name + " · " + k), el("pre", null, typeof d[k] === "string" ? d[k] : JSON.stringify(d[k], null, 1))); });
      if (m.flags && m.flags.length) add(det, el("p", "muted", m.name + " flags: " + m.flags.join(", ")));
    });
    add(sec, det);
    add(main, sec);
    var lp = el("div", "panel labels-panel"); lp.id = "labels-panel";
    add(main, lp);
    labelsPanel(lp, info.labels, rid, info);
    onNext = function () { labelNext(rid, info); };
    keys = function (k) {
      if (k === "j") { step(1); return true; }
      if (k === "k") { step(-1); return true; }
      if (k === "Escape") { back(); return true; }
      if (lbar && (k === "a" || k === "b" || k === "t")) { lbar.labelWith({ a: "A", b: "B", t: "tie" }[k]); return true; }
      if (rbar && /^[0-9]$/.test(k)) return rbar.keyScore(k);
      return false;
    };
  }

  function labelBar(rid, info, it, pair, queued) {
    var bar = el("div", "labelbar"); bar.id = "labelbar";
    var A = info.models[pair[0]], B = info.models[pair[1]];
    // the latest label of the name in the page counts as "yours"; the others' are counted beside it
    var me = annotator() || "anonymous";
    var own = it.labels.filter(function (l) { return (l.annotator || "anonymous") === me; });
    var mine = own.length ? own[own.length - 1].verdict_here : null;
    var buttons = {};
    add(bar, el("strong", null, "Your verdict:"));
    [["A", A + " better (a)"], ["B", B + " better (b)"], ["tie", "tie (t)"]].forEach(function (x) {
      var btn = el("button", "label-btn" + (mine === x[0] ? " on" : ""), x[1]);
      btn.setAttribute("data-verdict", x[0]);
      btn.addEventListener("click", function () { bar.labelWith(x[0]); });
      buttons[x[0]] = btn; add(bar, btn);
    });
    var nextBtn = el("button", "label-next", "Label next (n)");
    nextBtn.addEventListener("click", function () { labelNext(rid, info); });
    var note = el("input"); note.type = "text"; note.id = "label-note"; note.placeholder = "note (optional), then a / b / t or a button";
    note.maxLength = 2000;
    add(bar, note);
    var others = it.labels.length - own.length;
    var said = el("span", "muted label-state", (mine ? "labelled: " + verdictText(mine, info.models, pair) + (own.length > 1 ? " (" + own.length + " labels; the latest counts)" : "")
      : "not labelled") + (others ? "; " + others + " label" + (others > 1 ? "s" : "") + " by others" : ""));
    add(bar, said, nextBtn);
    var busy = false;
    bar.labelWith = function (verdict) {
      if (busy) return;
      busy = true;
      var body = { run: rid, id: it.id, pair: pair, verdict: verdict, note: note.value, annotator: annotator() };
      bar.removeAttribute("data-unsaved");
      api("labels", {}, body, function (n, of) {
        said.textContent = "saving: the viewer did not take it yet, trying again (" + n + " of " + of + ")";
      }).then(function (d) {
        Object.keys(buttons).forEach(function (k) { buttons[k].classList.toggle("on", k === d.label.verdict_here); });
        it.labels.push(d.label);
        said.textContent = "labelled: " + verdictText(d.label.verdict_here, info.models, pair) + " by " + d.label.annotator +
          " (saved " + d.label.time + (d.label.queue ? "; queue draw " + d.label.queue.draw : "; off the queue") + ")";
        note.value = "";
        info.labels = d.summary;
        var lp = document.getElementById("labels-panel");
        if (lp) labelsPanel(lp, d.summary, rid, info, d.corrected);
        bar.setAttribute("data-saved", String(d.summary.count));
        toast("saved: " + (verdict === "tie" ? "tie" : verdictText(verdict, info.models, pair) + " better"));
      }).catch(function (err) {  // never dropped in silence: the bar says so until the next label
        said.textContent = "NOT saved: " + err.message + "; label it again";
        bar.setAttribute("data-unsaved", verdict);
        toast("not saved: " + err.message, true);
      }).then(function () { busy = false; });
    };
    return bar;
  }

  // a person's score for one model's answer on one GPT metric, on that metric's scale (keys 1-5 on 1-5)
  function ratingBar(rid, info, it, pair, queued) {
    var keys_ = ratingKeysOf(it.keys, it.scales).filter(function (k) {
      return it.models.some(function (m) { return !m.missing && ((m.scores || {})[k] !== undefined || (m.invalid || {})[k]); });
    });
    if (!keys_.length) return null;
    var bar = el("div", "labelbar ratingbar"); bar.id = "ratingbar";
    var ms = el("select"); ms.id = "rate-model";
    var model = queued.rate !== null && queued.rate !== undefined ? queued.rate : String(pair[0]);
    it.models.forEach(function (m, i) { if (!m.missing) option(ms, String(i), m.name, model); });
    var ks = el("select"); ks.id = "rate-metric";
    var metric = keys_.indexOf(queued.metric) >= 0 ? queued.metric : keys_.indexOf(queueChoice().metric) >= 0 ? queueChoice().metric : keys_[0];
    keys_.forEach(function (k) { option(ks, k, k, metric); });
    var btns = el("span", "scores"), judge = el("span", "muted rate-judge"), said = el("span", "muted rate-state");
    add(bar, el("strong", null, "Your score:"), ms, ks, btns, judge, said);
    var ratings = it.ratings || [];
    var scale = function () { return it.scales[ks.value] || [1, 5]; };
    var draw = function () {
      clear(btns);
      var sc = scale(), m = it.models[Number(ms.value)] || {};
      var mine = ratings.filter(function (r) { return r.model === m.name && (r.metric === ks.value || r.metric === metricName(ks.value)); });
      var last = mine.length ? mine[mine.length - 1] : null;
      for (var v = Math.ceil(sc[0]); v <= Math.floor(sc[1]) && v - sc[0] < 11; v++) {
        (function (v) {
          var b = el("button", "rate-btn" + (last && last.score === v ? " on" : ""), String(v));
          b.setAttribute("data-score", String(v));
          b.addEventListener("click", function () { bar.rateWith(v); });
          add(btns, b);
        })(v);
      }
      var js = (m.scores || {})[ks.value];
      judge.textContent = "the judge: " + (typeof js === "number" ? fmt(js) : "–") + " on " + sc[0] + "–" + sc[1];
      said.textContent = last ? "scored " + last.score + " by " + last.annotator : "not scored";
    };
    ms.addEventListener("change", draw); ks.addEventListener("change", draw);
    draw();
    var busy = false;
    bar.keyScore = function (k) {
      var sc = scale(), v = Number(k);
      if (k === "0" && sc[1] >= 10) v = 10;
      if (!(v >= sc[0] && v <= sc[1])) return false;
      bar.rateWith(v);
      return true;
    };
    bar.rateWith = function (score) {
      if (busy) return;
      busy = true;
      var body = { kind: "rating", run: rid, id: it.id, model: Number(ms.value), metric: ks.value, score: score, annotator: annotator() };
      bar.removeAttribute("data-unsaved");
      api("labels", {}, body, function (n, of) {
        said.textContent = "saving: the viewer did not take it yet, trying again (" + n + " of " + of + ")";
      }).then(function (d) {
        ratings.push(d.label); it.ratings = ratings;
        draw();
        said.textContent = "scored " + d.label.score + " by " + d.label.annotator + " (saved " + d.label.time +
          (d.label.queue ? "; queue draw " + d.label.queue.draw : "; off the queue") + ")";
        info.labels = d.summary;
        var lp = document.getElementById("labels-panel");
        if (lp) labelsPanel(lp, d.summary, rid, info, d.corrected);
        bar.setAttribute("data-saved", String(ratings.length));
        toast("saved: " + d.label.model + " " + ks.value + " " + d.label.score);
      }).catch(function (err) {
        said.textContent = "NOT saved: " + err.message + "; score it again";
        bar.setAttribute("data-unsaved", String(score));
        toast("not saved: " + err.message, true);
      }).then(function () { busy = false; });
    };
    return bar;
  }

  // --- two runs -------------------------------------------------------------------------------------
  function comparePage(r, my) {
    var page = Math.max(0, parseInt(r.params.get("page") || "0", 10) || 0), per = 100;
    return api("compare", { a: r.a, b: r.b, offset: page * per, limit: per }).then(function (d) {
      if (my !== seq) return;
      document.title = "Compare: eval.py view";
      crumb.textContent = "› compare";
      add(main, add(el("h2"), "A = ", a(runHash(d.a.rid), d.a.name), " · B = ", a(runHash(d.b.rid), d.b.name)));
      if (d.error) add(main, el("p", "error", d.error));
      if (d.steps.length) {
        var t = table(["model", "score (all items)", "A", "B", "verdict"], "steps");
        d.steps.forEach(function (s) {
          var tr = row([s.model, s.score, td(fmt(s.mean_a), "num"), td(fmt(s.mean_b), "num"), add(el("td"), el("span", "step " + s.word.replace(/ /g, "-"), s.word), " ", el("span", "muted", s.text))]);
          t.body.appendChild(tr);
        });
        add(main, el("h3", null, "Primary scores, paired (eval.py compare)"), add(el("div", "scroll"), t.table));
      }
      add(main, el("h3", null, "What changed, item by item (largest change first)"),
          el("p", "muted changes-count", d.total + " items changed (a score of a model in both runs, or a judge verdict); a change is a share of the score's scale, a verdict turned round counts 1."));
      var ct = table(["item", "category", "question", "change", "scores (A → B)", "judge verdicts (A → B)"], "list changes");
      d.rows.forEach(function (x) {
        var links = add(el("td"), x.id + " ", a(itemHash(d.a.rid, x.id), "A"), " ", a(itemHash(d.b.rid, x.id), "B"));
        var sc = el("td");
        x.scores.slice(0, 4).forEach(function (s) {
          add(sc, el("div", null, s.model + " " + s.key + ": " + (typeof s.a === "number" ? fmt(s.a) : s.a || "–") + " → " +
            (typeof s.b === "number" ? fmt(s.b) : s.b || "–") + (s.d !== null ? " (" + (s.d > 0 ? "+" : "") + fmt(s.d) + ")" : "")));
        });
        if (x.scores.length > 4) add(sc, el("div", "muted", "and " + (x.scores.length - 4) + " more"));
        var vs = el("td");
        x.verdicts.forEach(function (v) {
          var word = function (w) { return w === "A" ? v.pair[0] : w === "B" ? v.pair[1] : w || "–"; };
          add(vs, el("div", null, v.pair[0] + " vs " + v.pair[1] + ": " + word(v.a) + " → " + word(v.b)));
        });
        var tr = row([links, td(x.c), td(x.q, "qx"), td(fmt(x.change), "num"), sc, vs]);
        tr.setAttribute("data-id", x.id);
        ct.body.appendChild(tr);
      });
      add(main, add(el("div", "scroll"), ct.table));
      var pages = Math.max(1, Math.ceil(d.total / per));
      if (pages > 1) {
        var go = function (p) { location.hash = "#/compare/" + encodeURIComponent(r.a) + "/" + encodeURIComponent(r.b) + (p ? "?page=" + p : ""); };
        var prev = el("button", null, "← previous page"), next = el("button", null, "next page →");
        prev.disabled = page === 0; next.disabled = page + 1 >= pages;
        prev.addEventListener("click", function () { go(page - 1); }); next.addEventListener("click", function () { go(page + 1); });
        add(main, add(el("div", "pager"), prev, next, el("span", "muted", "page " + (page + 1) + " of " + pages)));
      }
    });
  }

  // --- keys -----------------------------------------------------------------------------------------
  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var t = ev.target, tag = t && t.tagName;
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (t && t.isContentEditable)) {
      if (ev.key === "Escape") t.blur();
      if (!(tag === "INPUT" && (t.id === "label-note" || t.id === "annotator") && ev.key === "Enter")) return;
      if (t.id === "annotator") store(WHO_KEY, t.value.trim());
      t.blur(); return;
    }
    if (ev.key === "n" && onNext) { ev.preventDefault(); onNext(); return; }
    if (keys && keys(ev.key)) ev.preventDefault();
  });
  window.addEventListener("hashchange", render);
  render();
})();
