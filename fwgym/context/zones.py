"""Local time of a case's series, by its domain's spec (:meth:`fwgym.domains.Domain.zone_of`): the balancing
authorities' IANA zones for electricity (:func:`ba_zones`), Europe/London for cycle hire."""
from __future__ import annotations

from zoneinfo import ZoneInfo

from fwgym.core.cases import Case
from fwgym.domains import get_domain
from fwgym.domains.electricity import ba_zones

__all__ = ["ba_zones", "local_zone"]


def local_zone(case: Case) -> ZoneInfo:
    """Local time zone of the case's series (the domain's :meth:`~fwgym.domains.Domain.zone_of`)."""
    return ZoneInfo(get_domain(case.domain).zone_of(case.series_id))
