"""What a person learns from ``--help`` and ``help()``: inputs, defaults, output and errors."""

from __future__ import annotations

import pydoc

import pytest

import tensortune as tt
from tensortune import cli, errors


@pytest.mark.parametrize("command", ["tune", "best", "history", "report", "compile"])
def test_every_command_documents_its_output_defaults_and_exit_status(command, capsys):
    assert cli.main([command, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "exit status: 0 success" in text and "2 bad input" in text
    assert "--db PATH" in text and "default: $TENSORTUNE_DB" in text
    assert len(text) > 600, "a description of what the command does and prints"


def test_tune_help_names_the_strategies_and_the_model_flag(capsys):
    assert cli.main(["tune", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: 64)" in text and "(default: model)" in text
    assert "--model NAME" in text and "lgbm" in text
    assert "--json" in text and "last line" in text


def test_report_and_compile_help_name_their_new_flags(capsys):
    assert cli.main(["report", "--help"]) == 0
    assert "--no-peers" in capsys.readouterr().out
    assert cli.main(["compile", "--help"]) == 0
    assert "--emit-ir" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("obj", "words"),
    [
        (tt.compile, ("schedule", "target", "db", "Returns", "Raises", "SpecError", "BuildError")),
        (tt.workload, ("spec", "Returns", "Raises", "SpecError", "epilogue", "conv2d")),
        (tt.Workload, ("flops", "random_inputs", "reference", "name")),
    ],
)
def test_help_documents_inputs_returns_and_errors(obj, words):
    text = pydoc.render_doc(obj, renderer=pydoc.plaintext)
    for word in words:
        assert word in text, f"help({obj.__name__}) does not mention {word!r}"


def test_public_errors_are_exported_from_the_package():
    public = [
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, Exception) and not name.startswith("_")
    ]
    assert "EnvironmentFailure" in public
    for name in public:
        assert getattr(tt, name) is getattr(errors, name), name
        assert name in tt.__all__, name


def test_compile_with_db_names_what_it_needs():
    """A database is keyed by workload: a compute of one's own gets a clear error, not a crash."""
    from tensortune import te

    a = te.placeholder((4,), name="A")
    b = te.compute((4,), lambda i: a[i] * 2.0, name="B")
    with pytest.raises(tt.TensorTuneError, match="spec string or a Workload"):
        tt.compile(b, db=None)
