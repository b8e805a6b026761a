"""``fwgym evaluate`` checks every packaged file a run reads before any episode starts: an edited file is one
line ``fwgym: error: ... failed its sha256 check`` (exit 2), with no run directory left behind (a resumed run's
directory is left unchanged)."""
import json

import pytest

import fwgym.data as fdata
from fwgym.cli import main
from fwgym.cli.evaluate import check_packaged_files
from fwgym.errors import DataIntegrityError
from fwgym.forecasters.registry import POOLS

_RUN = ["evaluate", "--split", "test", "--limit", "1", "--no-progress"]




def _edit_manifest(monkeypatch, tmp_path, relpath):
    doc = json.loads(fdata.MANIFEST_PATH.read_text())
    doc["files"][relpath] = "0" * 64
    (tmp_path / "sha256.json").write_text(json.dumps(doc))
    monkeypatch.setattr(fdata, "MANIFEST_PATH", tmp_path / "sha256.json")


def _one_line_error(capsys, name):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fwgym: error: data file ") and "Traceback" not in err[0], err
    assert f"{name} failed its sha256 check" in err[0], err


def test_an_edited_extended_tariff_is_refused_before_the_run(edited_tariff, tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*_RUN, "--domain", "cycle_hire", "--pool", "extended", "--policies", "ets", "--out", str(out)]) == 2
    _one_line_error(capsys, "tariff_extended.json")
    assert not out.exists()


def test_a_protocol_run_does_not_need_the_extended_tariff(edited_tariff, tmp_path):
    out = tmp_path / "run"
    assert main([*_RUN, "--domain", "cycle_hire", "--policies", "hour_of_day_empirical", "--out", str(out)]) == 0
    assert (out / "manifest.json").is_file()


@pytest.mark.parametrize("relpath, domain", [
    ("config/sigma.json", "cycle_hire"),
    ("data/tfl_cycle_hire.parquet", "cycle_hire"),
    ("data/eia930_demand.parquet", "electricity"),
    ("data/balancing_authorities.csv", "electricity"),
    ("data/balancing_authority_zones.csv", "electricity"),
])
def test_an_edited_packaged_file_is_refused_before_the_run(monkeypatch, tmp_path, capsys, relpath, domain):
    _edit_manifest(monkeypatch, tmp_path, relpath)
    out = tmp_path / "run"
    assert main([*_RUN, "--domain", domain, "--policies", "hour_of_day_empirical", "--out", str(out)]) == 2
    _one_line_error(capsys, relpath.split("/")[-1])
    assert not out.exists()


def test_resume_on_an_edited_install_leaves_the_run_unchanged(monkeypatch, tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*_RUN, "--domain", "cycle_hire", "--policies", "hour_of_day_empirical", "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    _edit_manifest(monkeypatch, tmp_path, "data/tfl_cycle_hire.parquet")
    assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 2
    _one_line_error(capsys, "tfl_cycle_hire.parquet")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_check_packaged_files_reads_only_what_the_run_needs(monkeypatch, tmp_path, edited_tariff):
    _edit_manifest(monkeypatch, tmp_path, "data/eia930_demand.parquet")
    check_packaged_files(["cycle_hire"], POOLS["protocol"])  # neither the EIA file nor the extended tariff
    with pytest.raises(DataIntegrityError, match="eia930_demand.parquet"):
        check_packaged_files(["cycle_hire", "electricity"], POOLS["protocol"])
    with pytest.raises(DataIntegrityError, match="tariff_extended.json"):
        check_packaged_files(["cycle_hire"], POOLS["extended"])
    with pytest.raises(ValueError, match="unknown domain"):
        check_packaged_files(["wind"], POOLS["protocol"])
