"""Episodes built directly on the ledger (no env): one day-ahead ISNE test case, every tool allowed."""
import pytest

from fwgym.core.cases import get_case
from fwgym.tools import DEFAULT_TOOLS, REGISTRY, Episode

#: day-ahead (horizon 50, target steps 27..50), scale 17618.30 MW; seasonal_empirical at 336/50: 1027 credits
CASE_ID = "elec-ISNE-2024-07-19-day_ahead"


@pytest.fixture(scope="session")
def case():
    return get_case(CASE_ID)


@pytest.fixture
def make_episode(case):
    """``make_episode(**fields)``: an :class:`Episode` of the case allowing every registered tool."""

    def make(**fields):
        fields.setdefault("tools", {t: REGISTRY[t] for t in DEFAULT_TOOLS})
        return Episode(case=case, **fields)

    return make
