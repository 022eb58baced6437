#!/usr/bin/env python3
"""bench/idle.py: hold N idle keep-alive HTTP/1.1 connections to a server.

Each connection sends one GET (a small 404 answer), reads the answer, and
then stays open and silent: the idle keep-alive connections of
bench/scaling.sh, held while `pith bench http` loads the server. Sources are
spread over 127.0.0.2, 127.0.0.3, ... (PER_ADDRESS connections each) so the
ports of one address never run out. Standard library only.

Usage: idle.py HOST PORT N HOLD_SECONDS [PER_ADDRESS [FIRST_ADDRESS]]
(FIRST_ADDRESS: the last byte of the first source address, 2 by default)
Prints one line when all are open and one when it stops (after HOLD_SECONDS
or on SIGTERM): how many are still open (a closed connection reads as EOF).
With IDLE_TLS=1 each connection is TLS (ALPN http/1.1, the certificate not
checked: a self-signed one on loopback), for `pith serve --tls-cert`.
"""
import os
import select
import signal
import socket
import ssl
import sys
import time

TLS = None
if os.environ.get("IDLE_TLS") == "1":
    TLS = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    TLS.check_hostname = False
    TLS.verify_mode = ssl.CERT_NONE
    TLS.set_alpn_protocols(["http/1.1"])


def open_one(host, port, source):
    s = socket.create_connection((host, port), timeout=10, source_address=(source, 0))
    if TLS:
        s = TLS.wrap_socket(s, server_hostname="localhost")
    s.sendall(b"GET /api/v1/topics/999999999 HTTP/1.1\r\nHost: bench\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            raise ConnectionError("closed before answering")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = s.recv(4096)
        if not chunk:
            raise ConnectionError("closed mid-answer")
        body += chunk
    s.setblocking(False)
    return s


def still_open(socks):
    """Sockets that neither hit EOF nor errored; drains nothing else."""
    alive = []
    for i in range(0, len(socks), 1000):
        batch = socks[i : i + 1000]
        poller = select.poll()
        for s in batch:
            poller.register(s, select.POLLIN | select.POLLERR | select.POLLHUP)
        ready = {fd for fd, _ in poller.poll(0)}
        alive += [s for s in batch if s.fileno() not in ready]
    return alive


def main():
    host, port, n, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    per_address = int(sys.argv[5]) if len(sys.argv) > 5 else 5000
    first = int(sys.argv[6]) if len(sys.argv) > 6 else 2
    start = time.monotonic()
    socks = [open_one(host, port, "127.0.0.%d" % (first + i // per_address)) for i in range(n)]
    print(f"idle.py: {len(socks)} idle keep-alive connections open in {time.monotonic() - start:.1f} s", flush=True)
    stopped = []
    signal.signal(signal.SIGTERM, lambda *_: stopped.append(True))
    deadline = time.monotonic() + hold
    while time.monotonic() < deadline and not stopped:
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
    held = time.monotonic() - start
    print(f"idle.py: {len(still_open(socks))} of {n} still open after {held:.0f} s", flush=True)


if __name__ == "__main__":
    main()
