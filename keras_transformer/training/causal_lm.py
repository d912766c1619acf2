"""A corpus of pairs as a causal language model's text: each pair one text, its tokens the model's inputs.

A decoder-only preset (`gpt-ko`) trains on the same corpora as the
translation presets: each pair `(question, answer)` becomes one text,
`"question answer"`, and the batches are the teacher-forced decoder's:
`token_ids = [START] + text`, labels `text + [END]` (padding 0, which the
loss skips). They come from the same pipeline as a translation model's
(`datasets.make_batches`: length buckets, a token budget), with the text on
both sides, of which the model reads the target side alone.

Example:

>>> as_texts({"train": [("배고파", "밥 먹어요.")]})["train"]
[('배고파 밥 먹어요.', '배고파 밥 먹어요.')]
"""


def joined(pair):
    """One pair's text: the question and the answer, a space between."""
    return " ".join(part.strip() for part in pair if part.strip())


def as_texts(splits):
    """`splits` (name -> pairs) with every pair `(text, text)`, its `joined` text on both sides."""
    return {name: [(joined(pair), joined(pair)) for pair in pairs] for name, pairs in splits.items()}


def language_model_batches(batches):
    """Translation batches `({"encoder_inputs", "decoder_inputs"}, labels)` as `({"token_ids"}, labels)`."""
    return batches.map(lambda inputs, labels: ({"token_ids": inputs["decoder_inputs"]}, labels))
