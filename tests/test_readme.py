"""Every code block of the README works: Python blocks are executed as they are (in a
temporary folder), and every ``dpmt`` command line of the shell blocks parses with the real
CLI parser (options that exist, values in range up to what only a run can check)."""

import os
import pathlib
import re
import shlex

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def _blocks(lang: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_readme_has_python_and_shell_blocks():
    assert _blocks("python") and _blocks("bash")


@pytest.mark.parametrize("k", range(len(_blocks("python"))))
def test_python_block_runs(k, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = _blocks("python")[k]
    namespace: dict = {}
    exec(compile(code, f"README.md python block {k}", "exec"), namespace)
    # the first screen's model is saved and loads back
    if "model.save(" in code:
        assert (tmp_path / "runs" / "my-model" / "model.json").exists()


def _commands() -> list[list[str]]:
    cmds = []
    for block in _blocks("bash"):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            words = shlex.split(line)
            if words and os.path.basename(words[0]) == "dpmt":
                cmds.append(words[1:])
    return cmds


@pytest.mark.parametrize("argv", _commands(), ids=lambda a: " ".join(a[:2]))
def test_shell_command_parses(argv):
    from dpmt.apps.cli import build_parser

    args = build_parser().parse_args(argv)
    assert callable(args.func)
    if args.command in ("train", "compare"):
        from dpmt.apps.args import config_from_args

        config_from_args(args)          # the config accepts every value given
