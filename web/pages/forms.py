"""Flask-WTF forms of the pages (each carries a CSRF token).

Quiz questions get a form class built for their kind (``answer_form``): radio buttons for
one choice, checkboxes for several, one select per position for ordering and per left item
for matching, a text field for numbers and a text area for code and free text.
"""
from __future__ import annotations

from flask_wtf import FlaskForm
from flask_wtf.file import FileAllowed, FileField
from wtforms import (BooleanField, DateTimeLocalField, DecimalField, EmailField, FloatField,
                     HiddenField, IntegerField, PasswordField, RadioField, SelectField, SelectMultipleField,
                     StringField, SubmitField, TextAreaField)
from wtforms import widgets
from wtforms.validators import (DataRequired, EqualTo, InputRequired, Length, NumberRange, Optional,
                                Regexp, ValidationError)

from ..auth import MIN_PASSWORD_LENGTH
from ..models import ANSWER_POLICIES, FEEDBACK_LEVELS, LATE_POLICIES

EMAIL_PATTERN = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"

try:  # WTForms 3.3 deprecates (value, label) tuples in favour of SelectChoice
    from wtforms.fields.choices import SelectChoice
except ImportError:  # older WTForms take the tuples
    def SelectChoice(value, label):  # noqa: N802
        return (value, label)


def options(pairs) -> list:
    """Choices for a select, radio or checkbox field from (value, label) pairs."""
    return [SelectChoice(value, label) for value, label in pairs]


class MultiCheckboxField(SelectMultipleField):
    """Several choices as checkboxes (the WTForms documentation's recipe)."""
    widget = widgets.ListWidget(prefix_label=False)
    option_widget = widgets.CheckboxInput()


class SignInForm(FlaskForm):
    email = EmailField("Email", validators=[DataRequired(), Regexp(EMAIL_PATTERN, message="not an email address")])
    password = PasswordField("Password", validators=[DataRequired()])
    remember = BooleanField("Keep me signed in")
    submit = SubmitField("Sign in")


# The languages an account can choose (pages, quiz, feedback), in their own names.
LANGUAGE_CHOICES = [("en", "English"), ("ru", "Русский"), ("zh", "中文")]


class SignUpForm(FlaskForm):
    name = StringField("Name", validators=[DataRequired(), Length(max=200)])
    email = EmailField("Email", validators=[DataRequired(), Regexp(EMAIL_PATTERN, message="not an email address"),
                                            Length(max=254)])
    # The length rule is one of password_problems' (validate_password): a Length validator
    # here as well would say "use at least 8 characters" twice.
    password = PasswordField("Password", validators=[DataRequired()])
    confirm = PasswordField("Repeat the password",
                            validators=[DataRequired(), EqualTo("password", "the passwords differ")])
    # chosen once here (preset to the browser's language), changed later on the account page
    # (not sent, or not one of ours: the page's language, see auth.sign_up)
    lang = SelectField("Language", choices=options(LANGUAGE_CHOICES), validate_choice=False)
    invite = HiddenField()  # the invitation code from the link, carried through the form
    submit = SubmitField("Create account")

    def validate_password(self, field):
        from ..security import password_problems

        problems = password_problems(field.data or "", self.email.data)
        if problems:
            raise ValidationError("; ".join(problems))


