"""The training example: 8 ranks under torchrun-style variables, one ``kill -9``ed mid-run; the
7 others keep training and agree on the member set and the parameters."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import HERE

EXAMPLE = HERE.parent / "examples" / "train.py"


def run(*args: str, numpy: bool = True) -> str:
    env = dict(os.environ)
    if not numpy:
        env["LIFELINE_EXAMPLE_NO_NUMPY"] = "1"
    r = subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    return r.stdout


def test_eight_ranks_one_killed_the_seven_others_keep_training_and_agree():
    out = run("--launch", "8", "--kill", "3", "--kill-at", "20", "--steps", "50")
    last = out.strip().splitlines()[-1]
    print(last)
    assert last.startswith("launcher: OK: 7 ranks finished 50 steps after rank 3 was killed")
    assert "member set [0, 1, 2, 4, 5, 6, 7]" in last
    assert out.count("training goes on with 7 members") == 7


def test_plain_python_without_numpy():
    out = run("--launch", "3", "--kill", "1", "--kill-at", "10", "--steps", "25", numpy=False)
    assert "numpy=no" in out
    assert "launcher: OK: 2 ranks finished 25 steps after rank 1 was killed" in out
