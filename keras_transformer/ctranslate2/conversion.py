"""A training run as a CTranslate2 model: the fast CPU engine people deploy for translation.

`convert_run(run, output)` reads a run directory (`config.json`,
`model.keras`, `tokenizers/`) and writes a CTranslate2 model directory
(`model.bin`, `config.json`, the vocabulary files) with CTranslate2's own
`TransformerSpec` API, plus `keras_transformer.json` (what it was made from)
and `MANIFEST.sha256`. `transformer_spec(model, ...)` builds the spec alone.

What the spec holds, and why it decodes as our model does:

- the same post-norm or pre-norm layers (`norm_first`), with the final
  LayerNorms of a pre-norm model, and the model's LayerNorm epsilon;
- the embeddings, scaled by √d_model where the model scales them, and the
  model's positional-encoding table set explicitly (ours interleaves sine
  and cosine where CTranslate2's built-in table puts all sines first; an
  imported Marian model's table is laid out as CTranslate2's; an M2M100 or
  NLLB model's is fairseq's, from its row `pad_id + 1` on, as CTranslate2's
  own M2M100 converter sets it);
- attention projections in CTranslate2's layout (self-attention q/k/v fused
  into one matrix; cross-attention q, then k/v fused), the FFN, and the
  output projection (the target embedding when tied, with its bias where
  the model has one: Marian's `final_logits_bias`);
- the pieces as the vocabulary, id for id, and the tokenizer's own UNK,
  START and END pieces: `<unk>`/`<s>`/`</s>` at 1/2/3 for this package's
  tokenizers, Marian's `vocab.json` order for an imported model, whose
  decoder starts from `<pad>`, and an M2M100 or NLLB model's vocabulary
  with its language tokens (`__de__`, `deu_Latn`), decoding from `</s>`
  (`tokenizers.kinds`); one shared vocabulary file when source and target
  pieces are the same.

Decode it with `ctranslate2.Translator(path).translate_batch(pieces,
beam_size=1, min_decoding_length=0, suppress_sequences=[["<pad>"], ["<s>"]],
max_input_length=L, max_decoding_length=L)`, `L` the model's `max_length`
(in `keras_transformer.json`): our searches never generate PAD or START, may
end at once, and the positional table holds `L` positions. For beam search,
CTranslate2 divides by `length ** length_penalty` where we divide by GNMT's
`((5 + length) / 6) ** alpha`; `length_penalty = alpha * n / (5 + n)`, with
`n` a typical output length, ranks hypotheses of about that length alike.

An M2M100 or NLLB model (its `keras_transformer.json` names the
`source_language` position) takes each source framed as transformers'
tokenizer frames it, `[src_lang] pieces </s>` (`pieces </s> [src_lang]`
for NLLB's `legacy_behaviour`: CTranslate2 appends nothing), and the target
language as the first token of the output:
`translate_batch(sources, target_prefix=[[tgt_lang]] * len(sources))`,
as with CTranslate2's own converter; a `target_prefix` may go on with the
pieces of the first words of the translation, for any model.

Example:

>>> convert_run("saved_models/multi30k-en-de", "saved_models/en-de-ct2")
'saved_models/en-de-ct2'
>>> import ctranslate2
>>> translator = ctranslate2.Translator("saved_models/en-de-ct2", inter_threads=2, intra_threads=1)
>>> convert_run("saved_models/nllb", "saved_models/nllb-ct2")  # doctest: +SKIP
>>> ctranslate2.Translator("saved_models/nllb-ct2").translate_batch(  # doctest: +SKIP
...     [["eng_Latn", "▁A", "▁dog", "▁runs", ".", "</s>"]], target_prefix=[["deu_Latn"]])
"""

import json
import pathlib

from keras_transformer import runs
from keras_transformer.ctranslate2.spec import transformer_spec
from keras_transformer.files import atomic, destinations, manifest
from keras_transformer.models.loading import load_model

PROVENANCE = destinations.CTRANSLATE2_PROVENANCE
QUANTIZATIONS = ("float32", "int8", "int8_float32", "int16", "float16", "bfloat16", "int8_float16", "int8_bfloat16")


