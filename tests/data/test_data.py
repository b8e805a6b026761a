"""Tests for fwgym/data: loading, densifying and sha256-verifying the shipped Parquet files.

Expected values come from pandas.read_parquet of the same files (an independent reader).
"""
from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fwgym.data as fdata
from fwgym.core.series import load_series
from fwgym.data import DataIntegrityError

PKG_DATA = Path(fdata.__file__).resolve().parent
FILES = {"electricity": "eia930_demand.parquet", "cycle_hire": "tfl_cycle_hire.parquet"}
EPOCH = pd.Timestamp("1970-01-01", tz="UTC")


@pytest.fixture(scope="module")
def frames():
    out = {}
    for domain, name in FILES.items():
        df = pd.read_parquet(PKG_DATA / name)
        df["hour"] = (df["timestamp"] - EPOCH) // pd.Timedelta(hours=1)
        out[domain] = df
    return out


def test_series_counts():
    assert len(load_series("electricity")) == 54
    assert len(load_series("cycle_hire")) == 100


@pytest.mark.parametrize("domain", ["electricity", "cycle_hire"])
def test_ids_sorted_and_match_pandas(domain, frames):
    series = load_series(domain)
    ids = list(series)
    assert ids == sorted(ids)
    assert set(ids) == set(frames[domain]["series_id"].astype(str).unique())
    for sid, s in series.items():
        assert s.series_id == sid
        assert s.domain == domain
    assert {s.unit for s in series.values()} == {"MW" if domain == "electricity" else "departures/hour"}


@pytest.mark.parametrize("domain", ["electricity", "cycle_hire"])
def test_dense_values_match_pandas(domain, frames):
    """Every row of the Parquet file appears at its hour; every other hour in the span is NaN."""
    series = load_series(domain)
    for sid, g in frames[domain].groupby("series_id", sort=False):
        s = series[str(sid)]
        hours = g["hour"].to_numpy()
        vals = g["value"].to_numpy(dtype=float)
        assert s.start_hour == hours.min()
        assert len(s.values) == hours.max() - hours.min() + 1
        np.testing.assert_array_equal(s.values[hours - s.start_hour], vals)
        assert int(np.isfinite(s.values).sum()) == len(g)
        assert not s.values.flags.writeable


def test_known_values_electricity(frames):
    df = frames["electricity"]
    series = load_series("electricity")
    # first AEC row is 2019-12-31 23:00Z = 525.0 MW (see the file); check a few rows by timestamp
    first = df[df["series_id"] == "AEC"].iloc[0]
    assert first["timestamp"] == pd.Timestamp("2019-12-31 23:00", tz="UTC")
    assert series["AEC"].values[0] == first["value"]
    rng = np.random.default_rng(0)
    for i in rng.integers(0, len(df), size=25):
        row = df.iloc[int(i)]
        s = series[row["series_id"]]
        ts = row["timestamp"]
        hour = int((ts - EPOCH) / pd.Timedelta(hours=1))
        assert s.values[hour - s.start_hour] == row["value"]


def test_known_values_cycle_hire(frames):
    df = frames["cycle_hire"]
    series = load_series("cycle_hire")
    rng = np.random.default_rng(1)
    for i in rng.integers(0, len(df), size=25):
        row = df.iloc[int(i)]
        s = series[str(row["series_id"])]
        hour = int((row["timestamp"] - EPOCH) / pd.Timedelta(hours=1))
        assert s.values[hour - s.start_hour] == float(row["value"])
        assert s.name == row["station_name"]


def test_electricity_names_from_csv():
    with open(PKG_DATA / "balancing_authorities.csv", newline="", encoding="utf-8") as fh:
        names = {r["series_id"]: r["name"] for r in csv.DictReader(fh)}
    series = load_series("electricity")
    assert series["AEC"].name == "PowerSouth Energy Cooperative"
    for sid, s in series.items():
        assert s.name == names.get(sid, sid)


