import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False,
                     help="also run tests marked slow (or set FWGYM_RUN_SLOW=1)")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long test (real model weights); skipped unless --runslow or FWGYM_RUN_SLOW=1")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow") or os.environ.get("FWGYM_RUN_SLOW", "") not in ("", "0"):
        return
    skip = pytest.mark.skip(reason="slow test: use --runslow or FWGYM_RUN_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
