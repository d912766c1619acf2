"""XLA's persistent compilation cache: the folder and its flags, programs checked before TensorFlow reads them.

The store's rules (a session of checked links, adoption, the four ways a
program gets damaged, the size limit) are tested on program files written
here; one test runs `translate` in fresh processes: a damaged cache gives
the same translation, with one warning line, and a whole one compiles
nothing.
"""

import hashlib
import json
import os
import pathlib
import subprocess
import sys
import time
import warnings

import pytest

from keras_transformer import compile_cache
from keras_transformer.errors import KerasTransformerWarning

from trained_runs import tiny_run_dir

NAMES = [f"xla_compile_cache__{n}__{n * 7}__XLA_CPU_JIT.pb" for n in range(1, 5)]


def test_enable_sets_the_flags_and_makes_a_private_folder(tmp_path):
    environ = {"TF_XLA_FLAGS": "--tf_xla_min_cluster_size=4", "KERAS_TRANSFORMER_XLA_CACHE": str(tmp_path / "x")}
    assert compile_cache.enable(environ=environ) == tmp_path / "x"
    flags = environ["TF_XLA_FLAGS"].split()
    assert flags[0] == "--tf_xla_min_cluster_size=4" and "--tf_xla_persistent_cache_device_types=CPU" in flags
    session = pathlib.Path(flags[1].split("=", 1)[1])
    assert session.parent == tmp_path / "x" / "sessions" and session.is_dir()
    assert (tmp_path / "x").stat().st_mode & 0o777 == 0o700
    assert compile_cache.enable(environ=environ) == tmp_path / "x"  # a second call in the process: the same session
    assert environ["TF_XLA_FLAGS"].split() == flags


def test_a_folder_already_in_the_flags_is_kept_and_off_turns_it_off(tmp_path):
    mine = {"TF_XLA_FLAGS": f"--tf_xla_persistent_cache_directory={tmp_path}"}
    assert compile_cache.enable(tmp_path / "other", environ=mine) == tmp_path
    assert mine["TF_XLA_FLAGS"] == f"--tf_xla_persistent_cache_directory={tmp_path}"
    off = {"KERAS_TRANSFORMER_XLA_CACHE": "off"}
    assert compile_cache.enable(environ=off) is None and "TF_XLA_FLAGS" not in off


