"""The stage registry, the `Stage` template, the executors' Slurm file, and the import structure."""

import ast
import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from generation.corpus.topics import load_topics
from generation.profiles.profile import load_profile
from generation.stages import PIPELINE, REGISTRY, Input, Stage, pipeline_table
from generation.stages.base import ProfiledStage, StageSummary
from generation.stages.pool import PoolStage, PoolSummary
from generation.stages.questions import QuestionsStage
from generation.storage.atomic_files import ParquetSink
from generation.storage.shards import Shard, ShardError

ROOT = Path(__file__).resolve().parents[3]


@dataclass(slots=True)
class CountSummary(StageSummary):
    questions: int = 0


class CountSubquestions(Stage[CountSummary]):
    """A stage written as a new stage is: its summary's fields, one class with its declaration and its own work (here,
    one row per question)."""

    name = "count-subquestions"
    writes = "subq_counts"
    reads = (Input("questions", "folder from `researchy-subq questions`", (QuestionsStage,)),)
    sections = ("bm25",)
    unit = "questions"
    summary_type = CountSummary
    runs = 0

    def __init__(self, profile, out, questions):
        super().__init__(profile, out, questions=questions)

    def run_shard(self, shard, output, summary, progress, executor) -> dict:
        type(self).runs += 1
        with ParquetSink(output.path(shard), "runs") as sink:
            for topic in load_topics(self.inputs["questions"], shard):
                sink.write_rows(
                    [{"qid": topic.qid, "docid": "-", "rank": len(topic.subquestions), "score": 0.0, "stage": "count"}]
                )
                summary.questions += 1
        return {"questions": summary.questions}


def test_a_new_stage_gets_shards_records_skips_and_refusals_from_the_template(tmp_path, sample_questions):
    profile = load_profile("demo")
    summaries = [CountSubquestions(profile, tmp_path, sample_questions).run(Shard(i, 2)) for i in range(2)]
    assert sum(s.questions for s in summaries) == pq.read_table(sample_questions / "questions.parquet").num_rows
    assert all((tmp_path / "_done" / f"subq_counts-{Shard(i, 2).label}.json").is_file() for i in range(2))
    again = CountSubquestions(profile, tmp_path, sample_questions).run(Shard(0, 2))
    assert again.skipped and again.skipped_shards == 1 and CountSubquestions.runs == 2
    with pytest.raises(ShardError, match="cut into 2 shards"):
        CountSubquestions(profile, tmp_path, sample_questions).run(Shard(0, 3))
    deeper = profile.model_copy(update={"bm25": profile.bm25.model_copy(update={"depth": 7})})
    with pytest.raises(ShardError, match="made under config"):
        CountSubquestions(deeper, tmp_path, sample_questions).run(Shard(1, 2))
    assert not list((tmp_path / "_locks").glob("*.lock")), "a finished run leaves no lock"


def test_a_summary_names_its_fields_and_refuses_others():
    summary = PoolSummary("pool", "00000-of-00001")
    summary.questions += 3
    summary.outputs.append(Path("candidates-00000-of-00001.parquet"))
    assert summary.as_dict() == {
        "stage": "pool",
        "shard": "00000-of-00001",
        "skipped": False,
        "outputs": ["candidates-00000-of-00001.parquet"],
        "questions": 3,
        "candidates": 0,
        "by_source": {"bm25": 0, "rerank": 0, "clicked": 0},
        "clicked_total": 0,
        "clicked_missing": 0,
    }
    with pytest.raises(AttributeError, match="candidate"):
        _ = summary.candidate
    with pytest.raises(AttributeError, match="candidate"):
        summary.candidate = 1  # slotted: a misspelt field is refused, not added


def test_a_stage_that_reads_profile_sections_is_made_and_hashed_with_a_profile(tmp_path):
    assert [s.name for s in REGISTRY.values() if s.sections and not issubclass(s, ProfiledStage)] == []
    with pytest.raises(TypeError, match="stage pool needs a profile"):
        PoolStage(None, tmp_path, questions=tmp_path, runs=tmp_path, corpus=tmp_path)
    with pytest.raises(TypeError, match=r"stage count-subquestions's config hash covers profile sections \('bm25',\)"):
        CountSubquestions.config_hash(None)


def test_the_type_check_covers_all_our_python_and_exempts_none_of_it():
    with open(ROOT / "pyproject.toml", "rb") as f:
        mypy = tomllib.load(f)["tool"]["mypy"]
    assert {"builder", "generation", "scripts", "examples"} <= set(mypy["files"])
    # the overrides only stop mypy following third-party packages: none switches a check off or names our code
    assert [o["module"] for o in mypy["overrides"] if set(o) != {"module", "follow_imports"}] == []
    ours = [m for o in mypy["overrides"] for m in o["module"] if m.split(".")[0] in {"builder", "generation"}]
    assert ours == []


