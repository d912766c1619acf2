"""The notebooks run top to bottom, in this interpreter, and are stored with their outputs.

Notebook 01 runs in the default test run (about 10-20 s on a CPU); 02 (chatbot
training) and 03 (Multi30k translation, BLEU, export) train models for minutes
and are `slow`: `pytest -m slow tests/test_notebooks.py`.
"""

import json
import os
import pathlib
import sys
import time

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

REPO = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
ALL = sorted(path.name for path in NOTEBOOKS.glob("*.ipynb"))
SENTINEL = "__interpreter__="


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory):
    """A `python3` kernelspec that runs this very interpreter with this checkout first on the path."""
    directory = tmp_path_factory.mktemp("kernels")
    spec = directory / "python3"
    spec.mkdir()
    python_path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3 (tests)",
                "language": "python",
                "env": {"PYTHONPATH": python_path, "TF_CPP_MIN_LOG_LEVEL": "2"},
            }
        )
    )
    return directory


def execute(name, kernel_dir, timeout):
    """Runs notebook `name` and returns it with fresh outputs (the file is not changed)."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(f"import sys; print({SENTINEL!r} + sys.executable)"))
    manager = KernelManager(kernel_name="python3", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernel_dir)]))
    client = nbclient.NotebookClient(
        notebook,
        km=manager,
        timeout=timeout,
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    start = time.perf_counter()
    try:
        client.execute()  # raises CellExecutionError, with the cell and traceback, on any error
    finally:
        if manager.has_kernel:  # nbclient leaves a kernel it did not create running
            manager.shutdown_kernel(now=True)
    print(f"{name}: {time.perf_counter() - start:.1f} s")
    interpreter = "".join(output.get("text", "") for output in notebook.cells[-1].outputs).strip()
    assert interpreter == SENTINEL + sys.executable, f"the kernel ran {interpreter!r}, not {sys.executable}"
    return notebook


def code_cells(notebook):
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def images(notebook):
    return sum("image/png" in output.get("data", {}) for cell in code_cells(notebook) for output in cell.outputs)


@pytest.mark.parametrize("name", ALL)
def test_notebook_is_stored_with_outputs(name):
    path = NOTEBOOKS / name
    assert path.stat().st_size < 1_000_000, f"{name} is {path.stat().st_size} bytes: lower the figures' dpi"
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    cells = code_cells(notebook)
    assert all(cell.execution_count for cell in cells), f"{name} was not run top to bottom before saving"
    assert [cell.execution_count for cell in cells] == list(range(1, len(cells) + 1))
    assert images(notebook) >= 1
    for cell in cells:
        assert not any(output.output_type == "error" for output in cell.outputs), cell.source
        # Walk-throughs import the package; they define no layers or models themselves.
        assert not any(line.startswith("class ") for line in cell.source.splitlines()), cell.source


def test_notebook_01_positional_encoding_and_attention(kernel_dir):
    notebook = execute("01_positional_encoding_and_attention.ipynb", kernel_dir, timeout=120)
    assert images(notebook) >= 3
    text = "".join(output.get("text", "") for cell in code_cells(notebook) for output in cell.outputs)
    assert "output:  [[10.  0.]]" in text and "[[550.    5.5]]" in text
    assert "weights: (1, 8, 60, 60)" in text


@pytest.mark.slow
def test_notebook_02_train_chatbot(kernel_dir):
    notebook = execute("02_train_chatbot.ipynb", kernel_dir, timeout=3600)
    assert images(notebook) >= 2  # the schedule and the training curves


@pytest.mark.slow
def test_notebook_03_translate_export_and_attention(kernel_dir, shared_data_dir, monkeypatch):
    monkeypatch.setenv("KERAS_TRANSFORMER_DATA_DIR", str(shared_data_dir))  # the kernel inherits it
    notebook = execute("03_translate_export_and_attention.ipynb", kernel_dir, timeout=3600)
    text = "".join(output.get("text", "") for cell in code_cells(notebook) for output in cell.outputs)
    assert "BLEU" in text and images(notebook) >= 2
