"""SubwordTokenizer: reserved ids, round trips on real lines of every corpus, save/load, SavedModel."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import tokenizers
from keras_transformer.datasets import corpora
from keras_transformer.tokenizers import SubwordTokenizer

LINES_PER_SIDE = 1200  # trained on; the next HELD_OUT lines are unseen
HELD_OUT = 100


@pytest.fixture(scope="module")
def corpus_lines(shared_data_dir):
    """Real lines: {"ko": ..., "en": ..., "de": ..., "fr": ..., "es": ...}."""
    n = LINES_PER_SIDE + HELD_OUT
    chat = corpora.load_pairs("chatbot-ko", split="train")[:n]
    en_de = corpora.load_pairs("multi30k-en-de", shared_data_dir)[:n]
    fr = [t for _, t in corpora.load_pairs("multi30k-en-fr", shared_data_dir)[:n]]
    spa = corpora.load_split_pairs("en-spa", shared_data_dir)["train"][-n:]  # the long sentences are at the end
    return {
        "ko": [q for q, _ in chat] + [a for _, a in chat],
        "en": [e for e, _ in en_de],
        "de": [d for _, d in en_de],
        "fr": fr,
        "es": [s for _, s in spa],
    }


@pytest.fixture(scope="module")
def tokenizer(corpus_lines):
    """One shared vocabulary over five languages, trained on the first lines only (~1 s)."""
    train = [line for lines in corpus_lines.values() for line in lines[:LINES_PER_SIDE]]
    return SubwordTokenizer.train(train, vocab_size=3000)


def test_one_corpus_trains_one_model(corpus_lines):
    """A run's tokenizer.model has the same bytes every time it is trained on the same lines."""
    lines = corpus_lines["en"][:LINES_PER_SIDE]
    first, again = (SubwordTokenizer.train(lines, vocab_size=800).model_proto for _ in range(2))
    assert first == again
    assert SubwordTokenizer.train(lines[1:], vocab_size=800).model_proto != first


def _roundtrip(tokenizer, lines):
    ids = tokenizer.tokenize(tf.constant(lines))
    return [s.decode("utf-8") for s in tokenizer.detokenize(ids).numpy()]


def test_reserved_ids(tokenizer):
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.start_id, tokenizer.end_id) == (0, 1, 2, 3)
    pieces = tokenizer.id_to_piece(tf.constant([0, 1, 2, 3])).numpy().tolist()
    assert pieces == [b"<pad>", b"<unk>", b"<s>", b"</s>"]
    assert tokenizer.vocab_size == 3000 and int(tokenizer.get_vocab_size()) == 3000
    ids = tokenizer.tokenize(tf.constant(["Two dogs play.", "두 마리 개"]))
    assert ids.dtype == tf.int32 and isinstance(ids, tf.RaggedTensor)
    flat = ids.flat_values.numpy()
    assert flat.min() >= tokenizers.NUM_RESERVED_IDS and flat.max() < 3000  # no pad/unk/START/END added


@pytest.mark.parametrize("language", ["ko", "en", "de", "fr", "es"])
def test_roundtrip_real_lines(tokenizer, corpus_lines, language):
    """Seen and unseen lines come back unchanged, up to whitespace (German has some U+00A0)."""
    lines = corpus_lines[language][:50] + corpus_lines[language][LINES_PER_SIDE:]
    assert _roundtrip(tokenizer, lines) == [" ".join(line.split()) for line in lines]


def test_roundtrip_exact_on_accents_hangul_and_unseen_characters(tokenizer):
    lines = [
        "¿Dónde está la estación? ¡Está allí, señor!",
        "Él comió pingüino en Cádiz, ¿verdad?",
        "Ein Mädchen in einem Kleid läuft über die Straße.",
        "Ein\u00a0Hund\tläuft  im\u3000Schnee. ",  # Unicode spaces and tabs become one space
        "Une fillette à côté d'un garçon, près de l'océan.",
        "썸 타는 중인데 너무 떨려요 ㅠㅠ ㅋㅋ",  # NFKC would rewrite these compatibility jamo
        "Llegó en 1º lugar con 2ª marca.",  # and these ordinals
        "뷁 똠양꿍 😀 ☃ 齋",  # characters absent from training: byte fallback, not <unk>
    ]
    ids = tokenizer.tokenize(tf.constant(lines))
    assert tokenizers.UNK_ID not in ids.flat_values.numpy()
    assert _roundtrip(tokenizer, lines) == [" ".join(line.split()) for line in lines]
    assert _roundtrip(tokenizer, lines)[3] == "Ein Hund läuft im Schnee."


