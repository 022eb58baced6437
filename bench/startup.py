#!/usr/bin/env python3
"""bench/startup.py: how long `pith serve` takes from exec to serving.

For each binary, RUNS times (default 5): copy the data dir given (or start
with none, so pith creates its database), start `pith serve --listen
127.0.0.1:0` on the copy, and time exec to the first log line that says
`serving`; then stop it and remove the copy. Binaries alternate run by run,
so two builds measured together see the same machine. Standard library only.

Usage: startup.py [--runs N] [--data DIR] BINARY...
Prints one line per binary: the median and the range in milliseconds.
Exits 1 if a server exits or stays silent for 60 s instead of serving.
"""
import argparse
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TIMEOUT_S = 60


def once(binary, data):
    scratch = tempfile.mkdtemp(prefix="pith-startup-")
    try:
        copy = os.path.join(scratch, "data")
        if data:
            shutil.copytree(data, copy)
        start = time.perf_counter()
        server = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", copy],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            # Raw reads, not readline: a buffered reader could hold the `serving` line while
            # select waits on the pipe.
            seen, deadline = b"", start + TIMEOUT_S
            while b"serving" not in seen:
                left = deadline - time.perf_counter()
                if left <= 0 or not select.select([server.stderr], [], [], left)[0]:
                    sys.exit(f"startup.py: {binary} did not log 'serving' within {TIMEOUT_S} s")
                chunk = os.read(server.stderr.fileno(), 65536)
                if not chunk:
                    sys.exit(f"startup.py: {binary} exited before serving (status {server.wait()})")
                seen = seen[-64:] + chunk
            return (time.perf_counter() - start) * 1000
        finally:
            server.terminate()
            server.wait()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description="time pith serve from exec to serving")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--data", help="a data dir to copy for each run (default: none, an empty start)")
    parser.add_argument("binaries", nargs="+")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.data and not os.path.isfile(os.path.join(args.data, "pith.db")):
        parser.error(f"--data {args.data} holds no pith.db")
    times = {b: [] for b in args.binaries}
    for _ in range(args.runs):
        for binary in args.binaries:
            times[binary].append(once(binary, args.data))
    for binary, ms in times.items():
        print(f"{binary}: median {statistics.median(ms):.1f} ms ({min(ms):.1f}-{max(ms):.1f} ms, {len(ms)} runs)")


if __name__ == "__main__":
    main()
