"""structlog set-up: JSON lines when not on a terminal, readable lines on one.

Our own logs follow the level asked for; the libraries' loggers (drivers, HTTP clients, the
broker clients) stay at WARNING or quieter whatever it is, except at DEBUG, when everything
logs: their INFO lines are one per request or connection and would bury ours.
"""

from __future__ import annotations

import logging
import sys

import structlog

# The libraries' loggers and the level each keeps unless the level asked for is DEBUG.
# kafka, aiokafka and opensearch warn of every retried connection while a stack starts.
LIBRARY_LEVELS: dict[str, int] = {
    "faststream": logging.WARNING,  # logs every message it consumes at INFO
    "kafka": logging.ERROR,
    "aiokafka": logging.ERROR,
    "opensearch": logging.ERROR,  # opensearch-py: a line per request
    "opensearchpy": logging.ERROR,
    "elastic_transport": logging.WARNING,
    "urllib3": logging.WARNING,
    "httpx": logging.WARNING,  # a line per request at INFO
    "httpcore": logging.WARNING,
    "aiohttp": logging.WARNING,  # aiohttp.access: a line per request served
    "asyncio": logging.WARNING,
    "psycopg": logging.WARNING,
    "psycopg.pool": logging.WARNING,
    "redis": logging.WARNING,
    "git": logging.WARNING,
    "filelock": logging.WARNING,
    "markdown_it": logging.WARNING,
    "pdfminer": logging.WARNING,
}


def configure_logging(level: str = "INFO", *, json_output: bool | None = None) -> None:
    """Configure structlog and the stdlib root logger once per process."""
    if json_output is None:
        json_output = not sys.stderr.isatty()
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if json_output
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    threshold = logging.getLevelName(level.upper())
    if not isinstance(threshold, int):
        threshold = logging.INFO
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    debug = threshold <= logging.DEBUG
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if debug:
        logging.getLogger().setLevel(logging.DEBUG)
    for name, quiet in LIBRARY_LEVELS.items():
        logging.getLogger(name).setLevel(logging.NOTSET if debug else quiet)
