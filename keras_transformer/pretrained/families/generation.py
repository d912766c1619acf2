"""A checkpoint's `generation_config.json` as a `DecodingConfig`: what transformers' `generate` does by default."""

from keras_transformer.config import DecodingConfig
from keras_transformer.kinds import MAX_BEAM_SIZE
from keras_transformer.pretrained.fields import Fields


def language_model_decoding(generation, config, where="generation_config.json", family="this"):
    """The generation settings of a decoder-only checkpoint (GPT-2), each checked by its kind.

    As for Marian (`families.marian.decoding_config`): scores normalized by
    `length ** length_penalty` (the generated tokens, the prompt not
    counted), `early_stopping`, the `bad_words_ids` of one token, END forced
    at the last step where `forced_eos_token_id` says so, log-probabilities
    over the whole vocabulary. transformers' `max_length` counts the prompt
    too, so only `max_new_tokens` is read.
    """
    fields = Fields(generation, where, family)
    vocab = config.target_vocab_size
    banned = banned_ids(fields, vocab)
    early_stopping = early_stopping_of(fields)
    end = fields.single_id("eos_token_id", None, vocab_size=vocab)
    if end is not None and end != config.end_id:
        raise ValueError(f"{where}: `eos_token_id` is {end}, but config.json's is {config.end_id}")
    forced_end = fields.single_id("forced_eos_token_id", None, vocab_size=vocab)
    max_new_tokens = fields.int("max_new_tokens", None, low=1, high=config.max_length)
    return DecodingConfig(
        beam_size=fields.int("num_beams", 1, low=1, high=MAX_BEAM_SIZE),
        alpha=fields.number("length_penalty", 1.0),
        max_new_tokens=max_new_tokens,
        normalization="length",
        stopping="beams_ended" if early_stopping else "cannot_improve",
        force_end=forced_end == config.end_id,
        banned_ids=tuple(banned),
        cut_off="by_score",
        softmax_over="vocabulary",
    ).check(vocab_size=vocab, model_max_length=config.max_length, where=where)


def banned_ids(fields, vocab_size):
    """The ids of a generation config's `bad_words_ids` (one-token lists only), each checked to be an id."""
    where, bad_words = fields.where, fields.raw("bad_words_ids", [])
    if not isinstance(bad_words, list):
        raise ValueError(f"{where}: `bad_words_ids` must be a list of lists of ids. Received: {bad_words!r}"[:300])
    banned = []
    for ids in bad_words:
        if not (isinstance(ids, list) and len(ids) == 1):
            raise ValueError(
                f"{where}: bad_words_ids {ids!r}"[:200] + " is a sequence of tokens; keras-transformer bans "
                "single tokens only"
            )
        banned.append(Fields({"bad_words_ids": ids}, where).single_id("bad_words_ids", vocab_size=vocab_size))
    return tuple(banned)


def early_stopping_of(fields):
    """A generation config's `early_stopping`: true or false (transformers' "never" is not supported)."""
    early_stopping = fields.raw("early_stopping", False)
    if not isinstance(early_stopping, bool):
        raise ValueError(f"{fields.where}: early_stopping={early_stopping!r} is not supported (true or false)"[:300])
    return early_stopping
