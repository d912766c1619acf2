"""The corpora the `train` command knows by name, read from local files only.

| name                               | source -> target          | splits                                        |
|------------------------------------|---------------------------|-----------------------------------------------|
| `chatbot-ko`                       | question -> answer        | train 11,232 / validation 591 (seeded 95/5)   |
| `multi30k-en-de`, `multi30k-de-en` | English <-> German        | train 29,000 / validation 1,014 / test 1,000  |
| `multi30k-en-fr`, `multi30k-fr-en` | English <-> French        | as above                                      |
| `multi30k-en+fr-de`                | English, French -> German | train 58,000 / validation 1,014 / test 1,000  |
| `spa-en`, `en-spa`                 | Spanish <-> English       | train 107,068 / validation 5,948 / test 5,948 |

Names read `source-target` (`en-spa` is the keras.io example's direction);
the Tatoeba split is seeded 90/5/5. Multi30k is three-way parallel:
`multi30k-en+fr-de` trains on the English and the French source of every
German training sentence (alternating, English first) and validates and
tests on English -> German only.

Where the files come from (see `resolve_dir`): a folder of plain files given
as `data_dir` (the corpus folder itself or its parent), or
`$KERAS_TRANSFORMER_DATA_DIR`; else Multi30k (research use only:
`multi30k_task1/{train,val,test_2016_flickr}.{en,de,fr}`) and Tatoeba (CC-BY:
`spa_eng_anki/spa.txt`) are downloaded once from their canonical hosts (or
`$KERAS_TRANSFORMER_MIRROR`), checked against the sha256 sums shipped with
the package and cached in the tensorflow-datasets data dir (`data_dir`, else
`$TFDS_DATA_DIR`, else `~/tensorflow_datasets`); see `downloads`. The Korean
chatbot corpus (MIT) is bundled in the package.

Example:

>>> pairs = load_pairs("multi30k-en-de", split="validation")  # downloaded once, then cached
>>> len(pairs)
1014
>>> ds = load_corpus("chatbot-ko", split="train")  # {"source": str, "target": str}
"""

import dataclasses
import hashlib
import itertools
import os
import pathlib

from keras_transformer.datasets import downloads, readers

DATA_DIR_ENV = "KERAS_TRANSFORMER_DATA_DIR"
BUNDLED_DIR = pathlib.Path(__file__).resolve().parents[1] / "data"
SPLIT_SEED = 0
VALIDATION_FILES = "`corpus_files['validation']`"  # how errors name the argument of the validation files


@dataclasses.dataclass(frozen=True)
class Corpus:
    """How to read one named corpus: its folder, its languages and its splits."""

    name: str
    folder: str
    source_language: str
    target_language: str
    splits: tuple
    bundled: bool = False
    extra_train_sources: tuple = ()  # languages whose training pairs (into target_language) join the train split


def _multi30k(src, tgt, extra_train_sources=()):
    sources = "+".join((src, *extra_train_sources))
    return Corpus(
        f"multi30k-{sources}-{tgt}",
        "multi30k_task1",
        src,
        tgt,
        ("train", "validation", "test"),
        extra_train_sources=extra_train_sources,
    )


CORPORA = {
    corpus.name: corpus
    for corpus in [
        Corpus("chatbot-ko", "korean_chatbot", "ko", "ko", ("train", "validation"), bundled=True),
        _multi30k("en", "de"),
        _multi30k("de", "en"),
        _multi30k("en", "fr"),
        _multi30k("fr", "en"),
        _multi30k("en", "de", extra_train_sources=("fr",)),
        Corpus("spa-en", "spa_eng_anki", "es", "en", ("train", "validation", "test")),
        Corpus("en-spa", "spa_eng_anki", "en", "es", ("train", "validation", "test")),
    ]
}
MULTI30K_FILES = {"train": "train", "validation": "val", "test": "test_2016_flickr"}
CHATBOT_FILE = "ChatbotData.csv"
CHATBOT_FRACTIONS = {"validation": 0.05}
SPA_FILE = "spa.txt"
SPA_FRACTIONS = {"validation": 0.05, "test": 0.05}
_MARKER_FILES = {"multi30k_task1": "train.en", "korean_chatbot": CHATBOT_FILE, "spa_eng_anki": SPA_FILE}


def get_corpus(name):
    """Returns the `Corpus` called `name`, or raises a `ValueError` listing the names."""
    if name not in CORPORA:
        raise ValueError(f"`name` must be one of {sorted(CORPORA)}. Received: name={name!r}")
    return CORPORA[name]


