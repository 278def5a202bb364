"""Offline and quiet process environment, set by the app's entry points (not only by CI).

:func:`configure_environment` is called by the ``mimesis`` CLI (before any command), by
``mimesis.stages`` (before a stage module loads torch) and each stage's ``main()``, by the Prefect
flows and by the benchmarks; never at ``import mimesis``, so a program that imports the library
keeps its own environment.
"""

from __future__ import annotations

import os
import sys
import warnings

OFFLINE_ENV: dict[str, str] = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DVC_NO_ANALYTICS": "1",
    # The 20 s default failed under load on 2-core machines.
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "GIT_PYTHON_REFRESH": "quiet",
    # Spinning OpenMP threads made small generate calls 10-80x slower on a busy 2-core machine.
    "OMP_WAIT_POLICY": "PASSIVE",
}


def configure_environment() -> None:
    """Set the offline/no-telemetry variables unless the caller already chose a value.

    Warns when torch was imported first and ``OMP_WAIT_POLICY`` was not set: OpenMP reads it
    only when torch loads, so the passive policy would not apply to this process.
    """
    if "torch" in sys.modules and "OMP_WAIT_POLICY" not in os.environ:
        warnings.warn("torch was imported before mimesis: OMP_WAIT_POLICY=PASSIVE comes too late "
                      "for this process (import mimesis first, or export it)", stacklevel=2)
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db")
