"""The shape every CLI refusal has: exit 2, one `leanseg: error:` line naming the problem."""
from __future__ import annotations

import subprocess


def assert_one_line_refusal(result: subprocess.CompletedProcess, *wording: str) -> None:
    """Exit 2 with one `leanseg: error:` line on stderr holding each of `wording`."""
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("leanseg: error: "), result.stderr
    for words in wording:
        assert words in result.stderr, result.stderr
