"""Forms of the LTI pages (each carries a CSRF token)."""
from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import SelectMultipleField, StringField, SubmitField, TextAreaField, widgets
from wtforms.validators import DataRequired, Length, Optional


class PlatformForm(FlaskForm):
    name = StringField("Name", validators=[Optional(), Length(max=200)],
                       description="for you, e.g. 'University Canvas'")
    issuer = StringField("Issuer (iss)", validators=[DataRequired(), Length(max=255)])
    client_id = StringField("Client ID", validators=[DataRequired(), Length(max=255)])
    deployment_ids = StringField("Deployment IDs", validators=[Optional()],
                                 description="space or comma separated; empty accepts any")
    auth_login_url = StringField("Authentication request URL", validators=[DataRequired()])
    auth_token_url = StringField("Access token URL", validators=[DataRequired()])
    key_set_url = StringField("Public keyset URL", validators=[DataRequired()])
    auth_audience = StringField("Token audience", validators=[Optional()],
                                description="only if the LMS says so; default: the token URL")
    submit = SubmitField("Register platform")


class DeploymentsForm(FlaskForm):
    deployment_ids = TextAreaField("Deployment IDs", validators=[Optional()])
    submit = SubmitField("Save")


class DeepLinkForm(FlaskForm):
    assignments = SelectMultipleField("Assignments", validators=[DataRequired()],
                                      option_widget=widgets.CheckboxInput(),
                                      widget=widgets.ListWidget(prefix_label=False))
    submit = SubmitField("Add to the course")