def test_cache_per_domain_and_dir(tmp_path):
    a = load_series("cycle_hire")
    assert load_series("cycle_hire") is a
    assert load_series("cycle_hire", data_dir=PKG_DATA) is a
    shutil.copy(PKG_DATA / FILES["cycle_hire"], tmp_path / FILES["cycle_hire"])
    b = load_series("cycle_hire", data_dir=tmp_path)
    assert b is not a
    assert list(b) == list(a)
    for sid in a:
        np.testing.assert_array_equal(a[sid].values, b[sid].values)
        assert a[sid].start_hour == b[sid].start_hour


def test_unknown_domain():
    with pytest.raises(ValueError):
        load_series("gas")


# ------------------------------------------------------------------------------------------------
# integrity failures


def _assert_names_file(exc: DataIntegrityError, path: Path):
    assert str(path) in str(exc) or path.name in str(exc)


@pytest.mark.parametrize("domain", ["electricity", "cycle_hire"])
def test_missing_file(domain, tmp_path):
    with pytest.raises(DataIntegrityError) as exc:
        load_series(domain, data_dir=tmp_path)
    _assert_names_file(exc.value, tmp_path / FILES[domain])
    assert FILES[domain] in str(exc.value)


@pytest.mark.parametrize("domain", ["electricity", "cycle_hire"])
def test_flipped_bytes(domain, tmp_path):
    dst = tmp_path / FILES[domain]
    data = bytearray((PKG_DATA / FILES[domain]).read_bytes())
    mid = len(data) // 2
    data[mid] ^= 0xFF
    data[mid + 1] ^= 0x01
    dst.write_bytes(bytes(data))
    with pytest.raises(DataIntegrityError) as exc:
        load_series(domain, data_dir=tmp_path)
    assert FILES[domain] in str(exc.value)


@pytest.mark.parametrize("keep", [0, 100, 0.5])
def test_truncated(keep, tmp_path):
    name = FILES["cycle_hire"]
    data = (PKG_DATA / name).read_bytes()
    n = int(len(data) * keep) if isinstance(keep, float) else keep
    (tmp_path / name).write_bytes(data[:n])
    with pytest.raises(DataIntegrityError) as exc:
        load_series("cycle_hire", data_dir=tmp_path)
    assert name in str(exc.value)


def test_appended_byte(tmp_path):
    name = FILES["electricity"]
    (tmp_path / name).write_bytes((PKG_DATA / name).read_bytes() + b"\x00")
    with pytest.raises(DataIntegrityError) as exc:
        load_series("electricity", data_dir=tmp_path)
    assert name in str(exc.value)


def test_directory_instead_of_file(tmp_path):
    (tmp_path / FILES["cycle_hire"]).mkdir()
    with pytest.raises(DataIntegrityError):
        load_series("cycle_hire", data_dir=tmp_path)


def test_failed_load_is_not_cached(tmp_path):
    with pytest.raises(DataIntegrityError):
        load_series("cycle_hire", data_dir=tmp_path)
    shutil.copy(PKG_DATA / FILES["cycle_hire"], tmp_path / FILES["cycle_hire"])
    assert len(load_series("cycle_hire", data_dir=tmp_path)) == 100


def test_integrity_error_is_runtime_error():
    assert issubclass(DataIntegrityError, RuntimeError)


