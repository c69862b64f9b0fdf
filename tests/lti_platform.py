"""An LTI 1.3 platform (an LMS stand-in) for the tests, built on ``lti1p3platform``.

Everything LTI here comes from that package, the platform side of the protocol written
independently of pylti1p3 (which the tool uses): the OIDC login initiation, the signed
launch (resource link and deep linking, with the AGS and NRPS claims), the platform JWKS,
the OAuth 2 client-credentials token endpoint (verifying the tool's signed assertion
against the tool's JWKS), the AGS line item and score endpoints, NRPS memberships and the
validation of the tool's deep linking response. This file only adapts Flask requests to
it and keeps what it receives in memory for the tests to read.

``Platform.down = True`` makes the token and AGS endpoints answer 503, as an LMS under
maintenance would.

LTI Dynamic Registration (which ``lti1p3platform`` does not cover) is the platform's side
of the IMS spec written here: ``/.well-known/openid-configuration`` and ``/register``
(bearer ``registration_token``, the checks Moodle's ``registration_helper`` makes); once a
tool registered, its launches use the URLs it registered.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field

from flask import Flask, Response, jsonify, redirect, request
from jwcrypto.jwk import JWK
from lti1p3platform.ltiplatform import LTI1P3PlatformConfAbstract
from lti1p3platform.membership import Context
from lti1p3platform.message_launch import LTIAdvantageMessageLaunchAbstract
from lti1p3platform.oidc_login import OIDCLoginAbstract
from lti1p3platform.registration import Registration
from lti1p3platform.request import Request
from lti1p3platform.score import UpdateScoreStatus
from lti1p3platform.service_connector import (AssignmentsGradesService,
                                              NamesRoleProvisioningService)
from markupsafe import escape
from werkzeug.serving import make_server

CLIENT_ID = "attn-grader-client"
DEPLOYMENT_ID = "deployment-1"
CONTEXT_ID = "course-42"
LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"


class FlaskPlatformRequest(Request):
    def build_metadata(self, req):
        return {"method": req.method, "form_data": req.form.to_dict(),
                "get_data": req.args.to_dict(), "headers": req.headers,
                "content_type": req.content_type, "path": req.path,
                "json": req.get_json(silent=True)}


class LiveServer:
    """A WSGI app served on 127.0.0.1 in a thread."""

    def __init__(self, app):
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.thread.join(5)


@dataclass
class Platform:
    """The platform's state: its keys, users, line items and every score it accepted."""
    tool_url: str
    url: str = ""
    down: bool = False
    users: dict = field(default_factory=dict)      # user id -> dict(name, email, roles, status)
    lineitems: dict = field(default_factory=dict)  # id -> line item dict
    scores: list = field(default_factory=list)     # every accepted score, in arrival order
    rejected: list = field(default_factory=list)   # (status, score) not applied
    deep_link_items: list = field(default_factory=list)
    registration_token: str = "reg-token-1"
    registered: dict = field(default_factory=dict)  # the tool's registration request
    private_pem: str = ""
    public_pem: str = ""

    def __post_init__(self):
        key = JWK.generate(kty="RSA", size=2048)
        self.private_pem = key.export_to_pem(private_key=True, password=None).decode()
        self.public_pem = key.export_to_pem().decode()

    # what the tool's administrator copies into the tool
    @property
    def issuer(self):
        return self.url

    def tool_registration(self) -> dict:
        return dict(name="Test LMS", issuer=self.issuer, client_id=CLIENT_ID,
                    auth_login_url=f"{self.url}/authorize", auth_token_url=f"{self.url}/token",
                    key_set_url=f"{self.url}/jwks", deployment_ids=[DEPLOYMENT_ID])

    def conf(self) -> LTI1P3PlatformConfAbstract:
        tool = self.registered
        launch = tool["redirect_uris"][0] if tool else f"{self.tool_url}/lti/launch"
        reg = (Registration().set_iss(self.issuer).set_client_id(CLIENT_ID)
               .set_deployment_id(DEPLOYMENT_ID)
               .set_launch_url(launch)
               .set_deeplink_launch_url(launch)
               .set_oidc_login_url(tool.get("initiate_login_uri") or f"{self.tool_url}/lti/login")
               .set_tool_key_set_url(tool.get("jwks_uri") or f"{self.tool_url}/lti/jwks")
               .set_platform_public_key(self.public_pem)
               .set_platform_private_key(self.private_pem))
        return _Conf(registration=reg)

    def lineitem_url(self, item_id: str) -> str:
        return f"{self.url}/lineitems/{item_id}"

    def scores_for(self, user_id: str) -> list:
        return [s for s in self.scores if s["userId"] == user_id]


