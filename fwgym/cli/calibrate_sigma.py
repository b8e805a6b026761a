"""``fwgym calibrate-sigma``: recompute the per-domain sigma (:func:`fwgym.evaluation.calibration.calibrate_sigma`)."""
from __future__ import annotations

import argparse

from fwgym.evaluation.calibration import CALIBRATION_SPLITS
from fwgym.core.cases import DEV_SPLIT
from fwgym.cli.args import add_output_argument, add_progress_argument, add_split_argument, domains, positive_int

NAME = "calibrate-sigma"
HELP = "recompute the per-domain sigma on the dev split"

def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``fwgym calibrate-sigma``."""
    add_split_argument(p, default=DEV_SPLIT, choices=CALIBRATION_SPLITS,
                       help=f"the split calibrated on (default {DEV_SPLIT}; never the test split)")
    p.add_argument("--domain", type=domains, default=None,
                   help="calibrate one domain (default: those of the packaged file, the protocol's); a domain outside "
                        "the file (an opt-in or plug-in one) is printed for its Domain.sigma, not written")
    p.add_argument("--workers", type=positive_int, default=1, help="local worker processes (default 1)")
    p.add_argument("--write", action="store_true",
                   help="write the calibration to the packaged fwgym/config/sigma.json (or to --out FILE)")
    add_output_argument(p, metavar="FILE", default=None, aliases=("--output",),
                        help="write the calibration to FILE instead of the packaged sigma file (implies --write)")
    add_progress_argument(p)


def run(args) -> int:
    """Print the calibration as JSON; with ``--write`` or ``--out FILE``, also write it to the sigma file (or FILE)."""
    from fwgym.evaluation.calibration import calibrate_sigma, sigma_config
    from fwgym.core.scoring import write_sigma

    from fwgym.core.scoring import SIGMA_FILE_DOMAINS

    outside = [d for d in (args.domain or ()) if d not in SIGMA_FILE_DOMAINS]
    write = bool(args.write or args.out)
    if write and outside and not args.out:
        raise SystemExit(f"fwgym calibrate-sigma: error: {outside} are not in the packaged sigma file "
                         f"({list(SIGMA_FILE_DOMAINS)}): set the printed value as the domain's Domain.sigma "
                         "(or pass --out FILE to write a file of your own)")
    only = {"domains": args.domain} if args.domain else {}
    result = calibrate_sigma(split=args.split, workers=args.workers, progress=not args.no_progress, **only)
    text = sigma_config(result)
    print(text)
    if write:
        path = write_sigma(text, args.out or None)  # the packaged file's digest is recorded in fwgym/data/sha256.json
        print(f"wrote {path}")
    return 0


__all__ = ["NAME", "HELP", "add_arguments", "run"]
