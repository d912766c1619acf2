"""A checkpoint's generation settings as a `DecodingConfig`: what transformers' `generate` does by default.

The settings are `generation_config.json`'s; a checkpoint uploaded before
transformers wrote that file (most OPUS-MT, M2M100 and NLLB uploads of
2020-2022) keeps them in `config.json` (`num_beams`, `max_length`,
`bad_words_ids`, ...), and transformers then takes them from there
(`GenerationConfig.from_model_config`): every key of config.json that is a
setting of its `GenerationConfig` (`GENERATION_KEYS`), none other, and an
old `force_bos_token_to_be_generated` as `forced_bos_token_id` =
`bos_token_id`. Where both files exist, generation_config.json is read
alone (transformers drops config.json's settings when it loads a model).

A setting that changes what a search finds and that keras-transformer does
not apply (`UNSUPPORTED`: a minimum length, n-gram or repetition
penalties, ...) is refused in one line at any value but the one that
leaves the search unchanged.

Example:

>>> generation_from_config({"num_beams": 4, "max_length": 512, "d_model": 512, "min_length": None})
{'num_beams': 4, 'max_length': 512}
"""

from keras_transformer.config import DecodingConfig
from keras_transformer.kinds import MAX_BEAM_SIZE
from keras_transformer.pretrained.fields import Fields

# The settings transformers 5.24's `GenerationConfig` takes from config.json (its constructor's keys).
GENERATION_KEYS = frozenset(
    """max_length max_new_tokens min_length min_new_tokens early_stopping max_time stop_strings do_sample num_beams
    use_mtp use_cache cache_implementation cache_config max_cache_len temperature top_k top_p min_p top_h typical_p
    epsilon_cutoff eta_cutoff repetition_penalty encoder_repetition_penalty length_penalty no_repeat_ngram_size
    bad_words_ids renormalize_logits forced_bos_token_id forced_eos_token_id remove_invalid_values
    exponential_decay_length_penalty suppress_tokens begin_suppress_tokens sequence_bias token_healing guidance_scale
    watermarking_config num_return_sequences output_attentions output_hidden_states output_scores output_logits
    return_dict_in_generate pad_token_id bos_token_id eos_token_id encoder_no_repeat_ngram_size
    decoder_start_token_id is_assistant num_assistant_tokens num_assistant_tokens_schedule
    assistant_confidence_threshold prompt_lookup_num_tokens max_matching_ngram_size assistant_early_exit
    assistant_lookbehind target_lookbehind assistant_ensemble_weight speculation_type compile_config disable_compile
    continuous_batching_config low_memory penalty_alpha dola_layers diversity_penalty num_beam_groups constraints
    force_words_ids prefill_chunk_size""".split()
)
# Settings that change what a deterministic search finds, which keras-transformer does not apply: each with the
# values that leave the search as it is (null, absent, or these).
UNSUPPORTED = {
    "min_length": (0,),
    "min_new_tokens": (0,),
    "no_repeat_ngram_size": (0,),
    "encoder_no_repeat_ngram_size": (0,),
    "repetition_penalty": (1.0,),
    "encoder_repetition_penalty": (1.0,),
    "num_beam_groups": (1,),
    "diversity_penalty": (0.0,),
    "exponential_decay_length_penalty": (),
    "suppress_tokens": ([],),
    "begin_suppress_tokens": ([],),
    "sequence_bias": ({},),
    "force_words_ids": ([],),
    "constraints": ([],),
    "penalty_alpha": (0.0,),
    "dola_layers": (),
    "guidance_scale": (1.0,),
}


def checkpoint_generation(checkpoint):
    """`(settings, where)`: generation_config.json's settings, else those transformers takes from config.json."""
    if checkpoint.has("generation_config.json"):
        return checkpoint.json("generation_config.json"), str(checkpoint.folder / "generation_config.json")
    return generation_from_config(checkpoint.json("config.json")), str(checkpoint.folder / "config.json")


def generation_from_config(hf_config):
    """The generation settings in a `config.json` (a dict), as `GenerationConfig.from_model_config` takes them."""
    settings = {key: value for key, value in hf_config.items() if key in GENERATION_KEYS and value is not None}
    if hf_config.get("force_bos_token_to_be_generated"):  # an old BART-era key: BOS forced as the first token
        settings["forced_bos_token_id"] = settings.get("bos_token_id")
    return settings


def check_supported(fields):
    """A `ValueError` naming the first setting of `UNSUPPORTED` whose value would change the search."""
    for key, neutral in UNSUPPORTED.items():
        if fields.has(key) and fields.raw(key) not in neutral:
            raise ValueError(
                f"{fields.where}: {key}={fields.raw(key)!r}"[:200] + " changes what transformers' generate finds, "
                "and keras-transformer does not apply it"
            )


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
    check_supported(fields)
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
