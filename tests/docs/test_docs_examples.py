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
        if name in ("path", "overrides", "grids", "backend_sections"):  # not YAML keys
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


# A located spec message as docs show it: `spec.yaml:14 configs[2].params.lr: expected ...`.
MESSAGE = re.compile(r"[\w./-]+\.yaml:\d+:? [^`\n]+")
BAD_SPEC = re.compile(r"```yaml\n(# benchlab-bad-spec\n.*?)```.*?```text\n(.*?)```", re.S)
MARKDOWN = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _bad_spec_examples() -> list[tuple[str, str, str]]:
    return [(doc.name, spec, shown) for doc in MARKDOWN for spec, shown in BAD_SPEC.findall(doc.read_text())]


def _printed(tmp_path: Path, spec_text: str) -> str:
    from benchlab_testing import run_cli

    (tmp_path / "spec.yaml").write_text(spec_text)
    proc = run_cli("validate", "spec.yaml", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr


def test_documented_bad_specs_print_the_documented_messages(tmp_path):
    examples = _bad_spec_examples()
    assert examples, "docs/spec.md shows a bad spec and what benchlab prints for it"
    for doc, spec_text, shown in examples:
        assert _printed(tmp_path, spec_text).strip() == shown.strip(), doc


def test_every_example_message_in_the_docs_is_one_benchlab_prints(tmp_path):
    printed = {line.removeprefix("error: ")
               for _, spec_text, _ in _bad_spec_examples()
               for line in _printed(tmp_path, spec_text).splitlines()}
    shown = {(doc.name, m.removeprefix("error: ").strip()) for doc in MARKDOWN
             for m in MESSAGE.findall(doc.read_text())}
    assert any(doc == "README.md" for doc, _ in shown)
    for doc, message in sorted(shown):
        assert message in printed, f"{doc} shows a message benchlab does not print: {message}"


def test_readme_tables_list_every_command_and_extra():
    import tomllib

    import typer

    from benchlab.cli.app import app

    readme = (ROOT / "README.md").read_text()
    commands = readme.split("## Commands")[1].split("\n## ")[0]
    for name in typer.main.get_command(app).commands:  # type: ignore[attr-defined]
        assert f"`benchlab {name}" in commands, name
    extras = readme.split("## Extras")[1].split("\n## ")[0]
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for name in declared:
        assert f"| `{name}` |" in extras, name
