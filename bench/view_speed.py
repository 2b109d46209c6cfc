"""How fast is `eval.py view` on a large run, and how much memory does its server hold?

A constructed run of 10,000 items x 3 models (bench/report_scale.py's generator: Metrics and GPT scores,
judge details, some invalid scores, battles of every pair in both orders with raw replies, comparisons
as a run decides them; its manifest given the models and item counts a run writes), served by
`eval.py view` in a subprocess and opened in headless Chromium:

- the run's page, from navigation to its item list shown (the server reads the run then: the list of
  runs reads manifests only), cold and again (cached);
- a filter applied (category, "verdict flips with the order", "not labelled", a score range, the
  search box), from the control's change to the list shown again, in the page;
- an item opened from the list (j, Enter) until it is shown;
- the server's resident memory (VmRSS and its peak VmHWM) after start, after the run is read, at the end.

Targets (issue 39): the list in under 2 s, a filter in under 200 ms, the server under 300 MB.

    .venv/bin/python bench/view_speed.py [--items 10000] [--models 3] [--repeats 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from report_scale import CATS, generate  # noqa: E402

from evaluate.savepath import layout, read  # noqa: E402
from evaluate.savepath.write import write_json  # noqa: E402

MEASURE = """
var done = arguments[arguments.length - 1], list = document.getElementById('list');
var before = list.getAttribute('data-ready'), t0 = performance.now();
var obs = new MutationObserver(function () {
  if (list.getAttribute('data-ready') !== before) { obs.disconnect(); done([performance.now() - t0, document.querySelector('#list .count').textContent]); }
});
obs.observe(list, {attributes: true});
(function (id, value) {
  var c = document.getElementById(id);
  if (c.type === 'checkbox') { c.checked = value; c.dispatchEvent(new Event('change')); }
  else { c.value = value; c.dispatchEvent(new Event('change')); }
})(arguments[0], arguments[1]);
"""


def memory(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    get = lambda k: int(re.search(rf"^{k}:\s+(\d+) kB", status, re.M).group(1)) / 1024  # noqa: E731
    return get("VmRSS"), get("VmHWM")


def manifest_as_a_run_writes_it(save: Path) -> None:
    """The generator's manifest, plus what a run's manifest says of its models and items."""
    problems: list[str] = []
    manifest = read.read_manifest(save, problems) or {}
    found, _ = read.read_results(save)
    counts = {}
    for _, res in found:
        per: dict[str, int] = {}
        for it in res["items"]:
            per[it["category"]] = per.get(it["category"], 0) + 1
        counts[res["model"]] = per
    manifest.update({"models": [{"name": m} for m in counts], "started": "2026-01-01T00:00:00+00:00",
                     "finished": "2026-01-01T01:00:00+00:00", "layout": layout.LAYOUT_VERSION,
                     "plan": {"families": ["GPT", "Metrics"], "categories": {c: {} for c in CATS}, "items": counts}})
    write_json(layout.manifest_file(save), manifest)


def chromium():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    driver.set_script_timeout(60)
    return driver


def wait(driver, script: str, timeout: float = 120):
    end = time.monotonic() + timeout
    while not driver.execute_script(script):
        if time.monotonic() > end:
            raise RuntimeError(f"timed out: {script}")
        time.sleep(0.01)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=10000)
    ap.add_argument("--models", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3, help="each filter applied this many times (median)")
    ap.add_argument("--keep", type=Path, help="generate into this folder and keep it")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="view_speed_"))
    save = root / "big-run"
    proc = driver = None
    try:
        t0 = time.time()
        if not (save / "results").is_dir():
            generate(save, args.items, args.models)
            manifest_as_a_run_writes_it(save)
        t_gen = time.time() - t0
        size = sum(f.stat().st_size for d in ("results", "battles") for f in (save / d).glob("*.json")) / 1e6
        proc = subprocess.Popen([sys.executable, str(REPO / "eval.py"), "view", str(root), "--port", "0", "--no-browser"],
                                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
        line = proc.stdout.readline().strip()
        url = line.split(" ", 1)[1]
        time.sleep(0.5)
        mem_start = memory(proc.pid)
        driver = chromium()
        rid = "0:big-run"
        page = f"{url}#/run/{quote(rid, safe='')}"
        ready = "var l = document.getElementById('list'); return l && l.getAttribute('data-ms');"
        shown = []
        for i in range(3):  # cold (the server reads the run), then cached
            driver.get("about:blank")
            t0 = time.monotonic()
            driver.get(page)
            wait(driver, ready)
            wall = time.monotonic() - t0
            in_page = float(driver.execute_script(ready)) / 1000
            rows = driver.execute_script("return document.querySelectorAll('#list tr[data-id]').length")
            shown.append((wall, in_page, rows))
            if i == 0:
                mem_loaded = memory(proc.pid)
        count = driver.execute_script("return document.querySelector('#list .count').textContent")
        filters = [("category", "f-cat", CATS[3], "f-cat", ""), ("verdict flips with the order", "f-flipped", True, "f-flipped", False),
                   ("not labelled", "f-labelled", "no", "f-labelled", ""),
                   ("score range (GPT/correctness from 4)", "f-lo", "4", "f-lo", ""),
                   ("search box (on Enter; typing waits for a 250 ms pause)", "f-q", "river garden", "f-q", "")]
        results = []
        for name, cid, value, rid_reset, reset in filters:
            times, said = [], ""
            if cid == "f-lo":
                driver.execute_script("var s = document.getElementById('f-score'); s.value = 'GPT/correctness'; s.dispatchEvent(new Event('change'));")
                time.sleep(1)
            for _ in range(args.repeats):
                ms, said = driver.execute_async_script(MEASURE, cid, value)
                times.append(ms)
                driver.execute_async_script(MEASURE, rid_reset, reset)
            results.append((name, statistics.median(times), min(times), max(times), said))
        # an item from the list: j, Enter, until it is shown
        from selenium.webdriver.common.action_chains import ActionChains

        t0 = time.monotonic()
        ActionChains(driver).send_keys("j").send_keys("\ue007").perform()
        wait(driver, "return document.getElementById('item')")
        t_item = time.monotonic() - t0
        t0 = time.monotonic()
        ActionChains(driver).send_keys("j").perform()
        wait(driver, "var s = document.getElementById('item'); return s && document.querySelector('.position').textContent.startsWith('item 2 ');")
        t_next = time.monotonic() - t0
        mem_end = memory(proc.pid)
        cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                    if ln.startswith("model name")), platform.processor())
        version = subprocess.run(["/usr/bin/chromium", "--version"], capture_output=True, text=True).stdout.strip()
        print(f"machine: {os.cpu_count()} cores, {cpu}; {platform.system()} {platform.release()}; {version}; "
              f"Python {platform.python_version()} (shared with other jobs: timings are of a busy machine)")
        print(f"data: {args.items} items x {args.models} models, {args.models * (args.models - 1) // 2} battles in both "
              f"orders; results/ + battles/ {size:.1f} MB (generated in {t_gen:.1f} s)")
        for i, (wall, in_page, rows) in enumerate(shown):
            print(f"run page {'cold (server reads the run)' if i == 0 else 'again (cached)'}: list of {rows} rows shown "
                  f"{in_page:.2f} s after navigation began ({wall:.2f} s wall from driver.get)")
        print(f"  {count}")
        for name, med, lo, hi, said in results:
            print(f"filter {name}: {med:.0f} ms median of {args.repeats} (min {lo:.0f}, max {hi:.0f}); {said}")
        print(f"item from the list (j, Enter): {t_item * 1000:.0f} ms; next item (j): {t_next * 1000:.0f} ms")
        print(f"server memory: at start {mem_start[0]:.0f} MB; after reading the run {mem_loaded[0]:.0f} MB; "
              f"at the end {mem_end[0]:.0f} MB (peak {mem_end[1]:.0f} MB)")
        ok = shown[0][1] < 2 and all(r[1] < 200 for r in results) and mem_end[1] < 300
        print("targets (list < 2 s, a filter < 200 ms, server < 300 MB):", "met" if ok else "NOT met")
        print(json.dumps({"list_cold_s": shown[0][1], "list_cached_s": shown[-1][1],
                          "filters_ms": {r[0]: r[1] for r in results}, "item_ms": t_item * 1000,
                          "rss_mb": mem_end[0], "peak_rss_mb": mem_end[1]}))
    finally:
        if driver is not None:
            driver.quit()
        if proc is not None:
            proc.terminate()
            proc.wait(10)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
