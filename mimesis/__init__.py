"""MIMESIS: user simulators learned from real human conversations (library; never imports Prefect).

Importing the package sets the offline, no-telemetry environment of the stack (see
``mimesis.runtime_env``) so every entry point — CLI, ``dvc repro``, Prefect tasks, tests — runs
without reaching a model hub or a telemetry endpoint.
"""

from mimesis.runtime_env import configure_environment

configure_environment()

__version__ = "0.1.0"
