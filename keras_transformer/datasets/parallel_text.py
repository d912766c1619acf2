"""tensorflow-datasets builders for parallel text: local files, or Multi30k and Tatoeba downloaded.

`ParallelText` builds any corpus given as two aligned files or one TSV/CSV
per split (described by a `ParallelTextConfig`); `Multi30k`, `KoreanChatbot`
and `TatoebaSpaEng` are the corpora of `corpora.CORPORA`, with one config per
translation direction. Every example is `{"source": str, "target": str}`
(`KoreanChatbot` adds `"label"`). Raw files come from the user: the
`source_dir` constructor argument, else `tfds.download.DownloadConfig(manual_dir=...)`
(the Korean chatbot corpus is bundled and needs neither). Reading errors
(misaligned files, empty lines, non-UTF-8 bytes) are `ValueError`s that name
the file and the line. Given neither, `Multi30k` and `TatoebaSpaEng` download
their files from the canonical hosts (or `$KERAS_TRANSFORMER_MIRROR`) through
the download manager, checked against the package's `checksums.tsv` and
cached in the builder's data dir (see `keras_transformer.datasets.downloads`).

Example:

>>> builder = Multi30k(config="en-de", data_dir="/tmp/tfds")     # downloads, or source_dir="my_corpora/multi30k_task1"
>>> builder.download_and_prepare()
>>> ds = builder.as_dataset(split="validation")          # 1,014 examples
>>> custom = ParallelText(
...     config=ParallelTextConfig(name="my_corpus", files={"train": ("train.src", "train.tgt")}),
...     data_dir="/tmp/tfds")
"""

import dataclasses
import pathlib

import tensorflow_datasets as tfds

from keras_transformer.datasets import corpora, downloads, readers

_VERSION = tfds.core.Version("1.0.0")


def _text_features(**extra):
    return tfds.features.FeaturesDict({"source": tfds.features.Text(), "target": tfds.features.Text(), **extra})


