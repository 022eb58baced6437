#!/usr/bin/env python3
"""A wss:// client on Python's ssl module (OpenSSL), for tests/it/tls.rs: an
implementation of TLS 1.3 that is neither rustls nor Pith's own record code.

Usage: wss_openssl.py PORT CA_FILE TOPIC. Prints one line per step: the
cipher suite, `greeted`, `pong`, `ready` (the test then posts to TOPIC),
`event <json>`, `closed <code>`, and `eof` once the server's close_notify
has arrived and the socket ended.
"""
import base64
import json
import os
import socket
import ssl
import struct
import sys

port, ca, topic = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ctx = ssl.create_default_context(cafile=ca)
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
ctx.set_alpn_protocols(["http/1.1"])
tls = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=20), server_hostname="localhost")
print("cipher", tls.cipher()[0], flush=True)

key = base64.b64encode(os.urandom(16)).decode()
tls.sendall(
    f"GET /api/v1/live?topics={topic} HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
    f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
)
buf = b""
while b"\r\n\r\n" not in buf:
    chunk = tls.recv(4096)
    if not chunk:
        sys.exit("closed during the handshake")
    buf += chunk
head, buf = buf.split(b"\r\n\r\n", 1)
if not head.startswith(b"HTTP/1.1 101"):
    sys.exit(f"refused: {head!r}")


def need(n):
    global buf
    while len(buf) < n:
        chunk = tls.recv(65536)
        if not chunk:
            raise EOFError
        buf += chunk


def frame():
    """One server frame: (opcode, payload); servers do not mask."""
    global buf
    need(2)
    op, n = buf[0] & 0x0F, buf[1] & 0x7F
    at = 2
    if n == 126:
        need(4)
        n, at = struct.unpack("!H", buf[2:4])[0], 4
    elif n == 127:
        need(10)
        n, at = struct.unpack("!Q", buf[2:10])[0], 10
    need(at + n)
    payload, buf = buf[at : at + n], buf[at + n :]
    return op, payload


def send(op, payload):
    mask = os.urandom(4)
    n = len(payload)
    head = bytes([0x80 | op]) + (
        bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack("!H", n)
        if n < 65536 else bytes([0x80 | 127]) + struct.pack("!Q", n)
    )
    tls.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))


op, payload = frame()
assert op == 1 and json.loads(payload)["type"] == "subscribed", payload
print("greeted", flush=True)
send(1, b'{"op": "ping"}')
while True:
    op, payload = frame()
    if op == 1 and json.loads(payload)["type"] == "pong":
        print("pong", flush=True)
        break
print("ready", flush=True)
while True:
    op, payload = frame()
    if op == 1 and json.loads(payload)["type"] == "post":
        print("event", payload.decode(), flush=True)
        break
send(8, struct.pack("!H", 1000))
while True:
    op, payload = frame()
    if op == 8:
        print("closed", struct.unpack("!H", payload[:2])[0], flush=True)
        break
try:
    while tls.recv(4096):
        pass
except (ssl.SSLEOFError, ConnectionResetError):
    sys.exit("the server ended without close_notify")
print("eof", flush=True)
