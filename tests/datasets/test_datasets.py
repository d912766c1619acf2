"""Readers, named corpora and tensorflow-datasets builders: real counts, clear errors on bad files."""

import hashlib
import random

import pytest
import tensorflow as tf

from keras_transformer.datasets import corpora, parallel_text, readers

# Real counts from ../shared/data (see its README and PROVENANCE.md files).
MULTI30K = {"train": 29_000, "validation": 1_014, "test": 1_000}
CHATBOT_TOTAL, SPA_TOTAL = 11_823, 118_964


def _write(path, data):
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


# --- readers: errors name the file and the line ----------------------------------------------


def test_read_aligned_strips_and_handles_bom_and_crlf(tmp_path):
    src = _write(tmp_path / "a.en", "\ufeffHello there. \r\nA dog runs.\r\n")
    tgt = _write(tmp_path / "a.de", "Hallo.\nEin Hund läuft.")  # no final newline
    assert readers.read_aligned(src, tgt) == [("Hello there.", "Hallo."), ("A dog runs.", "Ein Hund läuft.")]


def test_misaligned_files_name_both_files_and_the_line(tmp_path):
    src = _write(tmp_path / "train.en", "one\ntwo\nthree\n")
    tgt = _write(tmp_path / "train.de", "eins\nzwei\n")
    with pytest.raises(ValueError, match=r"Misaligned.*train\.en has 3 lines.*train\.de has 2.*train\.en, line 3"):
        readers.read_aligned(src, tgt)


def test_empty_line_names_file_and_line(tmp_path):
    src = _write(tmp_path / "x.en", "one\n\nthree\n")
    with pytest.raises(ValueError, match=r"x\.en, line 2: empty line"):
        readers.read_lines(src)
    tsv = _write(tmp_path / "x.tsv", "Go.\tVe.\nHi.\t  \n")
    with pytest.raises(ValueError, match=r"x\.tsv, line 2: empty column 1"):
        readers.read_delimited(tsv)
    with pytest.raises(ValueError, match=r"x2\.tsv, line 2: empty line"):
        readers.read_delimited(_write(tmp_path / "x2.tsv", "Go.\tVe.\n\nHi.\tHola.\n"))


def test_non_utf8_names_file_and_line(tmp_path):
    latin1 = "Größe\nÜber\n".encode("latin-1")
    path = _write(tmp_path / "latin1.de", b"fine line\n" + latin1)
    with pytest.raises(ValueError, match=r"latin1\.de, line 2: not valid UTF-8"):
        readers.read_lines(path)
    with pytest.raises(ValueError, match=r"garbage\.tsv, line 1: not valid UTF-8"):
        readers.read_delimited(_write(tmp_path / "garbage.tsv", bytes(range(128, 256))))


UTF16_TEXT = "Hello there.\tHallo.\nA dog runs.\tEin Hund rennt.\n"  # ASCII: valid UTF-8 in UTF-16 too
UTF16_FILES = {  # bytes, the line named, the reader
    "UTF-16LE without BOM, lines": (UTF16_TEXT.encode("utf-16-le"), 1, readers.read_lines),
    "UTF-16BE without BOM, lines": (UTF16_TEXT.encode("utf-16-be"), 1, readers.read_lines),
    "NUL on line 2, lines": (b"one\ntw\0o\nthree\n", 2, readers.read_lines),
    "UTF-16LE without BOM, TSV": (UTF16_TEXT.encode("utf-16-le"), 1, readers.read_delimited),
    "NUL on line 2, TSV": (b"Go.\tVe.\nHi.\tHo\0la.\n", 2, readers.read_delimited),
    "NUL on line 3, CSV": (
        b'Q,A,label\nq,a,0\n"q\0",a,0\n',
        3,
        lambda path: readers.read_delimited(path, "Q", "A", delimiter=",", header=True),
    ),
}


@pytest.mark.parametrize("case", sorted(UTF16_FILES))
def test_nul_bytes_and_utf16_name_the_file_and_line(case, tmp_path):
    """Before: UTF-16 without a BOM decoded as UTF-8 with a NUL every other byte, and trained silently."""
    data, line, read = UTF16_FILES[case]
    path = _write(tmp_path / "train.en", data)
    with pytest.raises(
        ValueError, match=rf"train\.en, line {line}: contains a NUL byte \(is it UTF-16\? save it as UTF-8\)"
    ):
        read(path)


