"""``fwgym calibrate-sigma``: recompute the per-domain sigma (:func:`fwgym.evaluation.calibration.calibrate_sigma`)."""
from __future__ import annotations

import argparse

from fwgym.evaluation.calibration import CALIBRATION_SPLITS
from fwgym.core.cases import DEV_SPLIT
from fwgym.cli.args import domains, positive_int

NAME = "calibrate-sigma"
HELP = "recompute the per-domain sigma on the dev split"

def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``fwgym calibrate-sigma``."""
    p.add_argument("--split", default=DEV_SPLIT, choices=CALIBRATION_SPLITS)
    p.add_argument("--domain", type=domains, default=None,
                   help="calibrate one domain (default: those of the packaged file, the protocol's); a domain outside "
                        "the file (an opt-in or plug-in one) is printed for its Domain.sigma, not written")
    p.add_argument("--workers", type=positive_int, default=1, help="local worker processes (default 1)")
    p.add_argument("--write", action="store_true", help="write fwgym/config/sigma.json (or --output)")
    p.add_argument("--output", default=None)
    p.add_argument("--no-progress", action="store_true")


def run(args) -> int:
    """Print the calibration as JSON; with ``--write``, also write it to the sigma file."""
    from fwgym.evaluation.calibration import calibrate_sigma, sigma_config
    from fwgym.core.scoring import write_sigma

    from fwgym.core.scoring import SIGMA_FILE_DOMAINS

    outside = [d for d in (args.domain or ()) if d not in SIGMA_FILE_DOMAINS]
    if args.write and outside and not args.output:
        raise SystemExit(f"fwgym calibrate-sigma: error: {outside} are not in the packaged sigma file "
                         f"({list(SIGMA_FILE_DOMAINS)}): set the printed value as the domain's Domain.sigma "
                         "(or pass --output to write a file of your own)")
    only = {"domains": args.domain} if args.domain else {}
    result = calibrate_sigma(split=args.split, workers=args.workers, progress=not args.no_progress, **only)
    text = sigma_config(result)
    print(text)
    if args.write:
        path = write_sigma(text, args.output or None)  # the packaged file's digest is recorded in fwgym/data/sha256.json
        print(f"wrote {path}")
    return 0


__all__ = ["NAME", "HELP", "add_arguments", "run"]
