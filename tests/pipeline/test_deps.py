"""Code deps derived from the import graph (mimesis/deps.py) on a small synthetic project."""

from pathlib import Path

import pytest

from mimesis import deps

DVC = """stages:
  one:
    cmd: python -m mimesis.stages.one --out data/one
    deps:
      - data/upstream
      - mimesis/stages/one.py
      - mimesis/prompts/x.md
    outs:
      - data/one
"""


def _project(tmp_path: Path) -> Path:
    files = {
        "mimesis/__init__.py": "",
        "mimesis/stages/__init__.py": "",
        # a function-local import and a relative one: both are deps
        "mimesis/stages/one.py": "from ..util import helper\n\ndef main():\n"
                                 "    from mimesis.pkg import leaf\n    import mimesis.dyn\n",
        "mimesis/util.py": "def helper():\n    pass\n",
        "mimesis/pkg/__init__.py": "",
        "mimesis/pkg/leaf.py": "import json\n",
        "mimesis/pkg/data/table.json": "{}",
        # pkgutil discovery over a literally imported package: every module of it
        "mimesis/dyn.py": "import importlib, pkgutil\n"
                          "p = importlib.import_module('mimesis.plug')\n"
                          "for m in pkgutil.iter_modules(p.__path__): pass\n",
        "mimesis/plug/__init__.py": "",
        "mimesis/plug/a.py": "",
        "mimesis/plug/b.py": "",
        "mimesis/unused.py": "",
        "mimesis/prompts/x.md": "prompt",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    (tmp_path / "dvc.yaml").write_text(DVC)
    return tmp_path


def test_closure_follows_local_relative_and_discovered_imports(tmp_path):
    root = _project(tmp_path)
    needed = deps.needed_files(root, "mimesis.stages.one")
    assert needed == {"mimesis/__init__.py", "mimesis/stages/__init__.py",
                      "mimesis/stages/one.py", "mimesis/util.py", "mimesis/pkg/__init__.py",
                      "mimesis/pkg/leaf.py", "mimesis/pkg/data/table.json", "mimesis/dyn.py",
                      "mimesis/plug/__init__.py", "mimesis/plug/a.py", "mimesis/plug/b.py"}
    # folders where everything under them is needed, single files elsewhere
    assert deps.compress(root, needed) == [
        "mimesis/__init__.py", "mimesis/dyn.py", "mimesis/pkg", "mimesis/plug",
        "mimesis/stages", "mimesis/util.py"]


def test_check_reports_an_uncovered_import_and_write_fixes_it(tmp_path):
    root = _project(tmp_path)
    (report,) = deps.check(root)
    assert not report.ok
    assert "mimesis/util.py" in report.uncovered and "mimesis/plug/b.py" in report.uncovered
    assert deps.write(root) == ["one"]
    (report,) = deps.check(root)
    assert report.ok and report.uncovered == ()
    text = (root / "dvc.yaml").read_text()
    # upstream outputs and hand-listed prompt files survive, in place around the derived list
    assert text.index("data/upstream") < text.index("mimesis/dyn.py") < text.index("x.md")
    assert "mimesis/unused.py" not in text
    assert deps.write(root) == []  # idempotent


def test_missing_entry_module_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="mimesis.stages.nope"):
        deps.import_closure(tmp_path, "mimesis.stages.nope")


def test_discovery_reaches_subpackages_their_modules_and_data(tmp_path):
    """An env is a folder (``mimesis/envs/<name>/``): discovering the package must give each
    sub-package, the modules it imports (even function-locally) and its ``data/`` folder."""
    files = {
        "mimesis/__init__.py": "",
        "mimesis/stages/__init__.py": "",
        "mimesis/stages/one.py": "def main():\n    from mimesis.plug import registry\n",
        "mimesis/plug/__init__.py": "",
        "mimesis/plug/registry.py": "import importlib, pkgutil\n"
                                    "p = importlib.import_module('mimesis.plug')\n"
                                    "for m in pkgutil.iter_modules(p.__path__): pass\n",
        "mimesis/plug/coin/__init__.py": "from mimesis.plug.coin.gym import CoinGym\n",
        "mimesis/plug/coin/gym.py": "class CoinGym:\n    def probe(self):\n"
                                    "        from .probes import fact\n",
        "mimesis/plug/coin/probes.py": "",
        "mimesis/plug/coin/data/sides.json": "[]",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    needed = deps.needed_files(tmp_path, "mimesis.stages.one")
    assert {"mimesis/plug/coin/__init__.py", "mimesis/plug/coin/gym.py",
            "mimesis/plug/coin/probes.py", "mimesis/plug/coin/data/sides.json"} <= needed
    assert deps.compress(tmp_path, needed)[:2] == ["mimesis/__init__.py", "mimesis/plug"]
