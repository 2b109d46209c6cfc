(function () {
  "use strict";
  var D = null;  // the item browser's data, read by load() below
  var PER_PAGE = 10;  // a page of items stays a few screens long
  var state = { page: 0, list: [] };
  var $ = function (id) { return document.getElementById(id); };
  var NONE = {};
  function inv(it, m) { return it.v ? it.v[m] : NONE; }
  function details(it, m) {  // {score key: object}, rebuilt from the compact [shape, values...] form
    var out = {}, d = it.d ? it.d[m] : NONE;
    Object.keys(d).forEach(function (k) {
      var row = d[k], shape = row[0] >= 0 ? D.shapes[row[0]] : null, obj;
      if (!shape) obj = row[1];
      else { obj = {}; shape.forEach(function (f, i) { obj[f] = row[i + 1]; }); }
      out[D.keys[k]] = obj;
    });
    return out;
  }
  var hay = null;  // lower-cased searchable text per item, built on the first search

  // every piece of answer or judge text goes through textContent: never parsed as HTML
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function add(parent) { for (var i = 1; i < arguments.length; i++) if (arguments[i]) parent.appendChild(arguments[i]); return parent; }
  function fmt(x) {
    if (x === null || x === undefined || typeof x !== "number" || !isFinite(x)) return "–";
    var a = Math.abs(x);
    return a >= 100 ? x.toFixed(1) : a >= 10 ? x.toFixed(2) : x.toFixed(3);
  }
  function option(sel, value, label) { var o = el("option", null, label); o.value = value; sel.appendChild(o); }

  function init() {
    (D.scored_cats || D.cats.map(function (c, i) { return i; })).forEach(function (i) { option($("f-cat"), i, D.cats[i]); });
    D.keys.forEach(function (k, i) { option($("f-key"), i, k); });
    D.models.forEach(function (m, i) { option($("f-m1"), i, m); option($("f-m2"), i, m); });
    $("f-m1").value = "0";
    $("f-m2").value = D.models.length > 1 ? "1" : "0";
    // the browser is folded so the page stays a few screens long; the Items link (or #browser) unfolds it
    var openItems = function () { $("items").open = true; };
    document.querySelectorAll('a[href="#browser"]').forEach(function (a) { a.addEventListener("click", openItems); });
    if (location.hash === "#browser") openItems();
    $("items").querySelector("summary").textContent = "Browse the " + D.items.length + " items side by side " +
      "(filters, every score, the judge's raw replies)" +
      (D.unscored ? "; " + D.unscored + " records not evaluated (skipped categories) are left out" : "");
    ["f-cat", "f-m1", "f-m2", "f-key", "f-invalid", "f-sort"].forEach(function (id) {
      $(id).addEventListener("change", function () { state.page = 0; update(); });
    });
    var timer = null;
    $("f-text").addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () { state.page = 0; update(); }, 200);
    });
    $("b-prev").addEventListener("click", function () { if (state.page > 0) { state.page--; render(); } });
    $("b-next").addEventListener("click", function () {
      if ((state.page + 1) * PER_PAGE < state.list.length) { state.page++; render(); }
    });
    update();
  }

  function battleFor(m1, m2) {
    for (var i = 0; i < D.battles.length; i++) {
      var b = D.battles[i];
      if (b.a === m1 && b.b === m2) return { b: b, swapped: false };
      if (b.a === m2 && b.b === m1) return { b: b, swapped: true };
    }
    return null;
  }

  function disagreement(it, m1, m2, key) {
    var s1 = it.s[m1], s2 = it.s[m2], tot = 0, n = 0;
    for (var k in s1) {
      if (key !== "" && k !== key) continue;
      if (!(k in s2)) continue;
      var r = D.ranges[k], w = (r[1] - r[0]) || 1;
      tot += Math.abs(s1[k] - s2[k]) / w; n++;
    }
    return n ? tot / n : -1;
  }

  function update() {
    var cat = $("f-cat").value, key = $("f-key").value, invOnly = $("f-invalid").checked;
    var m1 = +$("f-m1").value, m2 = +$("f-m2").value, q = $("f-text").value.trim().toLowerCase();
    var bt = battleFor(m1, m2);
    if (q && !hay) hay = D.items.map(function (it) {
      var turns = (it.u || []).concat.apply(it.u || [], (it.r || []).map(function (r) { return r || []; }));
      return (it.id + "\n" + it.q + "\n" + (it.in || "") + "\n" + it.o.join("\n") + "\n" + turns.join("\n")).toLowerCase();
    });
    var list = [];
    for (var i = 0; i < D.items.length; i++) {
      var it = D.items[i];
      if (cat !== "" && it.c !== +cat) continue;
      if (it.o[m1] === null && it.o[m2] === null) continue;
      var v1 = inv(it, m1), v2 = inv(it, m2);
      if (key !== "" && !(key in it.s[m1]) && !(key in it.s[m2]) && !(key in v1) && !(key in v2)) continue;
      if (invOnly) {
        var bad = Object.keys(v1).length + Object.keys(v2).length > 0;
        if (key !== "") bad = (key in v1) || (key in v2);
        if (!bad && bt && key === "") { var bi = bt.b.items[it.id]; bad = !!(bi && bi[0] === "invalid"); }
        if (!bad) continue;
      }
      if (q && hay[i].indexOf(q) < 0) continue;
      list.push(i);
    }
    if ($("f-sort").value === "disagree") {
      var d = {};
      list.forEach(function (i) { d[i] = disagreement(D.items[i], m1, m2, key); });
      list.sort(function (x, y) { return d[y] - d[x] || x - y; });
    }
    state.list = list;
    render();
  }

  function verdictName(v, a, b) {
    if (v === "A") return a + " wins";
    if (v === "B") return b + " wins";
    if (v === "tie") return "tie";
    if (v === "invalid") return "invalid";
    return "–";
  }

  function renderBattle(box, it, m1, m2) {
    var found = battleFor(m1, m2);
    if (!found) return;
    var bi = found.b.items[it.id];
    if (!bi) return;
    var A = D.models[found.b.a], B = D.models[found.b.b];
    var det = el("details", "battle");
    var sum = el("summary", null, "Judge battle" + (bi[5] ? " (whole conversation)" : "") + ": " + verdictName(bi[0], A, B) +
      (bi[1] ? " · probability-weighted: " + verdictName(bi[1], A, B) + " (margin " + fmt(bi[2]) + ")" : ""));
    add(det, sum);
    renderOrders(det, [bi[3], bi[4]], A, B);
    (bi[5] || []).forEach(function (t) {  // a conversation: each turn's verdict and its orders
      add(det, el("h5", null, "Turn " + t[0] + ": " + verdictName(t[1], A, B) +
        (t[2] ? " · probability-weighted: " + verdictName(t[2], A, B) + " (margin " + fmt(t[3]) + ")" : "")));
      renderOrders(det, [t[4], t[5]], A, B);
    });
    add(box, det);
  }

  function renderOrders(det, orders, A, B) {
    orders.forEach(function (o, j) {
      if (!o) return;
      var first = j === 0 ? A : B, second = j === 0 ? B : A;
      add(det, el("h5", null, "Order " + first + " first, " + second + " second: " + verdictName(o[0], A, B) +
        (o[1] ? " · scores " + A + " " + o[1][0] + ", " + B + " " + o[1][1] : "") +
        (o[2] ? " · probability-weighted " + A + " " + fmt(o[2][0]) + ", " + B + " " + fmt(o[2][1]) : "")));
      if (o[4]) add(det, el("div", "inv", "invalid: " + o[4]));
      add(det, el("div", "txt", o[3] || "(no reply)"));
    });
  }

  function reply(text, absent) {
    return el("div", "txt", absent ? "(no answer from this model)" : (text || "(empty answer)"));
  }

  // a conversation: the setup, then each turn's user message and both models' replies side by side
  function renderConversation(box, it, m1, m2) {
    if (it.q) add(box, el("div", "hd", "setup"), el("div", "txt", it.q));
    it.u.forEach(function (user, k) {
      add(box, el("div", "hd", "turn " + (k + 1) + " · user"), el("div", "q", user));
      var side = el("div", "side");
      [m1, m2].forEach(function (m, j) {
        var col = el("div"), rs = it.r ? it.r[m] : null;
        add(col, el("h5", j ? "m2" : "m1", D.models[m] + " · turn " + (k + 1)));
        add(col, reply(rs ? rs[k] : null, !rs));
        add(side, col);
      });
      add(box, side);
      var refs = it.tr ? it.tr[k] : null;
      if (refs && refs.length) {
        var td = add(el("details"), el("summary", null, "turn " + (k + 1) + " reference" + (refs.length > 1 ? "s (" + refs.length + ")" : "")));
        refs.forEach(function (t) { add(td, el("div", "txt", t)); });
        add(box, td);
      }
    });
  }

  function renderItem(it, m1, m2) {
    var box = el("article", "item");
    var flags = (it.f ? [].concat(it.f[m1] || [], it.f[m2] || []) : []);
    add(box, el("div", "hd", "id " + it.id + " · " + D.cats[it.c] + (it.u ? " · conversation of " + it.u.length + " turns" : "") +
      (flags.length ? " · flags: " + flags.join(", ") : "")));
    if (it.u) renderConversation(box, it, m1, m2);
    else {
      add(box, el("div", "q", it.q));
      if (it.in) add(box, el("div", "txt", it.in));
      if (it.t && it.t.length) {
        var td = add(el("details"), el("summary", null, "reference" + (it.t.length > 1 ? "s (" + it.t.length + ")" : "")));
        it.t.forEach(function (t) { add(td, el("div", "txt", t)); });
        add(box, td);
      }
      var side = el("div", "side");
      [m1, m2].forEach(function (m, j) {
        var col = el("div");
        add(col, el("h5", j ? "m2" : "m1", D.models[m]));
        add(col, reply(it.o[m], it.o[m] === null));
        add(side, col);
      });
      add(box, side);
    }
    var keys = {};
    [m1, m2].forEach(function (m) { Object.keys(it.s[m]).concat(Object.keys(inv(it, m))).forEach(function (k) { keys[k] = 1; }); });
    var ks = Object.keys(keys).map(Number).sort(function (a, b) { return a - b; });
    if (ks.length) {
      var tbl = el("table", "sc"), head = el("tr");
      add(head, el("th", null, "score"), el("th", null, D.models[m1]), el("th", null, D.models[m2]));
      add(tbl, add(el("thead"), head));
      var body = el("tbody");
      ks.forEach(function (k) {
        var tr = el("tr"), v1 = it.s[m1][k], v2 = it.s[m2][k];
        add(tr, el("td", null, D.keys[k]));
        [[m1, v1, v2], [m2, v2, v1]].forEach(function (x) {
          var cell = el("td", (typeof x[1] === "number" && typeof x[2] === "number" && x[1] > x[2]) ? "hi" : null);
          var iv = inv(it, x[0]);
          if (k in iv) { cell.className = "inv"; cell.textContent = "invalid: " + iv[k][0]; cell.title = iv[k][1] || ""; }
          else cell.textContent = fmt(x[1]);
          add(tr, cell);
        });
        add(body, tr);
      });
      add(box, add(el("div", "scroll"), add(tbl, body)));
    }
    [m1, m2].forEach(function (m) {
      var iv = inv(it, m);
      Object.keys(iv).forEach(function (k) {
        var raw = iv[k][1];
        if (raw) {
          var d = add(el("details"), el("summary", "inv", D.models[m] + " · " + D.keys[k] + ": invalid (" + iv[k][0] + ") – raw reply"));
          add(box, add(d, el("div", "txt", raw)));
        }
      });
    });
    renderBattle(box, it, m1, m2);
    [m1, m2].forEach(function (m) {
      var det = details(it, m);
      if (!Object.keys(det).length) return;
      var sage = Object.keys(det).some(function (k) { return k.indexOf("SAGEval/") === 0; });
      var d = add(el("details"), el("summary", null, D.models[m] + ": judge details" +
        (sage ? ", SAGE critiques and suggested aspects" : "") + " (" + Object.keys(det).length + ")"));
      Object.keys(det).forEach(function (k) {
        add(d, el("h5", null, k));
        add(d, el("pre", null, JSON.stringify(det[k], null, 2)));
      });
      add(box, d);
    });
    return box;
  }

  function render() {
    var m1 = +$("f-m1").value, m2 = +$("f-m2").value, list = state.list;
    var pages = Math.max(1, Math.ceil(list.length / PER_PAGE));
    var start = state.page * PER_PAGE;
    $("b-count").textContent = list.length + " of " + D.items.length + " items · " + D.models[m1] + " beside " + D.models[m2];
    $("b-page").textContent = "page " + (state.page + 1) + " of " + pages;
    $("b-prev").disabled = state.page === 0;
    $("b-next").disabled = start + PER_PAGE >= list.length;
    var frag = document.createDocumentFragment();
    list.slice(start, start + PER_PAGE).forEach(function (i) { frag.appendChild(renderItem(D.items[i], m1, m2)); });
    var box = $("b-list");
    box.textContent = "";
    box.appendChild(frag);
    if (window.performance && performance.mark) performance.mark("browser-rendered");
    document.body.setAttribute("data-browser-ready", "1");
  }

  // Large runs embed their data gzip-compressed and base64-encoded (a third of the size); the
  // browser inflates it with DecompressionStream (Chromium 80+, Firefox 113+, Safari 16.4+).
  function load(done) {
    var plain = $("report-data");
    if (plain) { done(JSON.parse(plain.textContent)); return; }
    var packed = $("report-data-gz");
    if (!packed) return;
    if (typeof DecompressionStream === "undefined") {
      $("b-list").textContent = "This browser cannot inflate the item data (no DecompressionStream); open the report in a current Chromium or Firefox.";
      return;
    }
    var bin = atob(packed.textContent.trim()), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).text()
      .then(function (text) { done(JSON.parse(text)); });
  }

  load(function (data) { D = data; init(); });
})();