class ExtensionForm(FlaskForm):
    """One student's own deadline and/or extra attempts for an assignment."""
    email = EmailField("Student's email", validators=[DataRequired(), Length(max=254)])
    deadline = DateTimeLocalField("Their deadline (UTC)", validators=[Optional()],
                                  format=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"])
    extra_attempts = IntegerField("Extra attempts", default=0,
                                  validators=[Optional(), NumberRange(min=0, max=1000)])
    note = StringField("Note (for you)", validators=[Length(max=200)])
    submit = SubmitField("Grant the extension")


class ForgotPasswordForm(FlaskForm):
    email = EmailField("Email", validators=[DataRequired(), Regexp(EMAIL_PATTERN, message="not an email address"),
                                            Length(max=254)])
    submit = SubmitField("Send me a reset link")


class ResetPasswordForm(FlaskForm):
    password = PasswordField("New password", validators=[
        DataRequired(), Length(min=MIN_PASSWORD_LENGTH,
                               message=f"use at least {MIN_PASSWORD_LENGTH} characters")])
    confirm = PasswordField("Repeat the new password",
                            validators=[DataRequired(), EqualTo("password", "the passwords differ")])
    submit = SubmitField("Set the new password")


SIGNUP_MODE_LABELS = [("open", "open: anyone can create a student account"),
                      ("domain", "limited to e-mail domains (or an invitation)"),
                      ("invite", "by invitation only"),
                      ("closed", "closed: accounts only from `attn-grader users add`")]


class SignupSettingsForm(FlaskForm):
    mode = RadioField("Who may sign up", choices=options(SIGNUP_MODE_LABELS), validators=[InputRequired()])
    domains = StringField("E-mail domains", validators=[Length(max=2000)],
                          render_kw={"placeholder": "e.g. example.edu students.example.edu"})
    submit = SubmitField("Save sign-up settings")


class InvitationForm(FlaskForm):
    email = EmailField("For one address (optional)", validators=[
        Optional(), Regexp(EMAIL_PATTERN, message="not an email address"), Length(max=254)])
    max_uses = IntegerField("Sign-ups it allows", default=1, validators=[InputRequired(), NumberRange(1, 1000)])
    days = IntegerField("Valid for (days)", default=14, validators=[InputRequired(), NumberRange(1, 365)])
    note = StringField("Note", validators=[Length(max=200)], render_kw={"placeholder": "e.g. section B"})
    submit = SubmitField("Create an invitation link")


class ActionForm(FlaskForm):
    """A button that changes something (sign out, regrade, submit a quiz): CSRF only."""
    submit = SubmitField("Go")


class SubmissionForm(FlaskForm):
    code = TextAreaField("Your code", render_kw={"rows": 24, "spellcheck": "false",
                                                 "autocapitalize": "off"})
    upload = FileField("…or upload a .py file or a Jupyter notebook (.ipynb)", validators=[
        FileAllowed(["py", "ipynb"], "upload a Python file (.py) or a Jupyter notebook (.ipynb)")])
    submit = SubmitField("Submit for grading")

    def validate_code(self, field):
        if not (field.data or "").strip() and not self.upload.data:
            raise ValidationError("paste your code or choose a file to upload")


class TokenForm(FlaskForm):
    label = StringField("What it is for", validators=[Length(max=100)],
                        render_kw={"placeholder": "e.g. laptop"})
    submit = SubmitField("Create an API token")


class LanguageForm(FlaskForm):
    lang = SelectField("Quiz language", choices=options(LANGUAGE_CHOICES))
    submit = SubmitField("Switch")


class ManualGradeForm(FlaskForm):
    """Rubric items for free-text answers; plain points for any other answer left to a person."""
    rubric = MultiCheckboxField("Rubric points met", choices=[])
    points = DecimalField("Points", validators=[Optional(), NumberRange(min=0)])
    comment = TextAreaField("Comment for the student", validators=[Length(max=5000)],
                            render_kw={"rows": 3})
    submit = SubmitField("Save grade")


class OverrideScoreForm(FlaskForm):
    points = DecimalField("Points", validators=[InputRequired(), NumberRange(min=0)])
    comment = TextAreaField("Comment", validators=[Length(max=5000)], render_kw={"rows": 2})
    submit = SubmitField("Override score")


class AssignmentSettingsForm(FlaskForm):
    title = StringField("Title", validators=[DataRequired(), Length(max=200)])
    visible = BooleanField("Visible to students")
    opens_at = DateTimeLocalField("Opens (UTC)", validators=[Optional()],
                                  format=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"])
    deadline = DateTimeLocalField("Deadline (UTC)", validators=[Optional()],
                                  format=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"])
    late_policy = SelectField("After the deadline", choices=options([
        ("reject", "reject late work"), ("accept", "accept late work in full"),
        ("penalty", "accept with a penalty")]))
    late_penalty = FloatField("Late penalty (fraction taken off, 0–1)", default=0.0,
                              validators=[Optional(), NumberRange(min=0, max=1)])
    max_attempts = IntegerField("Attempts allowed (empty = unlimited)",
                                validators=[Optional(), NumberRange(min=1)])
    rate_limit_count = IntegerField("At most this many submissions…",
                                    validators=[Optional(), NumberRange(min=1)])
    rate_limit_seconds = IntegerField("…per this many seconds",
                                      validators=[Optional(), NumberRange(min=1)])
    feedback = SelectField("Feedback students see", choices=options([
        ("full", "every check and its diagnosis, at once"),
        ("score", "only the score"),
        ("after_deadline", "the score before the deadline, every check after it")]))
    family_points = StringField("Points per check family", validators=[Length(max=500)],
                                render_kw={"placeholder": "empty: the task's own split"})
    question_ids = MultiCheckboxField("Questions in this quiz", choices=[])
    answer_policy = SelectField("How questions may be answered", choices=options([
        ("single_try", "one try per question, feedback (and worked solution) after it"),
        ("penalised_tries", "several tries, each wrong try costs a share of the points")]))
    try_penalty = FloatField("Share of the points each wrong try costs (0.05–1)",
                             default=1 / 3, validators=[Optional(), NumberRange(min=0.05, max=1)])
    submit = SubmitField("Save settings")

    def validate(self, extra_validators=None) -> bool:
        ok = super().validate(extra_validators)
        # checks across fields (per-field validators stop at an empty optional field)
        if bool(self.rate_limit_seconds.data) != bool(self.rate_limit_count.data):
            self.rate_limit_seconds.errors = list(self.rate_limit_seconds.errors) + [
                "give both the number of submissions and the window, or neither"]
            ok = False
        if self.deadline.data and self.opens_at.data and self.deadline.data <= self.opens_at.data:
            self.deadline.errors = list(self.deadline.errors) + [
                "the deadline must come after the opening time"]
            ok = False
        return ok


assert set(LATE_POLICIES) == {"reject", "accept", "penalty"}
assert set(FEEDBACK_LEVELS) == {"full", "score", "after_deadline"}
assert set(ANSWER_POLICIES) == {"single_try", "penalised_tries"}


def _each_item_once(count: int):
    def check(form, _field):
        chosen = [getattr(form, f"pos{i}").data for i in range(count)]
        if all(chosen) and len(set(chosen)) != count:
            raise ValidationError("put each item in exactly one position")
    return check


def answer_form(question: dict, previous=None) -> FlaskForm:
    """A form for one rendered question (``questions.variants.render``), prefilled."""
    from .helpers import render_inline

    kind = question["kind"]

    def labelled(entries):  # option texts are Markdown (`code` and the like)
        return options((e["id"], render_inline(e["text"])) for e in entries)

    class AnswerForm(FlaskForm):
        submit = SubmitField("Check answer" if kind != "free_text" else "Save answer")

    data = {}
    if kind == "single":
        AnswerForm.choice = RadioField("Answer", choices=labelled(question["options"]),
                                       validators=[InputRequired("choose one option")])
        data["choice"] = previous
    elif kind == "multiple":
        AnswerForm.choices = MultiCheckboxField(
            "Answer", choices=labelled(question["options"]))
        data["choices"] = previous or []
    elif kind == "numeric":
        AnswerForm.number = StringField("Answer", validators=[InputRequired("enter a number")],
                                        render_kw={"inputmode": "decimal", "autocomplete": "off"})
        data["number"] = previous
    elif kind == "ordering":
        # Every position starts empty: pre-filled in the shown order, an unchanged answer would
        # be graded as the student's (and score partial credit for nothing).
        items = [(i["id"], render_inline(i["text"])) for i in question["items"]]
        for index in range(len(items)):
            validators = [InputRequired(message=f"choose the item for position {index + 1}")]
            if index == len(items) - 1:
                validators.append(_each_item_once(len(items)))
            setattr(AnswerForm, f"pos{index}", SelectField(
                f"{index + 1}.", choices=options([("", "— choose —")] + items), validators=validators))
            data[f"pos{index}"] = previous[index] if previous and index < len(previous) else ""
    elif kind == "matching":
        rights = options([("", "—")] + [(r["id"], render_inline(r["text"])) for r in question["right"]])
        for index, left in enumerate(question["left"]):
            setattr(AnswerForm, f"match{index}", SelectField(render_inline(left["text"]), choices=rights,
                                                             validators=[InputRequired()]))
            data[f"match{index}"] = (previous or {}).get(left["id"], "")
    elif kind == "code":
        AnswerForm.code = TextAreaField("Your function", validators=[InputRequired()],
                                        render_kw={"rows": 12, "spellcheck": "false",
                                                   "class": "code-input"})
        data["code"] = previous if previous is not None else question.get("template", "")
    else:  # free_text
        AnswerForm.text = TextAreaField("Your answer", validators=[InputRequired(), Length(max=20000)],
                                        render_kw={"rows": 8})
        data["text"] = previous
    return AnswerForm(data=data, prefix=f"q-{question['id']}")


def answer_from_form(question: dict, form: FlaskForm):
    """The answer in the shape ``questions.answers.grade_answer`` reads."""
    kind = question["kind"]
    if kind == "single":
        return form.choice.data
    if kind == "multiple":
        return list(form.choices.data or [])
    if kind == "numeric":
        return form.number.data.strip()
    if kind == "ordering":
        return [getattr(form, f"pos{i}").data for i in range(len(question["items"]))]
    if kind == "matching":
        return {left["id"]: getattr(form, f"match{i}").data
                for i, left in enumerate(question["left"]) if getattr(form, f"match{i}").data}
    if kind == "code":
        return form.code.data
    return form.text.data