class _Conf(LTI1P3PlatformConfAbstract):
    def init_platform_config(self, **kwargs):
        self._registration = kwargs["registration"]

    def get_registration_by_params(self, **kwargs):
        return self._registration


class _Login(OIDCLoginAbstract):
    def set_lti_message_hint(self, **kwargs):
        self._lti_message_hint = kwargs["hint"]

    def get_redirect(self, url):
        return redirect(url)


def _launch_class(platform: Platform):
    class Launch(LTIAdvantageMessageLaunchAbstract):
        def prepare_launch(self, preflight_response, **kwargs):
            hint = json.loads(preflight_response["lti_message_hint"])
            user_id = preflight_response["login_hint"]
            user = platform.users[user_id]
            self.set_user_data(user_id, user["roles"], full_name=user.get("name"),
                               email_address=user.get("email"))
            if user.get("claims"):  # what a Canvas launch adds: name parts, the LIS claim
                self.set_extra_claims(user["claims"])
            self.set_launch_context_claim(CONTEXT_ID, context_title="Attention, spring term",
                                          context_label="ATTN")
            self.set_nrps(f"{platform.url}/memberships")
            if hint["kind"] == "deeplink":
                self.set_dl(f"{platform.url}/deep-link-return", title="Add content",
                            accept_types={"ltiResourceLink"}, extra_data={"slot": "week-3"})
                return
            self.set_resource_link_claim(hint["link"], title=hint.get("title"))
            if hint.get("custom"):
                self.set_custom_parameters_claim(hint["custom"])
            item = hint.get("lineitem")
            self.set_ags(f"{platform.url}/lineitems",
                         platform.lineitem_url(item) if item else None,
                         allow_creating_lineitems=True)

        def render_launch_form(self, launch_data, **kwargs):
            action, token = escape(launch_data["launch_url"]), escape(launch_data["id_token"])
            return (f'<form method="post" action="{action}">'
                    f'<input type="hidden" name="id_token" value="{token}">'
                    f'<input type="hidden" name="state" value="{escape(launch_data["state"])}">'
                    "</form><script>document.forms[0].submit()</script>")  # as an LMS does
    return Launch


def _ags_class(platform: Platform):
    class Ags(AssignmentsGradesService):
        def find_lineitems(self, page=1, limit=None, line_item_id=None, resource_link_id=None,
                           resource_id=None, tag=None, **_):
            items = [i for i in platform.lineitems.values()
                     if (resource_id is None or i.get("resourceId") == resource_id)]
            return {"content": items, "has_next": False}

        def find_lineitem(self, line_item_id):
            return platform.lineitems[line_item_id]

        def create_lineitem(self, creation_data):
            item_id = f"item-{len(platform.lineitems) + 1}"
            item = dict(creation_data, id=platform.lineitem_url(item_id))
            platform.lineitems[item_id] = item
            return item

        def update_lineitem(self, update_data):
            return update_data

        def delete_lineitem(self, line_item_id):
            platform.lineitems.pop(line_item_id, None)

        def update_score(self, line_item_id, score):
            # AGS: a score whose timestamp is not after the last one applied is dropped.
            last = [s for s in platform.scores
                    if s["lineitem"] == line_item_id and s["userId"] == score["userId"]]
            if last and score["timestamp"] <= last[-1]["timestamp"]:
                platform.rejected.append((UpdateScoreStatus.OLD_TIMESTAMP.value, score))
                return UpdateScoreStatus.OLD_TIMESTAMP
            platform.scores.append(dict(score, lineitem=line_item_id))
            return UpdateScoreStatus.SUCCESS

        def get_results(self, line_item_id, page=1, limit=None, user_id=None):
            return {"content": [], "has_next": False}
    return Ags


def _nrps_class(platform: Platform):
    class Nrps(NamesRoleProvisioningService):
        def get_member_data_page(self, page=1, limit=None, role=None, since=None, **_):
            members = [{"user_id": uid, "name": u.get("name"), "email": u.get("email"),
                        "roles": u["roles"], "status": u.get("status", "Active"),
                        **u.get("member", {})}  # e.g. Canvas's lis_person_sourcedid
                       for uid, u in platform.users.items()]
            return {"content": members, "has_next": False}

        def get_context_by_id(self):
            return Context(id=CONTEXT_ID, label="ATTN", title="Attention, spring term")
    return Nrps


def _flask(resp) -> Response:
    body = resp.result
    if isinstance(body, dict) and "content" in body and "has_next" in body:
        body = body["content"]  # a line item container is a JSON array
    out = Response(json.dumps(body) if body is not None else "", status=resp.code,
                   mimetype=resp.media_type)
    return out