def test_utf16_with_a_byte_order_mark_or_other_than_ascii_is_named(tmp_path):
    path = _write(tmp_path / "train.de", UTF16_TEXT.encode("utf-16"))  # with its BOM
    with pytest.raises(ValueError, match=r"train\.de, line 1: not valid UTF-8 .*UTF-16 byte-order mark"):
        readers.read_lines(path)
    path = _write(tmp_path / "train.de", "Ein Hund läuft.\n".encode("utf-16-le"))  # "ä" is no UTF-8 in UTF-16
    with pytest.raises(ValueError, match=r"train\.de, line 1: not valid UTF-8 .*NUL bytes: is it UTF-16\?"):
        readers.read_lines(path)


def test_named_corpora_refuse_utf16_files(tmp_path):
    for stem in corpora.MULTI30K_FILES.values():
        for language in ("en", "de"):
            _write(tmp_path / f"{stem}.{language}", f"{stem} {language}\n")
    _write(tmp_path / "val.de", "val de\n".encode("utf-16-le"))
    with pytest.raises(ValueError, match=r"val\.de, line 1: contains a NUL byte"):
        corpora.load_pairs("multi30k-en-de", tmp_path)
    spa = tmp_path / "spa"
    spa.mkdir()
    _write(spa / corpora.SPA_FILE, "".join(f"Hi {i}.\tHola {i}.\n" for i in range(20)).encode("utf-16-le"))
    with pytest.raises(ValueError, match=r"spa\.txt, line 1: contains a NUL byte"):
        corpora.load_pairs("spa-en", spa)
    chat = tmp_path / "chat"
    chat.mkdir()
    rows = "Q,A,label\n" + "".join(f"질문 {i},대답 {i},0\n" for i in range(20))
    _write(chat / corpora.CHATBOT_FILE, rows.replace("대답 7", "대답\0 7"))
    with pytest.raises(ValueError, match=r"ChatbotData\.csv, line 9: contains a NUL byte"):
        corpora.load_pairs("chatbot-ko", chat)


def test_tsv_and_csv_columns(tmp_path):
    tsv = _write(tmp_path / "spa.txt", 'He said "hi".\tDijo "hola".\nGo.\tVe.\textra\n')
    assert readers.read_delimited(tsv)[0] == ('He said "hi".', 'Dijo "hola".')  # quotes kept in TSV
    with pytest.raises(ValueError, match=r"spa\.txt, line 2: expected 2 '\\t'-separated columns, found 3"):
        readers.read_delimited(tsv, columns=2)
    csv = _write(tmp_path / "qa.csv", 'Q,A,label\n"Hi, you",Hello,0\nBye,"See ya, ""friend""",1\n')
    assert readers.read_delimited(csv, "Q", "A", delimiter=",", header=True) == [
        ("Hi, you", "Hello"),
        ("Bye", 'See ya, "friend"'),
    ]
    with pytest.raises(ValueError, match="no column named 'Question'"):
        readers.read_delimited(csv, "Question", "A", delimiter=",", header=True)


def test_seeded_split_is_deterministic_grouped_and_order_free():
    pairs = [(f"source {i % 700}", f"target {i}") for i in range(1000)]  # sources repeat
    splits = readers.seeded_split(pairs, {"validation": 0.1, "test": 0.1}, seed=3)
    assert sum(map(len, splits.values())) == 1000 and 95 <= len(splits["validation"]) <= 105
    sources = {name: {s for s, _ in split} for name, split in splits.items()}
    assert not sources["train"] & sources["validation"] and not sources["validation"] & sources["test"]
    shuffled = pairs[:]
    random.Random(0).shuffle(shuffled)
    again = readers.seeded_split(shuffled, {"validation": 0.1, "test": 0.1}, seed=3)
    assert {name: set(split) for name, split in again.items()} == {n: set(s) for n, s in splits.items()}
    other = readers.seeded_split(pairs, {"validation": 0.1, "test": 0.1}, seed=4)
    assert set(other["validation"]) != set(splits["validation"])
    with pytest.raises(ValueError, match="fractions"):
        readers.seeded_split(pairs, {"validation": 0.6, "test": 0.5})


# --- named corpora from ../shared/data ---------------------------------------------------------


