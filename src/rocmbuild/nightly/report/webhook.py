"""The ``notify`` webhook: the JSON of a failure or a recovery (``notification``, pure) and its
POST (``post_json``). The URL may carry a token: it is never shown (not in a warning, the report
or the page)."""

from __future__ import annotations

import base64
import http.client
import json
import os
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from rocmbuild.artifacts.results import Status
from rocmbuild.core.log import redact
from rocmbuild.nightly.model import RunReport
from rocmbuild.nightly.report.fmt import GOOD, one_line
from rocmbuild.nightly.report.history import PAGE, REPORT, SUMMARY

NOTIFY_TIMEOUT_S = 10.0


def notification(runs: Sequence[RunReport], reports_dir: Path) -> dict[str, Any] | None:
    """The webhook's JSON for the latest run (``runs[0]``), or None when there is nothing to
    say: ``failure`` when a cell failed, else ``recovery`` when a cell whose last build in the
    earlier runs failed succeeded now. ``changed`` lists the cells whose state changed."""
    cur = runs[0]
    before: dict[str, Status] = {}  # each cell's newest non-skipped status in earlier runs
    for r in runs[1:]:
        for o in r.outcomes:
            if o.status is not Status.SKIPPED:
                before.setdefault(o.cell_id, o.status)
    failed = sorted(o.cell_id for o in cur.outcomes if o.status is Status.FAILED)
    recovered = sorted(o.cell_id for o in cur.outcomes
                       if o.status in GOOD and before.get(o.cell_id) is Status.FAILED)
    if not failed and not recovered:
        return None
    changed = [{"cell": c, "was": before[c].value if c in before else None,
                "now": Status.FAILED.value} for c in failed if before.get(c) is not Status.FAILED]
    changed += [{"cell": c, "was": Status.FAILED.value, "now": Status.SUCCESS.value}
                for c in recovered]
    event = "failure" if failed else "recovery"
    text = f"rocmbuild nightly {cur.run_id}: " + "; ".join(
        p for p in (f"failed: {', '.join(failed)}" if failed else "",
                    f"recovered: {', '.join(recovered)}" if recovered else "") if p)
    reports_dir = Path(os.path.abspath(reports_dir))
    run_dir = reports_dir / cur.run_id
    return {"event": event, "run": cur.run_id, "ok": cur.ok, "text": text, "failed": failed,
            "recovered": recovered, "changed": changed, "report": str(run_dir / REPORT),
            "summary": str(run_dir / SUMMARY), "page": str(reports_dir / PAGE)}


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect would turn the POST into a GET without its body: not followed."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> None:
        return None


def post_json(url: str, payload: dict[str, Any], timeout: float = NOTIFY_TIMEOUT_S) -> str | None:
    """POST ``payload`` to ``url``; None when a 2xx came back, else a one-line warning that
    never shows the URL (it may carry a token). ``user:password@`` in the URL is sent as basic
    authentication."""
    what = "nightly notify: the webhook POST failed"
    try:
        parts = urlsplit(url.strip())
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            return f"{what}: the URL is not http(s)://host/... (nothing was sent)"
        netloc = parts.netloc.rsplit("@", 1)[-1]
        req = urllib.request.Request(
            urlunsplit(parts._replace(netloc=netloc)), method="POST",
            data=json.dumps(payload, sort_keys=True).encode(),
            headers={"Content-Type": "application/json", "User-Agent": "rocmbuild"})
        if parts.username is not None:
            cred = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            req.add_header("Authorization", "Basic " + base64.b64encode(cred.encode()).decode())
        with urllib.request.build_opener(_NoRedirect).open(req, timeout=timeout) as resp:
            resp.read(1 << 16)
        return None
    except urllib.error.HTTPError as exc:
        exc.close()
        return f"{what}: HTTP {exc.code} {one_line(redact(str(exc.reason), strict=True), 80)}"
    except urllib.error.URLError as exc:
        reason = exc.reason
        why = (reason.strerror if isinstance(reason, OSError) and reason.strerror
               else str(reason))
        return f"{what}: {one_line(redact(why, strict=True), 80)}"
    except TimeoutError:
        return f"{what}: no answer in {timeout:g} s"
    except OSError as exc:
        return f"{what}: {one_line(exc.strerror or type(exc).__name__, 80)}"
    except (http.client.HTTPException, ValueError) as exc:
        return f"{what}: {type(exc).__name__}"
