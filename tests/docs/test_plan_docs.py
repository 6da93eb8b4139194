"""The docs' `plan` figures come from the commands that print them (tests/docs/plan_docs.py): each command of
docs/benchmarks-planning.md's GPU-hours section is followed by the lines it prints, and the prose that restates a figure
restates one of those. The commands themselves run after the demo (tests/end_to_end/test_demo_paste.py)."""

from tests.docs.plan_docs import PROSE, check_prose, documented_runs, figures


def test_each_documented_plan_command_shows_what_it_prints():
    runs = documented_runs()
    assert len(runs) >= 4
    for command, lines in runs:
        assert "researchy-subq plan --profile " in command and "demo-output/questions/train" in command
        assert lines and all(len(line) <= 100 for line in lines), "the default view: 100 columns"


def test_the_prose_figures_are_the_blocks_figures():
    assert all(figures(sentence) for _, sentence in PROSE)
    check_prose()


def test_a_figure_the_blocks_do_not_show_is_named(tmp_path):
    """A planted wrong figure (the 522 hours the docs once gave for the variant) is named."""
    import pytest

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "judging.md").write_text("The variant costs 522.0 GPU-hours\nin bf16.\n")
    with pytest.raises(AssertionError, match=r"docs/judging.md: 522.0 \(in 'The variant costs 522.0 GPU-hours"):
        check_prose([("docs/judging.md", "The variant costs 522.0 GPU-hours in bf16")], tmp_path)
