"""The design notes the code cites live in the repository (``docs/<name>.md``), and every
citation points at them: no file cites the old out-of-repo notes, every cited ``docs/`` file
exists, and every cited pitfall number is one that ``docs/pitfalls.md`` defines."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The notes as they were named outside the repository; only docs/<lowercase>.md may be cited.
OLD_NAMES = re.compile(r"PITFALLS|\b(?:METRICS|STACK|BEHAVIORS|ENVIRONMENTS)\.md")
CITED_DOC = re.compile(r"\bdocs/([A-Za-z0-9_]+)\.md\b")
CITED_PITFALL = re.compile(r"docs/pitfalls\.md((?:,? #\d+(?:[–-]#\d+)?)+)")
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".ini"}
NOTES = ("metrics", "pitfalls", "behaviors", "environments", "stack")


def tracked_texts() -> dict[str, str]:
    """Path -> text of every tracked text file (the working tree's tracked paths)."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    paths = [p for p in out.stdout.decode().split("\0") if p]
    return {p: (ROOT / p).read_text(encoding="utf-8", errors="replace") for p in paths
            if Path(p).suffix in TEXT_SUFFIXES and (ROOT / p).is_file()
            and not p.startswith((".venv/", ".git/"))}


TEXTS = tracked_texts()


def test_no_file_cites_the_out_of_repo_notes() -> None:
    hits = [f"{path}:{text[:m.start()].count(chr(10)) + 1}: {m.group(0)}"
            for path, text in TEXTS.items() if path != "tests/pipeline/test_docs_citations.py"
            for m in OLD_NAMES.finditer(text)]
    assert not hits, "cite docs/<name>.md instead:\n" + "\n".join(hits)


def test_every_cited_doc_exists_and_the_notes_are_there() -> None:
    cited = {m.group(1) for text in TEXTS.values() for m in CITED_DOC.finditer(text)}
    cited |= {m.group(1) for path, text in TEXTS.items() if path.startswith("docs/")
              for m in re.finditer(r"\]\(([a-z0-9_]+)\.md\)", text)}  # links between docs
    assert {"metrics", "pitfalls", "behaviors", "stack"} <= cited
    missing = sorted(n for n in cited | set(NOTES) if not (ROOT / "docs" / f"{n}.md").is_file())
    assert not missing, f"cited but not in docs/: {missing}"


def test_every_cited_pitfall_number_is_defined() -> None:
    pitfalls = (ROOT / "docs" / "pitfalls.md").read_text(encoding="utf-8")
    defined = {int(n) for n in re.findall(r"^(\d+)\. \*\*", pitfalls, flags=re.MULTILINE)}
    assert defined == set(range(1, max(defined) + 1)), "pitfalls are numbered 1..n"
    cited: dict[int, str] = {}
    for path, text in TEXTS.items():
        for m in CITED_PITFALL.finditer(text):
            for a, b in re.findall(r"#(\d+)(?:[–-]#(\d+))?", m.group(1)):
                for n in range(int(a), int(b or a) + 1):
                    cited.setdefault(n, path)
    assert cited, "the code cites no pitfall"
    unknown = {n: path for n, path in cited.items() if n not in defined}
    assert not unknown, f"cited pitfalls that docs/pitfalls.md does not define: {unknown}"


def test_pitfalls_name_tests_that_exist() -> None:
    pitfalls = (ROOT / "docs" / "pitfalls.md").read_text(encoding="utf-8")
    for item in re.split(r"^(?=\d+\. \*\*)", pitfalls, flags=re.MULTILINE)[1:]:
        files, names = set(), set()
        for ref in re.findall(r"`(tests/(?:\w+/)?test_\w+\.py(?:::test_\w+)?|test_\w+)`", item):
            file, _, name = ref.partition("::")
            if file.startswith("tests/"):
                files.add(file)
            names.add(name or (file if not file.startswith("tests/") else ""))
        assert files, f"pitfall without a test: {item[:60]!r}"
        source = "\n".join((ROOT / f).read_text(encoding="utf-8") for f in files)
        defined = set(re.findall(r"^def (test_\w+)\(", source, flags=re.MULTILINE))
        names.discard("")
        assert names <= defined, f"{item[:40]!r}: no such tests {names - defined}"