def resolve_dir(corpus, data_dir=None):
    """Finds or fetches the folder holding `corpus`'s files.

    In order: a folder of plain files (`data_dir` or `data_dir/<folder>`, or
    with no `data_dir` the same under `$KERAS_TRANSFORMER_DATA_DIR`), the
    bundled copy, then for Multi30k and Tatoeba a download verified and cached
    by tensorflow-datasets with `data_dir` (else `$TFDS_DATA_DIR`) as its data
    dir (see `downloads`).
    """
    corpus = get_corpus(corpus) if isinstance(corpus, str) else corpus
    marker = _MARKER_FILES[corpus.folder]
    roots = [data_dir] if data_dir is not None else [os.environ.get(DATA_DIR_ENV)]
    if corpus.bundled and data_dir is None:
        roots.append(BUNDLED_DIR)
    for root in filter(None, roots):
        for candidate in (pathlib.Path(root), pathlib.Path(root) / corpus.folder):
            if (candidate / marker).is_file():
                return candidate
    if corpus.folder in downloads.DOWNLOADS:
        return downloads.fetch(corpus.folder, data_dir)
    raise ValueError(
        f"`data_dir` must be a folder holding {marker} (or its parent holding {corpus.folder}/{marker}) "
        f"for corpus {corpus.name!r}. Received: data_dir={data_dir!r} "
        f"(${DATA_DIR_ENV}={os.environ.get(DATA_DIR_ENV)!r})"
    )


def read_chatbot(path):
    """Reads ChatbotData.csv into `(question, answer, label)` triples; labels are stripped ints 0-2."""
    rows = readers.iter_rows(path, ["Q", "A", "label"], delimiter=",", header=True, columns=3)
    triples = []
    for line, (question, answer, label) in rows:
        if label not in ("0", "1", "2"):
            raise ValueError(f"{path}, line {line}: label must be 0, 1 or 2. Received: label={label!r}")
        triples.append((question, answer, int(label)))
    return triples


def minimum_rows(fractions):
    """The fewest rows (with distinct sources) that `readers.seeded_split` splits with no split empty.

    Example:

    >>> minimum_rows(CHATBOT_FRACTIONS), minimum_rows(SPA_FRACTIONS)
    (11, 11)
    """

    def every_split_gets_one(rows):
        taken = [round(fraction * rows) for fraction in fractions.values()]
        return all(count >= 1 for count in taken) and rows - sum(taken) >= 1

    return next(rows for rows in itertools.count(1) if every_split_gets_one(rows))


def split_rows(rows, fractions, path):
    """`readers.seeded_split` of the `rows` read from `path`; a split left empty is a `ValueError` naming `path`.

    Example:

    >>> rows = [("q1", "a1"), ("q2", "a2"), ("q3", "a3")]
    >>> split_rows(rows, CHATBOT_FRACTIONS, "ChatbotData.csv")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: ChatbotData.csv has 3 rows (3 distinct sources): too few for the seeded split into ...
    >>> rows = [(f"q{i}", f"a{i}") for i in range(11)]
    >>> {name: len(split) for name, split in split_rows(rows, CHATBOT_FRACTIONS, "ChatbotData.csv").items()}
    {'train': 10, 'validation': 1}
    """
    if not rows:
        raise ValueError(
            f"{path} holds no examples (an empty file, or a header row only); "
            f"at least {minimum_rows(fractions)} rows are needed."
        )
    splits = readers.seeded_split(rows, fractions, seed=SPLIT_SEED)
    empty = [name for name, split in splits.items() if not split]
    if empty:
        shares = " / ".join(
            f"{name} {100 * f:g}%" for name, f in {"train": 1 - sum(fractions.values()), **fractions}.items()
        )
        raise ValueError(
            f"{path} has {len(rows)} rows ({len({row[0] for row in rows})} distinct sources): too few for the "
            f"seeded split into {shares}, which needs at least {minimum_rows(fractions)} rows with distinct "
            f"sources so that no split is empty (empty: {', '.join(empty)})."
        )
    return splits


def _read_multi30k_split(folder, stem, source_language, target_language):
    """The aligned pairs of one Multi30k split; files without a sentence are a `ValueError` naming them."""
    source_path, target_path = folder / f"{stem}.{source_language}", folder / f"{stem}.{target_language}"
    pairs = readers.read_aligned(source_path, target_path)
    if not pairs:
        raise ValueError(f"{source_path} and {target_path} hold no sentences; every split needs at least one pair.")
    return pairs