def test_every_stage_declares_what_it_reads_and_writes():
    for stage in REGISTRY.values():
        assert stage.name and stage.produces and stage.__doc__ and stage.unit
        assert all(isinstance(given, Input) and given.producers for given in stage.reads)
        assert all(producer in PIPELINE for given in stage.reads for producer in given.producers), stage.name
        assert not stage.sharded or stage.writes, f"{stage.name}: a sharded stage writes shards"
    order = [s.name for s in PIPELINE]
    for stage in PIPELINE:
        for given in stage.reads:  # inputs come from earlier stages
            assert all(order.index(p.name) < order.index(stage.name) for p in given.producers), stage.name


@pytest.mark.subprocess
def test_the_documented_stage_tables_are_the_registry():
    for page in ("docs/regenerating.md", "docs/architecture.md", "docs/reference/stages.md"):
        assert pipeline_table() in (ROOT / page).read_text(), f"regenerate {page}'s stage table: researchy-subq stages"
    cli = subprocess.run([sys.executable, "-m", "builder.cli.main", "stages"], capture_output=True, text=True, cwd=ROOT)
    assert cli.returncode == 0 and cli.stdout.strip() == pipeline_table()


def kit_modules() -> dict[str, Path]:
    """module name -> its file, for every module of the kit's two packages (a package is its __init__.py)."""
    modules = {}
    for path in [*ROOT.glob("generation/**/*.py"), *ROOT.glob("builder/**/*.py")]:
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def module_imports() -> dict[str, set[str]]:
    """module -> the kit's modules it imports, function-level (lazy) imports included."""
    modules = kit_modules()
    graph = {}
    for name, path in modules.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom) and node.module in modules:
                submodules = {f"{node.module}.{a.name}" for a in node.names} & modules.keys()
                edges |= submodules or {node.module}
        graph[name] = edges - {name}
    return graph


def test_a_backend_is_a_registry_entry_that_profiles_accept(tmp_path):
    """Adding a backend is its module and one entry in generation/profiles/backend_registry.py: profiles take their
    choices from the registries (ray: the Ray executor over a judge backend)."""
    from typing import get_args

    from generation.backends import JUDGE_BACKENDS, RERANK_BACKENDS, make_judge
    from generation.profiles.profile import JudgeConfig, Rerank

    assert set(get_args(JudgeConfig.model_fields["backend"].annotation)) == {*JUDGE_BACKENDS, "ray"}
    assert set(get_args(Rerank.model_fields["backend"].annotation)) == set(RERANK_BACKENDS)
    with pytest.raises(ValueError, match="no judge backend 'nope' .known: transformers, vllm, bi-encoder, openai"):
        make_judge(load_profile("demo").judge, "nope")


def test_the_profiles_prompt_choices_are_the_prompt_registry():
    """The prompt ids are listed twice: the profile's `judge.prompt` Literal (generation/profiles/sections.py, a top
    module, which may not import generation.judging) and the keys of generation/judging/prompts.py's REGISTRY. Adding
    a prompt to one and not the other fails here."""
    from typing import get_args

    from generation.judging.prompts import REGISTRY
    from generation.profiles.profile import JudgeConfig

    assert list(get_args(JudgeConfig.model_fields["prompt"].annotation)) == list(REGISTRY)


def test_no_import_loop_lazy_imports_included():
    graph, state, stack = module_imports(), {}, []

    def visit(module):
        state[module] = "open"
        stack.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                loop = stack[stack.index(target) :] + [target]
                pytest.fail("import loop: " + " -> ".join(loop))
            if target not in state:
                visit(target)
        stack.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module)


def package_imports() -> dict[tuple[str, str], list[str]]:
    """(package, package it imports) -> the module imports that make the arrow. A module's package is the folder
    it sits in (`generation` for generation/errors.py, `generation.stages` for generation/stages/judge.py)."""
    modules = kit_modules()
    package = {name: ".".join(path.relative_to(ROOT).parent.parts) for name, path in modules.items()}
    arrows: dict[tuple[str, str], list[str]] = {}
    for module, targets in module_imports().items():
        for target in sorted(targets):
            if package[module] != package[target]:
                arrows.setdefault((package[module], package[target]), []).append(f"{module} -> {target}")
    return arrows


def test_packages_import_each_other_one_way():
    """A loop between packages is invisible between files: judging/batch_files.py -> backends/openai_server.py and
    backends/hf.py -> judging/judges.py make no file loop, yet neither package can be read without the other."""
    arrows = package_imports()
    both_ways = [
        f"{a} <-> {b}: {', '.join(arrows[a, b])} / {', '.join(arrows[b, a])}"
        for a, b in sorted(arrows)
        if a < b and (b, a) in arrows
    ]
    assert not both_ways, "packages importing each other:\n" + "\n".join(both_ways)


def test_no_kit_module_imports_the_stand_ins():
    """builder/standins/ holds the stand-ins of tests and benchmarks (shipped so an installed wheel can run them);
    the kit's own modules build on none of them (builder/standins/paper_shaped.py imports the sampler, not back)."""
    found = [
        found
        for (a, b), imports in package_imports().items()
        if b.startswith("builder.standins") and not a.startswith("builder.standins")
        for found in imports
    ]
    assert not found, "kit modules importing a stand-in:\n" + "\n".join(found)


