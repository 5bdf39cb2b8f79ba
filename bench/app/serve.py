"""Serves the application over HTTP with the standard library's WSGI server: one process,
one thread, Django's full request cycle (its connection pool lends the connection per
request). Usage: serve.py PORT. Prints "ready" when listening; SIGTERM or SIGINT stops it
and closes the pool (its connection ends with a Terminate, as a deployment's shutdown),
within 5 s even when a request is stuck."""

import os
import signal
import sys
import threading
from wsgiref.simple_server import WSGIRequestHandler, make_server

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
from django.core.wsgi import get_wsgi_application  # noqa: E402


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


def main():
    app = get_wsgi_application()
    server = make_server("127.0.0.1", int(sys.argv[1]), app, handler_class=QuietHandler)

    def stop(*_):
        threading.Thread(target=server.shutdown).start()
        # A request in flight ends first; one stuck (its database gone) gets 5 s.
        watchdog = threading.Timer(5.0, os._exit, args=(1,))
        watchdog.daemon = True
        watchdog.start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("ready", flush=True)
    server.serve_forever()
    server.server_close()
    from django.db import connection

    connection.close()
    connection.close_pool()


if __name__ == "__main__":
    main()