def load_split_pairs(name, data_dir=None):
    """Returns every split of corpus `name` as a dict, split name -> list of `(source, target)`.

    Every split holds at least one pair: a file too short for that is a
    `ValueError` naming it (see `split_rows`).
    """
    corpus = get_corpus(name)
    folder = resolve_dir(corpus, data_dir)
    if corpus.folder == "multi30k_task1":
        src, tgt = corpus.source_language, corpus.target_language
        splits = {split: _read_multi30k_split(folder, stem, src, tgt) for split, stem in MULTI30K_FILES.items()}
        stem = MULTI30K_FILES["train"]
        extra = [_read_multi30k_split(folder, stem, lang, tgt) for lang in corpus.extra_train_sources]
        # Alternated rather than appended: the shuffle buffer is smaller than the split.
        splits["train"] = [pair for pairs in zip(splits["train"], *extra, strict=True) for pair in pairs]
        return splits
    if corpus.folder == "korean_chatbot":
        pairs = [(q, a) for q, a, _ in read_chatbot(folder / CHATBOT_FILE)]
        return split_rows(pairs, CHATBOT_FRACTIONS, folder / CHATBOT_FILE)
    pairs = readers.read_delimited(folder / SPA_FILE, 0, 1, delimiter="\t", columns=2)  # English, Spanish
    splits = split_rows(pairs, SPA_FRACTIONS, folder / SPA_FILE)  # grouped by the English side
    if corpus.source_language == "es":
        splits = {split: [(es, en) for en, es in split_pairs] for split, split_pairs in splits.items()}
    return splits


def load_pairs(name, data_dir=None, split="train"):
    """Returns one split of corpus `name` as a list of `(source, target)` strings (no TensorFlow).

    Args:
        name: a key of `CORPORA`, e.g. `"multi30k-en-de"`.
        data_dir: folder of the raw files or its parent; see the module docstring.
        split: `"train"`, `"validation"` or `"test"` (where the corpus has one).
    """
    corpus = get_corpus(name)
    if split not in corpus.splits:
        raise ValueError(f"`split` must be one of {corpus.splits} for {name!r}. Received: split={split!r}")
    return load_split_pairs(name, data_dir)[split]


def load_corpus(name, data_dir=None, split="train"):
    """Returns one split of corpus `name` as a `tf.data.Dataset` of `{"source": str, "target": str}`.

    The pairs are read in Python (a second for 119k lines) and held in memory;
    use the tensorflow-datasets builders in `parallel_text` for a cached,
    versioned copy on disk.

    Example:

    >>> ds = load_corpus("multi30k-de-en", data_dir="my_corpora", split="train")  # my_corpora/multi30k_task1/
    >>> next(iter(ds))["source"].numpy().decode()
    'Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.'
    """
    import tensorflow as tf

    pairs = load_pairs(name, data_dir, split)
    sources, targets = zip(*pairs) if pairs else ((), ())
    return tf.data.Dataset.from_tensor_slices(
        {"source": tf.constant(list(sources), tf.string), "target": tf.constant(list(targets), tf.string)}
    )


OWN_FILES = "own-files"  # the corpus name in a run's preset when it trained on `corpus_files`
TEXT = "text"  # `corpus_files[split] = {"text": path}`: a file of texts, one a line (a language model's)
VALIDATION_SHARE, MIN_VALIDATION, MAX_VALIDATION = 0.01, 100, 3000


def held_out_size(count):
    """How many of `count` training pairs become the validation split when none is given: 1%, 100 to 3,000.

    Example:

    >>> held_out_size(300), held_out_size(50_000), held_out_size(1_000_000)
    (100, 500, 3000)
    """
    return min(MAX_VALIDATION, max(MIN_VALIDATION, round(VALIDATION_SHARE * count)))


