"""The examples in the docs are valid: every spec block parses, the README's too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchlab.plan import expand
from benchlab.spec import parse_spec

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"```yaml\n(.*?)```", re.S)


def spec_blocks(path: Path) -> list[str]:
    return [b for b in BLOCK.findall(path.read_text()) if b.startswith("# benchlab-spec")]


DOCS = [p for p in sorted((ROOT / "docs").glob("*.md")) if spec_blocks(p)]


@pytest.mark.parametrize("doc", DOCS, ids=[p.name for p in DOCS])
def test_every_spec_in_the_docs_is_valid(doc):
    for block in spec_blocks(doc):
        spec = parse_spec(block, file=doc.name)
        assert len(expand(spec)) == len(spec.tasks) * len(spec.configs) * len(spec.seed_list)


def test_spec_reference_documents_every_field():
    from benchlab.spec import Spec

    text = (ROOT / "docs" / "spec.md").read_text()
    for name, field in Spec.model_fields.items():
        if name in ("path", "overrides", "grids"):
            continue
        assert f"`{field.alias or name}`" in text, name


def test_readme_spec_is_valid():
    block = BLOCK.findall((ROOT / "README.md").read_text())[0]
    spec = parse_spec(block, file="README.md")
    assert [r.name for r in expand(spec)][:2] == ["digits/logreg/s0", "digits/mlp/s0"]


def test_slm_lab_example_reads_the_documented_values(tmp_path):
    from benchlab.collect import collect_run

    spec = parse_spec(spec_blocks(ROOT / "docs" / "extractors.md")[0])
    (tmp_path / "train.log").write_text(
        "trial_metrics: frame:1.00e+07 | total_reward_ma:\x1b[32m816.18\x1b[0m | fps:1000\n")
    got = collect_run(tmp_path, spec.metrics.all)
    assert got.finals["total_reward_ma"] == 816.18 and got.finals["fps"] == 1000
    assert got.series["total_reward_ma"][0].tolist() == [1e7]


def test_spec_doc_command_examples_hold():
    from benchlab_testing import run_python_blocks

    assert run_python_blocks(ROOT / "docs" / "spec.md") >= 5
