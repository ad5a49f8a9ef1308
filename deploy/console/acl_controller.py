"""The console's ACL page: accounts and white addresses when ACL is on; create, change and
delete an account.

Mirrors apache/rocketmq-dashboard's AclController.
"""

from __future__ import annotations

from flask import Blueprint, render_template, request, url_for
from werkzeug.wrappers import Response

from deploy.console.acl_service import PERMS, acl_view, delete_account, update_account
from deploy.console.pages import act, console, read

acl_pages = Blueprint("acl", __name__)


@acl_pages.get("/acl")
def acl_page() -> str:
    view, error = read(lambda: acl_view(console().namesrv), "the brokers' ACL not read")
    return render_template("acl.html", view=view, error=error, perms=PERMS)


@acl_pages.post("/acl")
def acl_save() -> Response:
    f = request.form
    ak = f.get("access_key", "").strip()

    def run() -> str:
        brokers = update_account(console().namesrv, ak, f.get("secret_key", ""),
                                 f.get("white", ""), f.get("admin") == "on",
                                 f.get("topic_perm", "DENY"), f.get("group_perm", "SUB"),
                                 f.get("topic_perms", ""), f.get("group_perms", ""))
        return f"account {ak} written on {', '.join(brokers)}"

    return act(run, f"account {ak} not written", url_for("acl.acl_page"))


@acl_pages.post("/acl/delete")
def acl_delete() -> Response:
    ak = request.form.get("access_key", "").strip()

    def run() -> str:
        return f"account {ak} deleted on {', '.join(delete_account(console().namesrv, ak))}"

    return act(run, f"account {ak} not deleted", url_for("acl.acl_page"))
