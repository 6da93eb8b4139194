"""Terminal tables for results the CLI and the demo both print: agreement, simulation, validation."""
from __future__ import annotations

from rich.table import Table
from rich.text import Text

from generation.progress import console


def print_agreement(result: dict) -> None:
    coverage = result["coverage"]
    console.print(f"{coverage['both']:,} shared pairs; {coverage['only_a']:,} only in A, {coverage['only_b']:,} only in B",
                  highlight=False)
    table = Table(title="agreement (A vs B)")
    for column in ("measure", "value", "95% interval"):
        table.add_column(column, justify="right")
    for name, value in result["measures"].items():
        low, high = result.get("confidence_95", {}).get(name, (None, None))
        table.add_row(name, f"{value:.3f}", Text(f"[{low:.3f}, {high:.3f}]") if low is not None else "")
    console.print(table)
    levels = result["confusion"]["levels"]
    matrix = Table(title="confusion (rows A, columns B)")
    matrix.add_column("A \\ B")
    for lv in levels:
        matrix.add_column(str(lv), justify="right")
    for lv, row in zip(levels, result["confusion"]["rows_a_columns_b"]):
        matrix.add_row(str(lv), *(f"{v:,}" for v in row))
    console.print(matrix)
    binary = ", ".join(f">={t}: {v['agreement']:.3f} (kappa {v['kappa']:.3f})" for t, v in result["binary"].items())
    console.print(f"binary agreement at each threshold: {binary}", highlight=False, markup=False)
    if "system_ranking" in result:
        console.print(f"system ranking Kendall tau: {result['system_ranking']['kendall_tau']}")


def print_simulation(results: dict, questions: int, repeats: int, threshold: int) -> None:
    budgets = sorted(next(iter(results.values())))
    for metric in ("precision", "recall", "alpha_ndcg@10"):
        table = Table(title=f"{metric} by budget ({questions} questions, {repeats} seeded repeats, relevant = level "
                            f">= {threshold}; mean +- 95% interval half-width)")
        table.add_column("policy")
        for b in budgets:
            table.add_column(f"{b:.0%}", justify="right")
        for policy, by_budget in results.items():
            table.add_row(policy, *(f"{by_budget[b][metric]['mean']:.3f}\u00b1{by_budget[b][metric]['high'] - by_budget[b][metric]['mean']:.3f}"
                                    for b in budgets))
        console.print(table, width=max(console.width, 40 + 14 * len(budgets)))


def print_validation(report) -> None:
    table = Table(title=f"validate {report.release}")
    for column in ("", "check", "failures", "examples"):
        table.add_column(column, overflow="fold")
    for check in report.checks:
        mark = Text("ok", style="green") if check.ok else Text("FAIL", style="bold red")
        examples = "\n".join(str(e) for e in check.examples) or check.note
        table.add_row(mark, Text(check.name), f"{check.failures:,}" if check.failures else "", Text(examples))
    console.print(table)

