"""Where each price of the plan comes from, in words: which calibration row a share is (its run, device and date),
and in short for the compact view ("share H100 2026-11-23", "shares H100 2026-11-23/26")."""

from __future__ import annotations

from generation.judging.calibration import Calibration, short_device


def calibration_row(calibration: Calibration, precision: str, share: float, mode: str = "distribution") -> dict | None:
    """Which of the calibration's rows a share is: the kit's run at that precision and share; None when none is."""
    return next(
        (
            r
            for r in calibration.rows
            if r.get("precision") == precision
            and r.get("mode") == mode
            and str(r.get("run", "")).startswith("kit")
            and r.get("share_of_peak") is not None
            and abs(r["share_of_peak"] - share) < 5e-4
        ),
        None,
    )


def measured_device(calibration: Calibration, row: dict | None) -> str:
    """A calibration row's device: its own (a file that gathers several devices' figures names each), else the file's."""
    return str((row or {}).get("device") or calibration.device)


def measured_date(calibration: Calibration, row: dict) -> str:
    """A calibration row's date: its own, else the file's."""
    return str(row.get("measured") or calibration.versions.get("measured") or "date not recorded")


def measured_on(calibration: Calibration, precision: str, share: float, mode: str = "distribution") -> str:
    """For the plan to say what each row is priced from: the share's run (a shape, a batch and a prompt length), its
    device and date; empty when no row of the calibration is that share."""
    row = calibration_row(calibration, precision, share, mode)
    if row is None:
        return ""
    tokens = f", {row['prompt_tokens']:,} tokens" if row.get("prompt_tokens") else ""
    when = measured_date(calibration, row)
    return (
        f" on {row['shape']}, {row['run']}, batch {row['batch']}{tokens} ({measured_device(calibration, row)}, {when})"
    )


def joined_dates(dates: list[str]) -> str:
    """Dates as one string: "2026-11-23/26" for two days of one month, else joined by " + "."""
    dates = sorted(set(dates))
    if len(dates) > 1 and all(len(d) == 10 and d[:8] == dates[0][:8] for d in dates):
        return dates[0] + "".join(f"/{d[8:]}" for d in dates[1:])
    return " + ".join(dates)


def component_origin(
    calibration: Calibration, precision: str, share: float, suffix: tuple[float, str] | None, given: bool
) -> str:
    """In short, where a row's component price comes from: the measured shares' device and dates (the prefill's, and
    for a document-first prompt its suffixes' `suffix`: share and source), or what was given or assumed."""
    if given:
        return "--utilisation (given)"
    rows = [calibration_row(calibration, precision, share)]
    if suffix is not None:
        if "ASSUMED" in suffix[1]:
            return f"share {short_device(measured_device(calibration, rows[0]))}; suffixes ASSUMED"
        rows.append(
            calibration_row(calibration, precision, suffix[0], "suffix")
            or calibration_row(calibration, "bf16", suffix[0], "suffix")
        )
    dates = joined_dates([measured_date(calibration, r) if r else "date not recorded" for r in rows])
    devices = "/".join(dict.fromkeys(short_device(measured_device(calibration, r)) for r in rows))
    return f"{'shares' if suffix is not None else 'share'} {devices} {dates}"


def rerank_origin(calibration: Calibration, precision: str, share: float, given: bool) -> str:
    if given:
        return "--utilisation (given)"
    row = calibration_row(calibration, precision, share, "rerank")
    when = measured_date(calibration, row) if row else "date not recorded"
    return f"share {short_device(measured_device(calibration, row))} {when}"