def convert_run(run, output, *, quantization=None, overwrite=False, record=None):
    """Writes the training run `run` as a CTranslate2 model directory at `output`, atomically.

    Every check runs before the model loads: `run` must be a run directory of
    one model (not an ensemble), and `output` must be new, an empty folder, or
    a CTranslate2 export of this package (replaced only when `overwrite` is
    true) that neither holds nor lies inside `run`.

    Args:
        run: a training run directory.
        output: the folder to write.
        quantization: `None` (the weights as trained, float32) or one of
            `QUANTIZATIONS` (e.g. `"int8"`), CTranslate2's weight types.
        overwrite: replace an earlier CTranslate2 export of this package.
        record: more entries for `keras_transformer.json` (e.g. the
            `run_sha256` that `engines.ctranslate2.cache.cached_model` checks).

    Returns:
        `output` as a string.

    Raises:
        ValueError: naming `run`, `output` or `quantization`, or the part of
            the model CTranslate2 cannot represent.

    Example:

    >>> convert_run("saved_models/multi30k-en-de", "saved_models/en-de-ct2-int8", quantization="int8")
    'saved_models/en-de-ct2-int8'
    """
    _require_ctranslate2()
    run = runs.single_model_run(
        run,
        f"CTranslate2 models hold one Transformer. Received: run={str(run)!r}; convert one member (e.g. its "
        "member-0/ folder) instead",
    )
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ValueError(
            f"`quantization` must be None or one of {QUANTIZATIONS}. Received: quantization={quantization!r}"
        )
    destinations.check_separate(run, output, what="the export")
    if destinations.check_destination(output, destinations.CTRANSLATE2) == "ours" and not overwrite:
        raise destinations.DestinationInUseError(output, "a CTranslate2 export", ["overwrite"])

    runs.warn_if_unfinished(run)
    config = runs.RunConfig.read(run)
    model = load_model(run / runs.MODEL)
    source_pieces, target_pieces, position = _vocabularies(run, model)
    add_source_end = config.add_source_end and position is None  # a multilingual source comes framed
    spec = transformer_spec(model, source_pieces, target_pieces, add_source_end=add_source_end)
    spec.validate()
    spec.optimize(quantization=quantization)
    provenance = {
        "created_by": destinations.CREATOR,
        "format": "ctranslate2",
        "run": str(run),
        "quantization": quantization or "float32",
        "max_length": int(model.max_length),
        "add_source_end": add_source_end,
        "source_language": position,
        **(record or {}),
    }

    def write(tmp):
        spec.save(str(tmp))
        (pathlib.Path(tmp) / PROVENANCE).write_text(json.dumps(provenance, indent=2) + "\n", encoding="utf-8")
        manifest.write_manifest(tmp)

    atomic.replace_dir(write, output, destinations.remove_previous)
    return str(output)


def read_pieces(tokenizer_dir, vocab_size=None):
    """The pieces of the tokenizer saved in `tokenizer_dir`, in id order: its kind's CTranslate2 vocabulary.

    A tokenizer of this package reserves PAD, UNK, START and END (ids 0-3),
    anything else is a `ValueError`; an imported Marian tokenizer's pieces are
    its `vocab.json`'s, by id; an imported M2M100, NLLB, mBART-50 or T5
    tokenizer's are its vocabulary's, language tokens included, up to
    `vocab_size` (the model's embedding rows) where given
    (`keras_transformer.tokenizers.kinds`).

    Example:

    >>> read_pieces("saved_models/multi30k-en-de/tokenizers/source")[:4]
    ['<pad>', '<unk>', '<s>', '</s>']
    """
    from keras_transformer.tokenizers import kinds

    return kinds.ctranslate2_vocabulary(tokenizer_dir, vocab_size).pieces


def _vocabularies(run, model):
    """`(source pieces, target pieces, where the source's language token goes)`: `"first"`, `"last"`, or None.

    An M2M100, NLLB, mBART-50 or T5 run has one tokenizer for both sides,
    with languages where it is multilingual; other runs have none (None).
    """
    from keras_transformer.tokenizers import kinds

    return kinds.ctranslate2_vocabularies(
        run / runs.SOURCE_TOKENIZER, run / runs.TARGET_TOKENIZER, model.target_vocab_size
    )


# -- checks -------------------------------------------------------------------


def _require_ctranslate2():
    try:
        import ctranslate2  # noqa: F401
    except ModuleNotFoundError:
        raise ValueError(
            "Writing a CTranslate2 model needs the ctranslate2 package: pip install 'keras-transformer[ctranslate2]'"
        ) from None
