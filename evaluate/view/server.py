"""The viewer's HTTP server: the standard library's ThreadingHTTPServer, a JSON API and one static page
(evaluate/view/static: HTML, JS, CSS, all in the package; nothing from the network). How requests are
read and connections kept (bodies framed by Content-Length, the connection bound, error answers) is
the layer below the routes, evaluate/view/handling.py.

It is a server, so:
- it binds 127.0.0.1 unless told otherwise, and on a loopback address answers only requests whose Host
  is that address (a page elsewhere cannot reach it through a name that resolves to 127.0.0.1);
- every /api request needs the access token printed at start (header X-Token; a GET may carry it as
  `?token=`, a write never): without it 403 and nothing read or written;
- what it serves by name is checked by `catalog` (run ids, files of a run) or is one of the package's
  three static files; anything else is 404;
- every response says what it is (JSON as application/json, nosniff) and the page runs under a
  Content-Security-Policy of its own origin only; a run's own HTML (report.html) is served sandboxed,
  so its scripts run without the viewer's origin, token or storage.
"""

from __future__ import annotations

import hmac
import json
import sys
import traceback
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..core.errors import InputError
from ..core.io import clean_json
from ..savepath.labels import LabelError
from . import data, labelling
from .catalog import Catalog, Refused
from .handling import MAX_BODY, Handler as _Layer, ViewServer
from .items import Filters, RunView, label_key
from .runs import headline, item_changes, trend_groups

STATIC = Path(__file__).with_name("static")
ASSETS = {"/": ("index.html", "text/html; charset=utf-8"), "/index.html": ("index.html", "text/html; charset=utf-8"),
          "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
          "/static/app.css": ("app.css", "text/css; charset=utf-8")}
CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; "
       "frame-ancestors 'none'; base-uri 'none'; form-action 'none'; object-src 'none'")
# a run's own files (report.html and its inline script) run sandboxed: an opaque origin, no token, no storage
FILE_CSP = ("sandbox allow-scripts; default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
            "script-src 'unsafe-inline'")
PAGE = 50  # rows of the item list per request, unless asked for fewer (at most MAX_PAGE)
MAX_PAGE = 500
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class App:
    """What the handler asks: the catalog of runs and the token."""

    def __init__(self, catalog: Catalog, token: str, host: str, port: int = 0):
        self.catalog = catalog
        self.token = token
        self.host = host
        self.port = port

    def allowed_host(self, value: str | None) -> bool:
        if self.host not in LOOPBACK:
            return True  # bound to another address on purpose (warned at start): the token guards it
        names = {f"127.0.0.1:{self.port}", f"localhost:{self.port}", f"[::1]:{self.port}"}
        return (value or "").strip().lower() in names


def make_server(app: App, port: int) -> ThreadingHTTPServer:
    class Handler(_Handler):
        pass

    Handler.app = app

    host = "::1" if app.host == "::1" else app.host
    server = ViewServer((host, port), Handler)
    app.port = server.server_address[1]
    return server