def test_a_folder_others_may_write_to_is_not_used(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    environ = {}
    with pytest.warns(KerasTransformerWarning, match="writable by others"):
        assert compile_cache.enable(shared, environ=environ) is None
    assert "TF_XLA_FLAGS" not in environ


def test_the_default_folder_names_the_machine_under_the_user_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_TRANSFORMER_CACHE", str(tmp_path))
    folder = compile_cache.default_folder()
    assert folder.parent == tmp_path / "xla" and folder.name == compile_cache.machine_tag()
    assert "-tf" in folder.name


def test_the_size_limit_is_read_from_the_environment_and_a_bad_one_is_named():
    assert compile_cache.size_limit({}) == 256 * 2**20
    assert compile_cache.size_limit({"KERAS_TRANSFORMER_XLA_CACHE_MB": "0.5"}) == 2**19
    for value in ("0", "-3", "nan", "inf", "lots"):
        with pytest.raises(ValueError, match=rf"^\$KERAS_TRANSFORMER_XLA_CACHE_MB must be a positive number.*{value}"):
            compile_cache.enable(environ={"KERAS_TRANSFORMER_XLA_CACHE_MB": value, "KERAS_TRANSFORMER_XLA_CACHE": "/x"})


def _session_writing(store, programs):
    """Opens a session of `store`, writes `programs` ({name: bytes}) in it as TensorFlow would, and closes it."""
    session = store.open_session()
    for name, data in programs.items():
        (session.path / name).write_bytes(data)
    session.close()
    return session


def _listed(folder):
    return json.loads((folder / "index.json").read_text())["programs"]


def test_a_sessions_programs_are_kept_checked_and_linked_into_the_next(tmp_path):
    store = compile_cache.Store(tmp_path, limit=2**20)
    programs = {name: os.urandom(1000 + i) for i, name in enumerate(NAMES[:2])}
    first = _session_writing(store, programs)
    assert not first.path.exists() and sorted(p.name for p in (tmp_path / "programs").iterdir()) == NAMES[:2]
    listed = _listed(tmp_path)
    assert {name: entry["sha256"] for name, entry in listed.items()} == {
        name: hashlib.sha256(data).hexdigest() for name, data in programs.items()
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to say
        session = store.open_session()
    assert {p.name: p.read_bytes() for p in session.path.glob("*.pb")} == programs
    session.close()
    assert list((tmp_path / "sessions").iterdir()) == []


def _flip(path):
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    path.write_bytes(bytes(data))


def _damage(folder, how):
    """Damages programs/NAMES[0] (and, to swap, NAMES[1]) as the issue did; returns the names damaged."""
    first, second = folder / "programs" / NAMES[0], folder / "programs" / NAMES[1]
    if how == "flip 64 bytes":
        _flip(first)
    elif how == "truncate to half":
        first.write_bytes(first.read_bytes()[: first.stat().st_size // 2])
    elif how == "empty":
        first.write_bytes(b"")
    else:
        a, b = first.read_bytes(), second.read_bytes()
        first.write_bytes(b)
        second.write_bytes(a)
        return NAMES[:2]
    return NAMES[:1]


@pytest.mark.parametrize("how", ["flip 64 bytes", "truncate to half", "empty", "swap two programs"])
def test_a_damaged_program_is_never_given_to_tensorflow(tmp_path, how):
    store = compile_cache.Store(tmp_path, limit=2**20)
    programs = {name: os.urandom(4000) for name in NAMES[:3]}
    _session_writing(store, programs)
    damaged = _damage(tmp_path, how)
    with pytest.warns(KerasTransformerWarning) as caught:
        session = store.open_session()
    assert len(caught) == 1 and f"{len(damaged)} program(s) were damaged" in str(caught[0].message)
    assert "KERAS_TRANSFORMER_XLA_CACHE=off" in str(caught[0].message) and str(tmp_path) in str(caught[0].message)
    linked = {p.name: p.read_bytes() for p in session.path.glob("*.pb")}
    assert linked == {name: data for name, data in programs.items() if name not in damaged}
    assert sorted(p.name for p in (tmp_path / "programs").iterdir()) == sorted(linked)
    for name in damaged:  # TensorFlow compiles them again in this session: kept, checked
        (session.path / name).write_bytes(programs[name])
    session.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = store.open_session()
    assert {p.name: p.read_bytes() for p in again.path.glob("*.pb")} == programs
    again.close()


def test_an_unreadable_index_empties_the_cache_with_one_warning(tmp_path):
    store = compile_cache.Store(tmp_path, limit=2**20)
    _session_writing(store, {NAMES[0]: b"program"})
    (tmp_path / "index.json").write_text('{"programs": {"../../etc/passwd": ')
    (tmp_path / "notes.txt").write_text("the user's")
    with pytest.warns(KerasTransformerWarning, match="index.json was unreadable"):
        session = store.open_session()
    assert list(session.path.glob("*.pb")) == [] and list((tmp_path / "programs").iterdir()) == []
    assert (tmp_path / "notes.txt").read_text() == "the user's"  # only programs/ is deleted from
    session.close()


def test_the_least_recently_used_programs_go_past_the_limit(tmp_path):
    store = compile_cache.Store(tmp_path, limit=2500)
    _session_writing(store, {NAMES[0]: b"a" * 1000, NAMES[1]: b"b" * 1000})
    time.sleep(0.05)
    session = store.open_session()
    (session.path / NAMES[0]).read_bytes()  # read by TensorFlow in this session: used now
    os.utime(session.path / NAMES[1], ns=(1, 1))  # (on a file system that keeps no access times: used long ago)
    os.utime(session.path / NAMES[0], ns=(time.time_ns() + 10**9, (session.path / NAMES[0]).stat().st_mtime_ns))
    (session.path / NAMES[2]).write_bytes(b"c" * 1000)  # compiled in this session: 3,000 bytes, over the limit
    session.close()
    assert sorted(_listed(tmp_path)) == sorted([NAMES[0], NAMES[2]])
    assert sorted(p.name for p in (tmp_path / "programs").iterdir()) == sorted([NAMES[0], NAMES[2]])


def test_a_killed_processs_session_is_removed_and_a_live_one_kept(tmp_path):
    store = compile_cache.Store(tmp_path, limit=2**20)
    dead = tmp_path / "sessions" / "99999999-0000abcd"
    dead.mkdir(parents=True)
    (dead / NAMES[0]).write_bytes(b"half a prog")  # killed while TensorFlow wrote it: never adopted
    live = store.open_session()
    other = store.open_session()
    assert not dead.exists() and live.path.exists() and other.path.exists()
    other.close()
    assert live.path.exists() and _listed(tmp_path) == {}
    live.close()


def _translate(run, sentences, cache):
    """`translate` in a fresh process, as a user runs it (TensorFlow's own log lines hidden): (stdout, stderr)."""
    environ = dict(os.environ, KERAS_TRANSFORMER_XLA_CACHE=str(cache))
    environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
    flags = [f for f in environ.get("TF_XLA_FLAGS", "").split() if "persistent_cache" not in f]
    environ["TF_XLA_FLAGS"] = " ".join(flags)  # the test run's own cache (conftest) left out
    command = [sys.executable, "-m", "keras_transformer_cli", "translate", "--model", str(run), "--beam", "2"]
    command += ["--batch-size", "1", "--quiet", *sentences]
    done = subprocess.run(command, env=environ, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr


def _programs(cache):
    return {path.name: path.stat().st_mtime_ns for path in (pathlib.Path(cache) / "programs").iterdir()}


def test_a_damaged_cache_gives_the_same_translation_and_a_whole_one_compiles_nothing(tmp_path):
    """The issue: after a flipped or cut program every later run failed, exit 2, until the folder was deleted."""
    run, pairs = tiny_run_dir()
    cache = tmp_path / "xla"
    sentences = [pairs[0][0], pairs[3][0]]  # 16 and 23 tokens: two source buckets, two programs
    first, err = _translate(run, sentences, cache)
    assert err == "" and len(_programs(cache)) >= 2
    programs = sorted((cache / "programs").iterdir())
    _flip(programs[0])
    programs[1].write_bytes(programs[1].read_bytes()[: programs[1].stat().st_size // 2])
    again, err = _translate(run, sentences, cache)
    assert again == first and len(err.splitlines()) == 1, err
    assert "2 program(s) were damaged" in err and "KERAS_TRANSFORMER_XLA_CACHE=off" in err
    written = _programs(cache)
    assert sorted(written) == [p.name for p in programs]  # compiled again and kept
    assert _translate(run, sentences, cache) == (first, "")
    assert _programs(cache) == written  # none compiled again: a compiled program would have been written


def test_the_help_and_the_readme_name_the_cache_its_limit_and_how_to_turn_it_off():
    from keras_transformer.commands import cli

    readme = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    parser = cli.build_parser()
    translate = parser._subparsers._group_actions[0].choices["translate"]
    for text in (" ".join(parser.format_help().split()), " ".join(translate.format_help().split()), readme):
        assert "KERAS_TRANSFORMER_XLA_CACHE_MB" in text and "KERAS_TRANSFORMER_XLA_CACHE=off" in text
