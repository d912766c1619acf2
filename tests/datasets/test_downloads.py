"""Downloads of Multi30k and Tatoeba through a mirror on 127.0.0.1: checked, cached, refused when corrupt.

A `http.server` on a thread of the test process serves the canonical files
(copied from the real corpora); `KERAS_TRANSFORMER_MIRROR` points the
downloads at it, so no test ever reaches the real hosts. Servers that
misbehave (accept and never answer, stall in the middle of a body, trickle,
never stop sending) are raw sockets on 127.0.0.1 (`misbehaving`), and
`KERAS_TRANSFORMER_DOWNLOAD_TIMEOUT` is set low so that a stall fails in seconds.
"""

import contextlib
import functools
import hashlib
import http.server
import io
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from child_signals import default_sigint

from keras_transformer import runs, training
from keras_transformer.commands import cli
from keras_transformer.datasets import corpora, download_progress, downloads

MULTI30K_GZ = [download.url.rsplit("/", 1)[1] for download in downloads.DOWNLOADS["multi30k_task1"]]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(folder):
    """Serves `folder` on 127.0.0.1 (a free port) from a thread; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mirror"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _sha256(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def served(shared_data_dir, tmp_path_factory):
    """A folder `mirror/` with the nine Multi30k .gz files and spa-eng.zip, as a mirror serves them."""
    root = tmp_path_factory.mktemp("served")
    mirror = root / "mirror"
    mirror.mkdir()
    for name in MULTI30K_GZ:
        shutil.copyfile(shared_data_dir / "multi30k_task1" / "raw" / name, mirror / name)
    shutil.copyfile(shared_data_dir / "spa_eng_anki" / "spa-eng.zip", mirror / "spa-eng.zip")
    return root


@pytest.fixture
def offline_env(monkeypatch, tmp_path):
    """No folder of plain files, a fresh TFDS data dir; returns it."""
    monkeypatch.delenv(corpora.DATA_DIR_ENV, raising=False)
    tfds_dir = tmp_path / "tfds"
    monkeypatch.setenv(downloads.TFDS_DATA_DIR_ENV, str(tfds_dir))
    return tfds_dir


def _cached_downloads(tfds_dir):
    """sha256 -> path of every file that the download manager kept (its .INFO files aside)."""
    folder = tfds_dir / "downloads" / downloads.CACHE_NAME
    return {_sha256(p): p for p in folder.rglob("*") if p.is_file() and not p.name.endswith(".INFO")}


def test_multi30k_downloads_through_a_mirror_then_reads_the_cache_offline(
    served, shared_data_dir, offline_env, monkeypatch, tmp_path, capsys
):
    with serve(served) as url:
        monkeypatch.setenv(downloads.MIRROR_ENV, url)
        splits = corpora.load_split_pairs("multi30k-en-de")
    assert {name: len(pairs) for name, pairs in splits.items()} == {"train": 29_000, "validation": 1_014, "test": 1_000}
    served_sums = {_sha256(served / "mirror" / name) for name in MULTI30K_GZ}
    assert set(_cached_downloads(offline_env)) == served_sums  # the cached files are the served ones
    plain = downloads.cache_folder("multi30k_task1")
    for name in ("train.en", "val.de", "test_2016_flickr.fr"):
        assert (plain / name).read_bytes() == (shared_data_dir / "multi30k_task1" / name).read_bytes()

    # The server is stopped: the second run reads the cache, the plain files
    # or, when those are gone, the verified downloads that TFDS cached.
    assert corpora.load_split_pairs("multi30k-en-de") == splits
    shutil.rmtree(plain)
    assert corpora.load_split_pairs("multi30k-en-de") == splits

    # And a `tiny`-sized model trains on the downloaded corpus, still offline.
    summary = training.train(
        "multi30k-en-de",
        output=tmp_path / "run",
        epochs=1,
        max_examples=300,
        d_model=32,
        num_layers=1,
        num_heads=2,
        d_ff=64,
        vocab_size=1000,
        verbose=0,
    )
    assert summary["completed_epochs"] == 1 and summary["best_val_loss"] > 0
    assert runs.read_config(tmp_path / "run")["train_data_sha256"] == training.training_data_sha256(
        splits["train"][:300]
    )


def test_a_download_with_one_flipped_byte_is_refused_and_not_cached(served, offline_env, monkeypatch, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(served, bad)
    corrupt = bad / "mirror" / "val.de.gz"
    data = bytearray(corrupt.read_bytes())
    data[len(data) // 2] ^= 0x01
    corrupt.write_bytes(bytes(data))
    with serve(bad) as url:
        monkeypatch.setenv(downloads.MIRROR_ENV, url)
        with pytest.raises(ValueError) as error:
            corpora.load_pairs("multi30k-en-de", split="validation")
    message = str(error.value)
    assert "\n" not in message
    assert "val.de is missing and its sha256 is not the one in checksums.tsv" in message
    assert f"{url}/val.de.gz" in message and str(downloads.cache_folder("multi30k_task1")) in message
    cached = _cached_downloads(offline_env)
    assert hashlib.sha256(bytes(data)).hexdigest() not in cached
    assert not any(p.name.startswith("val.de") for p in offline_env.rglob("*") if p.is_file())
    assert not (downloads.cache_folder("multi30k_task1") / "val.de").exists()


def test_no_network_and_no_copy_is_one_line_naming_the_file_url_and_folder(offline_env, monkeypatch, capsys):
    with serve(offline_env.parent / "nothing-served") as url:
        pass  # stopped: nothing listens on that port any more
    monkeypatch.setenv(downloads.MIRROR_ENV, url)
    code = cli.main(["train", "--preset", "multi30k-en-de", "--output", str(offline_env.parent / "run")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("keras-transformer train: error: "), err
    assert "train.en is missing and cannot be downloaded" in err
    assert f"download {url}/train.en.gz and put it gunzipped in {downloads.cache_folder('multi30k_task1')}/" in err
    assert not (offline_env.parent / "run").exists()


def test_spa_eng_zip_is_checked_by_its_extracted_spa_txt(served, shared_data_dir, offline_env, monkeypatch, tmp_path):
    bad = tmp_path / "bad"
    (bad / "mirror").mkdir(parents=True)
    import zipfile

    with zipfile.ZipFile(bad / "mirror" / "spa-eng.zip", "w") as archive:
        archive.writestr("spa-eng/spa.txt", "Go.\tVe.\n")
    with serve(bad) as url:
        monkeypatch.setenv(downloads.MIRROR_ENV, url)
        with pytest.raises(ValueError, match=r"spa\.txt is missing and its extracted spa-eng/spa\.txt has a sha256"):
            corpora.load_pairs("spa-en")
    assert not _cached_downloads(offline_env)
    with serve(served) as url:
        monkeypatch.setenv(downloads.MIRROR_ENV, url)
        pairs = corpora.load_split_pairs("spa-en")
    assert sum(len(split) for split in pairs.values()) == 118_964
    cached = downloads.cache_folder("spa_eng_anki") / "spa.txt"
    assert cached.read_bytes() == (shared_data_dir / "spa_eng_anki" / "spa.txt").read_bytes()


def test_a_folder_of_plain_files_is_still_read_without_any_download(shared_data_dir, offline_env, monkeypatch):
    monkeypatch.setenv(downloads.MIRROR_ENV, "http://127.0.0.1:9/never-used")
    assert len(corpora.load_pairs("multi30k-en-de", data_dir=shared_data_dir, split="test")) == 1_000
    monkeypatch.setenv(corpora.DATA_DIR_ENV, str(shared_data_dir))
    assert len(corpora.load_pairs("multi30k-en-de", split="test")) == 1_000
    assert not offline_env.exists()


def test_the_multi30k_builder_downloads_into_its_data_dir(served, offline_env, monkeypatch, tmp_path):
    from keras_transformer.datasets import parallel_text

    with serve(served) as url:
        monkeypatch.setenv(downloads.MIRROR_ENV, url)
        builder = parallel_text.Multi30k(config="de-en", data_dir=tmp_path / "builder")
        builder.download_and_prepare()
    assert {split: info.num_examples for split, info in builder.info.splits.items()} == {
        "train": 29_000,
        "validation": 1_014,
        "test": 1_000,
    }
    assert (downloads.cache_folder("multi30k_task1", tmp_path / "builder") / "val.de").is_file()
    assert not offline_env.exists()  # the builder's data dir, not $TFDS_DATA_DIR


@contextlib.contextmanager
def misbehaving(respond):
    """A server on 127.0.0.1 that hands each request for `/mirror/NAME` to `respond(connection, NAME, stop)`.

    Each connection has a thread of its own and is closed when `respond`
    returns. Yields the base URL and an `Event` set at the first request; at
    the end of the block `stop` is set and every connection closed.
    """
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)
    stop, requested, connections = threading.Event(), threading.Event(), []

    def handle(connection):
        with contextlib.suppress(OSError), connection:
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = connection.recv(4096)
                if not chunk:
                    return
                request += chunk
            requested.set()
            respond(connection, request.split(b" ", 2)[1].decode().rsplit("/", 1)[1], stop)

    def accept():
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                connection, _ = listener.accept()
                connections.append(connection)
                threading.Thread(target=handle, args=(connection,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/mirror", requested
    finally:
        stop.set()
        thread.join()
        listener.close()
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


def _headers(length=None):
    size = "" if length is None else f"Content-Length: {length}\r\n"
    return f"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n{size}Connection: close\r\n\r\n".encode()


def _silent(connection, name, stop):
    """Accepts and never answers."""
    stop.wait()


def _headers_then_stall(served):
    """Sends the headers and half the body, then nothing."""

    def respond(connection, name, stop):
        data = (served / "mirror" / name).read_bytes()
        connection.sendall(_headers(len(data)) + data[: len(data) // 2])
        stop.wait()

    return respond


def _trickle(served, slow, pieces, pause):
    """Serves every file at once but `slow`, which comes in `pieces` parts `pause` seconds apart."""

    def respond(connection, name, stop):
        data = (served / "mirror" / name).read_bytes()
        connection.sendall(_headers(len(data)))
        step = -(-len(data) // pieces) if name == slow else len(data)
        for start in range(0, len(data), step):
            if start:
                stop.wait(pause)
            connection.sendall(data[start : start + step])

    return respond


def _endless(connection, name, stop):
    """Sends zeros until the client goes away (no Content-Length: the body ends when the connection does)."""
    connection.sendall(_headers())
    while not stop.is_set():
        connection.sendall(bytes(64 * 1024))


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self):
        return True


def _temporaries(tfds_dir):
    """What a fetch left behind: the manager's `*.tmp.*` folders and their files, and `.partial` plain files."""
    return sorted(
        str(p)
        for p in tfds_dir.rglob("*")
        if ".tmp." in p.name or ".tmp." in p.parent.name or p.name.endswith(".partial")
    )


