"""The tests' cache of tiny trained runs: one folder per checkout unless `KERAS_TRANSFORMER_TEST_CACHE` names one."""

import hashlib

import run_cache


def test_each_checkout_has_its_own_cache_by_default(monkeypatch, tmp_path):
    monkeypatch.delenv("KERAS_TRANSFORMER_TEST_CACHE", raising=False)
    here = run_cache.cache_root()
    assert hashlib.sha256(str(run_cache.REPO).encode()).hexdigest()[:12] in here.name
    monkeypatch.setattr(run_cache, "REPO", tmp_path / "another-checkout")
    assert run_cache.cache_root() != here  # a second checkout's run never removes this one's entries
    monkeypatch.setenv("KERAS_TRANSFORMER_TEST_CACHE", str(tmp_path / "named"))
    assert run_cache.cache_root() == tmp_path / "named"
