#!/usr/bin/env python3
"""flask-websub 0.4.1 as a peer for the interop tests (crates/cli/tests/it/interop_websub.rs).

    websub_peer.py hub
        Runs flask-websub's hub on 127.0.0.1 (a free port), publishing enabled; prints
        "HUB <url>" once listening.
    websub_peer.py subscriber HUB TOPIC
        Runs flask-websub's subscriber on 127.0.0.1 (a free port), subscribes to TOPIC at HUB
        (no secret: flask-websub allows one only over https); prints "SUBSCRIBED" when the hub
        verified it, then one line "NOTIFICATION <body as one line>" per delivery.

flask-websub runs its hub's background work as Celery tasks. The tests need no broker: a
minimal stand-in below runs each task on a thread, with the retry countdown it asks for.
Both modes stop on SIGTERM or when stdin closes.
"""
import os
import sys
import tempfile
import threading
import time
import types

from flask import Flask
from werkzeug.serving import make_server


class _Retry(Exception):
    def __init__(self, countdown):
        super().__init__(countdown)
        self.countdown = countdown


class _Task:
    def __init__(self, f, bind, max_retries):
        self.f, self.bind, self.max_retries = f, bind, max_retries

    def delay(self, *args, **kwargs):
        threading.Thread(target=self._run, args=(args, kwargs, 0), daemon=True).start()

    def __call__(self, *args, **kwargs):
        return self.f(*args, **kwargs)

    def s(self, *args, **kwargs):
        return (self, args, kwargs)

    def _run(self, args, kwargs, retries):
        def retry(countdown=0, **_):
            raise _Retry(countdown)

        me = types.SimpleNamespace(request=types.SimpleNamespace(retries=retries), retry=retry)
        try:
            if self.bind:
                self.f(me, *args, **kwargs)
            else:
                self.f(*args, **kwargs)
        except _Retry as r:
            if retries < self.max_retries:
                time.sleep(min(r.countdown, 2.0))
                self._run(args, kwargs, retries + 1)
        except Exception as e:  # a task failing is logged, as Celery would
            print("task failed: %r" % (e,), file=sys.stderr, flush=True)


class _Celery:
    def task(self, **opts):
        return lambda f: _Task(f, opts.get("bind", False), opts.get("max_retries", 3))

    def add_periodic_task(self, *args, **kwargs):
        pass


def _serve(app):
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _wait_for_end():
    try:
        sys.stdin.read()
    except KeyboardInterrupt:
        pass


def hub():
    from flask_websub.hub import Hub, SQLite3HubStorage

    work = tempfile.mkdtemp(prefix="websub-peer-hub-")
    app = Flask(__name__)
    app.config["PUBLISH_SUPPORTED"] = True
    h = Hub(SQLite3HubStorage(os.path.join(work, "hub.sqlite")), _Celery(), BACKOFF_BASE=0.1,
            MAX_ATTEMPTS=5, HUB_MIN_LEASE_SECONDS=60)
    app.register_blueprint(h.build_blueprint(url_prefix="/hub"))
    server = _serve(app)
    print("HUB http://127.0.0.1:%d/hub" % server.server_port, flush=True)
    _wait_for_end()


def subscriber(hub_url, topic):
    from flask_websub.subscriber import (SQLite3SubscriberStorage, SQLite3TempSubscriberStorage,
                                         Subscriber)

    work = tempfile.mkdtemp(prefix="websub-peer-sub-")
    app = Flask(__name__)
    # flask-websub refuses a secret over plain http (the tests are on loopback http), so this
    # subscriber checks no signature; our signing is checked by our own subscriber tests.
    sub = Subscriber(SQLite3SubscriberStorage(os.path.join(work, "s.sqlite")),
                     SQLite3TempSubscriberStorage(os.path.join(work, "t.sqlite")),
                     AUTO_SET_SECRET=False)
    app.register_blueprint(sub.build_blueprint(url_prefix="/callbacks"))
    server = _serve(app)
    app.config["SERVER_NAME"] = "127.0.0.1:%d" % server.server_port

    @sub.add_success_handler
    def ok(topic_url, callback_id, mode):
        print("SUBSCRIBED" if mode == "subscribe" else "UNSUBSCRIBED", flush=True)

    @sub.add_error_handler
    def err(topic_url, callback_id, reason):
        print("ERROR %s" % reason, flush=True)

    @sub.add_listener
    def got(topic_url, callback_id, body):
        text = body.decode("utf-8", "replace").replace("\n", " ")
        print("NOTIFICATION %s" % text, flush=True)

    with app.app_context():
        sub.subscribe(topic_url=topic, hub_url=hub_url, lease_seconds=600)
    _wait_for_end()


if __name__ == "__main__":
    if sys.argv[1:2] == ["hub"]:
        hub()
    elif sys.argv[1:2] == ["subscriber"] and len(sys.argv) == 4:
        subscriber(sys.argv[2], sys.argv[3])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
