"""Foreign feed formats: a TOML mapping turns a feed's own file into our columns.

Real feeds arrive in their own shapes (a `;`-separated Portuguese lineup, say). A
mapping file names, for that shape:

```toml
delimiter = ";"                      # CSV delimiter (default: the header's, store.intake.feedfile)
encoding = "utf-8"                   # file encoding (default: UTF-8, else Windows-1252)
date_format = ["%d/%m/%Y %H:%M:%S", "%d/%m/%Y"]  # strptime format(s) of eta/etb/etd,
                                     # tried in order (default ISO 8601)
timezone = "America/Sao_Paulo"       # zone of times without an offset (default UTC)

[columns]                            # our field = the file's column
ref = "duv"
vessel_name = "ship"
eta = "arrival"

[constants]                          # our field = a value for every row
port_unlocode = "BRSSZ"

[values.operation]                   # value maps, matched trimmed and case-insensitively
EMB = "load"
DESC = "disch"
```

Columns of the file that the mapping does not name are ignored; values that a value
map does not name pass through unchanged (and are then validated as usual).
"""

from __future__ import annotations

import dataclasses
import tomllib
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
from pathlib import Path

from store.frames import pd

from store.errors import ValidationError
from store.fields import FEED_FILE_COLUMNS


@dataclasses.dataclass(frozen=True)
class Mapping:
    #: None: detected from the file (`store.intake.feedfile`).
    delimiter: str | None = None
    encoding: str | None = None
    date_format: str | tuple[str, ...] | None = None
    timezone: str | None = None
    columns: dict[str, str] = dataclasses.field(default_factory=dict)
    constants: dict[str, str] = dataclasses.field(default_factory=dict)
    values: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path) -> "Mapping":
        """Read and check a mapping file. Raises ValidationError naming what is wrong."""
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ValidationError(f"Cannot read mapping {path}: {exc}") from exc
        known = {"delimiter", "encoding", "date_format", "timezone", "columns", "constants", "values"}
        unknown = set(data) - known
        if unknown:
            raise ValidationError(f"Unknown mapping keys: {', '.join(sorted(unknown))}")
        mapping = cls(
            delimiter=data.get("delimiter"),
            encoding=data.get("encoding"),
            date_format=_formats(data.get("date_format")),
            timezone=data.get("timezone"),
            columns={k: str(v) for k, v in data.get("columns", {}).items()},
            constants={k: str(v) for k, v in data.get("constants", {}).items()},
            values={
                field: {str(k).strip().lower(): str(v) for k, v in table.items()}
                for field, table in data.get("values", {}).items()
            },
        )
        if mapping.timezone is not None:
            try:
                ZoneInfo(mapping.timezone)
            except (ZoneInfoNotFoundError, ValueError) as exc:
                raise ValidationError(f"Mapping names an unknown timezone {mapping.timezone!r}") from exc
        for field in (*mapping.columns, *mapping.constants, *mapping.values):
            if field not in FEED_FILE_COLUMNS:
                raise ValidationError(f"Mapping names {field!r}, which is not a feed field")
        return mapping

    def parsing(self) -> dict:
        """The keyword arguments of `validate.validate_frame` this mapping sets."""
        return {"date_format": self.date_format, "timezone": self.timezone}

    def apply(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The file's frame (all strings) turned into our columns, row order kept.
        Raises ValidationError when a mapped column is missing from the file."""
        missing = [src for src in self.columns.values() if src not in frame.columns]
        if missing:
            raise ValidationError(
                f"The file lacks the mapped columns: {', '.join(missing)}",
                [{"line": 1, "field": col, "reason": "column named by the mapping is missing"} for col in missing],
            )
        out = pd.DataFrame(index=frame.index)
        for field, source in self.columns.items():
            out[field] = frame[source]
        for field, value in self.constants.items():
            out[field] = value
        for field, table in self.values.items():
            if field in out:
                column = out[field].astype(object).fillna("")
                lowered = column.str.strip().str.lower()
                out[field] = lowered.map(table).where(lowered.isin(table.keys()), column)
        return out


def _formats(value) -> str | tuple[str, ...] | None:
    if value is None or isinstance(value, str):
        return value
    return tuple(str(v) for v in value)