def test_a_server_that_never_answers_fails_train_within_the_timeout_naming_the_url(offline_env, monkeypatch, capsys):
    monkeypatch.setenv(downloads.TIMEOUT_ENV, "1.5")
    with misbehaving(_silent) as (url, requested):
        monkeypatch.setenv(downloads.MIRROR_ENV, url)
        start = time.monotonic()
        code = cli.main(["train", "--preset", "multi30k-en-de", "--output", str(offline_env.parent / "run")])
        elapsed = time.monotonic() - start
    err = capsys.readouterr().err
    assert code == 2 and requested.is_set()
    assert err.count("\n") == 1 and err.startswith("keras-transformer train: error: "), err
    assert "train.en is missing and cannot be downloaded (nothing received for 1.5 s; " in err
    assert f"${downloads.TIMEOUT_ENV} sets how long to wait" in err
    assert f"download {url}/train.en.gz and put it gunzipped in {downloads.cache_folder('multi30k_task1')}/" in err
    assert 1.5 <= elapsed < 1.5 + 5, elapsed  # one wait of the timeout: a stall is not retried
    assert not _temporaries(offline_env) and not _cached_downloads(offline_env)
    assert not (offline_env.parent / "run").exists()


def test_a_server_that_stalls_in_the_middle_of_a_body_fails_and_leaves_nothing(
    served, offline_env, monkeypatch, capsys
):
    monkeypatch.setenv(downloads.TIMEOUT_ENV, "2")
    monkeypatch.setattr(download_progress, "PROGRESS_AFTER", 1.2)  # past the last byte's time plus SILENCE_SHOWN
    monkeypatch.setattr(download_progress, "PROGRESS_EVERY", 0.2)
    with misbehaving(_headers_then_stall(served)) as (url, _):
        monkeypatch.setenv(downloads.MIRROR_ENV, url)
        start = time.monotonic()
        with pytest.raises(ValueError) as error:
            downloads.fetch("multi30k_task1")
        elapsed = time.monotonic() - start
    message = str(error.value)
    assert "\n" not in message and 2 <= elapsed < 2 + 5, elapsed
    assert message.startswith("train.en is missing and cannot be downloaded (nothing received for 2 s; ")
    assert f"download {url}/train.en.gz and put it gunzipped in" in message
    assert not _temporaries(offline_env) and not _cached_downloads(offline_env)
    assert not downloads.cache_folder("multi30k_task1").exists()
    assert capsys.readouterr().err == ""  # not a terminal: a stalled download logs no progress line


