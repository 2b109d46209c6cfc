"""docs/layout.md is checked against the folders (issue 45: it had drifted, missing item_sets.py and
savepath/labels.py): every package of evaluate/ has its row (the evaluators share one), every module of a
package with a row is named in it, and every folder a row names exists."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "layout.md"
# packages described as a whole in their parent's row (each benchmark) or in the evaluators' row
WHOLE = ("evaluate/benchmarks/", "evaluate/judges", "evaluate/metrics", "evaluate/stats", "evaluate/view/static")


def _rows() -> tuple[dict[str, str], str]:
    rows, evaluators = {}, ""
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("| evaluators"):
            evaluators = line
        m = re.match(r"\| `(evaluate/[a-z_/]+?)/?` \| (.*)", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows, evaluators


def _packages() -> list[str]:
    """Every folder of evaluate/ holding Python modules (a namespace package such as pipeline/ included)."""
    return sorted({p.parent.relative_to(REPO).as_posix() for p in (REPO / "evaluate").rglob("*.py")
                   if p.parent != REPO / "evaluate" and "__pycache__" not in p.parts})


def test_every_package_has_its_row_and_every_module_is_named() -> None:
    rows, evaluators = _rows()
    missing, unnamed = [], []
    for pkg in _packages():
        if pkg in rows:
            for mod in sorted((REPO / pkg).glob("*.py")):
                if mod.stem != "__init__" and not re.search(rf"`{re.escape(mod.stem)}(\.py)?`", rows[pkg]):
                    unnamed.append(mod.relative_to(REPO).as_posix())
        elif not pkg.startswith(WHOLE) and f"`{pkg}/`" not in evaluators:
            missing.append(pkg)
    assert not missing, f"packages without a row in docs/layout.md: {missing}"
    assert not unnamed, f"modules docs/layout.md does not name in their package's row: {unnamed}"


def test_every_folder_a_row_names_exists() -> None:
    rows, evaluators = _rows()
    named = [*rows, *re.findall(r"`((?:evaluate/)?[a-z_]+)/`", evaluators)]
    gone = [n for n in named if not (REPO / n).exists() and not (REPO / f"{n}.py").exists()]
    assert not gone, f"docs/layout.md names folders that are not there: {gone}"


def test_the_check_catches_a_module_left_out(tmp_path) -> None:
    """A planted drift: the pipeline's row without `item_sets` is caught."""
    text = DOC.read_text(encoding="utf-8").replace("`item_sets`", "`item-sets`")
    planted = tmp_path / "layout.md"
    planted.write_text(text, encoding="utf-8")
    globals()["DOC"] = planted
    try:
        try:
            test_every_package_has_its_row_and_every_module_is_named()
        except AssertionError as exc:
            assert "evaluate/pipeline/item_sets.py" in str(exc)
        else:
            raise AssertionError("the planted drift was not caught")
    finally:
        globals()["DOC"] = REPO / "docs" / "layout.md"