def test_a_package_s_own_modules_import_none_of_its_subpackages():
    """The modules at a package's top (generation/errors.py, notices.py, progress.py...) are what its subpackages
    build on; one of them importing a subpackage is an arrow back up."""
    arrows = package_imports()
    back_up = [f"{a} -> {b}: {', '.join(found)}" for (a, b), found in sorted(arrows.items()) if b.startswith(a + ".")]
    assert not back_up, "arrows back up:\n" + "\n".join(back_up)


# builder/release/'s groups, top first: each may import those after it, never one before it. publish validates
# before it commits. validate shares no derivation with assemble: what both need (the layout, the contract, the topic
# index, the training configs' rule, the card's text) sits in builder/release/'s own modules, below both; the pilot's
# record and text lower still, in builder/pilot/.
RELEASE_GROUPS = ("builder.release.publish", "builder.release.validate", "builder.release.assemble")


def test_the_release_groups_import_downward_only_and_validate_derives_apart_from_assemble():
    """Every subpackage of builder/release/ has its place in RELEASE_GROUPS, and no arrow runs back up it. Their
    common ground, builder/release/'s own modules (layout.py, contract.py, topic_index.py...), imports none of them
    (the test above). validate imports nothing from assemble: a bug in a derivation made by both would pass."""
    arrows = package_imports()
    subpackages = {
        p.parent.relative_to(ROOT).as_posix().replace("/", ".") for p in ROOT.glob("builder/release/*/__init__.py")
    }
    assert subpackages == set(RELEASE_GROUPS)
    back_up = [
        f"{a} -> {b}: {', '.join(found)}"
        for (a, b), found in sorted(arrows.items())
        if a in RELEASE_GROUPS and b in RELEASE_GROUPS and RELEASE_GROUPS.index(a) > RELEASE_GROUPS.index(b)
    ]
    assert not back_up, "arrows back up builder/release/:\n" + "\n".join(back_up)
    assert ("builder.release.publish", "builder.release.validate") in arrows
    shared = arrows.get(("builder.release.validate", "builder.release.assemble"), [])
    assert not shared, "validate imports assemble:\n" + "\n".join(sorted(shared))


def test_generation_never_imports_builder_and_command_modules_import_no_other_command_module():
    graph = module_imports()
    assert not [
        m for m, edges in graph.items() if m.startswith("generation") and any(e.startswith("builder") for e in edges)
    ]
    commands = {"builder.cli.stages", "builder.cli.release", "builder.cli.analysis"}
    assert all(not (graph[m] & commands) for m in commands)


def test_slurm_file_names_the_shard_count_and_a_time_from_the_plan(tmp_path):
    from generation.planning.slurm import SlurmError, sbatch_script

    args = ["--profile", "paper", "--subquestions", "w/q", "--candidates", "w/c", "--index", "w/i", "--out", "w/j"]
    script = sbatch_script("judge", 64, args, gpu_hours=7616, gpus_per_task=4)
    assert "#SBATCH --array=0-63" in script and "--num-shards 64" in script
    assert "SLURM_ARRAY_TASK_COUNT" not in script  # `sbatch --array=5,17` runs shards 5 and 17 of 64
    assert "#SBATCH --time=1-13:12:00" in script  # 7616 / 64 / 4 = 29.75 h, x 1.25 = 37.19 h, up to the minute
    with pytest.raises(SlurmError, match="--candidates"):
        sbatch_script("judge", 8, ["--profile", "paper", "--out", "x"], time="2:00:00")
    with pytest.raises(SlurmError, match="give --time, or --gpu-hours"):
        sbatch_script("judge", 8, args)
    with pytest.raises(SlurmError, match="no sharded stage"):
        sbatch_script("index", 8, args, time="1:00:00")


@pytest.mark.subprocess
def test_generated_slurm_task_runs_its_shard(tmp_path, sample_index, sample_questions):
    """The sbatch file, run by bash as Slurm would run array task 1: it activates the venv and runs shard 1 of 3."""
    from generation.planning.slurm import sbatch_script

    out = tmp_path / "runs"
    script = tmp_path / "retrieve.sbatch"
    script.write_text(
        sbatch_script(
            "retrieve",
            3,
            [
                "--profile",
                "demo",
                "--questions",
                str(sample_questions),
                "--index",
                str(sample_index / "index"),
                "--out",
                str(out),
            ],
            time="0:10:00",
            gpus_per_task=0,
            venv=Path(sys.prefix),
        )
    )
    env = {**os.environ, "SLURM_ARRAY_TASK_ID": "1"}
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in out.glob("bm25-*.parquet")] == ["bm25-00001-of-00003.parquet"]


@pytest.mark.subprocess
def test_bundled_slurm_example_is_what_the_cli_generates():
    example = (ROOT / "scripts" / "slurm_judge_array.sh").read_text()
    command = next(line for line in example.splitlines() if line.startswith("# Generated by: "))[
        len("# Generated by: ") :
    ]
    done = subprocess.run(
        command,
        shell=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )
    assert done.returncode == 0, done.stderr
    assert example == done.stdout