class _LocalBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """Base: adds a `source_dir` constructor argument, falling back on `manual_dir`."""

    VERSION = _VERSION
    RELEASE_NOTES = {"1.0.0": "First release."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = "Pass the folder of the raw files as `source_dir` or manual_dir."

    def __init__(self, *, source_dir=None, **kwargs):
        self._source_dir = source_dir
        super().__init__(**kwargs)

    def _generate_examples(self, pairs):
        for index, (source, target) in enumerate(pairs):
            yield index, {"source": source, "target": target}

    def _source(self, dl_manager, required=True):
        if self._source_dir is not None:
            return pathlib.Path(self._source_dir)
        try:
            return pathlib.Path(dl_manager.manual_dir)
        except AssertionError as e:  # tfds's way of saying: no (or an empty) manual_dir
            if not required:
                return None
            raise ValueError(
                f"`source_dir` (or a manual_dir) must name the folder of {self.name}'s files. "
                f"Received: source_dir=None ({e})"
            ) from None

    def _source_or_download(self, dl_manager, folder):
        """`source_dir` or the manual_dir if given, else the verified download (cached in the data dir)."""
        source = self._source(dl_manager, required=False)
        if source is not None:
            return source
        return downloads.fetch(folder, data_dir=pathlib.Path(dl_manager.download_dir).parent)


@dataclasses.dataclass(eq=False)
class ParallelTextConfig(tfds.core.BuilderConfig):
    """Describes a local parallel corpus for `ParallelText`.

    Args:
        name: the config's name; it names the prepared data's folder, so give
            each corpus its own.
        files: dict, split name -> `(source_path, target_path)` (two aligned
            files) or -> one TSV/CSV path. Relative paths are taken from the
            builder's `source_dir` or `manual_dir`.
        source_column, target_column: columns of a TSV/CSV (index, or name
            when `header`).
        delimiter: `"\\t"` for TSV (no quoting), `","` for CSV (quoted fields).
        header: whether a TSV/CSV starts with a header row.

    Example:

    >>> ParallelTextConfig(name="ko_chat", files={"train": "chat.csv"}, delimiter=",", header=True,
    ...                    source_column="Q", target_column="A")
    """

    files: dict = dataclasses.field(default_factory=dict)
    source_column: object = 0
    target_column: object = 1
    delimiter: str = "\t"
    header: bool = False


class ParallelText(_LocalBuilder):
    """A builder for any local parallel corpus described by a `ParallelTextConfig`."""

    name = "parallel_text"

    def _info(self):
        return self.dataset_info_from_configs(features=_text_features(), supervised_keys=("source", "target"))

    def _split_generators(self, dl_manager):
        config = self.builder_config
        if not isinstance(config, ParallelTextConfig) or not config.files:
            raise ValueError(
                "`config` must be a ParallelTextConfig with `files` naming each split's files. "
                f"Received: config={config!r}"
            )
        root = self._source(dl_manager, required=False)
        resolve = lambda p: pathlib.Path(p) if root is None else root / p  # noqa: E731
        splits = {}
        for split, paths in config.files.items():
            if isinstance(paths, (tuple, list)):
                pairs = readers.read_aligned(resolve(paths[0]), resolve(paths[1]))
            else:
                pairs = readers.read_delimited(
                    resolve(paths),
                    config.source_column,
                    config.target_column,
                    delimiter=config.delimiter,
                    header=config.header,
                )
            if not pairs:
                files = [paths] if isinstance(paths, (str, pathlib.PurePath)) else paths
                raise ValueError(
                    f"{' and '.join(str(resolve(p)) for p in files)}: no examples for split "
                    f"{split!r} (an empty file, or a header row only); every split needs one."
                )
            splits[split] = self._generate_examples(pairs)
        return splits


def _direction_configs(pairs, description):
    return [
        tfds.core.BuilderConfig(name=f"{src}-{tgt}", description=f"{description}: {src} -> {tgt}") for src, tgt in pairs
    ]


class Multi30k(_LocalBuilder):
    """Multi30k Task 1 (Flickr30k captions) en/de/fr from a local `multi30k_task1` folder.

    Splits: train 29,000, validation 1,014 (`val.*`), test 1,000
    (`test_2016_flickr.*`, sacreBLEU's `multi30k/2016`). Research use only.
    """

    name = "multi30k"
    BUILDER_CONFIGS = _direction_configs([("en", "de"), ("de", "en"), ("en", "fr"), ("fr", "en")], "Multi30k")
    MANUAL_DOWNLOAD_INSTRUCTIONS = (
        "Optional: without it the files are downloaded. Put train.{en,de,fr}, val.{en,de,fr} and "
        "test_2016_flickr.{en,de,fr} (gunzipped from https://github.com/multi30k/dataset data/task1/raw) in one "
        "folder and pass it as `source_dir` or manual_dir."
    )

    def _info(self):
        return self.dataset_info_from_configs(
            features=_text_features(),
            supervised_keys=("source", "target"),
            homepage="https://github.com/multi30k/dataset",
        )

    def _split_generators(self, dl_manager):
        name = f"multi30k-{self.builder_config.name}"
        splits = corpora.load_split_pairs(name, self._source_or_download(dl_manager, "multi30k_task1"))
        return {split: self._generate_examples(pairs) for split, pairs in splits.items()}


class TatoebaSpaEng(_LocalBuilder):
    """Tatoeba English-Spanish pairs (`spa.txt` of manythings.org/anki), seeded 90/5/5 split.

    Pairs sharing an English sentence stay in one split. CC-BY 2.0 FR.
    """

    name = "tatoeba_spa_eng"
    BUILDER_CONFIGS = _direction_configs([("en", "es"), ("es", "en")], "Tatoeba")
    MANUAL_DOWNLOAD_INSTRUCTIONS = (
        "Optional: without it the file is downloaded. Unzip spa-eng.zip "
        "(http://storage.googleapis.com/download.tensorflow.org/data/spa-eng.zip) and pass "
        "the folder holding spa.txt as `source_dir` or manual_dir."
    )

    def _info(self):
        return self.dataset_info_from_configs(
            features=_text_features(),
            supervised_keys=("source", "target"),
            homepage="https://tatoeba.org",
        )

    def _split_generators(self, dl_manager):
        name = "en-spa" if self.builder_config.name == "en-es" else "spa-en"
        splits = corpora.load_split_pairs(name, self._source_or_download(dl_manager, "spa_eng_anki"))
        return {split: self._generate_examples(pairs) for split, pairs in splits.items()}


class KoreanChatbot(_LocalBuilder):
    """The Korean chatbot corpus (question -> answer, with a 0/1/2 topic label), bundled; seeded 95/5 split.

    Pairs sharing a question stay in one split. MIT, Youngsook Song (2018).
    """

    name = "korean_chatbot"

    def _info(self):
        return self.dataset_info_from_configs(
            features=_text_features(label=tfds.features.ClassLabel(names=["everyday", "breakup", "love"])),
            supervised_keys=("source", "target"),
            homepage="https://github.com/songys/Chatbot_data",
        )

    def _split_generators(self, dl_manager):
        source = self._source(dl_manager, required=False)
        folder = corpora.resolve_dir("chatbot-ko", None if source is None else str(source))
        triples = corpora.read_chatbot(folder / corpora.CHATBOT_FILE)
        splits = corpora.split_rows(triples, corpora.CHATBOT_FRACTIONS, folder / corpora.CHATBOT_FILE)
        return {split: self._generate_examples(rows) for split, rows in splits.items()}

    def _generate_examples(self, triples):
        for index, (question, answer, label) in enumerate(triples):
            yield index, {"source": question, "target": answer, "label": label}