def test_multi30k_counts_and_directions(shared_data_dir):
    en_de = corpora.load_split_pairs("multi30k-en-de", shared_data_dir)
    assert {split: len(pairs) for split, pairs in en_de.items()} == MULTI30K
    assert en_de["train"][0] == (
        "Two young, White males are outside near many bushes.",
        "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
    )
    de_en = corpora.load_pairs("multi30k-de-en", shared_data_dir / "multi30k_task1", split="test")
    assert de_en == [(d, e) for e, d in en_de["test"]]  # data_dir may be the corpus folder itself


def test_multi30k_with_french_sources_trains_on_both_and_validates_on_english(shared_data_dir):
    en_de = corpora.load_split_pairs("multi30k-en-de", shared_data_dir)
    both = corpora.load_split_pairs("multi30k-en+fr-de", shared_data_dir)
    assert len(both["train"]) == 2 * len(en_de["train"])
    assert both["train"][0::2] == en_de["train"]  # English and French alternate
    assert [de for _, de in both["train"][1::2]] == [de for _, de in en_de["train"]]
    assert both["train"][1] == ("Deux jeunes hommes blancs sont dehors près de buissons.", en_de["train"][0][1])
    assert both["validation"] == en_de["validation"] and both["test"] == en_de["test"]


def test_a_dev_set_held_out_of_multi30k_train_is_never_trained_on(shared_data_dir):
    from keras_transformer.datasets.splits import hold_out_dev, load_splits
    from keras_transformer.presets import get_preset

    full = corpora.load_pairs("multi30k-en-de", shared_data_dir)
    splits = load_splits(get_preset("multi30k-en-de").replace(dev_examples=1000), shared_data_dir)
    assert len(splits["dev"]) == 1000 and len(splits["train"]) == 28_000
    assert not set(splits["dev"]) & set(splits["train"]) and set(splits["dev"]) | set(splits["train"]) == set(full)
    assert splits["validation"] == corpora.load_pairs("multi30k-en-de", shared_data_dir, "validation")
    assert hold_out_dev(full, 1000) == {"train": splits["train"], "dev": splits["dev"]}  # what the benchmark reads
    assert "dev" not in load_splits(get_preset("multi30k-en-de"), shared_data_dir)
    with pytest.raises(ValueError, match="`dev_examples` must be between 1 and 28999"):
        hold_out_dev(full, 29_000)


def test_chatbot_bundled_counts_and_split(shared_data_dir):
    bundled = corpora.BUNDLED_DIR / "korean_chatbot" / "ChatbotData.csv"
    shared = shared_data_dir / "korean_chatbot" / "ChatbotData.csv"
    assert hashlib.md5(bundled.read_bytes()).hexdigest() == hashlib.md5(shared.read_bytes()).hexdigest()
    assert (corpora.BUNDLED_DIR / "korean_chatbot" / "LICENSE.upstream").is_file()
    rows = corpora.read_chatbot(bundled)
    assert len(rows) == CHATBOT_TOTAL and {label for *_, label in rows} == {0, 1, 2}  # "2   " stripped
    splits = corpora.load_split_pairs("chatbot-ko")  # the bundled copy: no data_dir needed
    assert (len(splits["train"]), len(splits["validation"])) == (11_232, 591)
    assert splits == corpora.load_split_pairs("chatbot-ko", shared_data_dir)
    assert not {q for q, _ in splits["train"]} & {q for q, _ in splits["validation"]}


def test_spa_counts_and_directions(shared_data_dir):
    en_es = corpora.load_split_pairs("en-spa", shared_data_dir)
    assert sum(map(len, en_es.values())) == SPA_TOTAL
    assert {split: len(pairs) for split, pairs in en_es.items()} == {
        "train": 107_068,
        "validation": 5_948,
        "test": 5_948,
    }
    assert en_es["train"][0] == ("Hi.", "Hola.")  # pins the seeded split: "Go." went to another split
    es_en = corpora.load_pairs("spa-en", shared_data_dir, split="validation")
    assert es_en == [(es, en) for en, es in en_es["validation"]]


def test_load_corpus_dataset(shared_data_dir):
    ds = corpora.load_corpus("multi30k-en-de", shared_data_dir, split="validation")
    assert ds.element_spec == {"source": tf.TensorSpec([], tf.string), "target": tf.TensorSpec([], tf.string)}
    assert int(ds.cardinality()) == MULTI30K["validation"]
    first = next(iter(ds))
    assert first["target"].numpy().decode() == "Eine Gruppe von Männern lädt Baumwolle auf einen Lastwagen"


