"""``fwgym cases``: case counts per cohort and lead (the numbers DESIGN §2 states for the test split)."""
import re

import pytest

from fwgym.cases import SPLIT_DOC
from fwgym.cli import main


def test_cases_command_prints_counts(capsys):
    assert main(["cases", "--split", "test"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("split=test\n| cohort | day_ahead | week_ahead | total |\n|---|---:|---:|---:|\n")
    assert "| electricity-february | 187 | 183 | 370 |" in out
    for cohort, total in (("electricity-july", 343), ("electricity-august", 389)):
        da, wa, n = map(int, re.search(rf"\| {cohort} \| (\d+) \| (\d+) \| (\d+) \|", out).groups())
        assert da + wa == n == total
    assert "| cycle_hire-october | 80 | 77 | 157 |" in out
    assert "| total | | | 1259 |" in out and SPLIT_DOC not in out


def test_cases_command_one_domain_and_the_calendar(capsys):
    assert main(["cases", "--split", "dev", "--domain", "cycle_hire", "-v"]) == 0
    out = capsys.readouterr().out
    assert "| cycle_hire-august | 80 | 80 | 160 |" in out and "| total | | | 160 |" in out and "electricity" not in out.split(
        "\n\n")[0]
    assert SPLIT_DOC in out


def test_cases_command_refuses_an_unknown_domain(capsys):
    with pytest.raises(SystemExit):
        main(["cases", "--domain", "gas"])
    assert "domain must be 'all' or one of" in capsys.readouterr().err
