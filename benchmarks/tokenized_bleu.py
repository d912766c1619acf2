"""BLEU on lowercased, Moses-normalized and Moses-tokenized text: the metric of published Multi30k results.

Detokenized translations (what `translate` and `benchmarks/multi30k.py` write)
are punctuation-normalized, lowercased and tokenized with sacremoses, then
scored by sacreBLEU without further tokenization against references prepared
the same way, e.g. Multi30k's `tok/test_2016_flickr.lc.norm.tok.de`. Prints
this BLEU beside sacreBLEU's own lowercased 13a BLEU against the raw
references, so the two metrics can be compared on the same translations.
Needs `pip install sacremoses`.

Example:

    python benchmarks/tokenized_bleu.py benchmarks/results/multi30k-en-de/current.test_2016_flickr.hyp.de \\
        --data-dir DATA/multi30k_task1 --test test_2016_flickr --language de
"""

import argparse
import os
import pathlib
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import sacrebleu  # noqa: E402

from keras_transformer.evaluation import read_lines, score  # noqa: E402


def moses_lowercased(lines, language):
    """Normalizes punctuation, lowercases and tokenizes (`&quot;` escapes, as Multi30k's `tok/` files)."""
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    normalizer, tokenizer = MosesPunctNormalizer(lang=language), MosesTokenizer(lang=language)
    return [tokenizer.tokenize(normalizer.normalize(line).lower(), return_str=True) for line in lines]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("hypotheses", help="detokenized translations, one a line")
    parser.add_argument("--data-dir", required=True, help="a multi30k_task1 folder with its tok/ references")
    parser.add_argument("--test", default="test_2016_flickr")
    parser.add_argument("--language", default="de")
    args = parser.parse_args(argv)

    data = pathlib.Path(args.data_dir)
    hypotheses = read_lines(args.hypotheses)
    raw = read_lines(data / f"{args.test}.{args.language}")
    tokenized = read_lines(data / "tok" / f"{args.test}.lc.norm.tok.{args.language}")
    if not len(hypotheses) == len(raw) == len(tokenized):
        raise SystemExit(
            f"line counts differ: {len(hypotheses)} translations, {len(raw)} references, "
            f"{len(tokenized)} tokenized references"
        )
    same = sum(a == b for a, b in zip(moses_lowercased(raw, args.language), tokenized))
    ours = sacrebleu.corpus_bleu(moses_lowercased(hypotheses, args.language), [tokenized], tokenize="none", force=True)
    sacre = score(hypotheses, raw)["bleu_lowercase"]
    print(f"{args.hypotheses}")
    print(f"  BLEU, lowercased Moses-tokenized text (against tok/): {ours.score:.2f}")
    print(f"  sacreBLEU --lowercase, 13a (against the raw references): {sacre:.2f}")
    print(f"  (the raw references, prepared the same way, equal {same} of {len(raw)} tok/ lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
