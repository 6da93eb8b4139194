"""Calibration files: what the GPU benchmark (scripts/bench_gpu.py) measured, read by `plan` in place of an assumed
utilisation.

A file holds the device, the versions, the rows the benchmark printed and, per backend and precision, the share of
the device's dense peak that one forward over the prompts reached (distribution mode: prefill only). `plan`
costs prefill at that share and generate mode's decode steps separately, as memory-bound.

The bundled reference (`calibration-h100-2026-11-23.json`) holds the figures measured on 2026-11-23 on an H100
80 GB (torch 2.11, transformers 5.17) with the code before the GPU paths were added (CHANGELOG.md); it is not a run of
scripts/bench_gpu.py, and says so.

`whole_model` entries are whole-model measurements of one prompt at one precision (scripts/bench_whole_model.py
writes them): pairs/s through the kit, keyed by the batch composition they ran at (`rows_per_forward`: the rows of
its long forwards, the prefix passes of a document-first prompt), with the FLOPs a pair that rate is for, the
device, the backend (`transformers` when absent), the fp8 granularity and the date. `plan` prices no paper-scale row
of that prompt below its figure, nor a setting that was not measured below the figure of the nearest one that was
(generation/planning/whole_model.py). The reference holds the two of 2026-11-27 (CHANGELOG.md, 2026-11-27).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from generation.storage.atomic_files import write_text_atomic

REFERENCE = Path(__file__).with_name("calibration-h100-2026-11-23.json")


@dataclass(frozen=True)
class Device:
    """Dense tensor-core peaks (no sparsity) and memory bandwidth, from the vendor's data sheets."""

    name: str
    peak_flops: dict  # precision ("bf16", "fp8") -> FLOP/s
    bandwidth: float  # bytes/s
    memory: int  # bytes, as the device reports its total (nvidia-smi's memory.total)


# NVIDIA H100 SXM5 80 GB and H200 SXM 141 GB data sheets: 989 / 1,979 TFLOP/s dense bf16 / fp8; 3.35 / 4.8 TB/s.
# Memory as the device reports it: an H200's "141 GB" shows as 143,771 MiB in nvidia-smi (140.4 GiB; 141e9 bytes
# would be 131.3 GiB, 9 GiB short). The H100 keeps the 80 GiB the plan was calibrated with (it reports 81,559 MiB).
DEVICES = {
    "H100": Device("H100 SXM", {"bf16": 989e12, "fp8": 1979e12}, 3.35e12, 80 * 2**30),
    "H200": Device("H200 SXM", {"bf16": 989e12, "fp8": 1979e12}, 4.8e12, 143_771 * 2**20),
}


def device_spec(name: str) -> Device | None:
    """The spec of a device named like torch.cuda.get_device_name() ("NVIDIA H100 80GB HBM3"), if known."""
    return next((spec for key, spec in DEVICES.items() if key in name.upper()), None)


def same_device(a: str, b: str) -> bool:
    """Whether two device names are one kind of GPU: the same spec when both are known, else the same name."""
    spec_a, spec_b = device_spec(a), device_spec(b)
    return spec_a is spec_b if spec_a is not None and spec_b is not None else a == b


def short_device(name: str) -> str:
    """A device's short name ("H100" for "NVIDIA H100 80GB HBM3"); an unknown device keeps its name."""
    return next((key for key in DEVICES if key in name.upper()), name)


class CalibrationError(ValueError):
    pass


WHOLE_MODEL_KEYS = ("prompt", "precision", "shape", "device", "measured", "pairs_per_s", "rows_per_forward",
                    "flops_per_pair")  # fmt: skip


