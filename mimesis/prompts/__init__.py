"""Prompt templates are data: the ``*.md`` files of this package, loaded by name."""

from importlib import resources


def load_prompt(name: str) -> str:
    """Text of ``mimesis/prompts/<name>.md``.

    Raises:
        FileNotFoundError: no such prompt.
    """
    return resources.files("mimesis.prompts").joinpath(f"{name}.md").read_text(encoding="utf-8")