def test_detokenize_dense_padded_ids_drops_reserved(tokenizer):
    ids = tokenizer.tokenize(tf.constant(["A man rides a bike.", "Hola."]))
    framed = tf.concat([tf.fill([2, 1], tokenizers.START_ID), ids, tf.fill([2, 1], tokenizers.END_ID)], axis=1)
    dense = framed.to_tensor(default_value=tokenizers.PAD_ID, shape=[2, 20])
    assert tokenizer.detokenize(dense).numpy().tolist() == [b"A man rides a bike.", b"Hola."]
    assert tokenizer.detokenize(tf.cast(dense, tf.int64)).numpy().tolist()[1] == b"Hola."


def test_sampler_draws_other_segmentations_of_the_same_text(tokenizer, corpus_lines):
    lines = corpus_lines["de"][LINES_PER_SIDE:]
    viterbi = tokenizer.tokenize(tf.constant(lines)).to_list()
    draws = [tokenizer.sampler(alpha=0.3).tokenize(tf.constant(lines)) for _ in range(2)]
    assert draws[0].to_list() != draws[1].to_list() != viterbi  # a new segmentation every call
    for ids in draws:
        assert [s.decode() for s in tokenizer.detokenize(ids).numpy()] == [" ".join(line.split()) for line in lines]
        assert ids.flat_values.numpy().max() < tokenizer.vocab_size
    mean_length = {
        alpha: tokenizer.sampler(alpha).tokenize(tf.constant(lines)).row_lengths().numpy().mean()
        for alpha in (1.0, 0.3, 0.1)
    }
    viterbi_length = np.mean([len(ids) for ids in viterbi])
    assert viterbi_length <= mean_length[1.0] < mean_length[0.3] < mean_length[0.1]  # smaller alpha, finer splits