def check_whole_model(path, entries) -> list:
    """The `whole_model` entries, each with every key and positive figures; else a CalibrationError naming it."""
    if not isinstance(entries, list):
        raise CalibrationError(f"{path}: whole_model is not a list of measurements")
    for i, entry in enumerate(entries):
        missing = [k for k in WHOLE_MODEL_KEYS if not isinstance(entry, dict) or entry.get(k) in (None, "")]
        if missing:
            raise CalibrationError(f"{path}: whole_model[{i}] has no {', '.join(missing)} (a figure names its device "
                                   "and date)")  # fmt: skip
        for key in ("pairs_per_s", "rows_per_forward", "flops_per_pair"):
            if not isinstance(entry[key], (int, float)) or entry[key] <= 0:
                raise CalibrationError(f"{path}: whole_model[{i}].{key} = {entry[key]!r}, not a positive number")
    return entries


@dataclass
class Calibration:
    device: str
    source: str  # what measured it: the benchmark's command line, or the reference's provenance
    versions: dict
    # backend -> precision -> share of the dense peak in one forward (prefill); "rerank" as a backend key holds the
    # reranker's figure
    utilisation: dict
    peak_flops: dict  # precision -> the device's dense peak, FLOP/s
    bandwidth: float | None  # the device's memory bandwidth, bytes/s
    rows: list = field(default_factory=list)
    whole_model: list = field(default_factory=list)  # whole-model measurements by prompt, precision and composition

    def share(self, backend: str, precision: str) -> float | None:
        return self.utilisation.get(backend, {}).get(precision)

    def add_whole_model(self, entries: list[dict], device: str) -> Calibration:
        """This calibration with `entries` (scripts/bench_whole_model.py's) replacing its whole-model figures of the
        same setting and composition, named for the device they were measured on: the calibration's device becomes
        it (its peaks and bandwidth from the device table), and the shares keep the device they were measured on,
        row by row."""

        def key(e: dict) -> tuple:
            setting = (
                e["prompt"],
                e["precision"],
                e.get("fp8_granularity", "per-tensor"),
                e.get("backend", "transformers"),
            )
            return (*setting, e["device"], round(e["rows_per_forward"]))

        if not same_device(device, self.device):
            for row in self.rows:
                row.setdefault("device", self.device)
            self.source += (
                f". Whole-model figures of {device} added by scripts/bench_whole_model.py; the shares above stay the "
                f"{self.device}'s, each row naming its device"
            )
            self.device = device
            spec = device_spec(device)
            if spec is not None:
                self.peak_flops, self.bandwidth = dict(spec.peak_flops), spec.bandwidth
        replaced = {key(e) for e in entries}
        self.whole_model = [e for e in self.whole_model if key(e) not in replaced] + entries
        return self

    def save(self, path: Path) -> None:
        write_text_atomic(path, json.dumps(self.__dict__, indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> Calibration:
        try:
            data = json.loads(Path(path).read_text())
        except OSError as e:
            raise CalibrationError(f"{path}: cannot read ({e.strerror})") from None
        except json.JSONDecodeError as e:
            raise CalibrationError(f"{path}: not JSON (line {e.lineno}: {e.msg})") from None
        missing = {"device", "source", "versions", "utilisation", "peak_flops", "bandwidth"} - set(
            data if isinstance(data, dict) else ()
        )
        if missing:
            raise CalibrationError(f"{path}: not a calibration file (no {', '.join(sorted(missing))})")
        for backend, shares in data["utilisation"].items():
            for precision, value in shares.items():
                if not isinstance(value, (int, float)) or not 0 < value <= 1:
                    raise CalibrationError(f"{path}: utilisation.{backend}.{precision} = {value!r}, not in (0, 1]")
        for precision, value in data["peak_flops"].items():
            if not isinstance(value, (int, float)) or value <= 0:
                raise CalibrationError(f"{path}: peak_flops.{precision} = {value!r}, not a positive number")
        return cls(
            data["device"],
            data["source"],
            data["versions"],
            data["utilisation"],
            data["peak_flops"],
            data["bandwidth"],
            data.get("rows", []),
            check_whole_model(path, data.get("whole_model", [])),
        )
