"""Corpus BLEU and chrF with sacreBLEU, cased and lowercased, from lists or files.

sacreBLEU scores detokenized text with its own standard tokenization
(`13a`), so scores compare across papers and toolkits; its signature (the
exact settings) is returned with every score.

Example:

>>> scores = score(["Ein Hund rennt."], ["Ein Hund rennt im Schnee."])
>>> sorted(scores)
['bleu', 'bleu_lowercase', 'chrf', 'chrf_lowercase', 'length_ratio', 'num_sentences', 'signatures']
>>> scores = score_files("hypotheses.de", "test_2016_flickr.de")
"""

import pathlib

from sacrebleu.metrics import BLEU, CHRF

from keras_transformer.files.text_files import read_lines


def score(hypotheses, references):
    """Corpus BLEU and chrF of `hypotheses` against `references`.

    Args:
        hypotheses: list of strings, one translation per sentence.
        references: list of strings (one reference each), or a list of such
            lists (several references per sentence).

    Returns:
        A dict: `bleu`, `bleu_lowercase`, `chrf`, `chrf_lowercase` (floats,
        0-100), `length_ratio` (the hypotheses' length over the references',
        in BLEU's tokens; below 1 BLEU's brevity penalty applies, well above
        1 the translations run long), `num_sentences` and `signatures`
        (sacreBLEU's settings).

    Example:

    >>> score(["the cat sat"], ["the cat sat"])["bleu"]
    100.00000000000004
    """
    hypotheses, references = list(hypotheses), list(references)
    flat = not references or isinstance(references[0], str)
    reference_sets = [references] if flat else [list(r) for r in references]
    if not hypotheses:
        raise ValueError("`hypotheses` must not be empty. Received: hypotheses=[]")
    for index, refs in enumerate(reference_sets):
        if len(refs) != len(hypotheses):
            raise ValueError(
                "`references` must have one line per hypothesis. Received: "
                f"{len(hypotheses)} hypotheses and {len(refs)} references (set {index})"
            )
    results, signatures = {"num_sentences": len(hypotheses)}, {}
    for name, metric in (("bleu", BLEU), ("chrf", CHRF)):
        for suffix, lowercase in (("", False), ("_lowercase", True)):
            scorer = metric(lowercase=lowercase)
            corpus = scorer.corpus_score(hypotheses, reference_sets)
            results[name + suffix] = corpus.score
            signatures[name + suffix] = str(scorer.get_signature())
            if name + suffix == "bleu":
                results["length_ratio"] = corpus.sys_len / max(corpus.ref_len, 1)
    results["signatures"] = signatures
    return results


def score_files(hypothesis_path, reference_paths):
    """`score` on UTF-8 files, one sentence a line (several reference files allowed).

    Example:

    >>> score_files("hypotheses.de", ["reference.de"])["bleu"]
    """
    if isinstance(reference_paths, (str, pathlib.Path)):
        reference_paths = [reference_paths]
    return score(read_lines(hypothesis_path), [read_lines(p) for p in reference_paths])


def format_scores(scores):
    """One line for people.

    E.g. `BLEU 23.41 (lowercased 24.02)  chrF 51.20 (lowercased 52.03)  length 0.982  1000 sentences`.
    """
    return (
        f"BLEU {scores['bleu']:.2f} (lowercased {scores['bleu_lowercase']:.2f})  "
        f"chrF {scores['chrf']:.2f} (lowercased {scores['chrf_lowercase']:.2f})  "
        f"length {scores['length_ratio']:.3f}  "
        f"{scores['num_sentences']} sentences"
    )
