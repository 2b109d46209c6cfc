"""Files made by the real harnesses, offline, for the tests of evaluate.harness: Inspect AI (its mock
model answering by a rule, on a local JSON dataset), lm-evaluation-harness (a local task YAML over a
local JSON dataset, the packaged SmolLM2 converted to a transformers folder) and promptfoo (npm, its
echo provider). Each maker runs the tool in a subprocess with everything that could reach a network
switched off, and returns the paths it wrote.

The known answers are built in: in the Inspect logs model-a gets sample i wrong when i % 10 == 0 and
model-b when i % 3 == 0 (and model-b's call fails on sample 7, an error Inspect records and tolerates);
in the promptfoo file echo-b answers "unsure" when i % 3 == 0.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROMPTFOO = REPO / ".promptfoo" / "node_modules" / ".bin" / "promptfoo"  # make setup-promptfoo
OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "NO_COLOR": "1",
           "INSPECT_DISPLAY": "none", "PROMPTFOO_DISABLE_TELEMETRY": "1", "PROMPTFOO_DISABLE_UPDATE": "1",
           "PROMPTFOO_DISABLE_SHARING": "1", "PROMPTFOO_DISABLE_REDTEAM_REMOTE_GENERATION": "1",
           "PROMPTFOO_SELF_HOSTED": "1", "DO_NOT_TRACK": "1", "WANDB_MODE": "offline"}
N_INSPECT = 30  # samples; 2 epochs
N_LM_EVAL = 8  # documents
N_PROMPTFOO = 12  # tests


def _run(argv: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **OFFLINE, **(env or {})})
    assert proc.returncode == 0, f"{argv[:3]} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


INSPECT_SCRIPT = textwrap.dedent('''
    import json, sys
    from pathlib import Path
    from inspect_ai import Task, eval
    from inspect_ai.dataset import json_dataset
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import includes, match
    from inspect_ai.solver import generate

    out, n = Path(sys.argv[1]), int(sys.argv[2])
    for name, op in (("addition", "plus"), ("subtraction", "minus")):
        rows = [{"id": f"q{i}", "input": f"What is {i} {op} {i}?", "target": str(2 * i if op == "plus" else 0)}
                for i in range(1, n + 1)]
        (out / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in rows))

    def answerer(name, wrong_every, fails_on=None):
        def reply(messages, tools, tool_choice, config):
            words = messages[-1].text.split()
            i = int(words[2])
            if i == fails_on:
                raise RuntimeError(f"{name}: the model server dropped the connection on sample {i}")
            right = 2 * i if words[3] == "plus" else 0
            got = right + 1 if i % wrong_every == 0 else right
            o = ModelOutput.from_content(model=name, content=f"The answer is {got}")
            o.usage = ModelUsage(input_tokens=len(words), output_tokens=4, total_tokens=len(words) + 4)  # (no tiktoken)
            return o
        return reply

    def run(model, task, epochs, fmt, rename):
        name, wrong, fails = model
        logs = eval(Task(name=task, dataset=json_dataset(str(out / f"{task}.jsonl")), solver=generate(),
                         scorer=[match(location="end"), includes()]),
                    model=get_model(f"mockllm/{name}", custom_outputs=answerer(name, wrong, fails)),
                    log_dir=str(out / "logs"), epochs=epochs, display="none", log_format=fmt, fail_on_error=0.2)
        assert logs[0].status == "success", logs[0].error
        Path(logs[0].location).rename(out / rename)

    A, B = ("model-a", 10, None), ("model-b", 3, 7)
    run(A, "addition", 2, "eval", "a.eval")
    run(B, "addition", 2, "eval", "b.eval")
    run(A, "addition", 2, "json", "a.json")
    run(B, "addition", 1, "eval", "b_one_epoch.eval")
    run(B, "subtraction", 2, "eval", "b_subtraction.eval")
''')


def make_inspect(folder: Path) -> dict[str, Path]:
    """Inspect logs: a.eval and a.json (model-a), b.eval (model-b), b_one_epoch.eval, b_subtraction.eval."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "make.py").write_text(INSPECT_SCRIPT)
    _run([sys.executable, "make.py", str(folder), str(N_INSPECT)], folder, 600)
    return {"a": folder / "a.eval", "b": folder / "b.eval", "a_json": folder / "a.json",
            "b_one_epoch": folder / "b_one_epoch.eval", "b_subtraction": folder / "b_subtraction.eval"}


