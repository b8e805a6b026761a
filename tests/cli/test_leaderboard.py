"""``fwgym leaderboard``: the protocol's bootstrap defaults, the reference choice and clear errors."""
import pytest

from fwgym.cli import build_parser, main
from fwgym.evaluation import BOOT_SEED, N_BOOT


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("lb")
    assert main(["evaluate", "--split", "test", "--limit", "2", "--no-progress", "--out", str(out),
                 "--policies", "weekday_empirical", "hour_of_day_empirical"]) == 0
    return out


def test_defaults_are_the_protocol_constants():
    args = build_parser().parse_args(["leaderboard", "r"])
    assert (args.n_boot, args.seed, args.reference) == (N_BOOT, BOOT_SEED, None) == (10_000, 1701, None)


def test_reference_default_none_and_unknown(results, capsys):
    capsys.readouterr()
    assert main(["leaderboard", str(results), "--n-boot", "200", "--no-breakdown"]) == 0
    out = capsys.readouterr().out
    assert "200 draws, seed 1701, policy - hour_of_day_empirical" in out and "PARTIAL" in out
    assert main(["leaderboard", str(results), "--reference", "NONE", "--no-breakdown"]) == 0
    assert "intervals" not in capsys.readouterr().out.splitlines()[0]
    assert main(["leaderboard", str(results), "--reference", "nobody"]) == 2
    assert "reference policy 'nobody' is not among the policies" in capsys.readouterr().err