def test_a_stall_on_a_terminal_erases_the_progress_line_before_the_error(offline_env, monkeypatch):
    monkeypatch.setenv(downloads.TIMEOUT_ENV, "2")
    monkeypatch.setattr(download_progress, "PROGRESS_AFTER", 0.2)
    monkeypatch.setattr(sys, "stderr", _Terminal())
    with misbehaving(_silent) as (url, _):
        monkeypatch.setenv(downloads.MIRROR_ENV, url)
        code = cli.main(["train", "--preset", "multi30k-en-de", "--output", str(offline_env.parent / "run")])
    err = sys.stderr.getvalue()
    assert code == 2
    shown, _, error = err.rpartition("\r\x1b[K")  # the waiting line, erased; then the error alone
    assert f"\rDownloading train.en.gz from {url.split('/')[2]}: 0 B of 569 kB (0%)\x1b[K" in shown
    assert ": 0 B of 569 kB (0%), no data for 1 s (gives up at 2 s)\x1b[K" in shown  # counting the silence
    assert error.startswith("keras-transformer train: error: train.en is missing") and error.count("\n") == 1


def test_a_slow_trickle_is_waited_for_and_shows_progress(served, shared_data_dir, offline_env, monkeypatch, capsys):
    monkeypatch.setenv(downloads.TIMEOUT_ENV, "1")
    monkeypatch.setattr(download_progress, "PROGRESS_AFTER", 0.5)
    monkeypatch.setattr(download_progress, "PROGRESS_EVERY", 0.5)
    with misbehaving(_trickle(served, "val.de.gz", pieces=10, pause=0.3)) as (url, _):
        monkeypatch.setenv(downloads.MIRROR_ENV, url)
        start = time.monotonic()
        folder = downloads.fetch("multi30k_task1")
        elapsed = time.monotonic() - start
    assert elapsed > 2.7  # longer than the timeout in all: only silence counts
    assert (folder / "val.de").read_bytes() == (shared_data_dir / "multi30k_task1" / "val.de").read_bytes()
    assert set(_cached_downloads(offline_env)) == {_sha256(served / "mirror" / name) for name in MULTI30K_GZ}
    assert not _temporaries(offline_env)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) >= 2 and all(line.startswith("Downloading val.de.gz from 127.0.0.1:") for line in lines), lines
    assert all(" kB of 25 kB (" in line for line in lines), lines  # the bytes so far, of the registered size
    counts = [int(line.split(": ")[1].split(" ")[0]) for line in lines]
    assert all(a < b for a, b in zip(counts, counts[1:])), lines  # a line only for a period in which bytes came