LM_EVAL_TASK = textwrap.dedent('''
    task: tiny_addition
    dataset_path: json
    dataset_kwargs:
      data_files:
        train: {train}
        test: {test}
    training_split: train
    test_split: test
    fewshot_split: train
    output_type: generate_until
    doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
    doc_to_target: "{{{{answer}}}}"
    target_delimiter: " "
    generation_kwargs:
      until: ["\\n", "."]
      max_gen_toks: 6
      do_sample: false
    filter_list:
      - name: first-number
        filter:
          - function: regex
            regex_pattern: "(\\\\d+)"
          - function: take_first
    metric_list:
      - metric: exact_match
        aggregation: mean
        higher_is_better: true
    metadata:
      version: 1.0
''')

LM_EVAL_SCRIPT = textwrap.dedent('''
    import sys
    from lm_eval._cli import HarnessCLI
    from lm_eval.utils import setup_logging

    setup_logging()
    model, tasks, out = sys.argv[1:4]
    for shots, folder in (("0", "zero_shot"), ("2", "two_shot")):  # the lm_eval command line, twice in one process
        sys.argv = ["lm_eval", "run", "--model", "hf", "--model_args", f"pretrained={model},dtype=float32",
                    "--tasks", "tiny_addition", "--include_path", tasks, "--num_fewshot", shots, "--device", "cpu",
                    "--batch_size", "8", "--output_path", f"{out}/{folder}", "--log_samples", "--seed", "0"]
        cli = HarnessCLI()
        cli.execute(cli.parse_args())
''')


def smollm2_folder() -> Path:
    """The packaged SmolLM2 as a transformers folder (the project converts its GGUF once and caches it)."""
    from evaluate.models.convert import ensure_converted
    from evaluate.models.load import resolve_model

    return ensure_converted(resolve_model("SmolLM2-135M-Instruct"))


def make_lm_eval(folder: Path) -> dict[str, Path]:
    """lm-eval --log_samples files of SmolLM2 zero-shot and two-shot on the same 8 documents."""
    tasks = folder / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    test = [{"qid": f"t{i}", "question": f"What is {i} plus {i}?", "answer": str(2 * i)} for i in range(1, N_LM_EVAL + 1)]
    train = [{"qid": f"f{i}", "question": f"What is {i} plus {i + 1}?", "answer": str(2 * i + 1)} for i in (10, 20, 30)]
    (tasks / "test.json").write_text(json.dumps(test))
    (tasks / "train.json").write_text(json.dumps(train))
    (tasks / "tiny_addition.yaml").write_text(LM_EVAL_TASK.format(train=tasks / "train.json", test=tasks / "test.json"))
    (folder / "make.py").write_text(LM_EVAL_SCRIPT)
    _run([sys.executable, "make.py", str(smollm2_folder()), str(tasks), str(folder / "out")], folder, 900,
         env={"HF_DATASETS_CACHE": str(folder / "datasets_cache"), "TOKENIZERS_PARALLELISM": "false"})
    found = {shots: sorted((folder / "out" / shots).rglob("samples_tiny_addition_*.jsonl"))
             for shots in ("zero_shot", "two_shot")}
    assert all(len(v) == 1 for v in found.values()), found
    return {k: v[0] for k, v in found.items()}


def promptfoo_config(n: int) -> str:
    tests = []
    for i in range(1, n + 1):
        b = "unsure" if i % 3 == 0 else str(2 * i)
        tests.append(f'  - vars: {{question: "What is {i} plus {i}?", answer: "{2 * i}", b_answer: "{b}"}}\n'
                     '    assert: [{type: contains, value: "{{answer}}", metric: correct}]')
    return textwrap.dedent('''\
        description: addition
        prompts:
          - id: "Question: {{question}}\\nAnswer: {{answer}}"
            label: plain
          - id: "Question: {{question}}\\nAnswer: {{b_answer}}"
            label: cautious
        providers:
          - {id: echo, label: echo-a, prompts: [plain]}
          - {id: echo, label: echo-b, prompts: [cautious]}
        tests:
        ''') + "\n".join(tests) + "\n"


def make_promptfoo(folder: Path) -> Path | None:
    """promptfoo's results.json of two echo providers (None when promptfoo is not installed here:
    `make setup-promptfoo`)."""
    if not PROMPTFOO.exists() or shutil.which("node") is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "promptfooconfig.yaml").write_text(promptfoo_config(N_PROMPTFOO))
    _run([str(PROMPTFOO), "eval", "-c", "promptfooconfig.yaml", "--output", "results.json", "--no-cache",
          "--no-table", "--no-progress-bar"], folder, 300,
         env={"PROMPTFOO_CONFIG_DIR": str(folder / ".promptfoo"),  # its results store, here, not in ~/.promptfoo
              "PROMPTFOO_FAILED_TEST_EXIT_CODE": "0"})  # echo-b fails 4 tests on purpose (promptfoo exits 100)
    return folder / "results.json"
