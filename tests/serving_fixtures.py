"""Helpers for the REST server's tests: a fake SavedModel with the serving signatures, and a server process.

The fake model has exactly the signatures (names, inputs, outputs, dtypes,
shapes) that `Translator.save` writes, with outputs computed by string ops
(a translation is the sentence in upper case, its score minus its length),
so protocol tests run in seconds without training.
"""

import concurrent.futures
import json
import os
import pathlib
import re
import resource
import signal
import string
import subprocess
import sys
import threading
import time

import httpx
import pytest
import tensorflow as tf

REPO = pathlib.Path(__file__).resolve().parents[1]
BEAM = 3
STRINGS = tf.TensorSpec([None], tf.string)


def _scored(translations, sentences, offset=0.0):
    length = tf.cast(tf.strings.length(sentences, unit="UTF8_CHAR"), tf.float32)
    return {
        "translations": translations,
        "scores": -length - offset,
        "finished": length < 20,
    }


class FakeTranslator(tf.Module):
    """String ops with `Translator`'s serving signatures (see the module docstring)."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
    def beam(self, sentences):
        return _scored(tf.strings.upper(sentences), sentences)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
    def greedy(self, sentences):
        return _scored(tf.strings.lower(sentences), sentences)

    @tf.function(
        input_signature=[
            tf.TensorSpec([None], tf.string, name="sentences"),
            tf.TensorSpec([], tf.float32, name="temperature"),
            tf.TensorSpec([], tf.int32, name="top_k"),
            tf.TensorSpec([], tf.float32, name="top_p"),
            tf.TensorSpec([], tf.int64, name="seed"),
        ]
    )
    def sample(self, sentences, temperature, top_k, top_p, seed):
        settings = tf.strings.format("|{}|{}|{}|{}", (temperature, top_k, top_p, seed))
        return _scored(sentences + settings, sentences)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
    def nbest(self, sentences):
        candidates = [tf.strings.upper(sentences), tf.strings.lower(sentences), sentences]
        scored = [_scored(text, sentences, offset=float(rank)) for rank, text in enumerate(candidates)]
        return {name: tf.stack([s[name] for s in scored], axis=1) for name in scored[0]}

    @tf.function(
        input_signature=[
            tf.TensorSpec([None], tf.string, name="sources"),
            tf.TensorSpec([None], tf.string, name="targets"),
        ]
    )
    def score(self, sources, targets):
        return {
            "log_probs": -tf.cast(tf.strings.length(targets), tf.float32) / 2,
            "target_lengths": tf.strings.length(sources) + 1,
        }


def save_fake_translator(path):
    module = FakeTranslator()
    signatures = {
        "serving_default": module.beam,
        "greedy": module.greedy,
        "sample": module.sample,
        "nbest": module.nbest,
        "score": module.score,
    }
    tf.saved_model.save(module, str(path), signatures=signatures)
    return path


UPPER = str.maketrans(string.ascii_lowercase, string.ascii_uppercase)
LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def expected(signature, sentence):
    """What the fake model answers for one sentence (row format, one instance; ASCII case only, as TF's)."""
    length = len(sentence)
    upper, lower = sentence.translate(UPPER), sentence.translate(LOWER)
    texts = {"serving_default": upper, "greedy": lower}
    if signature == "nbest":
        return {
            "translations": [upper, lower, sentence],
            "scores": [-length - rank for rank in range(BEAM)],
            "finished": [length < 20] * BEAM,
        }
    return {"translations": texts[signature], "scores": -length, "finished": length < 20}


class Server:
    """`keras-transformer serve` in a subprocess on 127.0.0.1 and a free port; `url` once it listens.

    `open_files`: the server's limit on open files (`ulimit -n`), if not this process's.
    """

    def __init__(self, model, *flags, name="fake", startup_s=180, open_files=None):
        env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3")
        command = [sys.executable, "-m", "keras_transformer.commands.cli", "serve", "--model", str(model)]
        command += ["--port", "0", "--name", name, *flags]
        limit = None if open_files is None else lambda: _limit_open_files(open_files)
        self.process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO, preexec_fn=limit)
        self.name = name
        self.lines = []
        self.peak_rss_mb = None
        deadline = time.monotonic() + startup_s
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line:
                break
            self.lines.append(line)
            found = re.search(r"at (http://127\.0\.0\.1:\d+)/", line)
            if found:
                self.url = found[1]
                self.port = int(self.url.rsplit(":", 1)[1])
                self.predict_url = f"{self.url}/v1/models/{name}:predict"
                return
        self.stop()
        raise RuntimeError("the server did not start:\n" + "".join(self.lines))

    def stop(self):
        """SIGTERM, then the exit status; `peak_rss_mb` is then the server's peak memory (None if it was reaped)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                pid, status, usage = os.wait4(self.process.pid, os.WNOHANG)  # its own rusage: peak memory
                if pid:
                    self.process.returncode = os.waitstatus_to_exitcode(status)
                    self.peak_rss_mb = usage.ru_maxrss / 1024
                    break
                time.sleep(0.05)
            else:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def stderr(self):
        return "".join(self.lines) + (self.process.stderr.read() if self.process.poll() is not None else "")


def _limit_open_files(soft):
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def post(server, body, url=None, **kwargs):
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(url or server.predict_url, content=content, timeout=300, **kwargs)


def ok(response):
    assert response.status_code == 200, response.text
    return response.json()


def run_clients(url, plans):
    """Every client's answers as (status, JSON), sent by one thread per client over its own connection."""
    barrier = threading.Barrier(len(plans))

    def client(plan):
        answers = []
        with httpx.Client(timeout=300) as http:
            barrier.wait()
            for signature, payload in plan:
                body = payload if signature is None else json.dumps({"signature_name": signature, "instances": payload})
                response = http.post(url, content=body)
                answers.append((response.status_code, response.json()))
        return answers

    with concurrent.futures.ThreadPoolExecutor(len(plans)) as pool:
        return list(pool.map(client, plans))


CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def browser():
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        if os.environ.get("CI"):
            pytest.fail(f"CI must have {CHROMIUM} and {CHROMEDRIVER} (.ci/run installs chromium and chromium-driver)")
        pytest.skip(f"{CHROMIUM} or {CHROMEDRIVER} is missing (apt-get install chromium chromium-driver)")
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def read_page(browser, url, sentence):
    """Type `sentence` on the page at `url`, submit, and return (translation, [(score, text), ...]) shown."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(url)
    box = browser.find_element(By.ID, "sentence")
    box.clear()
    box.send_keys(sentence)
    browser.find_element(By.ID, "translate").click()
    WebDriverWait(browser, 60).until(
        lambda b: b.find_element(By.TAG_NAME, "body").get_attribute("data-state") in ("done", "error")
    )
    assert browser.find_element(By.ID, "error").text == ""
    rows = browser.find_elements(By.CSS_SELECTOR, "#nbest tbody tr")
    nbest = [tuple(cell.text for cell in row.find_elements(By.TAG_NAME, "td"))[1:] for row in rows]
    return browser.find_element(By.ID, "translation").text, [(float(score), text) for score, text in nbest]


def check_page_against_predict(browser, server, sentence):
    translation, nbest = read_page(browser, server.url + "/", sentence)
    best = ok(post(server, {"signature_name": "greedy", "instances": [sentence]}))["predictions"][0]  # streamed
    listed = ok(post(server, {"signature_name": "nbest", "instances": [sentence]}))["predictions"][0]
    assert translation == best["translations"].strip()  # the browser's .text trims the ends
    assert [text for _, text in nbest] == [text.strip() for text in listed["translations"]]
    assert [score for score, _ in nbest] == pytest.approx(listed["scores"], abs=5e-5)  # shown with 4 decimals
