"""`eval.py view [FOLDER ...]`: a local web app over the save paths under the folders (default: the
current folder): the runs and their trends, a run's items with filters, one item whole, two runs item
by item, and labels (a person's verdicts, appended to the run's labels.jsonl). docs/view.md.

Exit codes: 0 stopped with Ctrl-C; 2 bad input (a folder that does not exist, a port in use or not a
number)."""

from __future__ import annotations

import secrets
import sys
import threading
from pathlib import Path

from ..core.errors import InputError
from .common import EXIT_OK, Parser


def main(argv: list[str]) -> int:
    p = Parser(prog="eval.py view", description="A local web app over save paths: runs and trends, items with "
                                                "filters, two runs compared, labels for the judge check.")
    p.add_argument("folders", nargs="*", type=Path, metavar="FOLDER",
                   help="folders to search for save paths, recursively (default: the current folder)")
    p.add_argument("--port", type=int, default=8765, help="the port (0: any free port; default 8765)")
    p.add_argument("--host", default="127.0.0.1", help="the address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--no-browser", action="store_true", help="print the address only; do not open a browser")
    args = p.parse_args(argv)
    if not 0 <= args.port <= 65535:
        raise InputError(f"--port {args.port}: expected 0 (any free port) to 65535")
    from ..view.catalog import Catalog
    from ..view.server import LOOPBACK, App, make_server

    catalog = Catalog(args.folders or [Path(".")])
    if args.host not in LOOPBACK:
        print(f"warning: --host {args.host}: the viewer is reachable from other machines on that address; anyone "
              "with the token can read these runs and add labels", file=sys.stderr)
    app = App(catalog, secrets.token_urlsafe(24), args.host)
    try:
        server = make_server(app, args.port)
    except OSError as exc:
        raise InputError(f"--port {args.port} on {args.host}: cannot listen ({exc.strerror or exc}); "
                         "--port 0 takes any free port") from None
    shown = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{shown}:{app.port}/?token={app.token}"
    try:  # Ctrl-C at any moment from here stops the server quietly
        runs = catalog.scan()
        print(f"view: {url}", flush=True)
        print(f"{len(runs)} runs under {', '.join(str(f) for f in catalog.folders)}; Ctrl-C stops the viewer",
              file=sys.stderr, flush=True)
        if not args.no_browser:
            import webbrowser

            threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        print("view: stopped", file=sys.stderr)
    finally:
        server.server_close()
    return EXIT_OK
