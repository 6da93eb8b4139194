"""`validate`'s load check: `load_dataset(RELEASE, config)` streams the first row of every published config and
split, with the schema's Features; what `datasets` logs on the way (kept, not printed) is an error or a note."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from builder.release.card_text import published_configs
from generation.storage.schema import features


def check_loads(release: Path, rows: dict, splits: list[str], card: dict | None, load: bool, loads) -> None:
    """`card` is the card's YAML (None: the card has none, and nothing declares the configs to load)."""
    if not load or card is None:
        loads.skip("--no-load" if not load else "README.md has no YAML declaring the configs to load")
        return
    with datasets_log() as logged:
        load_every_config(release, rows, splits, loads, logged)


@contextmanager
def datasets_log() -> Iterator[list[logging.LogRecord]]:
    """The records `datasets` logs (WARNING and up) while the load checks run, kept instead of printed: a reader
    error it logs before raising (`Failed to read file ... ArrowInvalid`) is the failure the check reports, and
    printed it came before validate's own report. validate's lines are its report's, untouched."""
    # datasets' import adds its own stderr handler to this logger (datasets/utils/logging.py,
    # _configure_library_root_logger): imported first, so that handler is among those set aside below
    import datasets  # noqa: F401

    logger = logging.getLogger("datasets")
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handlers, propagate = logger.handlers[:], logger.propagate
    logger.handlers, logger.propagate = [Keep(logging.WARNING)], False
    try:
        yield records
    finally:
        logger.handlers, logger.propagate = handlers, propagate


def load_every_config(release: Path, rows: dict, splits: list[str], loads, logged: list[logging.LogRecord]) -> None:
    from datasets import get_dataset_config_names, load_dataset

    try:
        names = get_dataset_config_names(str(release))
    except Exception as e:  # noqa: BLE001 - any loader failure is the finding
        loads.fail(f"config names: {type(e).__name__}: {e}")
        return
    for c in published_configs(rows, splits):
        if c.name not in names:
            loads.fail(f"{c.name}: not a config of the folder")
            continue
        before = len(logged)
        try:
            dataset = load_dataset(str(release), c.name, streaming=True)
            for split, stream in dataset.items():
                next(iter(stream))
                if stream.features != features(c.table):
                    loads.fail(f"{c.name}/{split}: features {stream.features} differ from the schema module's")
        except Exception as e:  # noqa: BLE001
            loads.fail(f"{c.name}: {type(e).__name__}: {first_line(e)[:200] or '(no message)'}")
            continue  # what datasets logged on the way is this failure
        for record in logged[before:]:
            message = f"{c.name}: datasets logged {record.levelname}: {first_line(record.getMessage())[:200]}"
            if record.levelno >= logging.ERROR:
                loads.fail(message)
            elif not loads.note:
                loads.note = message


def first_line(text) -> str:
    """The first line of an error's text; "" for an empty one (datasets raises some without a message)."""
    return (str(text).splitlines() or [""])[0]
