"""The release's typed contract (builder/release/contract.py) and a validator that derives apart from the builder:
manifest.json is read and written through the contract and published with its JSON schema; a derivation made
wrong in build-release is caught by validate's own (builder/release/validate/statistics.py, retrieval_complexity.py),
not made again there."""

import json
import re
import shutil

import pytest

from builder.release.validate.folder import validate
from generation.profiles.profile import Profile

SYNTHETIC_RELEASE = dict(subquestions=300, judgments=4000, test_share=0.25, shards=2, seed=5)


def failing(report) -> dict[str, list]:
    return {c.name: c.examples for c in report.checks if not c.ok}


def test_the_manifest_is_its_published_schema_and_the_contract_refuses_other_keys(release, tmp_path):
    """manifest.schema.json beside manifest.json is the contract's JSON schema: a user's tool (here jsonschema)
    accepts the manifest by it, and both it and the kit refuse a key the contract does not name."""
    import jsonschema

    from builder.release.contract import MANIFEST_SCHEMA, ManifestError, manifest_json_schema, read_manifest

    schema = json.loads((release / MANIFEST_SCHEMA).read_text())
    assert (release / MANIFEST_SCHEMA).read_text() == manifest_json_schema()
    manifest = json.loads((release / "manifest.json").read_text())
    jsonschema.validate(manifest, schema)
    assert read_manifest(release).as_json() == manifest
    # the profile is written whole, its defaults included, as before the contract
    assert manifest["profile"] == Profile.model_validate(manifest["profile"]).model_dump()
    assert "bandit" in manifest["profile"] and "attention" in manifest["profile"]["judge"]
    copy = tmp_path / "release"
    shutil.copytree(release, copy)
    manifest["models"]["judge_temperature"] = 0
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(jsonschema.ValidationError, match="judge_temperature"):
        jsonschema.validate(manifest, schema)
    with pytest.raises(ManifestError, match=r"manifest.json: models.judge_temperature: Extra inputs are not permitted"):
        read_manifest(copy)
    assert list(failing(validate(copy, load=False)).values()) == [
        ["manifest.json: models.judge_temperature: Extra inputs are not permitted"]
    ]


def schema_properties(schema: dict) -> list[tuple[str, str, dict]]:
    """(record, field, property) for every property of the schema: the top level's and each definition's."""
    records = {"manifest.json": schema, **schema["$defs"]}
    return [(name, field, prop) for name, record in records.items() for field, prop in record["properties"].items()]


