"""A TLS-terminating reverse proxy for the real-Moodle checks over HTTPS (moodle_lti_more.sh,
``LTI_HTTPS=1``): it serves https://LISTEN with a certificate of the local test CA and passes
each request to the plain-HTTP server behind it, as a deployment's proxy does, saying
``X-Forwarded-Proto: https`` and ``X-Forwarded-For`` (the grader trusts them with
``ATTN_GRADER_TRUSTED_PROXIES=1``; Moodle with ``$CFG->sslproxy``). The ``Host`` header is
passed on as the browser sent it. Standard library only; one thread per connection.

  python tls_proxy.py --listen 127.0.0.1:8443 --to 127.0.0.1:8800 --cert server.crt --key server.key
"""
from __future__ import annotations

import argparse
import http.client
import ssl
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer",
              "transfer-encoding", "upgrade"}


def handler_for(backend_host: str, backend_port: int):
    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            headers["X-Forwarded-Proto"] = "https"
            headers["X-Forwarded-For"] = self.client_address[0]
            upstream = http.client.HTTPConnection(backend_host, backend_port, timeout=300)
            try:
                upstream.request(self.command, self.path, body=body, headers=headers)
                answer = upstream.getresponse()
                payload = answer.read()
            except OSError as exc:
                self.send_error(502, f"upstream {backend_host}:{backend_port}: {exc}")
                return
            finally:
                upstream.close()
            self.send_response(answer.status, answer.reason)
            for name, value in answer.getheaders():  # every Set-Cookie kept apart
                if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_OPTIONS = do_PATCH = _forward

        def log_message(self, fmt, *args):  # the servers behind log every request already
            pass

    return Forward


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--listen", required=True, help="HOST:PORT to serve HTTPS on")
    ap.add_argument("--to", required=True, help="HOST:PORT of the plain-HTTP server")
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    args = ap.parse_args()
    host, port = args.listen.rsplit(":", 1)
    to_host, to_port = args.to.rsplit(":", 1)
    server = ThreadingHTTPServer((host, int(port)), handler_for(to_host, int(to_port)))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
