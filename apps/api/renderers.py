from __future__ import annotations

import csv
import io
from typing import Any

from rest_framework.renderers import BaseRenderer


class ReportCSVRenderer(BaseRenderer):
    """A batch report's table as CSV (one row per problem); the summary stays in the JSON."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: dict | None = None) -> bytes:
        out = io.StringIO()
        if "rows" not in (data or {}):  # an error: its message, as one cell
            csv.writer(out).writerows([["error"], [(data or {}).get("error", {}).get("message", "")]])
            return out.getvalue().encode()
        writer = csv.DictWriter(out, fieldnames=list(data["rows"][0]) if data["rows"] else ["problem"])
        writer.writeheader()
        writer.writerows(data["rows"])
        return out.getvalue().encode()

