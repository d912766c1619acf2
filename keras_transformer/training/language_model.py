"""An imported GPT-2 fine-tuned as a causal language model: `train --init-from GPT2_RUN --train-text FILE`.

A run imported from a GPT-2 checkpoint (`keras-transformer import`), given
a file of texts (one a line; or pairs, each joined into one text), continues
its training as GPT-2 was trained and as transformers' `run_clm` fine-tunes
it: every next token of the texts, packed one after another (END between
them) into blocks of the same length (`causal_lm.packed_batches`), so no
label is padding and every END is learned.

- **The package's recipe**: the warmup schedule (an import's preset is
  GPT-2's, `families.gpt2.fine_tuning_preset`: a peak of 5e-5 after 100
  steps, annealed to 0 over the last third of 3 epochs, no label
  smoothing), Adam, the token budget (blocks of the preset's largest
  bucket or the model's positions, the shorter), mixed precision,
  `--resume`, `--minutes`, the best epoch by validation loss.
- **The tokenizer files** are the checkpoint's, copied byte for byte, and
  the generation settings are the import's (`export --format transformers`
  writes its generation_config.json back unchanged).
- **Held-out perplexity**: the validation texts, packed the same way, are
  scored before the first step and by the best model at the end;
  config.json's `perplexity` records both (the summary `train` returns
  shows them), e to the mean negative log-likelihood per token.

Before anything is written, a training file that holds no token the
tokenizer knows is refused in one line (`check_known_tokens`; a byte-level
BPE such as GPT-2's knows every text), as is a file of texts given to a
model that is not a language model (`check_text_corpus`).

Example:

>>> train(init_from="saved_models/gpt2", corpus_files={"train": {"text": "chats.txt"}})  # doctest: +SKIP
{'output': 'saved_models/gpt2-finetuned', ..., 'perplexity': {'before': 41.2, 'after': 23.5, ...}}
"""

from keras_transformer import runs
from keras_transformer.training import causal_lm
from keras_transformer.training.model_run import ModelRun
from keras_transformer.training.recipe import NO_PADDING, compile_model


def continues_pretrained(preset, recorded):
    """Whether a run of `preset` that records `recorded` (its sources) fine-tunes an imported language model."""
    return preset.model.architecture == "decoder_only" and bool(recorded.get("pretrained"))


def check_text_corpus(preset, corpus_files):
    """A one-line `ValueError` where `corpus_files` are texts (`{"text": path}`) and `preset` is no language model."""
    from keras_transformer.datasets import corpora

    texts = [paths for paths in (corpus_files or {}).values() if corpora.is_texts(paths)]
    if texts and preset.model.architecture != "decoder_only":
        raise ValueError(
            f"{texts[0][corpora.TEXT]} is a file of texts, which trains a language model (a decoder-only run: an "
            f"imported GPT-2, the gpt-ko preset); preset {preset.name!r} is an {preset.model.architecture} model: "
            "give it pairs"
        )


def check_known_tokens(init_from, splits, corpus_files=None):
    """A one-line `ValueError` where the training texts hold no token `init_from`'s tokenizer knows.

    A run of a language model only (an imported GPT-2 or another
    decoder-only run), whose tokenizer has an unknown id (`unk_id`:
    SentencePiece's `<unk>`; a byte-level BPE such as GPT-2's knows every
    text). Its bare word-start mark (`▁`) is no known text either.
    """
    if init_from is None or runs.RunConfig.read(init_from).model.architecture != "decoder_only":
        return
    tokenizer = runs.load_tokenizers(init_from).target
    unknown = getattr(tokenizer, "unk_id", None)
    if unknown is None:
        return
    texts = [causal_lm.joined(pair) for pair in splits["train"]]
    if not texts:
        return
    ids = tokenizer.tokenize(texts)
    ids = sorted({token for row in (ids.to_list() if hasattr(ids, "to_list") else ids) for token in row})
    pieces = [piece.decode("utf-8", errors="replace") for piece in tokenizer.id_to_piece(ids).numpy().tolist()]
    if all(token == unknown or piece == "\u2581" for token, piece in zip(ids, pieces)):
        train = (corpus_files or {}).get("train")
        name = train["text"] if isinstance(train, dict) else "the training file"
        raise ValueError(
            f"{name}: its text is unknown to {init_from}'s tokenizer (every token is its unknown one, id "
            f"{unknown}): it holds none of the characters the model has learned"
        )


class LanguageModelRun(ModelRun):
    """A `ModelRun` that continues an imported GPT-2's training on packed texts (see the module)."""

    def write_config(self):
        """config.json as training starts, with the import's generation settings as they were (its preset's)."""
        super().write_config()
        if self.preset.decoding != self.config.decoding:  # not a length the checkpoint never set
            self.config = self.config.replace(decoding=self.preset.decoding)
            self.record(decoding=self.preset.decoding)

    def make_datasets(self):
        """Packed `({"token_ids"}, labels)` blocks of the training and validation texts."""
        model, data = self.config.model, self.preset.data
        length = min(model.max_length, max(data.bucket_boundaries))
        rows = max(1, data.token_budget // length)
        tokenizer = self.tokenizers.target

        def batches(split, seed=None):
            texts = [causal_lm.joined(pair) for pair in self.splits[split]]
            return causal_lm.packed_batches(texts, tokenizer, model, length, rows, seed)

        self.train_batches, self.validation_batches = batches("train", self.options.seed), batches("validation")
        if self.options.devices.distributed:
            import tensorflow as tf

            options = tf.data.Options()
            options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
            self.train_batches = self.train_batches.with_options(options)
            self.validation_batches = self.validation_batches.with_options(options)

    def build_model(self):
        """The model from the import's weights, compiled with no label as padding; its held-out perplexity first."""
        from keras_transformer.models.architectures import build_model
        from keras_transformer.training import distribution, fine_tuning

        self.model = build_model(self.config.model)
        if self.initial_weights is not None:
            fine_tuning.set_initial_weights(self.model, self.initial_weights, self.init_from)
        jit_compile = distribution.uses_xla(self.strategy)
        self.schedule = compile_model(
            self.model, self.preset, jit_compile=jit_compile, cooldown=self.config.cooldown, pad_id=NO_PADDING
        )
        distribution.prepare_model(self.model, self.strategy, self.train_batches)
        if self.state != "resume":  # a resumed run measured its start before
            before, tokens = causal_lm.perplexity(self.model, self.validation_batches)
            self.record(perplexity={"before": round(before, 4), "held_out_tokens": tokens})

    def held_out_figures(self, config):
        """`config` with `perplexity`: the best model's on the validation texts, beside the import's."""
        import keras

        best = keras.saving.load_model(self.output / runs.MODEL, compile=False)
        after, tokens = causal_lm.perplexity(best, self.validation_batches)
        figures = {**(config.perplexity or {}), "after": round(after, 4), "held_out_tokens": tokens}
        return config.replace(perplexity=figures)

    def finish(self):
        result = super().finish()
        config = runs.RunConfig.read(self.output) if self.is_chief else self.config
        return {**result, "perplexity": config.perplexity}
