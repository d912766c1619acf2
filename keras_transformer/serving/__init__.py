"""Serving a SavedModel over TF Serving's REST API (`keras-transformer serve`).

- `signatures`: the SavedModel's signatures, TF Serving's JSON request forms
  parsed and checked against them, and the metadata TF Serving returns.
- `batching`: dynamic batching of concurrent requests into one signature call.
- `rest`: the FastAPI app (needs the `serve` extra: `pip install keras-transformer[serve]`).
- `connections`: how many connections the server holds, and how long a request
  may take to arrive (idle and half-sent requests are closed).
- `logs`: the server's log, each kind of line a few times a minute, then a count.
- `page`: the HTML page served at `/`.
"""