def test_a_slow_download_on_a_terminal_redraws_one_line_and_ends_it(served, offline_env, monkeypatch):
    monkeypatch.setenv(downloads.TIMEOUT_ENV, "1")
    monkeypatch.setattr(download_progress, "PROGRESS_AFTER", 0.3)
    monkeypatch.setattr(sys, "stderr", _Terminal())
    with misbehaving(_trickle(served, "val.de.gz", pieces=6, pause=0.3)) as (url, _):
        monkeypatch.setenv(downloads.MIRROR_ENV, url)
        downloads.fetch("multi30k_task1")
    err, host = sys.stderr.getvalue(), url.split("/")[2]
    assert err.count("\n") == 1, err  # one line, redrawn in place, ended with the final count
    assert err.count("\rDownloading val.de.gz") > 2 and "\rDownloading train" not in err  # only the slow one
    assert err.endswith(f"\rDownloading val.de.gz from {host}: 25 kB of 25 kB (100%)\x1b[K\n"), err


def test_display_progress_false_turns_the_line_off(served, offline_env, monkeypatch, capsys):
    monkeypatch.setenv(downloads.TIMEOUT_ENV, "1")
    monkeypatch.setattr(download_progress, "PROGRESS_AFTER", 0.1)
    monkeypatch.setattr(download_progress, "PROGRESS_EVERY", 0.1)
    downloads.display_progress(False)
    try:
        with misbehaving(_trickle(served, "val.de.gz", pieces=5, pause=0.3)) as (url, _):
            monkeypatch.setenv(downloads.MIRROR_ENV, url)
            downloads.fetch("multi30k_task1")
    finally:
        downloads.display_progress(True)
    assert capsys.readouterr().err == ""


