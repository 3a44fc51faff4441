"""Schemathesis hooks of `scripts/api-fuzz`: a check that no GET and no
refused request (4xx) changed the daemon's state, and the daemon kept
usable for the run.

The state is what a change can touch: the config in force (`/v1/config`:
VRs, vNICs, rules, ports, and its generation) and the routes added through
the API to each VR. It is read before every request schemathesis sends
(`before_call`) and again after each GET and each 4xx answer; a
difference fails the check, and schemathesis names the request (with a
curl line to replay it). The run must use one worker: the snapshot is the
state before the request just answered.

Each run starts from the daemon's first config (`VRHOST_FUZZ_CONFIG`),
applied again before its first request. When a change left the daemon
without the ports of that config (an apply of another config) or with more
than `MAX_VRS` VRs (each a process with its pool), it is applied again
before the next request (not at once: checks such as use_after_free look
at the state a request left).
"""

import json
import os
import tomllib
import urllib.error
import urllib.parse
import urllib.request

import schemathesis

URL = os.environ["VRHOST_FUZZ_URL"].rstrip("/")
TOKEN = os.environ["VRHOST_FUZZ_TOKEN"]
with open(os.environ["VRHOST_FUZZ_CONFIG"], encoding="utf-8") as f:
    BASELINE = f.read()
BASELINE_PORTS = {p["name"] for p in tomllib.loads(BASELINE)["ports"]}
MAX_VRS = 16

_before = None
_fresh = False


def _get(path, body=None):
    headers = {"Authorization": f"Bearer {TOKEN}"}
    data = None
    if body is not None:
        headers["Content-Type"] = "application/json"
        data = json.dumps(body).encode()
    req = urllib.request.Request(URL + path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def _config():
    status, config = _get("/v1/config")
    assert status == 200, f"GET /v1/config: {status} {config}"
    return config, tomllib.loads(config["toml"])


def _restore_if_needed():
    global _fresh
    _, doc = _config()
    ports = {p["name"] for p in doc.get("ports", [])}
    if _fresh and BASELINE_PORTS <= ports and len(doc.get("vrs", [])) <= MAX_VRS:
        return
    _fresh = True
    status, answer = _get("/v1/apply", {"toml": BASELINE})
    assert status == 200, f"restoring the first config: {status} {answer}"


def snapshot():
    """The daemon's config and API routes, as comparable data."""
    config, doc = _config()
    routes = {}
    for vr in doc.get("vrs", []):
        name = vr["name"]
        path = f"/v1/vrs/{urllib.parse.quote(name, safe='')}/routes?limit=100000"
        routes[name] = _get(path)
    return {"generation": config["generation"], "toml": config["toml"], "routes": routes}


def difference(before, after):
    """What changed from `before` to `after`, for a person."""
    out = []
    if before["generation"] != after["generation"]:
        out.append(f"config generation {before['generation']} -> {after['generation']}")
    if before["toml"] != after["toml"]:
        out.append("the config in force changed")
    for vr in sorted(set(before["routes"]) | set(after["routes"])):
        b, a = before["routes"].get(vr), after["routes"].get(vr)
        if b != a:
            out.append(f"VR {vr}'s API routes: {json.dumps(b)[:200]} -> {json.dumps(a)[:200]}")
    return "; ".join(out)


@schemathesis.hook
def before_call(context, case, kwargs):
    global _before
    _restore_if_needed()
    _before = snapshot()


@schemathesis.check
def state_unchanged_by_reads_and_refusals(ctx, response, case):
    """A GET, and a request refused with a 4xx, leave the daemon as it was."""
    refused = 400 <= response.status_code < 500
    if case.method.upper() != "GET" and not refused:
        return None
    if _before is None:
        return None
    after = snapshot()
    if after != _before:
        what = "a GET" if case.method.upper() == "GET" else f"a refused request ({response.status_code})"
        raise AssertionError(f"State changed by {what}: {difference(_before, after)}")
    return True
