"""What Dagster's web UI draws, where a test must judge a label as a user reads it."""

from __future__ import annotations

import re

# dagster-ui 1.13.28, ui-core/src/asset-graph/layout.ts: a link to another group's asset.
ASSET_LINK_NAME_MAX_LENGTH = 30


def shown_in_a_link(label: str, max_length: int = ASSET_LINK_NAME_MAX_LENGTH) -> str:
    """What the UI draws for a link to another group's asset whose key ends in `label`: a port
    of `withMiddleTruncation(label, {maxLength})` (ui-core/src/app/Util.tsx, called by
    asset-graph/ForeignNode.tsx). Cut at the middle breakpoint (`__`, else `_ > . -`) that
    leaves at least three characters before the cut."""
    overflow = len(label) - max_length
    if overflow <= 0:
        return label
    pattern = "__" if "__" in label else r"[_>.-]"
    breakpoints = [m.start() for m in re.finditer(pattern, label)]
    breakpoint = (len(label) + overflow) // 2
    usable = [i for i, at in enumerate(breakpoints) if at > overflow + 3]
    if usable:
        chosen = max(usable[0], len(breakpoints) // 2)
        if chosen < len(breakpoints):
            breakpoint = breakpoints[chosen]
    return label[: max(breakpoint - (overflow + 1), 0)] + "…" + label[breakpoint:]
