"""``fwgym calibrate-sigma``: recompute the per-domain sigma (:func:`fwgym.evaluation.calibrate_sigma`)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from fwgym.cases import SPLITS

NAME = "calibrate-sigma"
HELP = "recompute the per-domain sigma on the dev split"
#: splits sigma may be calibrated on (never the test split)
CALIBRATION_SPLITS = tuple(s for s in SPLITS if s != "test")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``fwgym calibrate-sigma``."""
    p.add_argument("--split", default="dev", choices=CALIBRATION_SPLITS)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--write", action="store_true", help="write fwgym/config/sigma.json (or --output)")
    p.add_argument("--output", default=None)
    p.add_argument("--no-progress", action="store_true")


def run(args) -> int:
    """Print the calibration as JSON; with ``--write``, also write it to the sigma file."""
    from fwgym.evaluation import calibrate_sigma
    from fwgym.scoring import REFERENCE_SIGMA, SIGMA_PATH

    result = calibrate_sigma(split=args.split, workers=args.workers, progress=not args.no_progress)
    result["reference_fwbench_paper"] = REFERENCE_SIGMA
    result["command"] = f"fwgym calibrate-sigma --split {args.split}"
    text = json.dumps(result, indent=2, sort_keys=True) + "\n"
    print(text)
    if args.write:
        path = Path(args.output) if args.output else SIGMA_PATH
        path.write_text(text)
        print(f"wrote {path}")
    return 0


__all__ = ["NAME", "HELP", "add_arguments", "run"]
