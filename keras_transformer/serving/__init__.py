"""Serving a SavedModel over TF Serving's REST API (`keras-transformer serve`).

- `signatures`: the SavedModel's signatures, TF Serving's JSON request forms
  parsed and checked against them, and the metadata TF Serving returns.
- `batching`: dynamic batching of concurrent requests into one signature call.
- `rest`: the FastAPI app (needs the `serve` extra: `pip install keras-transformer[serve]`).
- `page`: the HTML page served at `/`.
"""
