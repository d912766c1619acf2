"""The export registry: a new format is one module and one registry line, flags and destination included.

A toy format (it writes one text file, no model) is registered here and run
through `keras-transformer export --format toy`: its flag comes from its
`Option`, its destination rule from its `Destination`, and nothing else in
the package changes. No TensorFlow model is built.
"""

import json
import pathlib
import types

import pytest

from keras_transformer import export_formats
from keras_transformer.commands.cli import main
from keras_transformer.export_formats import ExportFormat, Option, options
from keras_transformer.files import atomic, destinations, manifest

TEXT, PROVENANCE = "toy.txt", "keras_transformer.json"


def _write(run, output, overwrite=False, shout=None, beam_size=None):
    """The toy format's `write`: `run` and the beam, in one text file, as every format writes (atomic, recorded)."""
    if destinations.check_destination(output, "toy") == "ours" and not overwrite:
        raise destinations.DestinationInUseError(output, "a toy export", ["overwrite"])
    text = f"{run} beam {beam_size or 4}"

    def fill(folder):
        folder = pathlib.Path(folder)
        (folder / TEXT).write_text(text.upper() if shout else text, encoding="utf-8")
        provenance = {"created_by": destinations.CREATOR, "format": "toy"}
        (folder / PROVENANCE).write_text(json.dumps(provenance), encoding="utf-8")
        manifest.write_manifest(folder)

    atomic.replace_dir(fill, output, destinations.remove_previous)
    return f"Exported {run} to {output} (toy)."


# The one module a new format is.
toy = types.ModuleType("toy")
toy.FORMAT = ExportFormat(
    name="toy",
    description="one text file that names the run",
    options=(options.BEAM_SIZE, Option("shout", "--format toy: the text in capitals", flag="--shout", switch=True)),
    write=_write,
    destination=destinations.Destination("toy", "toy export", TEXT, PROVENANCE),
    why_not={"quantization": "a toy has no weights"},
)


@pytest.fixture
def registered():
    """The toy format, registered by the one line a new format adds; taken out again afterwards."""
    export_formats.register(toy.FORMAT)  # the registry line
    yield
    del export_formats.FORMATS["toy"], destinations.DESTINATIONS["toy"], destinations.KINDS["toy"]


def _export(capsys, *flags):
    code = main(["export", "--model", "runs/chatbot", *flags])
    return code, capsys.readouterr().err


def test_a_new_format_is_one_module_and_one_registry_line(registered, tmp_path, capsys):
    output = tmp_path / "toy"
    code, err = _export(capsys, "--output", str(output), "--format", "toy", "--shout", "--beam", "3")
    assert code == 0 and f"Exported runs/chatbot to {output} (toy)." in err, err
    assert (output / TEXT).read_text(encoding="utf-8") == "RUNS/CHATBOT BEAM 3"
    assert manifest.verify_manifest(output) and destinations.kind_of(output) == "toy"
    assert destinations.marked_kind(output) == "toy" and destinations.is_whole(output, "toy")

    code, err = _export(capsys, "--output", str(output), "--format", "toy")
    assert code == 2 and "already holds a toy export. Pass --overwrite" in err, err
    code, err = _export(capsys, "--output", str(output), "--format", "toy", "--overwrite")
    assert code == 0 and (output / TEXT).read_text(encoding="utf-8") == "runs/chatbot beam 4", err
    assert [path.name for path in tmp_path.iterdir()] == ["toy"]  # the previous export was removed whole


def test_its_destination_refuses_what_it_did_not_write(registered, tmp_path, capsys):
    output = tmp_path / "notes"
    output.mkdir()
    (output / "notes.txt").write_text("mine", encoding="utf-8")
    code, err = _export(capsys, "--output", str(output), "--format", "toy", "--overwrite")
    assert code == 2 and "is not empty and is not a toy export written by keras-transformer" in err, err
    assert [path.name for path in output.iterdir()] == ["notes.txt"]


def test_its_flag_is_refused_for_a_format_that_does_not_take_it(registered, tmp_path, capsys):
    code, err = _export(capsys, "--output", str(tmp_path / "out"), "--shout")  # the default format, savedmodel
    assert code == 2 and "--shout does not apply to the savedmodel format (it has no such setting)" in err, err
    assert "it applies to toy" in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
    code, err = _export(capsys, "--output", str(tmp_path / "out"), "--format", "toy", "--quantization", "int8")
    assert code == 2 and "does not apply to the toy format (a toy has no weights)" in err, err


def test_the_help_lists_each_formats_flags(registered, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["export", "--help"])
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps the lines
    assert exit_.value.code == 0 and "toy: one text file that names the run" in out
    flags = [option.flag for option in export_formats.all_options() if option.flag is not None]
    assert flags[-1] == "--shout" and all(f"{flag} " in out for flag in flags), out
    assert "--format toy: the text in capitals" in out


def test_every_format_declares_its_options_and_its_registered_destination():
    assert list(export_formats.FORMATS) == ["savedmodel", "ctranslate2", "litert", "transformers"]
    for export_format in export_formats.FORMATS.values():
        assert all(isinstance(option, Option) for option in export_format.options), export_format.name
        assert destinations.DESTINATIONS[export_format.destination.kind] is export_format.destination
    flags = [option.flag for option in export_formats.all_options() if option.flag]
    assert flags == ["--quantization", "--beam", "--alpha", "--max-length", "--no-xla", "--scores"]