def platform_app(platform: Platform) -> Flask:
    app = Flask("lti-test-platform")
    Launch, Ags, Nrps = _launch_class(platform), _ags_class(platform), _nrps_class(platform)

    def ags():
        return Ags(FlaskPlatformRequest(request), platform.conf(), f"{platform.url}/lineitems")

    def unavailable():
        return Response("down for maintenance", status=503) if platform.down else None

    @app.get("/start")
    def start():
        """Where the LMS user clicks: starts the OIDC login at the tool."""
        hint = {"kind": request.args.get("kind", "resource"), "link": request.args.get("link"),
                "title": request.args.get("title"), "lineitem": request.args.get("lineitem"),
                "custom": json.loads(request.args.get("custom", "{}"))}
        login = _Login(FlaskPlatformRequest(request), platform.conf())
        login.set_lti_message_hint(hint=json.dumps(hint))
        if hint["kind"] == "deeplink":
            login.set_deeplinking_launch_url()
        return login.initiate_login(request.args["user"])

    @app.get("/.well-known/openid-configuration")
    def openid_configuration():
        return jsonify({
            "issuer": platform.issuer, "authorization_endpoint": f"{platform.url}/authorize",
            "token_endpoint": f"{platform.url}/token", "jwks_uri": f"{platform.url}/jwks",
            "registration_endpoint": f"{platform.url}/register",
            "token_endpoint_auth_methods_supported": ["private_key_jwt"],
            "scopes_supported": ["openid"], "response_types_supported": ["id_token"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "https://purl.imsglobal.org/spec/lti-platform-configuration": {
                "product_family_code": "test-lms", "version": "1.0",
                "messages_supported": [{"type": "LtiResourceLinkRequest"},
                                       {"type": "LtiDeepLinkingRequest"}]}})

    @app.post("/register")
    def register():
        if request.headers.get("Authorization") != f"Bearer {platform.registration_token}":
            return jsonify({"error": "invalid registration token"}), 401
        body = request.get_json(silent=True) or {}
        tool = body.get("https://purl.imsglobal.org/spec/lti-tool-configuration") or {}
        from urllib.parse import urlparse
        problems = [name for name, ok in (
            ("response_types", "id_token" in (body.get("response_types") or [])),
            ("token_endpoint_auth_method", body.get("token_endpoint_auth_method") == "private_key_jwt"),
            ("redirect_uris", isinstance(body.get("redirect_uris"), list) and body["redirect_uris"]),
            ("initiate_login_uri", body.get("initiate_login_uri")),
            ("jwks_uri", body.get("jwks_uri")),
            ("domain", tool.get("domain") == urlparse(tool.get("target_link_uri", "")).netloc),
        ) if not ok]
        if problems:
            return jsonify({"error": "invalid_client_metadata", "fields": problems}), 400
        platform.registered = body
        platform.registration_token = ""  # used up, as Moodle's is
        return jsonify({**body, "client_id": CLIENT_ID,
                        "https://purl.imsglobal.org/spec/lti-tool-configuration":
                        {**tool, "deployment_id": DEPLOYMENT_ID}})

    @app.get("/course")
    def course():
        """The LMS's course page with the tool embedded in an iframe (Moodle's "Embed",
        Canvas's default); the query is the link's, as for ``/start``."""
        src = escape("/start?" + request.query_string.decode())
        return (f'<!doctype html><title>Course</title><h1>LMS course</h1>'
                f'<iframe id="tool" src="{src}" style="width:1000px;height:800px"></iframe>')

    @app.route("/authorize", methods=["GET", "POST"])
    def authorize():
        return Launch(FlaskPlatformRequest(request), platform.conf()).lti_launch()

    @app.get("/jwks")
    def jwks():
        conf = platform.conf()
        return jsonify(conf.get_jwks())

    @app.post("/token")
    def token():
        return unavailable() or jsonify(platform.conf().get_access_token(request.form.to_dict()))

    @app.route("/lineitems", methods=["GET", "POST"])
    def lineitems():
        service = ags()
        return _flask(service.handle_get_lineitems() if request.method == "GET"
                      else service.handle_create_lineitem())

    @app.post("/lineitems/<item_id>/scores")
    def scores(item_id):
        return unavailable() or _flask(ags().handle_update_score(item_id))

    @app.get("/memberships")
    def memberships():
        return _flask(Nrps(FlaskPlatformRequest(request), platform.conf(),
                           f"{platform.url}/memberships").handle_get_members())

    @app.post("/deep-link-return")
    def deep_link_return():
        items = platform.conf().validate_deeplinking_resp({"JWT": request.form["JWT"]})
        platform.deep_link_items.extend(items)
        return jsonify(items)

    return app
