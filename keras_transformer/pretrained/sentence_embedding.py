"""How an imported encoder embeds a sentence: a sentence-transformers folder's pooling, read as untrusted input.

A sentence-transformers model is a Hugging Face checkpoint at the top of
its folder plus a list of modules after it (`modules.json`): the
`Transformer` (the checkpoint, `path` ""), a `Pooling` (`1_Pooling/
config.json`: the mean of the tokens' hidden states, the first token's
(`[CLS]`), their maximum, ...) and optionally a `Normalize` (to unit
length; a module without files, so its folder is often absent).
`sentence_bert_config.json` gives the tokens read at most
(`max_seq_length`) and whether text is lower-cased first.

`settings(checkpoint, config)` reads them into what a run records
(`pretrained.sentence_embedding`), and what `engines.xla.encoder.Encoder.embed`
computes with: the pooling modes (concatenated, in sentence-transformers'
order, where a config names several), `normalize`, `max_length` and
`lowercase`, and `source`: `"modules.json"`, or None for a checkpoint
without those files, which then embeds as sentence-transformers embeds a
plain checkpoint: mean pooling, at most as many tokens as the tokenizer and
the positions allow. A module this package does not compute (a `Dense`
projection, ...) is refused in one line naming it.

`files(settings, width, kept)` is the other direction: the
sentence-transformers files of an export (`modules.json`, the Pooling's
`config.json`, `sentence_bert_config.json`, and
`config_sentence_transformers.json` where the import read one), each written back as the
import read it (`kept`: the run's record of the checkpoint's JSON files)
where it still says what `settings` say.

Example:

>>> settings(Checkpoint("all-MiniLM-L6-v2"), config)  # doctest: +SKIP
{'pooling': ['mean'], 'normalize': True, 'max_length': 256, 'lowercase': False, 'source': 'modules.json'}
"""

from keras_transformer.files.json_files import read_json
from keras_transformer.pretrained.fields import Fields

MODULES = "modules.json"
# The pooling modes, in the order sentence-transformers concatenates them, and their legacy flags.
POOLING_MODES = {
    "cls": "pooling_mode_cls_token",
    "max": "pooling_mode_max_tokens",
    "mean": "pooling_mode_mean_tokens",
    "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
    "weightedmean": "pooling_mode_weightedmean_tokens",
    "lasttoken": "pooling_mode_lasttoken",
}
KINDS = ("Transformer", "Pooling", "Normalize")  # the modules read: the last part of a module's `type`
CONFIG_FILES = ("sentence_bert_config.json",)
VERSIONS = "config_sentence_transformers.json"
MAX_MODULES = 16


def settings(checkpoint, config):
    """The sentence-embedding settings of `checkpoint` (a `Checkpoint`) for a model of `config` (see the module)."""
    positions = min(config.max_length, _tokenizer_limit(checkpoint, config.max_length))
    if not checkpoint.has(MODULES):
        return dict(pooling=["mean"], normalize=False, max_length=positions, lowercase=False, source=None)
    kinds = _modules(checkpoint)
    checkpoint.json(VERSIONS, required=False)  # its versions and similarity, kept for an export to write back
    pooling = ["mean"]
    if "Pooling" in kinds:
        pooling = _pooling(checkpoint, kinds["Pooling"], config.d_model)
    transformer = Fields(checkpoint.json(CONFIG_FILES[0], required=False), CONFIG_FILES[0], "sentence-transformers")
    max_length = transformer.int("max_seq_length", positions, low=1)
    return dict(
        pooling=pooling,
        normalize="Normalize" in kinds,
        max_length=min(max_length, config.max_length),
        lowercase=transformer.bool("do_lower_case", False),
        source=MODULES,
    )


def _modules(checkpoint):
    """`{kind: path}` of the modules `modules.json` lists, in its order; each of `KINDS`, at most once."""
    where = checkpoint.path(MODULES)  # recorded with the files read
    data = read_json(where)
    checkpoint.texts[MODULES] = where.read_bytes().decode("utf-8")  # kept by the run, as its other JSON files
    if not isinstance(data, list) or not 0 < len(data) <= MAX_MODULES:
        raise ValueError(f"{where} must hold a list of at most {MAX_MODULES} modules")
    kinds = {}
    for index, module in enumerate(data):
        kind, path = _module(module, index, where)
        if kind not in KINDS:
            raise ValueError(
                f"{where}: module {index} is a sentence-transformers {kind}, which keras-transformer does not "
                f"compute; it imports {', '.join(KINDS)}"
            )
        if kind in kinds:
            raise ValueError(f"{where}: module {index} is a second {kind}; keras-transformer reads one of each")
        if (index == 0) != (kind == "Transformer") or (kind == "Transformer" and path not in ("", ".")):
            raise ValueError(
                f"{where}: keras-transformer imports a sentence-transformers model whose first module is the "
                f'Transformer at the folder\'s top (path ""). Module {index} is a {kind} at {path!r}'[:300]
            )
        kinds[kind] = path
    return kinds


def _module(module, index, where):
    """`(kind, path)` of one entry of modules.json."""
    if not isinstance(module, dict):
        raise ValueError(f"{where}: module {index} must be an object. Received: {module!r}"[:300])
    kind, path = module.get("type"), module.get("path", "")
    if not isinstance(kind, str) or not isinstance(path, str):
        raise ValueError(f"{where}: module {index} must have a `type` and a `path` that are strings"[:300])
    if ".." in path.split("/") or path.startswith("/") or "\\" in path:
        raise ValueError(f"{where}: module {index}'s path {path!r} leaves the folder"[:300])
    return kind.rsplit(".", 1)[-1], path.strip("/")