def test_every_field_of_the_manifest_schema_says_what_it_holds():
    """Every property of the manifest's JSON schema, nested records included, has a description (what a user's tools
    show); the schema names its draft (`$schema`, which jsonschema picks its validator by) and itself (`$id`: its
    file in the kit's repository, at the tag of the kit's version that wrote it)."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    from builder.release.contract import SCHEMA_URN, manifest_schema, manifest_schema_id

    schema = manifest_schema()
    properties = schema_properties(schema)
    assert len(properties) > 300 and len({name for name, _, _ in properties}) > 40
    undescribed = [f"{name}.{field}" for name, field, prop in properties if not prop.get("description", "").strip()]
    assert undescribed == []
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)
    assert validator_for(schema, default=None) is Draft202012Validator
    # the id names this schema: the same for the same schema, another for any change to it
    body = {key: value for key, value in schema.items() if key != "$id"}
    assert schema["$id"] == manifest_schema_id(body) and schema["$id"].startswith(SCHEMA_URN)
    edited = json.loads(json.dumps(body))
    edited["properties"]["repo"]["description"] += " (edited)"
    assert manifest_schema_id(edited) != schema["$id"]


def test_the_manifest_reference_states_each_fields_type_as_the_schema_does():
    """docs/reference/manifest.md's type column (builder/release/manifest_reference.py) on the schema's own
    properties: a record links to its table, a union inside an array or object is bracketed, keys a Literal names
    are listed, bounds are said."""
    from builder.release.contract import manifest_schema
    from builder.release.manifest_reference import records_in_order, type_text

    schema = manifest_schema()
    defs = schema["$defs"]
    assert type_text(schema["properties"]["pilot"]) == "[`PilotEntry`](#pilotentry) or null"
    assert type_text(defs["PilotAgreement"]["properties"]["confidence_95"]) == (
        "(object: string -> array of (number or null)) or null"
    )
    assert (
        type_text(defs["PilotRecord"]["properties"]["settings"])
        == "object: `A` or `B` -> [`PilotSetting`](#pilotsetting)"
    )
    assert type_text(defs["BM25"]["properties"]["b"]) == "number (>= 0, <= 1)"
    assert type_text(defs["PilotRecord"]["properties"]["schema_version"]) == "`1`"
    order, held_by = records_in_order(schema)
    assert order[0] == "manifest.json" and sorted(order[1:]) == sorted(defs)  # every record once
    assert held_by["PilotPlanRow"] == ["[`PilotBill`](#pilotbill) `rows`", "[`PilotBill`](#pilotbill) `headline`"]


def test_a_statistic_build_release_counts_wrong_is_caught_by_validate(synthetic_release, monkeypatch):
    """build-release with a wrong provenance rule (a document counted as BM25-only when the reranker also has it):
    the manifest and the card state its numbers, consistently; validate counts by its own code and names the share."""
    from builder.release.assemble import stats

    monkeypatch.setitem(stats.ROW_CLASSES, "bm25_only", lambda b: b.bm25)
    release, _ = synthetic_release("wrong-provenance", **SYNTHETIC_RELEASE)
    found = failing(validate(release, load=False))
    assert any("provenance_share" in e for examples in found.values() for e in examples), found


def test_a_complexity_build_release_derives_wrong_is_caught_by_validate(synthetic_release, monkeypatch):
    """build-release with a wrong completeness (every answering document counted as covering its whole question):
    validate derives the complexity columns by its own code and names the questions that differ."""
    from builder.release.assemble.complexity import ComplexityAccumulator

    right = ComplexityAccumulator.result

    def whole(self):
        values = right(self)
        values["completeness"] = (values["completeness"] > 0).astype(float)
        return values

    monkeypatch.setattr(ComplexityAccumulator, "result", whole)
    release, _ = synthetic_release("wrong-complexity", **SYNTHETIC_RELEASE)
    found = failing(validate(release, load=False))
    assert any("completeness of qid" in e for examples in found.values() for e in examples), found


def test_the_cards_config_entries_are_read_through_the_contract(release, tmp_path):
    """The card's `configs:` entries are written and read through `ConfigFiles`: a key it does not name (a
    `revision` pinned by hand) is named, with its entry, not passed over."""
    copy = tmp_path / "release"
    shutil.copytree(release, copy)
    card = (copy / "README.md").read_text()
    assert "  default: true\n" in card
    (copy / "README.md").write_text(card.replace("  default: true\n", "  default: true\n  revision: main\n", 1))
    found = failing(validate(copy, load=False))
    assert any(
        e == "README.md YAML configs entry 0 (judgments): revision: Extra inputs are not permitted"
        for examples in found.values()
        for e in examples
    ), found


def test_completeness_exactly_at_the_threshold_is_not_retrieval_complex_in_any_order():
    """A question of K = 10 sub-questions whose four answering documents answer 2, 2, 5 and 5 of them (none all: not
    answerable): its completeness is (2 log 2 + 2 log 5) / (4 log 10) = 0.5 exactly, the threshold, but the float64
    sum gives 0.49999999999999994 in some orders. Build (assemble/complexity.py, sums in key order) and validate (validate/retrieval_complexity.py,
    in document order) both judge the stored float32 value, so neither calls it retrieval-complex, whatever ids the
    documents have (a synthetic release at 6M judgments held such a question: validate failed its own build)."""
    import numpy as np
    import pyarrow as pa

    from builder.release.assemble.complexity import ComplexityAccumulator
    from builder.release.validate.retrieval_complexity import Answers

    k, answers = 10, [2, 2, 5, 5]
    subquestion = np.concatenate([np.arange(m) for m in answers])
    rng = np.random.default_rng(0)
    for _ in range(40):
        ids = rng.choice(10**9, len(answers), replace=False)
        document = np.repeat(ids, answers).astype(np.int64)
        order = rng.permutation(len(document))
        args = (
            np.zeros(len(document), np.int64)[order],
            subquestion[order],
            document[order],
            pa.array([5] * len(document)),
        )
        build = ComplexityAccumulator(np.array([k]), np.zeros(k, np.int64), 4, 0.5)
        check = Answers(np.array([k]), np.zeros(k, np.int64), 4, 0.5)
        build.add(*args)
        check.add(*args)
        built, derived = build.result(), check.columns()
        assert np.float32(built["completeness"][0]) == np.float32(derived["completeness"][0]) == np.float32(0.5)
        assert not built["retrieval_complex"][0] and not derived["retrieval_complex"][0], ids


def test_validates_complexity_spilled_to_disk_is_what_it_gives_in_memory(monkeypatch):
    """validate's retrieval complexity keeps the answering (question, document) rows in sorted runs on disk
    (generation/storage/spill.py): with runs of 64 rows, merged back in chunks of whole questions, every column is bit
    for bit what one run in memory gives, and the build's (assemble/complexity.py, its own code) agrees."""
    import numpy as np
    import pyarrow as pa

    import generation.storage.spill as spill
    from builder.release.assemble.complexity import ComplexityAccumulator
    from builder.release.validate.retrieval_complexity import Answers

    rng = np.random.default_rng(3)
    k = rng.integers(1, 9, 300)  # sub-questions per question
    subq_question = np.repeat(np.arange(len(k)), k)
    batches = []
    for _ in range(30):
        subquestion = rng.integers(0, len(subq_question), 400)
        question = subq_question[subquestion]
        document = rng.integers(0, 12, 400).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)  # hashes, as docids give
        batches.append((question, subquestion, document, pa.array(rng.integers(0, 6, 400), pa.int8())))

    def columns(make, spills=False):
        answers = make(k, subq_question, 4, 0.5)
        for batch in batches:
            answers.add(*batch)
        if isinstance(answers, ComplexityAccumulator):
            return answers.result()
        assert (answers.rows.spilled > 1) == spills
        return answers.columns()

    held = columns(Answers)
    monkeypatch.setattr(spill, "SPILL_BYTES", 64 * 16)  # 64 rows of (question, document)
    spilled = columns(Answers, spills=True)
    built = columns(ComplexityAccumulator)
    for name, values in held.items():
        assert np.array_equal(spilled[name], values), name
        assert np.allclose(built[name], values), name


