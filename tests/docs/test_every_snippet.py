"""Every fenced block of the README, docs/ and the examples' READMEs is checked; none is skipped.

A block is one of these, and a block that is none of them fails the test with its file and line:

- a spec (``# benchlab-spec``, or a whole spec): validated by the spec loader; a spec
  fragment (``resources:``, ``tasks:``, ``search:``...): merged into a small spec and validated;
  a ``# benchlab-bad-spec``: refused (test_docs_examples checks the message);
- an evaluation-server config fragment: loaded by the server's own config loader over the
  shipped sample config; slime's delegate entry: names benchmarks the sample config serves;
- Python: run;
- shell (``bash``, ``console``): every command in it is checked. A ``benchlab`` command is
  parsed by the real command line (command, flags, the number of arguments, typed values); a
  synopsis (``[--flag]``) names only flags its command has; ``pip install`` names extras the
  project has; ``python SCRIPT`` and ``python -m MODULE`` name what exists; anything else must be
  a tool the docs are allowed to name (``ray``, ``helm``, ``srun``...), which is not run here;
- output (``text``, ``json``, ``markdown``, ``csv``, plain): JSON must parse.

Commands that need only this machine are run as written: the README's spec with the quick
start's ``train.py``, and the one-run commands of the examples' READMEs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").glob("*/README.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
EXTRAS = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
# Tools the docs may show and this test does not run: cluster managers, remote shells, GPU queries.
OTHER_TOOLS = {"ray", "helm", "kubectl", "ssh", "curl", "nvidia-smi", "srun", "scontrol", "sbatch", "sleep", "mkdir",
               "export", "cd", "for", "done", "do", "wait", "openssl", "echo", "cut", "tr", "sort", "paste", "ps", "["}
SHELL_WORDS = {"&&", "||", ";", "|", "&"}
OUTPUT_LANGS = {"text", "json", "markdown", "csv"}
# "Save as `scores.csv`" in the paragraph before a block, or the marker the server's docs use.
SAVE_AS = re.compile(r"Save as `([^`]+)`|<!-- example: dataset (\S+) -->\s*$")


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int
    lang: str
    body: str
    saved_as: str | None = None  # the file the doc tells the reader to save this block as

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def all_blocks() -> list[Block]:
    blocks = []
    for doc in DOCS:
        text = doc.read_text()
        for m in FENCE.finditer(text):
            before = text[max(0, m.start() - 400): m.start()].rstrip().rsplit("\n\n", 1)[-1]
            saved = SAVE_AS.search(before)
            blocks.append(Block(doc, text[: m.start()].count("\n") + 1, m.group(1), m.group(2),
                                saved.group(1) or saved.group(2) if saved else None))
    return blocks


BLOCKS = all_blocks()


def _cli():
    """The real command line's click group (typer carries its own copy of click)."""
    import benchlab.cli as cli

    cli._register()
    return typer.main.get_command(cli.app)


# --- shell -----------------------------------------------------------------------------------------

def shell_commands(block: Block) -> list[str]:
    """The commands of a shell block: a console block's ``$`` lines, every line of a bash block,
    with continuation lines joined and comments dropped."""
    lines = block.body.splitlines()
    if block.lang == "console":
        lines = [line[2:] for line in lines if line.startswith("$ ")]
    joined: list[str] = []
    for line in lines:
        if joined and joined[-1].endswith("\\"):
            joined[-1] = joined[-1][:-1] + " " + line.strip()
        else:
            joined.append(line)
    commands = []
    for line in joined:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        commands.append(line)
    return commands


