"""Forms of the LTI pages (each carries a CSRF token)."""
from __future__ import annotations

from flask_babel import lazy_gettext as _l
from flask_wtf import FlaskForm
from wtforms import SelectMultipleField, StringField, SubmitField, TextAreaField, widgets
from wtforms.validators import DataRequired, Length, Optional, StopValidation


class PlatformForm(FlaskForm):
    name = StringField(_l("Name"), validators=[Optional(), Length(max=200)],
                       description=_l("for you, e.g. 'University Canvas'"))
    issuer = StringField(_l("Issuer (iss)"), validators=[DataRequired(), Length(max=255)])
    client_id = StringField(_l("Client ID"), validators=[DataRequired(), Length(max=255)])
    deployment_ids = StringField(_l("Deployment IDs"), validators=[Optional()],
                                 description=_l("space or comma separated; empty accepts any"))
    auth_login_url = StringField(_l("Authentication request URL"), validators=[DataRequired()])
    auth_token_url = StringField(_l("Access token URL"), validators=[DataRequired()])
    key_set_url = StringField(_l("Public keyset URL"), validators=[DataRequired()])
    auth_audience = StringField(_l("Token audience"), validators=[Optional()],
                                description=_l("only if the LMS says so; default: the token URL"))
    submit = SubmitField(_l("Register platform"))


class DeploymentsForm(FlaskForm):
    deployment_ids = TextAreaField(_l("Deployment IDs"), validators=[Optional()])
    submit = SubmitField(_l("Save"))


class AtLeastOne:
    """At least one option chosen, checked on the server only. ``DataRequired`` would put
    ``required`` on every checkbox, and the browser would then refuse the form unless every
    box were ticked."""
    field_flags: dict = {}

    def __call__(self, form, field):
        if not field.data:
            raise StopValidation(_l("Tick at least one assignment."))


class DeepLinkForm(FlaskForm):
    assignments = SelectMultipleField(_l("Assignments"), validators=[AtLeastOne()],
                                      option_widget=widgets.CheckboxInput(),
                                      widget=widgets.ListWidget(prefix_label=False))
    submit = SubmitField(_l("Add to the course"))