def test_corpus_errors(tmp_path, monkeypatch):
    monkeypatch.delenv(corpora.DATA_DIR_ENV, raising=False)
    with pytest.raises(ValueError, match="`name` must be one of"):
        corpora.load_pairs("wmt14-en-de")
    with pytest.raises(ValueError, match=r"`split` must be one of .*split='test'"):
        corpora.load_pairs("chatbot-ko", split="test")
    # No copy and no network (a mirror nobody serves): one line naming the file, its URL and the folder.
    monkeypatch.setenv("KERAS_TRANSFORMER_MIRROR", "http://127.0.0.1:9/offline")
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path / "tfds"))
    with pytest.raises(
        ValueError,
        match=r"^train\.en is missing and cannot be downloaded .*: download "
        r"http://127\.0\.0\.1:9/offline/train\.en\.gz and put it gunzipped in .*tfds/",
    ):
        corpora.load_pairs("multi30k-en-de")
    monkeypatch.setenv(corpora.DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(ValueError, match=r"^spa\.txt is missing .*spa-eng\.zip"):
        corpora.load_pairs("spa-en")
    monkeypatch.setenv(corpora.DATA_DIR_ENV, str(tmp_path / "empty"))
    with pytest.raises(ValueError, match=r"`data_dir` must be a folder holding ChatbotData\.csv"):
        corpora.load_pairs("chatbot-ko", data_dir=tmp_path / "empty")


# --- tensorflow-datasets builders ----------------------------------------------------------------


def _counts(builder):
    return {split: info.num_examples for split, info in builder.info.splits.items()}


def test_builder_korean_chatbot(tmp_path):
    builder = parallel_text.KoreanChatbot(data_dir=tmp_path)
    builder.download_and_prepare()
    assert _counts(builder) == {"train": 11_232, "validation": 591}
    example = next(iter(builder.as_dataset(split="validation")))
    assert set(example) == {"source", "target", "label"} and 0 <= int(example["label"]) <= 2


def test_builder_multi30k(shared_data_dir, tmp_path):
    builder = parallel_text.Multi30k(config="en-de", source_dir=shared_data_dir / "multi30k_task1", data_dir=tmp_path)
    builder.download_and_prepare()
    assert _counts(builder) == MULTI30K
    assert builder.info.supervised_keys == ("source", "target")
    with pytest.raises(ValueError, match=r"train\.en is missing and cannot be downloaded"):  # no server
        parallel_text.Multi30k(config="de-en", data_dir=tmp_path / "empty").download_and_prepare()


def test_builder_tatoeba_spa_eng(shared_data_dir, tmp_path):
    """The full 119k pairs, from a manual_dir: a few seconds."""
    builder = parallel_text.TatoebaSpaEng(config="es-en", data_dir=tmp_path)
    download_config = parallel_text.tfds.download.DownloadConfig(manual_dir=str(shared_data_dir / "spa_eng_anki"))
    builder.download_and_prepare(download_config=download_config)
    assert sum(_counts(builder).values()) == SPA_TOTAL


def test_builder_parallel_text_generic_and_errors(tmp_path):
    _write(tmp_path / "train.src", "a b\nc d\n")
    _write(tmp_path / "train.tgt", "A B\nC D\n")
    _write(tmp_path / "dev.csv", "src,tgt\nx,X\n")
    config = parallel_text.ParallelTextConfig(
        name="toy",
        files={"train": ("train.src", "train.tgt"), "validation": "dev.csv"},
        delimiter=",",
        header=True,
        source_column="src",
        target_column="tgt",
    )
    builder = parallel_text.ParallelText(config=config, source_dir=tmp_path, data_dir=tmp_path / "tfds")
    builder.download_and_prepare()
    assert _counts(builder) == {"train": 2, "validation": 1}
    assert [ex["target"] for ex in builder.as_dataset(split="validation").as_numpy_iterator()] == [b"X"]

    _write(tmp_path / "bad.tgt", "A B\n")
    bad = parallel_text.ParallelTextConfig(name="bad", files={"train": (tmp_path / "train.src", tmp_path / "bad.tgt")})
    with pytest.raises(ValueError, match=r"bad\.tgt has 1"):
        parallel_text.ParallelText(config=bad, data_dir=tmp_path / "tfds").download_and_prepare()
    with pytest.raises(ValueError, match="ParallelTextConfig with `files`"):
        parallel_text.ParallelText(
            config=parallel_text.ParallelTextConfig(name="none"), data_dir=tmp_path / "tfds"
        ).download_and_prepare()