def _pooling(checkpoint, path, width):
    """The pooling modes of `PATH/config.json`: `pooling_mode` (a name or a list), else the legacy flags."""
    name = f"{path}/config.json"
    fields = Fields(checkpoint.json(name), name, "sentence-transformers Pooling")
    dimension = fields.int("embedding_dimension", None, low=1) or fields.int("word_embedding_dimension", None, low=1)
    if dimension is not None and dimension != width:
        raise ValueError(f"{name}: the pooled dimension is {dimension}, but the model's hidden states are {width} wide")
    if fields.has("pooling_mode"):
        modes = fields.raw("pooling_mode")
        modes = [modes] if isinstance(modes, str) else modes
        if not isinstance(modes, list) or not modes or not all(isinstance(mode, str) for mode in modes):
            raise ValueError(f"{name}: `pooling_mode` must be a mode's name or a list of them. Received: {modes!r}")
    else:
        modes = [mode for mode, flag in POOLING_MODES.items() if fields.bool(flag, False)] or ["mean"]
    unknown = [mode for mode in modes if mode not in POOLING_MODES]
    if unknown:
        raise ValueError(f"{name}: pooling mode {unknown[0]!r} is not one of {sorted(POOLING_MODES)}"[:300])
    return modes


def _tokenizer_limit(checkpoint, positions):
    """`tokenizer_config.json`'s `model_max_length` (transformers writes 1e30 for "none"), else `positions`."""
    limit = checkpoint.json("tokenizer_config.json", required=False).get("model_max_length")
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit >= 1:
        return positions
    return int(min(limit, positions))


# What an export writes where the import read no such file: sentence-transformers' own names.
MODULE_TYPES = {kind: f"sentence_transformers.models.{kind}" for kind in KINDS}
POOLING_PATH, NORMALIZE_PATH = "1_Pooling", "2_Normalize"


def files(settings, width, kept=None):
    """`{name: bytes}`: the sentence-transformers files of a model that embeds as `settings` say (see the module).

    None for a run imported without them (`source` None). `width` is the
    model's hidden size; `kept` maps a file's name to its text as imported.
    """
    if settings.get("source") != MODULES:
        return {}
    kept = kept or {}
    modules, pooling_path = _modules_file(kept.get(MODULES), settings["normalize"])
    pooling_name = f"{pooling_path}/config.json"
    pooling = _kept_if(kept.get(pooling_name), lambda data: _pooling_modes(data, width) == settings["pooling"])
    if pooling is None:
        flags = {flag: mode in settings["pooling"] for mode, flag in POOLING_MODES.items()}
        pooling = _json_bytes({"word_embedding_dimension": width, **flags})
    config_name = CONFIG_FILES[0]
    wanted = {"max_seq_length": settings["max_length"], "do_lower_case": settings["lowercase"]}
    config = _kept_if(kept.get(config_name), lambda data: _config_reads(data, wanted))
    if config is None:
        config = _json_bytes({**_object(kept.get(config_name)), **wanted})
    written = {MODULES: modules, pooling_name: pooling, config_name: config}
    if isinstance(kept.get(VERSIONS), str):
        written[VERSIONS] = kept[VERSIONS].encode("utf-8")
    return written


def _modules_file(kept_text, normalize):
    """`(modules.json's bytes, the Pooling's path)`: the kept file where it lists the modules an export has."""
    import json

    try:
        data = json.loads(kept_text) if kept_text else None
    except ValueError:
        data = None
    if isinstance(data, list) and all(isinstance(module, dict) for module in data):
        kinds = [str(module.get("type", "")).rsplit(".", 1)[-1] for module in data]
        paths = [module.get("path") for module in data]
        expected = ["Transformer", "Pooling"] + (["Normalize"] if normalize else [])
        if kinds == expected and all(isinstance(path, str) for path in paths) and paths[0] in ("", "."):
            return kept_text.encode("utf-8"), paths[1].strip("/")
    paths = {"Transformer": "", "Pooling": POOLING_PATH, "Normalize": NORMALIZE_PATH}
    kinds = ["Transformer", "Pooling"] + (["Normalize"] if normalize else [])
    modules = [
        {"idx": index, "name": str(index), "path": paths[kind], "type": MODULE_TYPES[kind]}
        for index, kind in enumerate(kinds)
    ]
    return _json_bytes(modules), POOLING_PATH


def _pooling_modes(data, width):
    fields = Fields(data, "config.json", "sentence-transformers Pooling")
    if fields.has("pooling_mode"):
        modes = data["pooling_mode"]
        return [modes] if isinstance(modes, str) else modes
    dimension = data.get("embedding_dimension", data.get("word_embedding_dimension"))
    if dimension not in (None, width):
        return None
    return [mode for mode, flag in POOLING_MODES.items() if data.get(flag) is True] or ["mean"]


def _config_reads(data, wanted):
    return (
        data.get("max_seq_length") == wanted["max_seq_length"]
        and bool(data.get("do_lower_case", False)) == (wanted["do_lower_case"])
    )


def _kept_if(text, reads):
    """`text` as bytes where it is a JSON object that `reads` accepts; else None."""
    data = _object(text)
    return text.encode("utf-8") if data and reads(data) else None


def _object(text):
    import json

    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _json_bytes(data):
    import json

    return (json.dumps(data, indent=2) + "\n").encode("utf-8")
