"""The submit page's form, refused: it comes back with why and with the name it was sent under, as
text (issue 43, must-have 9: "the upload form keeps the name after an error")."""

from __future__ import annotations

from helpers.web import PAYLOAD, upload
from markupsafe import escape
from starlette.testclient import TestClient

from policybox.league.web.app import make_app

OWN = {"Origin": "http://testserver"}


def test_a_refused_upload_keeps_its_name_in_the_form(fresh, tmp_path):
    folder, tokens = fresh
    not_a_zip = tmp_path / "bot.zip"
    not_a_zip.write_text("print('not a zip')")
    with TestClient(make_app(folder)) as client:
        assert client.post("/login", data={"token": tokens["gamma"]}, headers=OWN).status_code == 200
        refused = upload(client, not_a_zip, "gammabot", OWN, url="/submit")
        assert refused.status_code == 400 and "is not a zip or tar.gz file" in refused.text
        assert '<input name="name" value="gammabot"' in refused.text
        hostile = upload(client, not_a_zip, f'"{PAYLOAD}', OWN, url="/submit")
        assert hostile.status_code == 400 and PAYLOAD not in hostile.text
        assert f'value="{escape(chr(34) + PAYLOAD)}"' in hostile.text  # the name as text, its quote escaped
        assert 'value=""' in client.get("/submit").text  # a new form: empty
