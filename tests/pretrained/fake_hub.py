"""A stand-in for the Hugging Face Hub on 127.0.0.1: the routes huggingface_hub calls to fetch a model's files.

`FakeHub(files)` serves one repository, whatever its name and revision (as
the hostile stand-in of the safety tests did), at commit `COMMIT`:

- `GET /api/models/ORG/NAME[/revision/REV]`: the model's info (its commit, its files);
- `HEAD` and `GET /ORG/NAME/resolve/REV/FILE`: a file, with the headers
  huggingface_hub reads (`X-Repo-Commit`, `ETag`, `Content-Length`).

`FakeHub(silent=True)` accepts connections and never answers. Every request
is recorded (`requests`). Point huggingface_hub at it with
`HF_ENDPOINT=hub.url` (read when huggingface_hub is imported: a subprocess).
"""

import hashlib
import http.server
import json
import socket
import threading
import urllib.parse

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class FakeHub:
    """The server; a context manager that starts it in a thread and stops it."""

    def __init__(self, files=None, silent=False, root=None):
        # Each file by its name, or by its path below `root` where given (a file in a folder of the repository).
        self.files = {
            (path.relative_to(root).as_posix() if root else path.name): path.read_bytes() for path in files or ()
        }
        self.silent = silent
        self.requests = []
        self._held = []

    def __enter__(self):
        if self.silent:
            self._socket = socket.create_server(("127.0.0.1", 0))
            self._thread = threading.Thread(target=self._accept_and_hold, daemon=True)
        else:
            self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
            self._socket = self._server.socket
            self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        return self

    def __exit__(self, *exc_info):
        if self.silent:
            for connection in self._held:
                connection.close()
        else:
            self._server.shutdown()
        self._socket.close()

    def _accept_and_hold(self):
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            self.requests.append("(connection)")
            self._held.append(connection)

    def _handler(self):
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                self._answer(body=False)

            def do_GET(self):
                self._answer(body=True)

            def _answer(self, body):
                path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
                hub.requests.append(f"{self.command} {path}")
                parts = path.strip("/").split("/")
                if parts[:2] == ["api", "models"]:
                    siblings = [{"rfilename": name} for name in sorted(hub.files)]
                    info = {"id": "/".join(parts[2:4]), "modelId": "/".join(parts[2:4]), "sha": COMMIT}
                    self._send(json.dumps({**info, "siblings": siblings}).encode(), "application/json", body)
                elif len(parts) >= 5 and parts[2] == "resolve" and _served(path, hub.files) is not None:
                    self._send(hub.files[_served(path, hub.files)], "application/octet-stream", body)
                else:
                    self.send_response(404)
                    self.send_header("X-Error-Code", "EntryNotFound")
                    self.send_header("Content-Length", "0")
                    self.end_headers()

            def _send(self, data, kind, body):
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("ETag", '"' + hashlib.sha256(data).hexdigest() + '"')
                self.end_headers()
                if body:
                    self.wfile.write(data)

        return Handler


def _served(path, files):
    """The name of the file of `files` that the request `path` (`/ORG/NAME/resolve/REVISION/FILE`) asks for."""
    return next((name for name in sorted(files, key=len, reverse=True) if path.endswith("/" + name)), None)