@pytest.fixture
def ctrl_c_reaches_python():
    """SIGINT as a fresh interpreter has it: Python's handler, unblocked (an earlier test may have changed either)."""
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    yield
    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    signal.signal(signal.SIGINT, handler)


def test_ctrl_c_during_a_stall_stops_the_download_at_once(offline_env, monkeypatch, capsys, ctrl_c_reaches_python):
    monkeypatch.setenv(downloads.TIMEOUT_ENV, "60")

    def interrupt_when_asked(connection, name, stop):
        stop.wait(0.3)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # what Ctrl-C does
        stop.wait()

    threads = set(threading.enumerate())
    with misbehaving(interrupt_when_asked) as (url, _):
        monkeypatch.setenv(downloads.MIRROR_ENV, url)
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            downloads.fetch("multi30k_task1")
        assert time.monotonic() - start < 5
        assert not _temporaries(offline_env)
        start = time.monotonic()
        code = cli.main(["train", "--preset", "multi30k-en-de", "--output", str(offline_env.parent / "run")])
        assert time.monotonic() - start < 5
    assert code == 130 and capsys.readouterr().err.endswith("Interrupted.\n")
    assert not _temporaries(offline_env) and not _cached_downloads(offline_env)
    # Nothing goes on downloading behind the caller's back (a pool thread kept the process alive for minutes).
    assert not [t for t in set(threading.enumerate()) - threads if t.is_alive() and not t.daemon]


def test_sigint_ends_the_train_command_during_a_stall_at_once(offline_env, tmp_path, ctrl_c_reaches_python):
    environment = {k: v for k, v in os.environ.items() if k != corpora.DATA_DIR_ENV}
    environment.update({downloads.TFDS_DATA_DIR_ENV: str(offline_env), downloads.TIMEOUT_ENV: "120"})
    lines = []  # (when, line) of its stderr
    with misbehaving(_silent) as (url, requested):
        environment[downloads.MIRROR_ENV] = url
        command = [sys.executable, "-m", "keras_transformer_cli", "train", "--preset", "multi30k-en-de"]
        process = subprocess.Popen(
            [*command, "--output", str(tmp_path / "run")],
            env=environment,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=default_sigint,
        )
        reader = threading.Thread(target=lambda: lines.extend((time.monotonic(), line) for line in process.stderr))
        reader.start()
        try:
            assert requested.wait(120), "the command never asked for a file"
            sent = time.monotonic()
            process.send_signal(signal.SIGINT)
            process.wait(timeout=60)  # the stall's 120 s are not what ends it (TensorFlow's exit takes seconds)
        finally:
            process.kill()
            reader.join()
    assert process.returncode == 130 and lines and lines[-1][1] == "Interrupted.\n", lines
    assert lines[-1][0] - sent < 3
    assert not _temporaries(offline_env) and not (tmp_path / "run").exists()


def test_an_endless_body_is_cut_at_the_registered_size(offline_env, monkeypatch):
    monkeypatch.setenv(downloads.TIMEOUT_ENV, "5")
    with misbehaving(_endless) as (url, _):
        monkeypatch.setenv(downloads.MIRROR_ENV, url)
        start = time.monotonic()
        with pytest.raises(ValueError, match=r"^train\.en is missing and its sha256 is not the one in checksums"):
            downloads.fetch("multi30k_task1")
        assert time.monotonic() - start < 5
    assert not _temporaries(offline_env) and not _cached_downloads(offline_env)


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_a_bad_download_timeout_is_one_line_naming_the_variable(value, offline_env, monkeypatch, capsys):
    monkeypatch.setenv(downloads.TIMEOUT_ENV, value)
    code = cli.main(["train", "--preset", "multi30k-en-de", "--output", str(offline_env.parent / "run")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(
        f"keras-transformer train: error: ${downloads.TIMEOUT_ENV} must be a positive number of seconds"
    )
    assert err.rstrip().endswith(f"Received: {downloads.TIMEOUT_ENV}='{value}'")
    assert not offline_env.exists() and not (offline_env.parent / "run").exists()