def test_loading_the_data_does_not_import_pandas():
    # pandas costs ~75 MB of RSS per process (issue 8: one env < 300 MB); the loader reads Arrow buffers
    code = ("import sys; from fwgym.core.series import load_series; load_series('electricity'); load_series('cycle_hire'); "
            "from fwgym.envs.fwbench import FWBenchEnv; e = FWBenchEnv(('electricity', 'cycle_hire'), split='test'); e.reset(seed=0); "
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------------------------------------
# the sha256 manifest of every file that changes a score


def test_manifest_lists_every_score_file_with_its_digest():
    assert set(fdata.SCORE_FILES) == {"config/sigma.json", "data/balancing_authorities.csv",
                                      "data/balancing_authority_zones.csv", "data/eia930_demand.parquet",
                                      "data/tfl_cycle_hire.parquet"}
    for rel in fdata.SCORE_FILES:
        path = PKG_DATA.parent / rel
        assert fdata.expected_sha256(rel) == fdata.sha256_file(path), rel
        assert fdata.verified_bytes(rel) == path.read_bytes()
    with pytest.raises(ValueError):
        fdata.expected_sha256("data/ATTRIBUTION.md")


@pytest.fixture
def package_copy(tmp_path, monkeypatch):
    """A copy of the package's score files and manifest under tmp_path, which fwgym.data reads instead."""
    for rel in fdata.SCORE_FILES + ("data/sha256.json",):
        if rel.endswith(".parquet"):
            continue
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PKG_DATA.parent / rel, tmp_path / rel)
    monkeypatch.setattr(fdata, "PACKAGE_DIR", tmp_path)
    monkeypatch.setattr(fdata, "MANIFEST_PATH", tmp_path / "data" / "sha256.json")
    from fwgym.context.scenarios import ba_zones

    ba_zones.cache_clear()
    yield tmp_path
    ba_zones.cache_clear()


def test_edited_zone_is_refused_naming_the_file(package_copy):
    from fwgym.context.scenarios import ba_zones

    assert ba_zones()["ISNE"][0] == "America/New_York"  # the unedited copy passes
    ba_zones.cache_clear()
    path = package_copy / "data" / "balancing_authority_zones.csv"
    text = path.read_text(encoding="utf-8")
    line = next(ln for ln in text.splitlines() if ln.startswith("ISNE,"))
    path.write_text(text.replace(line, line.replace("America/New_York", "America/Los_Angeles")), encoding="utf-8")
    with pytest.raises(DataIntegrityError) as exc:
        ba_zones()
    assert str(path) in str(exc.value) and "sha256" in str(exc.value)


def test_edited_ba_name_is_refused_naming_the_file(package_copy, tmp_path_factory):
    path = package_copy / "data" / "balancing_authorities.csv"
    path.write_text(path.read_text(encoding="utf-8").replace("PowerSouth Energy Cooperative", "PowerSouth"), encoding="utf-8")
    other = tmp_path_factory.mktemp("parquet")  # a fresh directory: load_series caches per directory
    shutil.copy(PKG_DATA / FILES["electricity"], other / FILES["electricity"])
    with pytest.raises(DataIntegrityError) as exc:
        load_series("electricity", data_dir=other)
    assert str(path) in str(exc.value)


def test_edited_sigma_is_refused_naming_the_file(package_copy, monkeypatch):
    import json

    import fwgym.core.scoring as scoring

    sigma_path = package_copy / "config" / "sigma.json"
    monkeypatch.setattr(scoring, "SIGMA_PATH", sigma_path)
    original = scoring.load_sigma()
    doc = json.loads(sigma_path.read_text())
    doc["sigma"] = {d: 10 * v for d, v in doc["sigma"].items()}  # x10 sigma divides every S by 10
    sigma_path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    with pytest.raises(DataIntegrityError) as exc:
        scoring.load_sigma()
    assert str(sigma_path) in str(exc.value) and "calibrate-sigma --write" in str(exc.value)
    # a copy elsewhere, given explicitly, is the caller's choice (not checked)
    elsewhere = package_copy / "my_sigma.json"
    shutil.copy(sigma_path, elsewhere)
    assert scoring.load_sigma(elsewhere) == pytest.approx({d: 10 * v for d, v in original.items()}, rel=1e-15)


def test_missing_or_malformed_manifest_is_refused(package_copy):
    manifest = package_copy / "data" / "sha256.json"
    manifest.write_text("{}")
    with pytest.raises(DataIntegrityError, match="sha256.json"):
        fdata.verified_bytes("config/sigma.json")
    manifest.unlink()
    with pytest.raises(DataIntegrityError, match="sha256.json"):
        fdata.verified_bytes("config/sigma.json")
