"""Identity-document numbers in tables: values under a CSV / TSV / Markdown column whose header
names a document ("passport_no", "SSN", "National ID", "driver_license_number").

A row id ("order_id", "employee_id") is not a document and is left alone; a value needs a digit.
Used by :func:`mimesis.data.pii.scrub` (kind ``ID_NUMBER``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# A CSV / TSV / Markdown column whose header names an identity document ("passport_no",
# "SSN", "National ID", "driver_license_number"): every value with a digit below it is an ID.
_ID_HEADER = re.compile(
    r"(?:[a-z]+_)*(?:(?:passport|ssn|social_security|national_id|national_insurance|nhs|aadhaar"
    r"|tax_id|nino|tfn|dni|cpf|personnummer|drivers?_licen[cs]e)(?:_[a-z]+)*"
    r"|(?:id|identity|id_card|document|doc|licen[cs]e|ni|sin|tin)_(?:no|nr|num|number))"
)
_ID_VALUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{4,19}")


def _cells(line: str, sep: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each cell of a delimited line, quotes respected, blanks stripped."""
    cell = re.compile(rf'[ \t]*(?:"(?:[^"]|"")*"|[^{re.escape(sep)}\n]*)')
    pos = 0
    while pos <= len(line):
        m = cell.match(line, pos)
        start, end = m.start(), m.end()
        value = line[start:end]
        start += len(value) - len(value.lstrip(' \t"'))
        end -= len(value) - len(value.rstrip(' \t"'))
        yield start, max(start, end)
        pos = m.end() + 1
        if m.end() >= len(line) or line[m.end()] != sep:
            break


def _id_header(cell: str) -> bool:
    return _ID_HEADER.fullmatch(re.sub(r"[^a-z0-9]+", "_", cell.lower()).strip("_")) is not None


def find_id_columns(text: str) -> Iterator[tuple[int, int]]:
    """Values under a delimited column whose header names an identity document."""
    if not any(sep in text for sep in ",\t|;"):
        return
    lines, pos = [], 0
    for line in text.split("\n"):
        lines.append((pos, line))
        pos += len(line) + 1
    for i, (_, header) in enumerate(lines):
        for sep in ",\t|;":
            if sep not in header:
                continue
            cells = list(_cells(header, sep))
            columns = [k for k, (a, b) in enumerate(cells) if _id_header(header[a:b])]
            if not columns:
                continue
            for offset, row in lines[i + 1 :]:
                if sep not in row:
                    break
                row_cells = list(_cells(row, sep))
                for k in columns:
                    if k < len(row_cells):
                        a, b = row_cells[k]
                        value = row[a:b]
                        if _ID_VALUE.fullmatch(value) and any(c.isdigit() for c in value):
                            yield offset + a, offset + b
