"""The `mimesis-retrain` flow: the scheduled retrain our users run weekly.

    python -m flows.retrain            # one retrain now
    python -m flows.retrain --serve    # serve it on the cron in params.yaml (pipeline.schedule_cron)

Sources outside the repo (the packaged corpus, a data lake path) may have changed without DVC
noticing, so `ingest` is always rerun; DVC then reruns exactly what the new data invalidates.
"""

from __future__ import annotations

import argparse
import sys

from prefect import flow

from flows.pipeline import pipeline
from mimesis_rl.config import load_params


@flow(name="mimesis-retrain", log_prints=True)
def retrain(profile: str | None = None) -> dict:
    return pipeline(profile=profile, force_stages=["ingest"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.retrain", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", help="params profile (demo | tiny)")
    parser.add_argument("--serve", action="store_true", help="serve on the params.yaml cron schedule")
    args = parser.parse_args(argv)
    if args.serve:
        cron = load_params()["pipeline"]["schedule_cron"]
        retrain.serve(name="mimesis-retrain-scheduled", cron=cron, parameters={"profile": args.profile})
    else:
        retrain(profile=args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
