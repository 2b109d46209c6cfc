"""Everything a run leaves besides the scores, from one SaveDir, in one order: result files,
battles and ranking -> summary.csv -> charts -> comparisons -> report -> manifest (last, so it
lists every file). A view that fails (a chart, the report) is recorded in the manifest's errors
and never costs the results. What was written comes back as the run's log (`RunLog`, built from
memory), which the closing lines, the report and the gates (evaluate.ci.gates) read."""

from __future__ import annotations

import json
from typing import Any

from ..savepath import layout, read
from ..savepath.log import RunLog
from .results import write_summary_csv
from .savedir import SaveDir


def write_outputs(save: SaveDir, manifest: dict[str, Any], *, run_id: str | None = None,
                  charts: bool = True) -> RunLog | None:
    """Write every output of the run once; returns the run's log, what the report and the closing lines
    show (None when the save path holds no results)."""
    errors = manifest.setdefault("errors", [])
    save.include_earlier()
    changes = save.check_signatures()
    if changes:
        manifest["signature_changes"] = changes
    files: dict[str, Any] = save.write(run_id)
    results = save.results()
    manifest["outputs_files"] = files
    if not results:
        save.write_manifest(manifest)
        return None
    files["summary_csv"] = str(write_summary_csv(save.path, results))
    if charts:
        try:
            from ..report.charts import write_charts

            files["charts"] = [str(p) for p in write_charts(save.path, results, battles=save.battles)]
        except Exception as exc:  # charts are a view; never lose results over them
            errors.append({"error": f"charts: {type(exc).__name__}: {exc}"})
    dicts = save.result_dicts(run_id)
    comparisons: dict = {}
    if len(results) >= 2:  # paired comparisons of every pair of models in the save path
        try:
            from .comparisons import compare_results, not_comparable, write_comparison_files

            primary = (manifest.get("config") or {}).get("primary")
            comparisons = compare_results(dicts, primary=primary)
            files["comparisons"] = [str(p) for p in write_comparison_files(save.path, comparisons)]
            for line in not_comparable(comparisons):
                save.log(f"warning: {line}")
        except Exception as exc:
            errors.append({"error": f"comparisons: {type(exc).__name__}: {exc}"})
    view = save_data(save, dicts, list(comparisons.values()), manifest)
    try:
        from ..report import write_report

        files["report"] = str(layout.report_file(save.path))
        write_report(save.path, data=view)
    except Exception as exc:
        files.pop("report", None)
        errors.append({"error": f"report: {type(exc).__name__}: {exc}"})
    if errors and manifest.get("status") == "ok":
        manifest["status"] = "finished with errors"
    save.write_manifest(manifest)
    return view


def save_data(save: SaveDir, results: list[dict[str, Any]], comparisons: list[dict[str, Any]],
              manifest: dict[str, Any]) -> RunLog:
    """The run's log, from memory; only the small files other commands own (the judge check, SAGEval's
    summaries, the labels, the charts) are read from the save path, through its one reader
    (`evaluate.savepath.read`, as `RunLog.read` reads them)."""
    problems: list[str] = []
    data = RunLog(path=save.path, results=results, battles=list(save.battles.values()), ranking=save.ranking,
                  comparisons=comparisons, manifest=json.loads(json.dumps(manifest, default=str)),
                  problems=problems)
    data.judge_check = read.read_judge_check(save.path, problems)
    data.sageval = read.read_sageval(save.path, problems)
    data.labels = read.read_labels(save.path, problems)
    data.charts = read.chart_files(save.path)
    data.unreadable = list(save.unreadable)
    problems.extend(str(u) for u in data.unreadable)
    return data
