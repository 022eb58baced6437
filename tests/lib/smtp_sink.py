"""An SMTP sink for the email tests: aiosmtpd's Controller on 127.0.0.1:PORT,
writing each mail it receives to DIR as NNNNN.json ({"from", "to",
"subject", "body"}, the body decoded from its transfer encoding), and an
empty DIR/ready once it listens. Runs until killed.

    python smtp_sink.py DIR PORT
"""
import email
import email.policy
import json
import os
import sys
import time

from aiosmtpd.controller import Controller


class Sink:
    def __init__(self, out):
        self.out = out
        self.count = 0

    async def handle_DATA(self, server, session, envelope):
        msg = email.message_from_bytes(envelope.content, policy=email.policy.default)
        part = msg.get_body(preferencelist=("plain",))
        self.count += 1
        name = os.path.join(self.out, "%05d" % self.count)
        with open(name + ".tmp", "w", encoding="utf-8") as f:
            json.dump(
                {
                    "from": envelope.mail_from,
                    "to": envelope.rcpt_tos,
                    "subject": str(msg["subject"]),
                    "body": part.get_content() if part is not None else "",
                },
                f,
            )
        # Whole files only: a reader never sees half a mail.
        os.rename(name + ".tmp", name + ".json")
        return "250 OK"


def main():
    out, port = sys.argv[1], int(sys.argv[2])
    controller = Controller(Sink(out), hostname="127.0.0.1", port=port)
    controller.start()
    open(os.path.join(out, "ready"), "w").close()
    try:
        while True:
            time.sleep(3600)
    finally:
        controller.stop()


if __name__ == "__main__":
    main()