def any_key(path):
    schema = json.loads(path.read_text())
    path.write_text(json.dumps({**schema, "additionalProperties": True}))


@pytest.mark.parametrize(
    "edit,finding",
    [
        (lambda path: path.unlink(), "manifest.schema.json: missing (build-release writes it beside manifest.json)"),
        (lambda path: path.write_text('{"type": "object"}'), "manifest.schema.json: not the contract's schema ($defs missing)"),
        (any_key, "not the contract's schema (additionalProperties is true, the contract's false)"),
        (lambda path: path.write_text("{'type': 'object'}"), "manifest.schema.json: not JSON (Expecting property name"),
    ],
)  # fmt: skip
def test_validate_refuses_a_schema_file_that_is_not_the_contracts(release, tmp_path, edit, finding):
    """manifest.schema.json, what a user's own tools read the release by, is checked as part of the release: deleted,
    replaced by `{"type": "object"}`, edited to allow any key or not JSON, it fails its own check and only that."""
    from builder.release.contract import MANIFEST_SCHEMA
    from builder.release.validate.manifest import SCHEMA

    copy = tmp_path / "release"
    shutil.copytree(release, copy)
    edit(copy / MANIFEST_SCHEMA)
    found = failing(validate(copy, load=False))
    assert list(found) == [SCHEMA] and any(finding in e for e in found[SCHEMA]), found


def test_publish_refuses_a_release_whose_schema_file_is_not_the_contracts(release, tmp_path):
    """publish validates first: a release whose schema file allows anything is not uploaded."""
    from builder.release.contract import MANIFEST_SCHEMA, read_manifest
    from builder.release.publish.to_hub import PublishRefused, publish
    from builder.release.validate.manifest import SCHEMA
    from tests.builder.release.publish.test_to_hub import RecordingHub

    copy = tmp_path / "release"
    shutil.copytree(release, copy)
    (copy / MANIFEST_SCHEMA).write_text('{"type": "object"}\n')
    hub = RecordingHub(remote_files=[])
    with pytest.raises(PublishRefused, match=f"does not validate: {re.escape(SCHEMA)} \\(1\\)"):
        publish(copy, read_manifest(copy).repo, yes=True, api=hub)
    assert hub.calls == []


@pytest.mark.parametrize("value,shown", [("4486", '"4486"'), (True, "true"), (4486.0, "4486.0")])
def test_a_count_the_schema_refuses_is_refused_by_the_kit(release, tmp_path, value, shown):
    """Strict reading (pydantic's strict mode, as JSON): a row count written as a string, as true, or as a float is
    refused naming its key and the value, where lax mode would have read 4486 or 1. The release's JSON schema
    refuses the first two as well (jsonschema counts 4486.0 as an integer)."""
    import jsonschema

    from builder.release.contract import MANIFEST_SCHEMA, ManifestError, read_manifest

    copy = tmp_path / "release"
    shutil.copytree(release, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["rows"]["judgments"]["train"] = value
    (copy / "manifest.json").write_text(json.dumps(manifest))
    said = f"manifest.json: rows.judgments.train: Input should be a valid integer, not {shown}"
    with pytest.raises(ManifestError, match=re.escape(said)):
        read_manifest(copy)
    assert list(failing(validate(copy, load=False)).values()) == [[said]]
    schema = json.loads((copy / MANIFEST_SCHEMA).read_text())
    if not isinstance(value, float):
        with pytest.raises(jsonschema.ValidationError, match="is not of type 'integer'"):
            jsonschema.validate(manifest, schema)
