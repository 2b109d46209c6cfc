"""`eval.py prompts [FILE]`: the GPT metrics an evaluation prompt file defines, per category.

What a config may list under `GPT:` for each category, the score keys they give (`GPT/<metric>`,
what `primary:`, `summary_scores:` and the gates name), and every metric that cannot be rated because
"metrics" and "CoT" disagree (a misspelt key), with the closest key of the other. Exit 2 when the
file is not a valid evaluation prompt file.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from ..core.places import PROMPTS
from ..judges.prompts import FALLBACK_CATEGORY, load_evaluation_prompts
from .common import EXIT_OK, Parser


def main(argv: list[str]) -> int:
    p = Parser(prog="eval.py prompts", description="List the GPT metrics of an evaluation prompt file per category "
                                                   "(the names a config lists under GPT:, scored as GPT/<name>).")
    p.add_argument("file", nargs="?", type=Path,
                   help="an evaluation prompt file (default: the project's own, "
                        "evaluate/prompts/evaluation_prompt_<language>.json, inside the package)")
    p.add_argument("--language", choices=("en", "cn"), default="en", help="the default file's language")
    p.add_argument("--category", help="only this category (or the general entry that stands in for it)")
    args = p.parse_args(argv)
    path = args.file or PROMPTS / f"evaluation_prompt_{args.language}.json"
    prompts = load_evaluation_prompts(path)
    width = shutil.get_terminal_size((80, 24)).columns
    cats = [args.category] if args.category else prompts.categories()
    print(f"{path} (sha256 {prompts.sha256[:12]}…): {len(prompts.categories())} categories")
    name_w = min(24, max(len(c) for c in cats + ["category"]))
    problems = []
    for cat in cats:
        entry = prompts.entry_for(cat)
        rated = [m for m in entry.metrics if m in entry.cot]
        label = cat + (f' (uses "{FALLBACK_CATEGORY}")' if entry.fallback else "")
        text = ", ".join(rated) or "(none)"
        lines = textwrap.wrap(text, width=max(30, width - name_w - 2)) or [text]
        print(f"{label[:name_w]:<{name_w}}  {lines[0]}")
        for line in lines[1:]:
            print(f"{'':<{name_w}}  {line}")
        for m in sorted(set(entry.metrics) ^ set(entry.cot)):
            problems.append(prompts.missing_reason(cat, m))
    if FALLBACK_CATEGORY in prompts.categories() and not args.category:
        print(f'categories without an entry use "{FALLBACK_CATEGORY}"')
    print("scores: GPT/<metric> (e.g. in primary: or summary_scores: of a config)")
    for line in dict.fromkeys(problems):
        print(f"cannot be rated: {line}")
    return EXIT_OK
