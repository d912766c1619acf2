"""The model card (`README.md`) of a checkpoint export: where the model came from, what trained it, how it scored.

`model_card(run_config, ...)` writes what the run's config.json records:
the source checkpoint and its license (`license_of` reads it from the
source's own card at import), what the run was fine-tuned or trained on,
the BLEU and chrF of an evaluation (`keras-transformer evaluate --output
scores.json`), and the version of this package. Its front matter is the
Hub's (`license`, `library_name`, `pipeline_tag`, `base_model`), so the
folder uploads as it is (`huggingface_hub.upload_folder`).

Example:

>>> license_of("---\\ntags:\\n- translation\\nlicense: cc-by-4.0\\n---\\n# opus-mt-en-de\\n")
'cc-by-4.0'
>>> license_of("# a card without front matter") is None
True
"""

import math
import pathlib
import re

from keras_transformer.files.json_files import read_json_object

MAX_CARD_BYTES = 2**16  # the front matter is at the top of a card
_LICENSE = re.compile(r"^license:\s*['\"]?([A-Za-z0-9][\w.+-]{0,63})['\"]?\s*$", re.MULTILINE)
_HF = "hf://"


def license_of(card):
    """The `license:` of a model card's YAML front matter (the text of its README.md), or None."""
    if not card or not card.startswith("---"):
        return None
    front_matter = card[3:].split("\n---", 1)[0]
    match = _LICENSE.search(front_matter)
    return match.group(1) if match else None


def read_scores(path):
    """`{"bleu", "chrf", "source", "reference", "beam_size"}` of an `evaluate --output` JSON file.

    A file that is not one (no finite `bleu`) is a `ValueError` naming it.
    """
    scores = read_json_object(path)
    bleu = scores.get("bleu")
    if isinstance(bleu, bool) or not isinstance(bleu, (int, float)) or not math.isfinite(bleu):
        raise ValueError(
            f"{path} holds no `bleu` number: pass the JSON that `keras-transformer evaluate --output` writes"
        )
    return scores


MARIAN = {
    "kind": "A MarianMT model",
    "tags": ("marian",),
    "usage": (
        "from transformers import MarianMTModel, MarianTokenizer",
        "",
        'tokenizer = MarianTokenizer.from_pretrained("PATH_OR_REPO")',
        'model = MarianMTModel.from_pretrained("PATH_OR_REPO")',
        'batch = tokenizer(["Your sentence."], return_tensors="pt", padding=True)',
        "print(tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True))",
    ),
}


def model_card(run_config, run_name, version, scores=None, card=None):
    """The text of README.md for the export of a run whose config.json is `run_config` (a `runs.RunConfig`).

    `card` is what the writer of the checkpoint's family says of it
    (`{"kind", "tags", "usage"}`: its model class, its Hub tags, the lines of
    a Python example; optionally its `pipeline_tag`, default translation, and
    `generation`: False for a family without generation settings); default
    Marian's (`MARIAN`).
    """
    card = card or MARIAN
    pretrained = run_config.pretrained or {}
    source = pretrained.get("source")
    license_name = pretrained.get("license")
    front = ["---"] + ([f"license: {license_name}"] if license_name else [])
    pipeline = card.get("pipeline_tag", "translation")
    front += ["library_name: transformers", f"pipeline_tag: {pipeline}", "tags:", f"- {pipeline}"]
    front += [f"- {tag}" for tag in card["tags"]]
    if source and source.startswith(_HF):
        front.append(f"base_model: {source[len(_HF) :]}")
    front.append("---")
    lines = [
        "",
        f"# {run_name}",
        "",
        f"{card['kind']} written by keras-transformer {version} from its run `{run_name}`.",
        "",
        f"- **Source checkpoint**: {_source(pretrained)}",
        f"- **License**: {license_name or 'not stated by the source checkpoint; set it before you share the model'}",
        f"- **Trained**: {_training(run_config)}",
        f"- **Evaluation**: {_evaluation(scores, run_config.classifier, card.get('generation', True))}",
        f"- **Written by**: keras-transformer {version}",
        "",
        "## Use",
        "",
        "```python",
        *card["usage"],
        "```",
        "",
    ]
    if card.get("generation", True):
        lines += [
            "`generation_config.json` holds the run's decoding settings (beams, length penalty, maximum length).",
            "",
        ]
    return "\n".join(front + lines)


def _source(pretrained):
    """The source checkpoint: its Hub name, or a local folder's name alone (a card names no folder of this machine)."""
    source = pretrained.get("source")
    if not source:
        return "none: trained from scratch by keras-transformer"
    if not source.startswith(_HF):
        return f"a local checkpoint, `{pathlib.PurePath(source).name}`"
    revision = pretrained.get("revision")
    return f"`{source}`" + (f" at revision `{revision}`" if revision else "")


def _training(config):
    epochs = config.completed_epochs
    preset = config.preset.name if config.preset is not None else None
    if config.init_from is None and config.pretrained and not epochs:
        return "not fine-tuned: the source checkpoint's weights as imported"
    data = _data(config)
    what = "fine-tuned" if config.init_from is not None else "trained from scratch"
    count = f" for {epochs} epoch{'s' * (epochs != 1)}" if isinstance(epochs, int) else ""
    languages = config.languages or {}
    pair = f" from `{languages.get('source_lang')}` into `{languages.get('target_lang')}`" if languages else ""
    return f"{what} on {data}{pair}{count}" + (f" (preset `{preset}`)" if preset else "")


def _data(config):
    files = (config.corpus_files or {}).get("train")
    if isinstance(files, list) and files:
        return ", ".join(
            f"`{pathlib.PurePath(str(entry.get('path', '?'))).name}` (sha256 {str(entry.get('sha256', '?'))[:12]})"
            for entry in files
            if isinstance(entry, dict)
        )
    corpus = config.preset.data.corpus if config.preset is not None else None
    return f"the `{corpus}` corpus" if corpus else "data the run does not record"


def _evaluation(scores, classifier=None, translates=True):
    if scores is None and isinstance(classifier, dict) and isinstance(classifier.get("accuracy"), (int, float)):
        majority = classifier.get("majority")
        against = f" (always the most common class: {majority:.1%})" if isinstance(majority, (int, float)) else ""
        return f"accuracy {classifier['accuracy']:.1%} on {classifier.get('held_out', '?')} held-out texts{against}"
    if scores is None and not translates:
        return "none given"
    if scores is None:
        return "none given (`keras-transformer evaluate --output scores.json`, then export with `--scores`)"
    parts = [f"BLEU {float(scores['bleu']):.2f}"]
    if isinstance(scores.get("chrf"), (int, float)) and not isinstance(scores.get("chrf"), bool):
        parts.append(f"chrF {float(scores['chrf']):.2f}")
    source = scores.get("source")
    if isinstance(source, str):
        parts.append(f"on `{pathlib.PurePath(source).name}`")
    beam = scores.get("beam_size")
    if isinstance(beam, int) and not isinstance(beam, bool):
        parts.append(f"(beam {beam}, sacreBLEU)")
    return " ".join(parts)
