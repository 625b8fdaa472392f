"""MLflow runs, registry and lineage helpers; DVC revision and hash look-ups."""

from mimesis_rl.tracking.lineage import content_hash, git_commit
from mimesis_rl.tracking.runs import PARENT_RUN_ENV, pipeline_run, stage_run

__all__ = ["PARENT_RUN_ENV", "content_hash", "git_commit", "pipeline_run", "stage_run"]