def _json_bytes(obj: Any) -> bytes:
    return json.dumps(clean_json(obj), ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8")


class _Handler(_Layer):
    app: App
    server_version = "eval-view"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the terminal is the person's
        pass

    # --- responses --------------------------------------------------------------------------------
    def _send(self, status: int, body: bytes, ctype: str, csp: str = CSP) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", csp)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, _json_bytes(obj), "application/json; charset=utf-8")

    def _error(self, status: int, message: str) -> None:
        self._json(status, {"error": message})

    # --- dispatch ---------------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._handle("GET")

    def do_HEAD(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def _handle(self, method: str) -> None:
        try:
            if not self.app.allowed_host(self.headers.get("Host")):
                return self._error(403, "unexpected Host header (the viewer answers on the address it printed)")
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
            if method == "GET" and url.path in ASSETS:
                name, ctype = ASSETS[url.path]
                return self._send(200, (STATIC / name).read_bytes(), ctype)
            if url.path == "/favicon.ico":  # none: an answer, so the browser's console stays clean
                return self._send(204, b"", "image/x-icon")
            if not url.path.startswith("/api/"):
                return self._error(404, "not found")
            if not self._token_ok(method, query):
                return self._error(403, "missing or wrong access token (use the address `eval.py view` printed)")
            route = ROUTES.get((method, url.path))
            if route is None:
                return self._error(404 if method == "GET" else 405, "not found")
            route(self, query)
        except Refused as exc:
            self._error(exc.status, str(exc))
        except LabelError as exc:  # a label that cannot be stored: the field named, nothing written
            self._error(400, str(exc))
        except InputError as exc:
            self._error(422, str(exc))
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:  # noqa: BLE001 - a bug must not kill the server; say it once
            print(f"view: internal error on {method} {urlsplit(self.path).path}: {type(exc).__name__}: {exc}",
                  file=sys.stderr)
            traceback.print_exc(limit=3, file=sys.stderr)
            try:
                self._error(500, f"internal error: {type(exc).__name__}")
            except OSError:
                pass

    def _token_ok(self, method: str, query: dict[str, str]) -> bool:
        given = self.headers.get("X-Token") or (query.get("token") if method == "GET" else None) or ""
        return hmac.compare_digest(given.encode("utf-8", "replace"), self.app.token.encode("utf-8"))

    # --- the API ----------------------------------------------------------------------------------
    def api_runs(self, query: dict[str, str]) -> None:
        cat = self.app.catalog
        runs = []
        for h in cat.scan():
            runs.append({"rid": cat.rid(h.path), "name": cat.name(h), "run_id": h.run_id, "status": h.status,
                         "started": h.started, "finished": h.finished, "models": h.models,
                         "categories": h.categories, "items": h.items, "judge": h.judge, "trust": h.trust,
                         "battles": h.battles, "labels": h.labels, "problems": h.problems})
        self._json(200, {"folders": [str(f) for f in cat.folders], "runs": runs})

    def api_trends(self, query: dict[str, str]) -> None:
        cat = self.app.catalog
        groups = trend_groups(cat.scan(), lambda a, b: cat.compare(cat.rid(a.path), cat.rid(b.path)),
                              lambda h: cat.rid(h.path), cat.name)
        self._json(200, {"groups": groups})

    def api_run(self, query: dict[str, str]) -> None:
        cat = self.app.catalog
        rid = query.get("run", "")
        view = cat.view(rid)
        h = cat.header(rid)
        self._json(200, {"rid": rid, "name": cat.name(h), "run_id": h.run_id, "status": h.status,
                         "started": h.started, "finished": h.finished, "judge": h.judge,
                         "models": view.models, "categories": view.categories, "keys": view.keys,
                         "scales": view.scales, "list_key": view.list_key, "items": len(view.entries),
                         "battles": [list(p) for p in view.battles], "headline": headline(view, cat.labels(rid)[1]),
                         "labels": self._labels_summary(rid, view), "report": data.has_report(h.path)})

    def api_items(self, query: dict[str, str]) -> None:
        cat = self.app.catalog
        rid = query.get("run", "")
        view = cat.view(rid)
        f = filters(query, view)
        latest, _, _ = cat.labels(rid)
        chosen = view.select(f, latest)
        offset = max(0, _int(query.get("offset"), 0))
        limit = min(MAX_PAGE, max(1, _int(query.get("limit"), PAGE)))
        self._json(200, {"total": len(chosen), "offset": offset, "ids": [e.id for e in chosen],
                         "key": f.score or view.list_key,
                         "rows": [view.row(e, f, latest) for e in chosen[offset:offset + limit]]})

    def api_item(self, query: dict[str, str]) -> None:
        cat = self.app.catalog
        rid = query.get("run", "")
        view = cat.view(rid)
        entry = view.by_id.get(query.get("id", ""))
        if entry is None:
            raise Refused(404, "no such item in this run")
        pair = _pair(query.get("pair"), view)
        _, every, _ = cat.labels(rid)
        a, b = view.models[pair[0]], view.models[pair[1]]
        key = label_key(entry.id, entry.category, a, b)
        history = [lab for lab in every if label_key(lab.id, lab.category, lab.model_a, lab.model_b) == key]
        self._json(200, {**view.detail(entry, pair, history), "ratings": labelling.ratings_of(cat.resolve(rid), entry)})

    def api_labels(self, query: dict[str, str]) -> None:
        rid = query.get("run", "")
        self._json(200, self._labels_summary(rid, self.app.catalog.view(rid)))

    def api_add_label(self, query: dict[str, str]) -> None:
        """A battle label {run, id, pair, verdict, note, annotator} or a rating label {kind: "rating", run, id,
        model, metric, score, annotator}. Whether it is on the label queue is the queue's to say (it handed
        that item out, `labels_queue.queue_for`), never the page's. A label that does not fit the run is 400
        naming its field, and nothing is stored."""
        length = _int(self.headers.get("Content-Length"), -1)
        if length < 0 or length > MAX_BODY:
            return self._error(413 if length > MAX_BODY else 411, f"a label is a JSON body of at most {MAX_BODY} bytes")
        try:
            body = json.loads(self.rfile.read(length).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            return self._error(400, f"not JSON: {exc}")
        if not isinstance(body, dict):
            return self._error(400, "expected a JSON object {run, id, pair, verdict, note, annotator}")
        cat = self.app.catalog
        rid = str(body.get("run", ""))
        view = cat.view(rid)
        entry = view.by_id.get(str(body.get("id", "")))
        if entry is None:
            raise Refused(404, "no such item in this run")
        if body.get("kind", "battle") == "rating":
            pair, payload = None, labelling.rating_payload(body, view, entry)  # LabelError (400) naming the field
        else:
            pair = _pair(",".join(str(x) for x in body.get("pair") or [0, 1]), view)
            payload = labelling.battle_payload(body, view, entry, pair)
        root = cat.resolve(rid)
        payload["queue"] = labelling.on_queue(root, payload)
        label = cat.add_label(rid, payload)
        self._json(200, {"label": labelling.shown(label, view, pair), "summary": self._labels_summary(rid, view),
                         "corrected": labelling.after_label(root, view)})

    def api_next(self, query: dict[str, str]) -> None:
        """The next item of the save path's label queue that this annotator has not labelled (`Label next`)."""
        cat = self.app.catalog
        rid = query.get("run", "")
        view = cat.view(rid)
        self._json(200, labelling.next_unit(cat.resolve(rid), view, query))

    def api_corrected(self, query: dict[str, str]) -> None:
        """The label-corrected verdicts of the run (`judgecheck.corrected`), for the labels panel."""
        rid = query.get("run", "")
        view = self.app.catalog.view(rid)
        self._json(200, labelling.corrected_or_why(self.app.catalog.resolve(rid), view))

    def api_compare(self, query: dict[str, str]) -> None:
        cat = self.app.catalog
        ra, rb = query.get("a", ""), query.get("b", "")
        va, vb = cat.view(ra), cat.view(rb)
        try:
            comps = cat.compare(ra, rb)
            error = None
        except InputError as exc:
            comps, error = [], str(exc)
        steps = []
        na, nb = cat.name(cat.header(ra)), cat.name(cat.header(rb))
        from .runs import step

        for comp in comps:
            for r in comp["rows"]:
                if r.get("category") == "(all)" and r.get("role") == "confirmatory":
                    steps.append({"model": comp["model_a"][2:], "score": r["score"], "mean_a": r.get("mean_a"),
                                  "mean_b": r.get("mean_b"), **step(r, na, nb, comp["model_a"][2:])})
        changes = item_changes(va, vb)
        offset = max(0, _int(query.get("offset"), 0))
        limit = min(MAX_PAGE, max(1, _int(query.get("limit"), 100)))
        self._json(200, {"a": {"rid": ra, "name": na, "models": va.models}, "b": {"rid": rb, "name": nb,
                                                                                  "models": vb.models},
                         "steps": steps, "error": error, "total": len(changes), "offset": offset,
                         "rows": changes[offset:offset + limit]})

    def api_file(self, query: dict[str, str]) -> None:
        body, ctype = self.app.catalog.file(query.get("run", ""), query.get("path", ""))
        self._send(200, body, ctype, csp=FILE_CSP)

    # --- labels -----------------------------------------------------------------------------------
    def _labels_summary(self, rid: str, view: RunView) -> dict[str, Any]:
        from ..judgecheck.labels import MIN_LABELS, RULE_WORDS, agreement, outputs_of

        latest, every, problems = self.app.catalog.labels(rid)
        out: dict[str, Any] = {"count": len(every), "items": len(latest), "problems": problems,
                               "min_labels": MIN_LABELS, "battles": bool(view.battles), "per_pair": {}}
        for lab in latest.values():
            name = f"{lab.model_a} vs {lab.model_b}"
            out["per_pair"][name] = out["per_pair"].get(name, 0) + 1
        if not every or not view.battles:
            out["with_judge"] = 0
            return out
        if view.outputs is None:
            view.outputs = outputs_of(view.data.results)
        rec = agreement(every, view.data.battles, view.outputs, source="labels.jsonl")
        a = rec["agreement"]
        valid = a["n"] + rec["label_ties_left_out"]
        out["with_judge"] = valid
        if valid >= MIN_LABELS:
            out["agreement"] = {k: a[k] for k in ("accuracy", "ci95", "n", "kappa", "kappa_ci95", "kappa_strength",
                                                  "judge_ties", "invalid")}
            out["label_ties"] = rec["label_ties_left_out"]
            out["rules"] = [{"name": name, "words": RULE_WORDS.get(name, name), "accuracy": b["accuracy"],
                             "kappa": b.get("kappa"), "best": name == rec["best_trivial_rule"]}
                            for name, b in rec["baselines"].items()]
            # a panel: each judge against the same labels (which judge agrees with you)
            out["judges"] = [{"name": name, **{k: j[k] for k in ("accuracy", "ci95", "n", "kappa", "invalid")}}
                             for name, j in (rec.get("judges") or {}).items()]
        out["trustworthy"] = rec["trustworthy"]
        out["verdict"] = rec["verdict_text"]
        return out


ROUTES = {("GET", "/api/runs"): _Handler.api_runs, ("GET", "/api/trends"): _Handler.api_trends,
          ("GET", "/api/run"): _Handler.api_run, ("GET", "/api/items"): _Handler.api_items,
          ("GET", "/api/item"): _Handler.api_item, ("GET", "/api/labels"): _Handler.api_labels,
          ("POST", "/api/labels"): _Handler.api_add_label, ("GET", "/api/next"): _Handler.api_next,
          ("GET", "/api/corrected"): _Handler.api_corrected, ("GET", "/api/compare"): _Handler.api_compare,
          ("GET", "/api/file"): _Handler.api_file}


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _float(value: Any) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


def _pair(value: str | None, view: RunView) -> tuple[int, int]:
    """`i,j` model indices of the run (default 0,1); Refused (400) for anything else."""
    n = len(view.models)
    if n < 2:
        return (0, 0)
    if not value:
        return (0, 1)
    try:
        i, j = (int(x) for x in value.split(","))
    except ValueError:
        raise Refused(400, f"pair {value!r:.40}: expected two model indices, e.g. 0,1") from None
    if not (0 <= i < n and 0 <= j < n and i != j):
        raise Refused(400, f"pair {value!r:.40}: the run has models 0 to {n - 1}")
    return (i, j)


def filters(query: dict[str, str], view: RunView) -> Filters:
    model = query.get("model", "")
    return Filters(pair=_pair(query.get("pair"), view), category=query.get("cat", ""), score=query.get("score", ""),
                   model=int(model) if model.isdigit() and int(model) < len(view.models) else None,
                   lo=_float(query.get("lo")), hi=_float(query.get("hi")), flipped=query.get("flipped") == "1",
                   disagree=query.get("disagree") == "1", invalid=query.get("invalid") == "1",
                   labelled=query.get("labelled", "") if query.get("labelled") in ("yes", "no") else "",
                   query=query.get("q", "")[:200])
