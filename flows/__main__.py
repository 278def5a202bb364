"""``python -m flows``: run the pipeline flow of this checkout (what ``mimesis run`` starts).

The installed ``mimesis`` command lives in the library, which never imports ``flows``; it starts
this module as a process in the checkout instead, after checking the root and the profile.

Every selected stage's params are checked here, before Prefect starts: building them imports the
stage modules, which the stages then run from in this process, so the check costs no second
import of torch, transformers and TRL (about 20 s on 2 cores).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console

from mimesis.params import ParamsError
from mimesis.pipeline import STAGES, check_params, closing_line, results_table
from mimesis.run_summary import REPORT_DIR, SUMMARY_NAME


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows", description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=".", help="project root (holds dvc.yaml)")
    parser.add_argument("--profile", required=True, help="the active params.yaml profile")
    parser.add_argument("--stages", default="", help="comma-separated subset (default: all)")
    parser.add_argument("--force", action="store_true", help="run even if DVC says up to date")
    args = parser.parse_args(argv)
    root = Path(args.root)
    stages = [s for s in args.stages.split(",") if s] or None
    console = Console()
    for name in stages or STAGES:  # a typo in the last stage fails now, not after the others ran
        try:
            check_params(root, name)
        except ParamsError as err:
            console.print(f"[red]{err}[/red]", highlight=False)
            return 2
    from flows.pipeline import pipeline  # Prefect only once the params hold

    start = time.perf_counter()
    results = pipeline(root=str(root), profile=args.profile, stages=stages, force=args.force)
    total = time.perf_counter() - start
    console.print(results_table(results, total))
    console.print(closing_line(root, results, total, args.profile), soft_wrap=True)
    console.print(f"run summary: {root / REPORT_DIR / SUMMARY_NAME}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
