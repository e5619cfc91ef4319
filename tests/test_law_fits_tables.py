"""Chapter 03's stage table: one line per stage with the rows it takes and the points and runs it was
fitted on, in short numeric cells (a long status squeezed the rows column in the rendered page)."""

from __future__ import annotations

import re

import pandas as pd

from bitlaws.study import law_fits as lfs


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_stages_markdown_gives_rows_and_what_each_stage_was_fitted_on():
    frames = {s: pd.DataFrame({"x": range(10 + i)}) for i, s in enumerate(lfs.FIT_ORDER)}
    # the P_w rows Table 1 ranks: 13 rows, 4 distinct (N, D, P_w) points, 6 runs
    frames["neff_w"] = pd.DataFrame({"n_params": [1] * 7 + [2] * 6, "n_tokens": [10] * 13,
                                     "bits_w": [3, 3, 3, 4, 4, 4, 4, 3, 3, 3, 8, 8, 8],
                                     "run_id": ["a", "a", "b", "c", "c", "d", "d", "e", "e", "e", "f", "f", "f"]})
    first, second, third = lfs.FIT_ORDER[:3]
    fits = {first: {"status": "ok", "n_points": 10, "n_cells": 7, "n_groups": 5},
            second: {"status": "ok", "n_points": 9, "n_cells": 6, "n_groups": 4},  # one row not used
            third: {"status": "skipped", "reason": "no rows at this profile"},
            "table1": {"status": "ok", "n_points": 13}}
    md = lfs.stages_markdown(fits, frames, current=False, profile="smoke")
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert _cells(table[0]) == ["stage", "form", "rows", "points", "runs"]
    body = {_cells(line)[0].strip("`"): _cells(line) for line in table[2:]}
    assert list(body) == [*lfs.FIT_ORDER, "table1"]
    assert body[first][2:] == ["10", "7", "5"]
    assert body[second][2:] == ["11", "6", "4"]
    assert body[third][2:] == ["12", "—", "—"]
    assert body[lfs.FIT_ORDER[3]][2:] == ["13", "—", "—"]
    assert body["table1"][2:] == ["13", "4", "6"]  # Table 1 ranks neff_w's rows: their points and runs
    assert {"n_params", "n_tokens", "bits_w"} <= set(lfs.lf.STAGES["neff_w"].cell)  # the points counted above
    note = next(line for line in md.splitlines() if line.startswith("*Rows*"))
    assert f"`{second}` fitted on 9 of its 11 rows" in note  # one row not used, said once, below
    assert f"`{third}` not fitted: no rows at this profile" in note
    assert f"`{lfs.FIT_ORDER[3]}` no fit file" in note and f"`{first}`" not in note
    for s in lfs.FIT_ORDER:  # the stage's own equation
        assert body[s][1] == lfs.lf.STAGES[s].equation
    assert "*points*: the distinct design points" in md
    assert re.search(r"older than the rows.*`python -m bitlaws fit --profile smoke`", md)
    assert "exactly these rows" in lfs.stages_markdown(fits, frames, current=True, profile="smoke")
    # a Table 1 record of other rows than these: no counts, and the note says why
    other = lfs.stages_markdown({**fits, "table1": {"status": "ok", "n_points": 12}}, frames, False, "smoke")
    line = next(x for x in other.splitlines() if x.startswith("| `table1`"))
    assert _cells(line)[2:] == ["13", "—", "—"]
    assert "`table1` counts not recorded (its record took 12 rows, 13 are here)" in other


def test_ptq_crosscheck_markdown_quotes_chapter_1s_named_estimates():
    from bitlaws.study.ptq_degradation import EXPONENT_ESTIMATES

    nan = float("nan")
    est = {"slope": {"name": EXPONENT_ESTIMATES["slope"], "gamma_post": 0.7049, "r2": 0.987, "n_points": 30.0},
           "floor": {"name": EXPONENT_ESTIMATES["floor"], "gamma_d": 0.5344, "gamma_n": 0.2947, "gamma_post": 0.7182,
                     "r2": 0.977, "n_points": 33.0},
           "fit": {"gamma_d": nan}, "p1": {"gamma_d": nan}}
    text = lfs.ptq_crosscheck_markdown(est)
    assert "`ptq_degradation.exponent_estimates`" in text
    assert f"its *{EXPONENT_ESTIMATES['slope']}*, a common slope" in text
    assert "γ_post = **0.70 bits** (R² 0.99, 30 points)" in text
    assert f"its *{EXPONENT_ESTIMATES['floor']}*, gives γ_D = **0.53**, γ_N = **0.29**" in text and "33 cells" in text
    assert lfs.ptq_crosscheck_markdown(None).startswith("Chapter 1's estimates of the exponents have too few cells")
