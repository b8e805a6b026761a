"""``python -m fwgym.domains.pedestrian``: rebuild the packaged Parquet file from the installed source
(:func:`fwgym.domains.pedestrian.source.build_main`)."""
from fwgym.domains.pedestrian.source import build_main

raise SystemExit(build_main())
