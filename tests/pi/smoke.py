#!/usr/bin/env python3
"""The smoke test a build for another machine must pass (tests/pi/arm64.sh
runs it on the arm64 binary under qemu-user). Everything goes through the
binary the command line names, run with the given prefix:

    tests/pi/smoke.py -- qemu-aarch64-static -L /usr/aarch64-linux-gnu target/.../pith

It seeds a small forum, serves it, makes a user, and checks the API round
trip (read, post, read-your-write, ETag and 304), a WebSocket subscriber
receiving the post, `pith backup` of the running forum, and a SIGKILL and
restart that keep every acknowledged write. Python's standard library only:
the WebSocket client is the few lines of RFC 6455 a text frame needs.
"""

import base64
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

STEP_TIMEOUT = 120  # seconds; emulation is slow, and so is a busy CI box


def log(msg):
    print(f"smoke: {msg}", flush=True)


def run(pith, *args, env=None):
    out = subprocess.run(pith + list(args), capture_output=True, text=True, env=env, timeout=600)
    if out.returncode != 0:
        sys.exit(f"smoke: `pith {' '.join(args)}` failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return out.stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, pith, data, port):
        self.port = port
        self.log = open(os.path.join(data, "serve.log"), "ab")
        env = dict(os.environ, PITH_DATA_DIR=data, PITH_LISTEN=f"127.0.0.1:{port}", PITH_RATE_LIMITS="false")
        self.proc = subprocess.Popen(pith + ["serve"], env=env, stdout=self.log, stderr=self.log)
        deadline = time.time() + STEP_TIMEOUT
        while True:
            try:
                if self.request("GET", "/healthz")[0] == 200:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                sys.exit(f"smoke: pith serve exited with {self.proc.returncode}; log in {self.log.name}")
            if time.time() > deadline:
                sys.exit("smoke: pith serve never answered /healthz")
            time.sleep(0.2)

    def request(self, method, path, body=None, token=None, headers=None):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, data, timeout=STEP_TIMEOUT) as res:
                return res.status, res.headers, res.read()
        except urllib.error.HTTPError as e:
            # The headers are an email.message.Message: `get` ignores case.
            return e.code, e.headers, e.read()

    def kill(self, sig):
        self.proc.send_signal(sig)
        self.proc.wait(timeout=STEP_TIMEOUT)


class WebSocket:
    """A client for text frames: the handshake, masked sends, unmasked reads."""

    def __init__(self, port, path):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=STEP_TIMEOUT)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                sys.exit("smoke: the WebSocket handshake was cut short")
            head += chunk
        if not head.startswith(b"HTTP/1.1 101"):
            sys.exit(f"smoke: WebSocket handshake refused: {head!r}")

    def _exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                sys.exit("smoke: the WebSocket closed")
            buf += chunk
        return buf

    def message(self):
        """The next text message as JSON (pings are answered by nobody: none comes this fast)."""
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = int.from_bytes(self._exact(2), "big")
            elif n == 127:
                n = int.from_bytes(self._exact(8), "big")
            payload = self._exact(n)
            if b0 & 0x0F == 1:
                return json.loads(payload)


def main():
    if "--" not in sys.argv:
        sys.exit(__doc__)
    pith = sys.argv[sys.argv.index("--") + 1 :]
    work = tempfile.mkdtemp(prefix="pith-smoke-")
    data = os.path.join(work, "data")
    env = dict(os.environ, PITH_DATA_DIR=data)

    log("pith seed (a small realistic set)")
    run(pith, "seed", "--scale", "0.01", env=env)
    log("pith user add")
    token = run(pith, "user", "add", "smoke", "--admin", env=env).strip().splitlines()[-1]

    port = free_port()
    log(f"pith serve on 127.0.0.1:{port}")
    server = Server(pith, data, port)
    status, _, body = server.request("GET", "/api/v1/topics?sort=new&limit=5")
    assert status == 200, (status, body)
    topic = json.loads(body)["topics"][0]["id"]

    status, headers, body = server.request("GET", f"/api/v1/topics/{topic}?sort=old")
    assert status == 200, (status, body)
    etag = headers.get("ETag")
    assert etag, "a topic answer carries an ETag"
    before = len(json.loads(body)["posts"])
    status, _, _ = server.request("GET", f"/api/v1/topics/{topic}?sort=old", headers={"If-None-Match": etag})
    assert status == 304, f"If-None-Match with the ETag answers {status}"
    log(f"topic {topic}: {before} posts, ETag {etag}, 304 on If-None-Match")

    ws = WebSocket(port, f"/api/v1/live?topics={topic}")
    hello = ws.message()
    assert hello["type"] == "subscribed" and hello["topics"] == [topic], hello

    text = f"posted from the smoke test at {time.time()}"
    status, _, body = server.request("POST", f"/api/v1/topics/{topic}/posts", {"body": text}, token=token)
    assert status == 201, (status, body)
    post = json.loads(body)["id"]

    status, headers, body = server.request("GET", f"/api/v1/topics/{topic}?sort=old")
    posts = json.loads(body)["posts"]
    assert status == 200 and len(posts) == before + 1 and posts[-1]["id"] == post, "read-your-write"
    assert headers.get("ETag") not in (None, etag), "a write changes the ETag"
    log(f"post {post}: read back at once, new ETag {headers.get('ETag')}")

    event = ws.message()
    assert str(post) in json.dumps(event) and text in json.dumps(event), f"the subscriber got {event}"
    log(f"the WebSocket subscriber received it: {event.get('type')}")

    backup = os.path.join(work, "backup.db")
    run(pith, "backup", backup, env=env)
    with sqlite3.connect(backup) as db:
        (n,) = db.execute("SELECT count(*) FROM posts WHERE id = ?", (post,)).fetchone()
    assert n == 1, "the backup of the running forum holds the acknowledged post"
    log("pith backup of the running server holds the post")

    status, _, body = server.request("POST", f"/api/v1/topics/{topic}/posts", {"body": "the last one"}, token=token)
    assert status == 201, (status, body)
    last = json.loads(body)["id"]
    server.kill(signal.SIGKILL)
    log("SIGKILL right after an acknowledged write; restarting")
    server = Server(pith, data, port)
    status, _, body = server.request("GET", f"/api/v1/topics/{topic}?sort=old")
    ids = [p["id"] for p in json.loads(body)["posts"]]
    assert status == 200 and post in ids and last in ids, "every acknowledged write survives the kill"
    server.kill(signal.SIGTERM)
    log("all acknowledged writes kept across the restart; smoke test passed")


if __name__ == "__main__":
    main()
