"""The one Jinja environment of every page policybox renders: the web page's templates (``ladder
serve``) and the report's (``policybox report``), with the same filters.

Autoescape is on for every template, set here explicitly (Starlette turns it on only for an
environment it builds itself): every text a policy controls reaches a template as data. An undefined
name is an error, not an empty string. The filters:

- ``number``: a number as the plots and the report show it (``plots.number``: 3 significant digits,
  whole above 100);
- ``fixed(places)``: with ``places`` decimals as JavaScript's ``toFixed`` writes it, so that the web
  page's live standings (``web/static/standings.js``) read as the page does; a dash for none;
- ``first_line``: a text's first line (``policybox.lines.first_line``);
- ``step_number``: a stored step index as people count steps, from 1 (``policybox.results.step_number``);
- ``failure_step``: a failure's step, its number or "start-up" (``policybox.results.failure_step``).
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Context, Decimal

import jinja2

from policybox.league.views import plots
from policybox.lines import first_line
from policybox.results import failure_step, step_number

_WIDE = Context(prec=60)  # a quantize never runs out of digits


def fixed(value: float | None, places: int = 3) -> str:
    """``value`` with ``places`` decimals, a tie rounded away from zero -- what JavaScript's
    ``toFixed`` writes, so that the live standings (``static/standings.js``) read as the page does;
    a dash for none."""
    if value is None:
        return "—"
    exact = Decimal(value + 0.0)  # -0.0 + 0.0 is 0.0: JavaScript writes no "-0"
    return str(exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP, context=_WIDE))


environment = jinja2.Environment(
    loader=jinja2.ChoiceLoader(
        [
            jinja2.PackageLoader("policybox.league.web", "templates"),  # the web page's
            jinja2.PackageLoader("policybox.league", "templates"),  # the report's
        ]
    ),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)
environment.filters.update(
    number=plots.number, fixed=fixed, first_line=first_line, step_number=step_number, failure_step=failure_step
)