def check_corpus_files(files):
    """A `files` argument of `load_file_splits` of the wrong shape is a ValueError (the files are not read)."""
    if not isinstance(files, dict) or "train" not in files or set(files) - {"train", "validation"}:
        raise ValueError(
            "`corpus_files` must be a dict with a 'train' entry (and optionally 'validation'), each "
            "a (source_path, target_path) pair, one two-column TSV path or {'text': path}. "
            f"Received: corpus_files={files!r}"
        )
    for split, paths in files.items():
        if not (
            isinstance(paths, (str, os.PathLike))
            or (isinstance(paths, (tuple, list)) and len(paths) == 2)
            or (isinstance(paths, dict) and set(paths) == {TEXT} and isinstance(paths[TEXT], (str, os.PathLike)))
        ):
            raise ValueError(
                f"`corpus_files[{split!r}]` must be a (source_path, target_path) pair, one TSV path or "
                f"{{'text': path}}. Received: corpus_files[{split!r}]={paths!r}"
            )
        for path in _paths(paths):
            if os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path):
                raise ValueError(
                    f"{path} is not a regular file: a training run reads its corpus again (its sha256 is recorded "
                    "for resuming); write it to a file first"
                )
    if len({is_texts(paths) for paths in files.values()}) > 1:
        raise ValueError(f"`corpus_files` must be texts or pairs in every split, not both. Received: {files!r}")


def is_texts(paths):
    """Whether a split of `corpus_files` is a file of texts, one a line (`{"text": path}`), not pairs."""
    return isinstance(paths, dict)


def _read_files(paths):
    """The pairs of two aligned files or one two-column TSV; every check names the file and the line.

    A file of texts (`{"text": path}`) gives each text as the pair `(text, "")`.
    """
    if is_texts(paths):
        texts = readers.read_texts(paths[TEXT])
        if not texts:
            raise ValueError(f"{paths[TEXT]} holds no text: a language model's corpus is one text a line.")
        return [(text, "") for text in texts]
    if isinstance(paths, (str, os.PathLike)):
        pairs = readers.read_delimited(paths, 0, 1, delimiter="\t", columns=2)
        names = [paths]
    else:
        pairs = readers.read_aligned(*paths)
        names = paths
    if not pairs:
        raise ValueError(f"{' and '.join(str(name) for name in names)} hold no sentences; every split needs a pair.")
    return pairs


def load_file_splits(files):
    """The splits of a user's own parallel corpus: dict, split name -> list of `(source, target)`.

    Args:
        files: dict with a `"train"` entry and an optional `"validation"`
            entry, each `(source_path, target_path)` (two line-aligned UTF-8
            files), one path of a two-column (source TAB target) TSV, or
            `{"text": path}`, a language model's texts, one a line (blank
            lines skipped; each the pair `(text, "")`). With no
            `"validation"`, a seeded 1% of the training pairs (at least 100,
            at most 3,000; see `held_out_size`) is held out, pairs that
            share a source kept together.

    Example:

    >>> splits = load_file_splits({"train": ("my_corpus/train.en", "my_corpus/train.de")})
    >>> splits = load_file_splits({"train": "pairs.tsv", "validation": "valid.tsv"})
    """
    check_corpus_files(files)
    splits = {split: _read_files(paths) for split, paths in files.items()}
    if "validation" not in splits:
        train, size = splits["train"], held_out_size(len(splits["train"]))
        if len(train) <= size:
            names = _paths(files["train"])
            kind = "text" if is_texts(files["train"]) else "pair"
            pairs = f"{len(train)} {kind}" + ("" if len(train) == 1 else "s")
            raise ValueError(
                f"{' and '.join(str(name) for name in names)} hold {pairs}: too few to hold out "
                f"{size} for validation; give validation files too ({VALIDATION_FILES})."
            )
        splits = readers.seeded_split(train, {"validation": size / len(train)}, seed=SPLIT_SEED)
    return splits


def _paths(paths):
    """The file paths of one split of `corpus_files`."""
    if is_texts(paths):
        return [paths[TEXT]]
    return [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)


def describe_files(files):
    """What a run's config.json records of `corpus_files`: each file's absolute path and sha256.

    Example:

    >>> describe_files({"train": "pairs.tsv"})  # doctest: +SKIP
    {'train': [{'path': '/home/me/pairs.tsv', 'sha256': '9f86d0...'}], 'validation': 'held out: 1%, seed 0'}
    """

    def record(path):
        path = pathlib.Path(path).resolve()
        return {"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}

    described = {split: [record(path) for path in _paths(paths)] for split, paths in files.items()}
    described.setdefault(
        "validation",
        f"held out of train: {VALIDATION_SHARE:.0%} ({MIN_VALIDATION} to {MAX_VALIDATION} pairs), seed {SPLIT_SEED}",
    )
    return described
