"""A reference model server: KServe's Open Inference Protocol (v2) over HTTP, for one model.

It loads the model at MODEL_PATH and serves it as MODEL_NAME on PORT, the environment the operator
gives every model's container. It is ready (``/v2/health/ready``, ``/healthz``: the operator's
readiness probe) only once the model is loaded; a model that cannot be loaded ends the process with
a message, as a real server does, so Kubernetes reports the crash.
"""

import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import joblib
import numpy as np

MODEL_NAME = os.environ.get("MODEL_NAME", "model")
MODEL_PATH = os.environ.get("MODEL_PATH", "/models/model.joblib")
PORT = int(os.environ.get("PORT", "8080"))
# After SIGTERM the Pod's address stays in the nodes' service rules for a moment: requests sent to
# it meanwhile must still be answered, not refused (a gateway would answer them 502).
DRAIN_SECONDS = float(os.environ.get("DRAIN_SECONDS", "5"))
DRAINING = threading.Event()


class Model:
    def __init__(self) -> None:
        self.ready = threading.Event()
        self.estimator = None
        self.features = 0

    def load(self) -> None:
        started = time.monotonic()
        try:
            bundle = joblib.load(MODEL_PATH)
        except FileNotFoundError:
            log(f"no model at MODEL_PATH={MODEL_PATH}")
            os._exit(1)
        except Exception as err:  # a file that is not a model of this server
            log(f"cannot load the model at MODEL_PATH={MODEL_PATH}: {err}")
            os._exit(1)
        self.estimator = bundle["model"]
        self.features = bundle["features"]
        self.ready.set()
        log(f"model {MODEL_NAME} loaded from {MODEL_PATH} in {time.monotonic() - started:.1f}s")

    def infer(self, request: dict) -> dict:
        inputs = request.get("inputs") or []
        if len(inputs) != 1:
            raise ValueError("expected exactly one input tensor")
        tensor = inputs[0]
        data = np.asarray(tensor.get("data"), dtype=np.float64).reshape(-1, self.features)
        labels = self.estimator.predict(data)
        return {
            "model_name": MODEL_NAME,
            "id": request.get("id", ""),
            "outputs": [
                {
                    "name": "label",
                    "shape": [len(labels)],
                    "datatype": "INT64",
                    "data": [int(v) for v in labels],
                }
            ],
        }


MODEL = Model()


def log(message: str) -> None:
    print(json.dumps({"time": time.time(), "msg": message}), file=sys.stderr, flush=True)


class Handler(BaseHTTPRequestHandler):
    server_version = "reference-model-server/1"

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the base class's name)
        pass

    def reply(self, status: int, body: dict | None = None) -> None:
        payload = json.dumps(body or {}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:  # noqa: N802 (the base class's name)
        ready = MODEL.ready.is_set() and not DRAINING.is_set()
        path = self.path.split("?")[0].rstrip("/")
        if path == "/v2/health/live":
            self.reply(200, {"live": True})
        elif path in ("/v2/health/ready", "/healthz", f"/v2/models/{MODEL_NAME}/ready"):
            self.reply(200 if ready else 503, {"ready": ready})
        elif path == "/v2":
            self.reply(200, {"name": "reference-model-server", "version": "1", "extensions": []})
        elif path == f"/v2/models/{MODEL_NAME}":
            self.reply(
                200,
                {
                    "name": MODEL_NAME,
                    "platform": "scikit-learn",
                    "inputs": [{"name": "image", "datatype": "FP64", "shape": [-1, MODEL.features]}],
                    "outputs": [{"name": "label", "datatype": "INT64", "shape": [-1]}],
                },
            )
        else:
            self.reply(404, {"error": f"no route {path}"})

    def do_POST(self) -> None:  # noqa: N802
        path = self.path.split("?")[0].rstrip("/")
        if path != f"/v2/models/{MODEL_NAME}/infer":
            self.reply(404, {"error": f"no route {path}"})
            return
        if not MODEL.ready.is_set():
            self.reply(503, {"error": "model not loaded yet"})
            return
        try:
            length = int(self.headers.get("Content-Length", "0"))
            self.reply(200, MODEL.infer(json.loads(self.rfile.read(length) or b"{}")))
        except (ValueError, TypeError, KeyError) as err:
            self.reply(400, {"error": str(err)})


class Server(ThreadingHTTPServer):
    # Requests in flight when the drain ends are answered before the process exits (daemon threads
    # would die with it, and the gateway would see the connection cut).
    daemon_threads = False
    block_on_close = True


def main() -> None:
    server = Server(("0.0.0.0", PORT), Handler)
    threading.Thread(target=MODEL.load, daemon=True).start()
    log(f"serving {MODEL_NAME} on port {PORT} (Open Inference Protocol v2)")
    # PID 1 in a container ignores SIGTERM unless it handles it: without this, a replaced Pod would keep
    # answering for its whole grace period. It drains instead: not ready, answering, then gone.
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=drain, args=(server,), daemon=True).start())
    server.serve_forever()
    server.server_close()
    log("drained, stopping")


def drain(server: ThreadingHTTPServer) -> None:
    if DRAINING.is_set():
        return
    DRAINING.set()
    log(f"SIGTERM: answering for {DRAIN_SECONDS:g} s more, then stopping")
    time.sleep(DRAIN_SECONDS)
    server.shutdown()


if __name__ == "__main__":
    main()
