"""Prefect flows of the pipeline (orchestration; lives in the checkout, not in the wheel).

Importing the package applies the runtime environment defaults before Prefect loads its settings
(``python -m flows.distributed``); each flow applies them again in its body, for a worker that
loads the flow file directly.
"""

from mimesis.runtime_env import configure_environment

configure_environment()