@pytest.mark.parametrize(
    "bad",
    [dict(alpha=0.0), dict(alpha=1.5), dict(alpha="0.3"), dict(nbest_size=0), dict(nbest_size=1), dict(nbest_size=-2)],
)
def test_sampler_rejects_bad_settings(tokenizer, bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        tokenizer.sampler(**bad)


def test_save_load(tokenizer, tmp_path):
    tokenizer.save(tmp_path / "tok")
    assert sorted(p.name for p in (tmp_path / "tok").iterdir()) == ["tokenizer.json", "tokenizer.model"]
    config = json.loads((tmp_path / "tok" / "tokenizer.json").read_text())
    assert config["vocab_size"] == 3000 and (config["pad_id"], config["end_id"]) == (0, 3)
    reloaded = SubwordTokenizer.load(tmp_path / "tok")
    batch = tf.constant(["Zwei Hunde spielen im Schnee.", "사랑해요"])
    assert reloaded.tokenize(batch).to_list() == tokenizer.tokenize(batch).to_list()
    with pytest.raises(ValueError, match="tokenizer.json"):
        SubwordTokenizer.load(tmp_path)


def test_train_from_files_and_errors(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text("\n".join(f"line number {i} of a tiny file" for i in range(200)) + "\n", encoding="utf-8")
    tokenizer = SubwordTokenizer.train([path], vocab_size=60, byte_fallback=False, model_type="bpe")
    assert _roundtrip(tokenizer, ["line number 7"]) == ["line number 7"]
    small = SubwordTokenizer.train([path], vocab_size=5000)  # more than this corpus holds: an upper bound
    assert 256 < small.vocab_size < 5000
    with pytest.raises(ValueError, match="vocab_size=5000"):
        SubwordTokenizer.train([path], vocab_size=5000, hard_vocab_limit=True)
    with pytest.raises(ValueError, match="vocab_size=3"):
        SubwordTokenizer.train(["text"], vocab_size=3)
    with pytest.raises(ValueError, match="vocab_size=10"):  # smaller than the alphabet + 256 bytes
        SubwordTokenizer.train([path], vocab_size=10)
    with pytest.raises(ValueError, match="normalization='nfd'"):
        SubwordTokenizer.train([path], vocab_size=60, normalization="nfd")
    with pytest.raises(ValueError, match="model_type"):
        SubwordTokenizer.train([path], vocab_size=60, model_type="wordpiece")
    with pytest.raises(ValueError, match="not readable UTF-8"):
        SubwordTokenizer.train(str(tmp_path / "missing.txt"), vocab_size=60)
    with pytest.raises(ValueError, match="no non-empty line"):
        SubwordTokenizer.train(["", "  "], vocab_size=60)


def test_training_refuses_nul_bytes_naming_the_file_and_line(tmp_path):
    """A UTF-16 file (a NUL every other byte) trained a vocabulary of garbage."""
    path = tmp_path / "utf16.txt"
    path.write_bytes("line one\nline two\n".encode("utf-16-le"))
    with pytest.raises(
        ValueError, match=r"utf16\.txt, line 1: contains a NUL byte \(is it UTF-16\? save it as UTF-8\)"
    ):
        SubwordTokenizer.train([path], vocab_size=300)
    with pytest.raises(ValueError, match=r"`texts_or_files\[1\]`, line 1: contains a NUL byte"):
        SubwordTokenizer.train(["fine", "n\0ul"], vocab_size=300)


def test_a_corpus_sentencepiece_would_skip_whole_is_one_clear_error():
    """SentencePiece's own message was `[!sentences_.empty()]`."""
    for texts, message in [
        (["x" * 5000, "y " * 2500], r"of its 2 lines, 2 are longer than 4192 bytes \(the longest: 5000\)"),
        (["a\u2585b"], r"of its 1 lines, 0 are longer .* 1 hold U\+2585"),
    ]:
        with pytest.raises(ValueError, match=r"holds no line that SentencePiece trains on: " + message) as error:
            SubwordTokenizer.train(texts, vocab_size=300)
        assert "sentences_" not in str(error.value)
    for pair in (["red dog", "der Hund"], ["x" * 5000, "ok"]):  # one pair; one usable line is enough
        assert SubwordTokenizer.train(pair, vocab_size=300).vocab_size > 256


class _Holder(tf.Module):
    """What a Translator does: hold the tokenizer, call it inside its own tf.function."""

    def __init__(self, tokenizer):
        super().__init__()
        self.tokenizer = tokenizer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def roundtrip(self, strings):
        ids = self.tokenizer.tokenize(strings)
        return self.tokenizer.detokenize(ids.to_tensor()), ids.row_lengths()


def test_survives_saved_model_in_a_fresh_process(tokenizer, tmp_path):
    tf.saved_model.save(_Holder(tokenizer), str(tmp_path / "holder"))
    script = textwrap.dedent(
        f"""
        import tensorflow as tf
        import tensorflow_text  # registers the SentencePiece ops; loading fails without it
        holder = tf.saved_model.load({str(tmp_path / "holder")!r})
        text, lengths = holder.roundtrip(tf.constant(["¿Qué tal?", "Ein Hund läuft.", "잘 자요"]))
        print("OUT", [t.decode() for t in text.numpy()], lengths.numpy().min() > 0)
        ids = holder.tokenizer.tokenize(tf.constant(["잘 자요"]))
        print("OUT", holder.tokenizer.detokenize(ids).numpy()[0].decode(), int(holder.tokenizer.get_vocab_size()))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    out = [line for line in result.stdout.splitlines() if line.startswith("OUT")]
    assert out == ["OUT ['¿Qué tal?', 'Ein Hund läuft.', '잘 자요'] True", "OUT 잘 자요 3000"]
