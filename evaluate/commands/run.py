"""`python eval.py --config FILE [FILE ...]`: the main job (also ColossalAI's flags, which override
the config file), with `--dry-run`, `--export-requests` / `--import-results`, `--shard` and
`--judge-check` as ways of running it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..backends.registry import capabilities
from ..core.errors import InputError
from ..families import family_names
from ..pipeline.config import AnswerFile, RunConfig, load_config, parse_config, refuse_panel, single_judges
from ..track.options import check_installed, with_flags
from .common import EXIT_CODES, EXIT_FAIL_UNDER, EXIT_INPUT, EXIT_OK, EXIT_RUN_ERRORS, Parser, run_errors, worst


def _families_arg(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    out = []
    for v in values:
        out.extend(x.strip() for x in v.split(",") if x.strip())
    return out


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="eval.py", description="Evaluate LLM answers: judges, automatic metrics, UniEval, RepEval, "
                                          "SAGEval. `eval.py help` lists the other commands.", epilog=EXIT_CODES)
    p.add_argument("--config", "--config_file", dest="config", nargs="+", metavar="FILE",
                   help="config file (.json, .yaml or .yml); several run one after the other in this process, "
                        "sharing loaded models (all are checked before the first starts)")
    p.add_argument("--battle_prompt_file", help="battle prompt file (ColossalAI format)")
    p.add_argument("--gpt_evaluation_prompt_file", help="evaluation prompt file (ColossalAI format)")
    p.add_argument("--target_file", help="file with the reference answers (field `target`)")
    p.add_argument("--answer_file_list", nargs="+", help="one answer file per model")
    p.add_argument("--model_name_list", nargs="+", help="model names, in the order of --answer_file_list")
    p.add_argument("--gpt_model", help="judge model (OpenAI model name, a served model, or a local model)")
    p.add_argument("--save_path", help="folder for results (default: the config's save_path, else ./results)")
    p.add_argument("--openai_key", help="API key for an OpenAI-compatible judge (prefer the env variable named "
                                        "by judge.api_key_env); never written to any file")
    p.add_argument("--gpt_with_reference", action="store_true", default=None,
                   help="give the target answer to the judge as a reference")
    p.add_argument("--only", nargs="+", metavar="FAMILY", help=f"run only these families ({', '.join(family_names())})")
    p.add_argument("--skip", nargs="+", metavar="FAMILY", help="skip these families")
    p.add_argument("--limit", type=int, metavar="N",
                   help="only the first N records of each category (same ids for every model): a quick run")
    p.add_argument("--dry-run", action="store_true", help="validate everything and print the plan; score nothing")
    p.add_argument("--force", action="store_true", help="with --limit: replace a fuller run's results in the save "
                   "path, or show results of another item set beside this run's (refused otherwise)")
    p.add_argument("--fail-under", action="append", default=[], metavar="[[MODEL:]CATEGORY:]SCORE=VALUE",
                   help="exit 1 when an aggregate is below VALUE (repeatable): BLEU-4=0.2 (every model, overall), "
                        "closed_qa:GPT/correctness=3.5 (every model, one category), model_a:closed_qa:BLEU-4=0.2, "
                        "model_a::BLEU-4=0.2 (one model, overall), *:BLEU-4=0.2 (each category)")
    p.add_argument("--fail-if-worse", action="append", default=[], metavar="CANDIDATE:BASELINE:[CATEGORY:]SCORE",
                   help="exit 1 when the run's paired comparison finds CANDIDATE worse than BASELINE on SCORE "
                        "(a primary score over every item: its simultaneous interval within the pair's confirmatory "
                        "family excludes 0; any other score or a CATEGORY: the exploratory, unadjusted 95%% row)")
    p.add_argument("--fail-under-win-rate", action="append", default=[], metavar="CANDIDATE:BASELINE[:label-corrected]=VALUE",
                   help="exit 1 when CANDIDATE's battle win rate against BASELINE is below VALUE (ties count half); "
                        "with :label-corrected, the win rate as people would judge, from the labels (docs/labels.md)")
    p.add_argument("--fail-on-untrusted-judge", action="store_true",
                   help="exit 1 unless the judge check of this judge and prompts passed (with --judge-check N "
                        "the check runs first)")
    p.add_argument("--junit", metavar="FILE.xml", help="also write the gates and the rule checks (per model and "
                   "category) as a JUnit XML file, the format GitLab, Jenkins and GitHub test reporters read")
    p.add_argument("--markdown", metavar="FILE.md", help="also write the closing lines (means, verdicts, gates, "
                   "status) as Markdown tables, e.g. for $GITHUB_STEP_SUMMARY or a merge-request comment")
    p.add_argument("--missing", choices=("refuse", "common"), help="when a model has no answer for some items: "
                   "refuse the run (the default) or score only the items every model answered, naming per model "
                   "the ids left out (the config key `missing`)")
    p.add_argument("--probe", action="store_true", help="with --dry-run: also ask the judge's endpoints whether "
                   "they answer (free: GET /models); exit 3 when none does")
    p.add_argument("--track", action="append", choices=("mlflow", "wandb"), metavar="mlflow|wandb",
                   help="after the run, send it to this tracker (repeatable): the config's track: block's options "
                        "where it has one, else the defaults (MLflow's tracking URI; W&B offline); a tracker that "
                        "refuses is a warning, the run's files and exit code are kept (docs/tracking.md)")
    p.add_argument("--no-charts", action="store_true", help="do not draw charts")
    p.add_argument("--judge-check", type=int, metavar="N", help="first run the label-free judge check "
                   "(`eval.py judge-check`, N sanity pairs per corruption) on each config that lists GPT metrics, "
                   "in this process: the judge is loaded once, and the run shows the check's verdict")
    p.add_argument("--shard", metavar="I/N", help="run shard I of N of the items (by a hash of the record id; "
                                                  "into <save_path>/shard-I-of-N); join with `eval.py merge`")
    p.add_argument("--export-requests", metavar="FILE.jsonl", help="write the judge requests the run still needs "
                   "(OpenAI batch format, e.g. for vLLM's run_batch) and stop; nothing is scored")
    p.add_argument("--import-results", metavar="FILE.jsonl", help="load a batch engine's output into the judge "
                   "cache (checked against the run's requests) and stop; then run normally")
    return p


# flags that would send several configs' runs to one place, or give them one set of answers
_ONE_CONFIG_FLAGS = ("save_path", "answer_file_list", "model_name_list", "target_file")


def configs_from_args(args: argparse.Namespace) -> list[RunConfig]:
    """One RunConfig per --config file (or one from ColossalAI-style flags alone)."""
    files = args.config or [None]
    if len(files) > 1:
        clash = [f"--{f}" for f in _ONE_CONFIG_FLAGS if getattr(args, f)]
        if clash:
            raise InputError(f"{', '.join(clash)} with {len(files)} config files: these flags apply to one run; "
                             "give one --config with them, or set them in each config file")
    return [config_from_args(args, f) for f in files]


def config_from_args(args: argparse.Namespace, config_file: str | None = None) -> RunConfig:
    if config_file:
        cfg = load_config(Path(config_file))
    else:
        if not args.answer_file_list:
            raise InputError("nothing to do: give --config FILE (or ColossalAI's --config_file with "
                             "--answer_file_list)")
        cfg = parse_config({}, None)
    if args.answer_file_list:
        names = args.model_name_list or [Path(p).stem for p in args.answer_file_list]
        if len(names) != len(args.answer_file_list):
            raise InputError(f"--model_name_list has {len(names)} names for {len(args.answer_file_list)} "
                             "--answer_file_list files; give one name per file")
        cfg.answers = [AnswerFile(name=n, path=Path(p), default_name=not args.model_name_list)  # a harness's
                       for n, p in zip(names, args.answer_file_list)]  # file names its model unless named here
    elif args.model_name_list:
        if len(args.model_name_list) != len(cfg.answers):
            raise InputError(f"--model_name_list has {len(args.model_name_list)} names for the config's "
                             f"{len(cfg.answers)} answer files")
        for a, n in zip(cfg.answers, args.model_name_list):
            a.name, a.default_name = n, False
    if args.target_file:
        cfg.target_file = Path(args.target_file)
    if args.save_path:
        from ..pipeline.config import without_dotdot

        cfg.save_path = without_dotdot(Path(args.save_path).expanduser())
    elif "save_path" not in cfg.raw:
        cfg.save_path = Path("results")
    if args.battle_prompt_file:
        cfg.battle_prompt = Path(args.battle_prompt_file)
    if args.gpt_evaluation_prompt_file:
        cfg.evaluation_prompt = Path(args.gpt_evaluation_prompt_file)
    if args.gpt_model:
        refuse_panel(cfg, "--gpt_model", "set each judge's model in its block (judge[i].model) instead")
        cfg.judge.model = args.gpt_model
    if args.openai_key:
        cfg.openai_key = args.openai_key  # a panel's: every openai judge's key (each names its api_key_env)
        block = cfg.raw.get("judge") or {}
        block = block[0] if isinstance(block, list) and len(block) == 1 else block  # a list of one judge
        if cfg.panel is None and isinstance(block, dict) and "backend" not in block:
            cfg.judge.backend = "openai"
    if args.gpt_with_reference:
        cfg.gpt_with_reference = True
    if getattr(args, "shard", None):
        from ..pipeline.shard import parse_shard, shard_save_path

        cfg.shard = parse_shard(args.shard)
        cfg.save_path = shard_save_path(cfg.save_path, cfg.shard)
    if getattr(args, "missing", None):
        cfg.missing = args.missing
    cfg.force = bool(getattr(args, "force", False))
    if args.limit is not None:
        if args.limit < 1:
            raise InputError(f"--limit: expected a positive integer, got {args.limit}")
        cfg.limit = args.limit
    return cfg


def _judge_check(cfg: RunConfig, args: argparse.Namespace, families) -> int:
    """--judge-check N: the label-free check of this config's judge before its run (same process, so
    a local judge is loaded once). A check that fails to run is reported and the run goes on; the
    exit code then says the run's work was not all done."""
    from ..judgecheck import check_config, has_gpt_work

    if "GPT" not in families or not has_gpt_work(cfg):
        print("judge check: this config lists no GPT metrics; nothing to check", file=sys.stderr)
        return EXIT_OK
    from ..backends.pool import JudgePool

    judges = JudgePool(api_key=cfg.openai_key)
    try:
        for name, one in single_judges(cfg):  # a panel: each judge checked on its own, then the panel as a whole
            if name is not None:
                print(f"judge check of the panel's judge {name}:", file=sys.stderr)
            check_config(one, judges, limit=args.judge_check)
        if cfg.panel is not None:
            print("judge check of the panel as a whole:", file=sys.stderr)
            check_config(cfg, judges, limit=args.judge_check)
    except InputError:
        raise
    except Exception as exc:  # the run itself can still be done; its manifest says "not checked"
        print(f"error: judge check: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_RUN_ERRORS
    finally:
        judges.close()
    return EXIT_OK


def _known_check(gates):
    """The gates' names against what the prepared run will produce (exit 2 before anything is paid)."""
    from ..ci.gates import check_names, known_of

    def check(prep) -> None:
        if gates:
            check_names(gates, known_of(prep.plan, [s.name for s in prep.sets]))

    return check


def _run_one(cfg: RunConfig, args: argparse.Namespace, families: list[str], gates,
             ci_files=None) -> tuple[int, str]:
    """One config's run: its exit code and, when not 0, the reason for the last line."""
    from ..backends.probing import probe_judge
    from ..ci.gates import evaluate, failure_reason, needs_labels, outcome_lines, status_word, view_of_run
    from ..judgecheck.store import attach_to_run
    from ..pipeline.run import JudgeStopped, plan_only, run_job

    if any(a.generate is not None for a in cfg.answers):  # answers: entries that name a model
        from ..generation.in_run import generate_for_run

        code, why, _ = generate_for_run(cfg, dry_run=args.dry_run)
        if code:
            return code, why
    if args.export_requests or args.import_results:
        refuse_panel(cfg, "--export-requests" if args.export_requests else "--import-results",
                     "export and import the requests of each judge with a config of that judge alone "
                     "(its replies land in the judge cache the panel's run reads)")
        return _requests_io(cfg, args, families), ""
    if args.dry_run:
        with _stand_ins(cfg):
            print(plan_only(cfg, families, check=_known_check(gates))["plan_text"])
        if args.probe:
            for name, one in single_judges(cfg):  # a panel: each judge's server
                judge = f"judge {name}" if name else "the judge"
                caps = capabilities(one.judge)
                if not caps.user_server:
                    print(f"probe: {judge} ({one.judge.backend}, {one.judge.model}) has no server of yours to ask"
                          + (" (the tool starts its own)" if caps.starts_server else ""))
                    continue
                results, down = probe_judge(one.judge, cfg.openai_key)
                for r in results:
                    print(r.line())
                if down:  # the stable start of the line (backends.retry.UNREACHABLE), then which judge of a panel
                    return EXIT_RUN_ERRORS, f"judge unreachable: {f'{name}: ' if name else ''}{down}"
        for name, opts in with_flags(cfg.track, args.track).items():
            print(f"track: after the run, to {name} ({', '.join(f'{k}={v}' for k, v in vars(opts).items() if v)})")
        print("dry run: configuration, answer files and prompts are valid; nothing was scored")
        return EXIT_OK, ""
    check_code = EXIT_OK
    if args.judge_check is not None:
        check_code = _judge_check(cfg, args, families)
    try:
        outcome = run_job(cfg, families=families, charts=not args.no_charts, check=_known_check(gates),
                          attach_check=attach_to_run)
    except JudgeStopped as exc:
        print("status: failed")
        if ci_files is not None:
            ci_files.add(str(cfg.source or cfg.save_path), None, [], EXIT_RUN_ERRORS, str(exc), "failed")
        return EXIT_RUN_ERRORS, str(exc)
    manifest = outcome.manifest
    if outcome.view is not None:
        from ..report import closing_summary

        print(closing_summary(outcome.view))  # judge usage, cache and invalid counts are part of it
    codes: list[tuple[int, str]] = []
    if (failed_run := run_errors(manifest)) is not None:
        codes.append(failed_run)
    if check_code:
        codes.append((check_code, "the judge check did not run (see above)"))
    results = []
    if gates:
        try:
            view = view_of_run(outcome)
            if needs_labels(gates):  # labels given to an earlier run of this save path still hold for its items
                from ..judgecheck.corrected import current

                view.corrected = current(cfg.save_path)
            results = evaluate(gates, view)
        except InputError as exc:
            codes.append((EXIT_INPUT, str(exc)))
        else:
            for line in outcome_lines(results):  # one line per gate, pass or fail
                print(line)
            if any(not r.passed for r in results):
                codes.append((EXIT_FAIL_UNDER, failure_reason(results)))
    code, why = worst(codes)
    status = status_word(code, manifest["status"])
    if outcome.view is not None and (trackers := with_flags(cfg.track, args.track)):
        from ..track.send import track

        track(cfg.save_path, trackers, status=status, warn=lambda line: print(line, file=sys.stderr))
    print(f"status: {status}")
    if ci_files is not None:
        ci_files.add(str(cfg.source or cfg.save_path), outcome.view, results, code, why, status,
                     view_of_run(outcome).gated)
    return code, why


def _stand_ins(cfg: RunConfig):
    """Generated answers not there yet read as placeholders while a plan is made (evaluate.generation.in_run)."""
    import contextlib

    if not any(a.generate is not None for a in cfg.answers):
        return contextlib.nullcontext()
    from ..generation.in_run import placeholders

    return placeholders(cfg)


def _requests_io(cfg: RunConfig, args: argparse.Namespace, families) -> int:
    from ..pipeline.collect import export_requests, import_results
    from ..pipeline.plan import load_inputs

    if args.export_requests and args.import_results:
        raise InputError("--export-requests and --import-results: give one of them (export, judge, import, run)")
    if args.export_requests:
        got = export_requests(load_inputs(cfg, families), Path(args.export_requests))
        print(f"exported {got['requests']} judge requests to {got['file']} (already cached: {got['cached']}); "
              f"judge them with model \"{got['model']}\", then --import-results OUTPUT.jsonl"
              + (f"; {got['deferred']} more depend on these replies: export again after the import"
                 if got["deferred"] else ""))
        return EXIT_OK
    got = import_results(load_inputs(cfg, families), Path(args.import_results))
    print(f"imported {got['stored']} results into {got['cache']}; failed lines: {got['failed']}; requests still "
          f"without a result: {got['still_missing']}")
    for line in got["failures"]:
        print(f"  failed: {line}", file=sys.stderr)
    return EXIT_OK


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from ..pipeline.plan import select_families
    from ..pipeline.run import plan_only
    from ..ci.gates import parse_gates

    gates = parse_gates(args.fail_under, args.fail_if_worse, args.fail_under_win_rate, args.fail_on_untrusted_judge)
    if args.probe and not args.dry_run:
        raise InputError("--probe goes with --dry-run (a run probes its judge before its first paid request anyway)")
    families = select_families(_families_arg(args.only), _families_arg(args.skip))
    configs = configs_from_args(args)
    for cfg in configs:  # a tracker's package missing: exit 2 before any work, naming the extra
        check_installed(with_flags(cfg.track, args.track))
    if args.judge_check is not None and args.judge_check < 1:
        raise InputError(f"--judge-check: expected a positive number of pairs per corruption, got {args.judge_check}")
    if (args.export_requests or args.import_results) and len(configs) > 1:
        raise InputError("--export-requests / --import-results work on one config at a time")
    if len(configs) > 1:  # every file checked (plan, answers, prompts, gates) before any scoring starts
        for cfg in configs:
            with _stand_ins(cfg):
                plan_only(cfg, families, check=_known_check(gates))
    ci_files = None
    if args.junit or args.markdown:
        from ..ci.reports import CIFiles

        ci_files = CIFiles.at(args.junit, args.markdown)  # checked writable before any work
    results = []
    for i, cfg in enumerate(configs):
        if len(configs) > 1:
            print(f"== config {i + 1} of {len(configs)}: {args.config[i]}")
        code, why = _run_one(cfg, args, families, gates, ci_files)
        if code and len(configs) > 1:
            why = f"config {i + 1} ({args.config[i]}): {why}"
        results.append((code, why))
    code, why = worst(results)
    if ci_files is not None and not args.dry_run and not (args.export_requests or args.import_results):
        for path in ci_files.write():
            print(f"wrote {path}", file=sys.stderr)
    if code:
        print(f"exit {code}: {why}", file=sys.stderr)
    return code
