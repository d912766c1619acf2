"""The page served at `/`: type a sentence, see its translation word by word, and the n-best list.

Plain HTML and a little JavaScript, with no external assets (the server works
offline). The page calls the API itself: `:stream` with `greedy` for the
translation, each piece shown as it arrives (one `<span>` each), and
`:predict` with `nbest` for the beam search's list with scores.

Example:

>>> "translator:predict" in render("translator") and "translator:stream" in render("translator")
True
"""

import html
import json

TEMPLATE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>__TITLE__</title>
<style>
  body { font-family: sans-serif; max-width: 44em; margin: 2em auto; padding: 0 1em; }
  textarea { width: 100%; font-size: 1.1em; }
  #translation { font-size: 1.3em; margin: 1em 0; min-height: 1.4em; }
  #error { color: #b00020; }
  table { border-collapse: collapse; }
  td, th { padding: 0.2em 0.8em; text-align: left; border-bottom: 1px solid #ddd; }
</style>
</head>
<body>
<h1>__TITLE__</h1>
<form id="form">
  <textarea id="sentence" rows="3" placeholder="Type a sentence"></textarea>
  <p><button id="translate" type="submit">Translate</button> <span id="busy"></span></p>
</form>
<p id="error"></p>
<div id="translation"></div>
<table id="nbest"><thead><tr><th>#</th><th>score</th><th>translation</th></tr></thead><tbody></tbody></table>
<script>
const PREDICT = __PREDICT__;
const STREAM = __STREAM__;
async function stream(sentence, shown) {
  // Server-Sent Events over fetch: each "data:" line one JSON event (serving/sse.py).
  const response = await fetch(STREAM, {
    method: "POST",
    headers: {"Content-Type": "application/json"},
    body: JSON.stringify({signature_name: "greedy", instances: [sentence]}),
  });
  if (!response.ok) throw new Error((await response.json()).error || response.statusText);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) return;
    buffered += value;
    const events = buffered.split("\\n\\n");
    buffered = events.pop();
    for (const text of events) {
      const event = JSON.parse(text.replace(/^data: /, ""));
      if (event.error) throw new Error(event.error);
      if (event.token) shown.appendChild(document.createElement("span")).textContent = event.token.text;
    }
  }
}
async function predict(signature, sentence) {
  const response = await fetch(PREDICT, {
    method: "POST",
    headers: {"Content-Type": "application/json"},
    body: JSON.stringify({signature_name: signature, instances: [sentence]}),
  });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body.predictions[0];
}
document.getElementById("form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const sentence = document.getElementById("sentence").value;
  const rows = document.querySelector("#nbest tbody");
  document.getElementById("error").textContent = "";
  document.getElementById("busy").textContent = "translating...";
  document.body.dataset.state = "busy";
  try {
    const shown = document.getElementById("translation");
    shown.replaceChildren();
    const [, nbest] = await Promise.all([stream(sentence, shown), predict("nbest", sentence)]);
    rows.replaceChildren();
    nbest.translations.forEach((text, i) => {
      const row = rows.insertRow();
      row.insertCell().textContent = i + 1;
      row.insertCell().textContent = nbest.scores[i].toFixed(4);
      row.insertCell().textContent = text;
    });
    document.body.dataset.state = "done";
  } catch (error) {
    document.getElementById("error").textContent = error.message;
    document.body.dataset.state = "error";
  } finally {
    document.getElementById("busy").textContent = "";
  }
});
</script>
</body>
</html>
"""


def render(name):
    """The page for the model served as `name`."""

    def url(action):
        return json.dumps(f"/v1/models/{name}:{action}").replace("<", "\\u003c")

    page = TEMPLATE.replace("__TITLE__", html.escape(name)).replace("__PREDICT__", url("predict"))
    return page.replace("__STREAM__", url("stream"))
