"""Structured, quiet logs for both components: one line per record on stderr, logfmt or JSON."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Literal, get_args

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[str, ...] = get_args(LogFormat)

_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "color_message"}


def _fields(record: logging.LogRecord, formatter: logging.Formatter) -> dict[str, object]:
    """time, level, logger and msg, then the record's extra fields and any exception."""
    when = datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    fields: dict[str, object] = {
        "time": when[:-4] + "Z",
        "level": record.levelname.lower(),
        "logger": record.name,
        "msg": record.getMessage(),
    }
    fields.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
    if record.exc_info:
        fields["error"] = formatter.formatException(record.exc_info)
    return fields


class LogfmtFormatter(logging.Formatter):
    """`time=… level=… logger=… msg="…"` followed by the record's extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        return " ".join(f"{k}={_quote(v)}" for k, v in _fields(record, self).items())


class JsonFormatter(logging.Formatter):
    """One JSON object per line, with the same fields as the logfmt form."""

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(_fields(record, self), default=str, separators=(",", ":"))


def _quote(value: object) -> str:
    text = str(value)
    if text and not any(c in text for c in ' "=\n\t'):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def setup_logging(level: str, format_: str = "text") -> None:
    """Send every log line to stderr at the given level, as logfmt (`text`) or JSON."""
    if format_ not in LOG_FORMATS:
        raise ValueError(f"log format {format_!r} is not one of {', '.join(LOG_FORMATS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if format_ == "json" else LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # httpx logs every request at INFO, uvicorn every connection: quiet unless debugging.
    for chatty in ("httpx", "httpcore"):
        logging.getLogger(chatty).setLevel(max(logging.WARNING, root.level))
