"""Downloads of Multi30k and Tatoeba through a mirror on 127.0.0.1: checked, cached, refused when corrupt.

A `http.server` on a thread of the test process serves the canonical files
(copied from the real corpora); `KERAS_TRANSFORMER_MIRROR` points the
downloads at it, so no test ever reaches the real hosts.
"""

import contextlib
import functools
import hashlib
import http.server
import pathlib
import shutil
import threading

import pytest

from keras_transformer import run_dir, training
from keras_transformer.commands import cli
from keras_transformer.datasets import corpora, downloads

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
    assert run_dir.read_config(tmp_path / "run")["train_data_sha256"] == training.training_data_sha256(
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
