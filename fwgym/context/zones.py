"""Local time of a case's series: the balancing authorities' IANA zones and Europe/London for cycle hire."""
from __future__ import annotations

from functools import lru_cache
from zoneinfo import ZoneInfo

from fwgym.core.cases import LONDON, Case
from fwgym.data import read_csv_rows

__all__ = ["ba_zones", "local_zone"]


@lru_cache(maxsize=None)
def ba_zones() -> dict[str, tuple[str, str]]:
    """``{BA code: (IANA time zone, region description)}`` for the 54 balancing authorities."""
    return {r["series_id"]: (r["time_zone"], r["region"]) for r in read_csv_rows("data/balancing_authority_zones.csv")}


def local_zone(case: Case) -> ZoneInfo:
    """Local time zone of the case's series (BA zone, or Europe/London for cycle hire)."""
    if case.domain == "cycle_hire":
        return LONDON
    return ZoneInfo(ba_zones()[case.series_id][0])
