"""A loader given another command's directory names what it holds and which command reads it.

Before, `rasp eval UT_DIR` said "config.json does not exist, run 'rasp compile'", and
`rasp universal --load MODEL_DIR` said only "no universal transformer"."""

from __future__ import annotations

from pathlib import Path

import pytest

from rasp_compiler.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[1]
REVERSE = str(ROOT / "programs" / "reverse.rasp")


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> dict[str, Path]:
    from rasp_compiler.universal import build_universal

    where = tmp_path_factory.mktemp("kinds")
    made = {kind: where / kind for kind in ("model", "simulator", "ut", "backbone")}
    assert cli_main(["compile", REVERSE, "--vocab", "ab", "--max-len", "4", "-o", str(made["model"])]) == 0
    assert cli_main(["simulate", "--n", "1", "--d", "1", "-o", str(made["simulator"])]) == 0
    build_universal("sparse", layers=1, heads=1, dim=2).save(str(made["ut"]))
    assert cli_main(["universal", "--program", REVERSE, "--vocab", "ab", "--max-len", "4", "--with-mlps",
                     "--save-backbone", str(made["backbone"])]) == 0
    return made


# (the loader's command line with DIR for the directory, the kinds it does not read)
LOADERS = [
    (["eval", "DIR", "--input", "ab"], ("ut", "backbone")),
    (["simulate", "--model", "DIR", "--input-json", "[0]"], ("ut", "backbone")),
    (["universal", "--load", "DIR", "--check"], ("model", "simulator", "backbone")),
    (["universal", "--program", REVERSE, "--vocab", "ab", "--max-len", "4", "--with-mlps",
      "--backbone", "DIR"], ("model", "simulator", "ut")),
    (["experiment", "probe", "DIR"], ("ut", "backbone")),
]
NAMED = {"model": "holds a compiled model (rasp compile)",
         "simulator": "holds the universal simulator U (rasp simulate -o)",
         "ut": "holds a fixed universal transformer (rasp universal --save); rasp universal --load",
         "backbone": "holds a lookup UT backbone (rasp universal --save-backbone)"}


@pytest.mark.parametrize("line,kinds", LOADERS, ids=lambda v: " ".join(v[:2]) if isinstance(v, list) else "")
def test_a_directory_of_another_kind_is_named(artifacts, capsys, line, kinds) -> None:
    capsys.readouterr()
    for kind in kinds:
        args = [str(artifacts[kind]) if a == "DIR" else a for a in line]
        assert cli_main(args) == 1
        err = capsys.readouterr().err
        assert f"{artifacts[kind]} {NAMED[kind]}" in err, (kind, err)
        assert err.count("error:") == 1 and "Traceback" not in err


def test_an_empty_directory_keeps_the_loaders_own_hint(tmp_path, capsys) -> None:
    assert cli_main(["eval", str(tmp_path), "--input", "ab"]) == 1
    assert "run 'rasp compile' to create the model" in capsys.readouterr().err


def test_a_run_is_not_written_into_another_commands_directory(artifacts, capsys) -> None:
    """`rasp experiment dyck1 --out UT_DIR` wrote the run's config.json and model.safetensors beside
    the UT's files (only a compiled model's config.json was refused)."""
    for kind in ("ut", "backbone"):
        before = sorted(p.name for p in artifacts[kind].iterdir())
        assert cli_main(["experiment", "dyck1", "--settings", "base", "--steps", "1", "--width", "8",
                         "--heads", "2", "--no-progress", "--out", str(artifacts[kind])]) == 1
        err = capsys.readouterr().err
        assert "holds another command's files" in err and NAMED[kind] in err, err
        assert sorted(p.name for p in artifacts[kind].iterdir()) == before
