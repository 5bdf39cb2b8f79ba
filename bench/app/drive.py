"""Drives the application the way its users do: a browser-like HTTP client (cookies,
CSRF tokens, forms filled from the page's own fields, redirects followed at once) that
logs in to /admin/, opens the user and group change lists, adds a group and a user, edits
the user, searches, and logs out; a think time of 50-200 ms (uniform, seeded: every run
makes the same requests) before each action. Static files are not fetched: they do not
reach the database.

Usage: drive.py BASE_URL PASSWORD VISITS SEED OUT.json. Writes each HTTP request's time
(its first byte sent to its response's last byte read, ms) and a summary; exits non-zero
on any response it did not expect."""

import http.client
import json
import random
import re
import sys
import time
import urllib.parse
from html.parser import HTMLParser

BASE, PASSWORD, VISITS, SEED, OUT = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
HOST = urllib.parse.urlsplit(BASE).netloc
rng = random.Random(SEED)
cookies = {}
pages = []  # (method, path, ms)
where = [""]  # the last page's path: a form with no action posts back to it


class Form(HTMLParser):
    """The fields a browser would submit from the page's first POST form."""

    def __init__(self, html):
        super().__init__()
        self.fields, self.options, self._select, self._in_form, self._textarea = [], {}, None, False, None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form" and a.get("method", "").lower() == "post":
            self._in_form = True
        if not self._in_form:
            return
        name = a.get("name")
        if tag == "input" and name and a.get("type") not in ("submit", "button", "file"):
            if a.get("type") in ("checkbox", "radio") and "checked" not in a:
                return
            self.fields.append((name, a.get("value", "on" if a.get("type") == "checkbox" else "")))
        elif tag == "select" and name:
            self._select = name
            self.options.setdefault(name, [])
        elif tag == "option" and self._select:
            self.options[self._select].append(a.get("value", ""))
            if "selected" in a:
                self.fields.append((self._select, a.get("value", "")))
        elif tag == "textarea" and name:
            self._textarea = name
            self.fields.append((name, ""))

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None
        elif tag == "form":
            self._in_form = False

    def handle_data(self, data):
        if self._textarea and self.fields and self.fields[-1][0] == self._textarea:
            self.fields[-1] = (self._textarea, self.fields[-1][1] + data)


def request(method, path, fields=None, expect=(200,)):
    """One HTTP request, timed; follows a redirect at once (as a browser does). Returns
    the final page's HTML."""
    body = urllib.parse.urlencode(fields, doseq=True) if fields is not None else None
    headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())}
    if body is not None:
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        headers["Referer"] = BASE + path
    conn = http.client.HTTPConnection(HOST, timeout=120)
    t0 = time.perf_counter()
    conn.request(method, path, body=body, headers=headers)
    resp = conn.getresponse()
    html = resp.read().decode()
    ms = (time.perf_counter() - t0) * 1000
    conn.close()
    pages.append((method, path.split("?")[0], ms))
    for h, v in resp.getheaders():
        if h.lower() == "set-cookie":
            k, _, rest = v.partition("=")
            value = rest.split(";")[0]
            if value in ("", '""') or "max-age=0" in rest.lower():
                cookies.pop(k, None)
            else:
                cookies[k] = value
    if resp.status not in expect:
        sys.exit(f"drive: {method} {path}: HTTP {resp.status}, expected {expect}: {html[:300]!r}")
    if resp.status in (301, 302):
        return request("GET", resp.getheader("Location"))
    where[0] = path
    return html


def think():
    time.sleep(rng.uniform(0.050, 0.200))


def submit(path, html, **override):
    form = Form(html)
    fields = [(k, v) for k, v in form.fields if k not in override]
    for k, v in override.items():
        for one in v if isinstance(v, list) else [v]:
            fields.append((k, one))
    return request("POST", path, fields, expect=(302,))


def visit(v):
    think()
    html = request("GET", "/admin/", expect=(302,))
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
    think()
    html = request("POST", "/admin/login/?next=/admin/",
                   [("csrfmiddlewaretoken", token), ("username", "admin"), ("password", PASSWORD),
                    ("next", "/admin/")], expect=(302,))
    for path in ("/admin/auth/user/", "/admin/auth/group/"):
        think()
        request("GET", path)
    think()
    html = request("GET", "/admin/auth/group/add/")
    perms = Form(html).options["permissions"]
    think()
    submit("/admin/auth/group/add/", html, name=f"team-{SEED}-{v}", permissions=rng.sample(perms, 3))
    think()
    html = request("GET", "/admin/auth/user/add/")
    think()
    username = f"user-{SEED}-{v}"
    pw = f"pw-{SEED}-{v}-long-enough"
    html = submit("/admin/auth/user/add/", html, username=username, password1=pw, password2=pw,
                  usable_password="true")
    path = where[0]
    if not re.fullmatch(r"/admin/auth/user/\d+/change/", path):
        sys.exit(f"drive: adding a user led to {path}, not its change page")
    groups = Form(html).options.get("groups", [])
    think()
    submit(path, html, first_name=f"First{v}", last_name=f"Last{v}", email=f"{username}@example.com",
           groups=rng.sample(groups, min(2, len(groups))))
    think()
    request("GET", f"/admin/auth/user/?q=user-{SEED}")
    think()
    html = request("GET", "/admin/auth/group/")
    think()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
    request("POST", "/admin/logout/", [("csrfmiddlewaretoken", token)])
    cookies.pop("sessionid", None)


t0 = time.perf_counter()
for v in range(VISITS):
    visit(v)
elapsed = time.perf_counter() - t0
ms = sorted(p[2] for p in pages)
with open(OUT, "w") as f:
    json.dump({"pages": len(ms), "mean_ms": sum(ms) / len(ms), "p50_ms": ms[len(ms) // 2],
               "max_ms": ms[-1], "elapsed_s": elapsed, "visits": VISITS,
               "requests": [{"method": m, "path": p, "ms": t} for m, p, t in pages]}, f)