def words_of(command: str) -> list[list[str]]:
    """A command line split into simple commands (at ``&&``, ``;``, ``|``, ``&``), without comments."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    simple: list[list[str]] = [[]]
    for word in lexer:
        if word in SHELL_WORDS:
            simple.append([])
        else:
            simple[-1].append(word)
    return [w for w in simple if w]


def _strip_assignments(words: list[str]) -> list[str]:
    """The command without its leading ``NAME=value`` words; ``x=$(cmd args)`` is ``cmd args``."""
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        inner = re.search(r"\$\((.*)", words[0])
        if inner and inner.group(1):
            return [inner.group(1), *words[1:]]
        words = words[1:]
    return words


def check_benchlab(args: list[str], where: str) -> None:
    """Parse ``benchlab ARGS`` as the real command line does, without running the command."""
    group = _cli()
    if "[" in " ".join(args):  # a synopsis: [--flag VALUE] ...
        check_synopsis(" ".join(["benchlab", *args]), where)
        return
    assert args, f"{where}: a bare `benchlab`"
    command = group.get_command(None, args[0])
    assert command is not None, f"{where}: `benchlab {args[0]}` is no command"
    if hasattr(command, "get_command") and len(args) > 1:  # a group of commands: `benchlab import mlflow ...`
        sub = command.get_command(None, args[1])
        assert sub is not None, f"{where}: `benchlab {args[0]} {args[1]}` is no command"
        command, args = sub, [f"{args[0]} {args[1]}", *args[2:]]
    try:
        command.make_context(args[0], list(args[1:]))
    except Exception as exc:  # click's UsageError, from typer's own copy of click
        if not hasattr(exc, "format_message"):
            raise
        raise AssertionError(f"{where}: `benchlab {shlex.join(args)}`: {exc.format_message()}") from None


def check_synopsis(text: str, where: str) -> None:
    """A usage synopsis names only flags that its command has."""
    group = _cli()
    words = text.split()
    command = group.get_command(None, words[1])
    assert command is not None, f"{where}: `benchlab {words[1]}` is no command"
    if hasattr(command, "get_command") and len(words) > 2:  # a group of commands: `benchlab import mlflow ...`
        command = command.get_command(None, words[2])
        assert command is not None, f"{where}: `benchlab {words[1]} {words[2]}` is no command"
    known = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
    for flag in re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", text):
        for one in flag.split("/"):
            assert one in known, f"{where}: `benchlab {words[1]}` has no flag {one}"


def check_pip(words: list[str], where: str) -> None:
    for word in words[2:]:
        for extra in re.findall(r"\[([^\]]+)\]", word):
            for name in extra.split(","):
                assert name in EXTRAS, f"{where}: no extra [{name}] in pyproject.toml"


def check_python(words: list[str], where: str, cwd: Path) -> None:
    if words[1] == "-m":
        import importlib.util

        assert importlib.util.find_spec(words[2]) is not None, f"{where}: no module {words[2]}"
    elif words[1] != "-c":
        # A script of the repository, or one the doc told the reader to save (in the working folder).
        assert (cwd / words[1]).is_file() or (Path.cwd() / words[1]).is_file(), f"{where}: no script {cwd / words[1]}"


def check_simple_command(words: list[str], where: str, cwd: Path) -> Path:
    """Check one simple command; returns the folder the next one runs in (after a ``cd``)."""
    words = _strip_assignments(words)
    if not words:
        return cwd
    head = words[0]
    if head == "benchlab":
        check_benchlab(words[1:], where)
    elif head == "pip":
        check_pip(words, where)
    elif head == "python":
        check_python(words, where, cwd)
    elif head == "cd":
        target = ROOT / words[1] if (ROOT / words[1]).is_dir() else cwd
        return target
    elif head == "#!/bin/bash" or head.startswith("#SBATCH"):
        pass
    else:
        name = head.split("=")[0].split("(")[0].lstrip("$")
        assert head in OTHER_TOOLS or name in OTHER_TOOLS or re.fullmatch(r"[A-Za-z_]\w*=.*", head), \
            f"{where}: `{head}` is neither benchlab nor a tool the docs may name"
    # A benchlab command given to another tool (ray exec '...', kubectl exec -- benchlab ..., srun ... benchlab).
    for i, word in enumerate(words[1:], start=1):
        if word == "benchlab" and head != "pip":
            check_benchlab(words[i + 1:], where)
            break
        if " " in word and "benchlab " in word:
            for inner in words_of(word):
                check_simple_command(inner, where, cwd)
    return cwd


def check_shell(block: Block) -> int:
    cwd = ROOT
    count = 0
    for command in shell_commands(block):
        if command.startswith("benchlab ") and "[--" in command:
            check_synopsis(command, block.where)
            count += 1
            continue
        for words in words_of(command):
            cwd = check_simple_command(words, block.where, cwd)
            count += 1
    return count


# --- YAML ------------------------------------------------------------------------------------------

BASE_SPEC = {
    "name": "fragment",
    "tasks": [{"name": "t"}],
    "configs": [{"name": "a"}],
    "seeds": 2,
    "command": "python run.py --seed {seed}",
    "metrics": {"primary": {"name": "score", "goal": "max"}},
}


def check_yaml(block: Block) -> str:
    from benchlab.evaluate.config import EvalConfig, load_config
    from benchlab.plan import expand
    from benchlab.spec import Spec, parse_spec

    body = block.body
    if body.startswith("# benchlab-bad-spec"):
        return "bad spec"
    if body.startswith("  - "):  # an item of a spec's configs list, as `--promote` writes it
        data = {**BASE_SPEC, "configs": [*BASE_SPEC["configs"], *yaml.safe_load(_dedent(body))]}
        assert expand(parse_spec(yaml.safe_dump(data), file=block.where))
        return "spec fragment"
    data = yaml.safe_load(body)
    assert isinstance(data, dict), f"{block.where}: a YAML block that is no mapping"
    spec_keys = {f.alias or n for n, f in Spec.model_fields.items()}
    if body.startswith("# benchlab-spec") or {"name", "tasks", "configs", "command"} <= set(data):
        spec = parse_spec(body, file=block.where)
        assert len(expand(spec)) == len(spec.tasks) * len(spec.configs) * len(spec.seed_list)
        return "spec"
    if set(data) <= spec_keys:
        merged = _merge(_doc_spec(block.doc, data), data)
        assert expand(parse_spec(yaml.safe_dump(merged), file=block.where))
        return "spec fragment"
    if set(data) <= set(EvalConfig.model_fields):
        return _check_eval_config(data, block, load_config)
    if set(data) == {"eval"}:
        served = set(load_config(None).benchmarks)
        for entry in data["eval"]["delegate"]:
            assert entry["url"].endswith("/evaluate"), block.where
            for dataset in entry["datasets"]:
                assert dataset["name"] in served, f"{block.where}: benchmark {dataset['name']} is not served"
        return "slime delegate"
    raise AssertionError(f"{block.where}: a YAML block that is neither a spec nor a server config: {sorted(data)}")


def _check_eval_config(data: dict, block: Block, load_config) -> str:
    """Load ``data`` over the shipped sample config, from the working folder (the doc's saved files)."""
    from benchlab.evaluate.config import DEFAULT_CONFIG

    sample = yaml.safe_load(DEFAULT_CONFIG.read_text())
    for bench in sample["benchmarks"].values():
        bench["dataset"] = str(DEFAULT_CONFIG.parent / bench["dataset"])
    for section, values in data.items():
        if isinstance(values, dict) and isinstance(sample.get(section), dict):
            sample[section] = {**sample[section], **values}
        else:
            sample[section] = values
    for bench in (data.get("benchmarks") or {}).values():
        # The doc's judge benchmarks use the shipped sample datasets of the same names.
        if not Path(bench["dataset"]).exists() and (DEFAULT_CONFIG.parent / bench["dataset"]).is_file():
            shutil.copy(DEFAULT_CONFIG.parent / bench["dataset"], Path.cwd() / bench["dataset"])
    path = Path.cwd() / "eval.yaml"
    path.write_text(yaml.safe_dump(sample))
    config = load_config(path)
    for section in data:
        assert getattr(config, section) is not None, f"{block.where}: section {section} did not load"
    return "server config"


def _doc_spec(doc: Path, fragment: dict) -> dict:
    """The spec a fragment belongs to: the doc's first whole spec, else a small one."""
    if "tasks" in fragment or "configs" in fragment:
        return BASE_SPEC  # a fragment that lists its own tasks or configs stands alone
    for block in BLOCKS:
        if block.doc == doc and block.lang == "yaml" and block.body.startswith("# benchlab-spec"):
            return yaml.safe_load(block.body)
    return BASE_SPEC


def _merge(spec: dict, fragment: dict) -> dict:
    """``fragment`` over ``spec``, section by section; a metric a task's ``range`` names is added."""
    merged = dict(spec)
    for key, value in fragment.items():
        both_maps = isinstance(value, dict) and isinstance(spec.get(key), dict)
        merged[key] = {**spec[key], **value} if both_maps else value
    known = {merged["metrics"]["primary"]["name"], *(m["name"] for m in merged["metrics"].get("secondary", []))}
    ranged = {name for task in merged["tasks"] for name in (task.get("range") or {})} - known
    if ranged:
        extra = [{"name": name, "goal": "max"} for name in sorted(ranged)]
        merged["metrics"] = {**merged["metrics"], "secondary": [*merged["metrics"].get("secondary", []), *extra]}
    return merged


def _dedent(text: str) -> str:
    indent = min(len(line) - len(line.lstrip()) for line in text.splitlines() if line.strip())
    return "\n".join(line[indent:] for line in text.splitlines())


# --- the tests -------------------------------------------------------------------------------------

# Docs whose Python examples another test runs (and checks their figures): not run twice.
PYTHON_RUN_ELSEWHERE = {
    "spec.md": "tests/docs/test_docs_examples.py",
    "gpus.md": "tests/execute/test_gpus_docs.py",
    "reports.md": "tests/report/test_report_docs.py",
    "evaluation-statistics.md": "tests/docs/test_evaluation_statistics_doc.py",
    "python.md": "tests/test_python_api.py",  # its cells share one namespace, as a notebook's do
    "importing.md": "tests/importers/test_importing_docs.py",
}


def check_block(block: Block) -> str:
    if block.lang == "yaml":
        return check_yaml(block)
    if block.lang == "python":
        if block.doc.name in PYTHON_RUN_ELSEWHERE:
            return "python, run by " + PYTHON_RUN_ELSEWHERE[block.doc.name]
        # In a process of its own, as a reader runs it: what it writes (benchlab.log flushes at
        # exit, into the current folder) lands in the working folder, and no state is shared.
        proc = subprocess.run([sys.executable, "-c", block.body], cwd=Path.cwd(), capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, f"{block.where}: {proc.stderr[-2000:]}"
        return "python"
    if block.lang in ("bash", "console"):
        if block.lang == "console" and not shell_commands(block):
            return "output"
        assert check_shell(block) > 0, block.where
        return "shell"
    if block.lang == "json":
        if (block.saved_as or "").endswith(".jsonl"):
            [json.loads(line) for line in block.body.splitlines() if line.strip()]
        else:
            json.loads(block.body)
        return "output"
    if block.lang in OUTPUT_LANGS:
        return "output"
    if block.lang == "":
        if block.body.startswith("benchlab "):
            for line in block.body.splitlines():
                if line.strip().startswith("benchlab "):
                    check_synopsis(line.split("#")[0], block.where)
            return "synopsis"
        return "output"
    raise AssertionError(f"{block.where}: a ```{block.lang} block this test cannot check")


# A training script for the docs' specs that have none: it takes any --flag value and logs the
# metrics they name, so a doc's spec runs as written.
ANY_TRAIN_PY = """
import sys
from benchlab import log, summary

args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
lr, seed = float(args.get("--lr", 0.01)), int(args.get("--seed", 0))
for step in range(5):
    log(step=step, val_accuracy=0.5 + 0.05 * step - abs(lr - 0.01) + 0.001 * seed)
summary(test_accuracy=0.7 - abs(lr - 0.01), val_accuracy=0.7 - abs(lr - 0.01))
"""


def _search_the_docs_study(doc: Path, tmp_path: Path) -> None:
    """docs/search.md loads the study of its spec: run that search first, as the doc does."""
    from benchlab_testing import run_cli

    spec = next(b for b in BLOCKS if b.doc == doc and b.body.startswith("# benchlab-spec"))
    (tmp_path / "bench.yaml").write_text(spec.body)
    (tmp_path / "train.py").write_text(ANY_TRAIN_PY)
    proc = run_cli("search", "bench.yaml", "-j", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]


PREPARE = {"search.md": _search_the_docs_study}


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_every_block_of_the_doc_is_checked(doc, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the doc's files are saved here, and what its examples write lands here
    for block in BLOCKS:
        if block.doc == doc and block.saved_as:
            (tmp_path / block.saved_as).write_text(block.body)
    if doc.name in PREPARE:
        PREPARE[doc.name](doc, tmp_path)
    kinds = [check_block(b) for b in BLOCKS if b.doc == doc]
    assert len(kinds) == sum(1 for b in BLOCKS if b.doc == doc)


def test_the_docs_whose_python_runs_elsewhere_are_run_there():
    for doc, test in PYTHON_RUN_ELSEWHERE.items():
        text = (ROOT / test).read_text()
        # run_python_blocks, or a runner of its own that runs each block in a fresh interpreter
        runs = "run_python_blocks" in text or '[sys.executable, "-c", body]' in text
        assert runs and doc in text, (doc, test)


def test_the_checks_find_what_a_wrong_snippet_gets_wrong():
    """Each check refuses the drift it is for: a flag, a command, an extra, a script, a spec field."""
    doc = ROOT / "README.md"
    wrong = [
        Block(doc, 1, "bash", "benchlab run spec.yaml --dataset digits\n"),
        Block(doc, 2, "bash", "benchlab frobnicate spec.yaml\n"),
        Block(doc, 3, "bash", "pip install 'benchlab[nosuchextra]'\n"),
        Block(doc, 4, "bash", "cd examples/quickstart && python nosuch.py\n"),
        Block(doc, 5, "console", "$ benchlab export RESULTS TARGET [--what report] [--no-such-flag]\n"),
        Block(doc, 6, "yaml", "resources: {gpus: lots}\n"),
        Block(doc, 7, "bash", "make everything\n"),
        Block(doc, 8, "bash", "benchlab run -j two spec.yaml\n"),
    ]
    for block in wrong:
        with pytest.raises(Exception) as info:
            check_block(block)
        assert f"README.md:{block.line}" in str(info.value) or block.lang == "yaml", str(info.value)


@pytest.mark.slow
def test_the_readme_spec_runs_as_written_with_the_quick_starts_train_py(tmp_path):
    from benchlab_testing import run_cli

    spec = next(b for b in BLOCKS if b.doc.name == "README.md" and b.lang == "yaml")
    (tmp_path / "spec.yaml").write_text(spec.body)
    shutil.copy(ROOT / "examples" / "quickstart" / "train.py", tmp_path / "train.py")
    # As written, the spec plans its twenty runs, each with the command it names.
    planned = run_cli("run", "spec.yaml", "--dry-run", cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr[-3000:]
    assert "20 runs would run" in planned.stdout
    commands = [line for line in planned.stdout.splitlines() if "python train.py --task" in line]
    assert len(commands) == 2 * 2 * 5
    # Run for real at 2 of its 5 seeds, through the override syntax the README documents: eight of
    # the same commands (seeds 0 and 1). All twenty and the report are about 90 s of CPU on a
    # two-core CI machine; seeds 2-4 would only repeat the commands seeds 0-1 run.
    proc = run_cli("run", "spec.yaml", "seeds=2", "-j", "2", cwd=tmp_path, timeout=420)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "results" / "quickstart" / "BENCHMARK_REPORT.md").exists()
    status = run_cli("status", "--json", cwd=tmp_path)
    counts = json.loads(status.stdout)
    assert _completed(counts) == 2 * 2 * 2, status.stdout


def _completed(status: object) -> int:
    if isinstance(status, dict):
        if "completed" in status and isinstance(status["completed"], int):
            return status["completed"]
        return sum(_completed(v) for v in status.values())
    if isinstance(status, list):
        return sum(_completed(v) for v in status)
    return 0


SCRIPT_COMMANDS = [b for b in BLOCKS if b.lang == "bash" and b.body.startswith("cd examples/")]


@pytest.mark.slow
@pytest.mark.parametrize("block", SCRIPT_COMMANDS, ids=[b.where for b in SCRIPT_COMMANDS])
def test_the_examples_one_run_commands_run_as_written(block, tmp_path):
    env = {**os.environ, "BENCHLAB_RUN_DIR": str(tmp_path)}
    proc = subprocess.run(["bash", "-c", block.body.replace("python ", f"{sys.executable} ", 1)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() or any(tmp_path.iterdir()), "the command printed and wrote nothing"
