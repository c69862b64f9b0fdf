"""Flask-WTF forms of the pages (each carries a CSRF token).

Quiz questions get a form class built for their kind (``answer_form``): radio buttons for
one choice, checkboxes for several, one select per position for ordering and per left item
for matching, a text field for numbers, shapes and big-O expressions, a grid of boxes for a
matrix and a text area for code and free text.

Labels and messages are ``lazy_gettext`` strings: the classes are built at import, the text is
looked up in the request's language when a page renders it. WTForms' own messages ("This field
is required.") come translated from WTForms' catalogues (Flask-WTF's WTF_I18N_ENABLED).
"""
from __future__ import annotations

from flask_babel import lazy_gettext as _l
from flask_wtf import FlaskForm
from flask_wtf.file import FileAllowed, FileField
from wtforms import (BooleanField, DateTimeLocalField, DecimalField, EmailField, FloatField,
                     HiddenField, IntegerField, PasswordField, RadioField, SelectField, SelectMultipleField,
                     StringField, SubmitField, TextAreaField)
from wtforms import widgets
from wtforms.validators import (DataRequired, EqualTo, InputRequired, Length, NumberRange, Optional,
                                Regexp, ValidationError)

from ..i18n import LANGUAGES
from ..models import ANSWER_POLICIES, FEEDBACK_LEVELS, LATE_POLICIES
from ..security import MIN_PASSWORD_LENGTH

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
    email = EmailField(_l("Email"), validators=[DataRequired(), Regexp(EMAIL_PATTERN, message=_l("not an email address"))])
    password = PasswordField(_l("Password"), validators=[DataRequired()])
    remember = BooleanField(_l("Keep me signed in"))
    submit = SubmitField(_l("Sign in"))


class SignUpForm(FlaskForm):
    name = StringField(_l("Name"), validators=[DataRequired(), Length(max=200)])
    email = EmailField(_l("Email"), validators=[DataRequired(), Regexp(EMAIL_PATTERN, message=_l("not an email address")),
                                            Length(max=254)])
    # The length rule is one of password_problems' (validate_password): a Length validator
    # here as well would say "use at least 8 characters" twice.
    password = PasswordField(_l("Password"), validators=[DataRequired()])
    confirm = PasswordField(_l("Repeat the password"),
                            validators=[DataRequired(), EqualTo("password", _l("the passwords differ"))])
    # chosen once here (preset to the browser's language), changed later on the account page
    # (not sent, or not one of ours: the page's language, see auth.sign_up)
    lang = SelectField(_l("Language"), choices=options(LANGUAGES.items()), validate_choice=False)
    invite = HiddenField()  # the invitation code from the link, carried through the form
    submit = SubmitField(_l("Create account"))

    def validate_password(self, field):
        from ..security import password_problems

        problems = password_problems(field.data or "", self.email.data)
        if problems:
            raise ValidationError("; ".join(problems))


class ExtensionForm(FlaskForm):
    """One student's own deadline and/or extra attempts for an assignment."""
    email = EmailField(_l("Student's email"), validators=[DataRequired(), Length(max=254)])
    deadline = DateTimeLocalField(_l("Their deadline (UTC)"), validators=[Optional()],
                                  format=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"])
    extra_attempts = IntegerField(_l("Extra attempts"), default=0,
                                  validators=[Optional(), NumberRange(min=0, max=1000)])
    note = StringField(_l("Note (for you)"), validators=[Length(max=200)])
    submit = SubmitField(_l("Grant the extension"))


class ForgotPasswordForm(FlaskForm):
    email = EmailField(_l("Email"), validators=[DataRequired(), Regexp(EMAIL_PATTERN, message=_l("not an email address")),
                                            Length(max=254)])
    submit = SubmitField(_l("Send me a reset link"))


class ResetPasswordForm(FlaskForm):
    password = PasswordField(_l("New password"), validators=[
        DataRequired(), Length(min=MIN_PASSWORD_LENGTH,
                               message=_l("use at least %(num)d characters", num=MIN_PASSWORD_LENGTH))])
    confirm = PasswordField(_l("Repeat the new password"),
                            validators=[DataRequired(), EqualTo("password", _l("the passwords differ"))])
    submit = SubmitField(_l("Set the new password"))


SIGNUP_MODE_LABELS = [("open", _l("open: anyone can create a student account")),
                      ("domain", _l("limited to e-mail domains (or an invitation)")),
                      ("invite", _l("by invitation only")),
                      ("closed", _l("closed: accounts only from `attn-grader users add`"))]


class SignupSettingsForm(FlaskForm):
    mode = RadioField(_l("Who may sign up"), choices=options(SIGNUP_MODE_LABELS), validators=[InputRequired()])
    domains = StringField(_l("E-mail domains"), validators=[Length(max=2000)],
                          render_kw={"placeholder": _l("e.g. example.edu students.example.edu")})
    submit = SubmitField(_l("Save sign-up settings"))


class InvitationForm(FlaskForm):
    email = EmailField(_l("For one address (optional)"), validators=[
        Optional(), Regexp(EMAIL_PATTERN, message=_l("not an email address")), Length(max=254)])
    max_uses = IntegerField(_l("Sign-ups it allows"), default=1, validators=[InputRequired(), NumberRange(1, 1000)])
    days = IntegerField(_l("Valid for (days)"), default=14, validators=[InputRequired(), NumberRange(1, 365)])
    note = StringField(_l("Note"), validators=[Length(max=200)], render_kw={"placeholder": _l("e.g. section B")})
    submit = SubmitField(_l("Create an invitation link"))


class ActionForm(FlaskForm):
    """A button that changes something (sign out, regrade, submit a quiz): CSRF only."""
    submit = SubmitField(_l("Go"))


class SubmissionForm(FlaskForm):
    code = TextAreaField(_l("Your code"), render_kw={"rows": 24, "spellcheck": "false",
                                                 "autocapitalize": "off"})
    upload = FileField(_l("…or upload a .py file or a Jupyter notebook (.ipynb)"), validators=[
        FileAllowed(["py", "ipynb"], _l("upload a Python file (.py) or a Jupyter notebook (.ipynb)"))])
    submit = SubmitField(_l("Submit for grading"))

    def validate_code(self, field):
        if not (field.data or "").strip() and not self.upload.data:
            raise ValidationError(_l("paste your code or choose a file to upload"))


class TokenForm(FlaskForm):
    label = StringField(_l("What it is for"), validators=[Length(max=100)],
                        render_kw={"placeholder": _l("e.g. laptop")})
    submit = SubmitField(_l("Create an API token"))


class LanguageForm(FlaskForm):
    # each language named in itself, so anyone finds their own
    lang = SelectField(_l("Language"), choices=options(LANGUAGES.items()))
    submit = SubmitField(_l("Switch"))


class ManualGradeForm(FlaskForm):
    """Rubric items for free-text answers; plain points for any other answer left to a person."""
    rubric = MultiCheckboxField(_l("Rubric points met"), choices=[])
    points = DecimalField(_l("Points"), validators=[Optional(), NumberRange(min=0)])
    comment = TextAreaField(_l("Comment for the student"), validators=[Length(max=5000)],
                            render_kw={"rows": 3})
    submit = SubmitField(_l("Save grade"))


class OverrideScoreForm(FlaskForm):
    points = DecimalField(_l("Points"), validators=[InputRequired(), NumberRange(min=0)])
    comment = TextAreaField(_l("Comment"), validators=[Length(max=5000)], render_kw={"rows": 2})
    submit = SubmitField(_l("Override score"))


class AssignmentSettingsForm(FlaskForm):
    title = StringField(_l("Title"), validators=[DataRequired(), Length(max=200)])
    visible = BooleanField(_l("Visible to students"))
    opens_at = DateTimeLocalField(_l("Opens (UTC)"), validators=[Optional()],
                                  format=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"])
    deadline = DateTimeLocalField(_l("Deadline (UTC)"), validators=[Optional()],
                                  format=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"])
    late_policy = SelectField(_l("After the deadline"), choices=options([
        ("reject", _l("reject late work")), ("accept", _l("accept late work in full")),
        ("penalty", _l("accept with a penalty"))]))
    late_penalty = FloatField(_l("Late penalty (fraction taken off, 0–1)"), default=0.0,
                              validators=[Optional(), NumberRange(min=0, max=1)])
    max_attempts = IntegerField(_l("Attempts allowed (empty = unlimited)"),
                                validators=[Optional(), NumberRange(min=1)])
    rate_limit_count = IntegerField(_l("At most this many submissions…"),
                                    validators=[Optional(), NumberRange(min=1)])
    rate_limit_seconds = IntegerField(_l("…per this many seconds"),
                                      validators=[Optional(), NumberRange(min=1)])
    feedback = SelectField(_l("Feedback students see"), choices=options([
        ("full", _l("every check and its diagnosis, at once")),
        ("score", _l("only the score")),
        ("after_deadline", _l("the score before the deadline, every check after it"))]))
    family_points = StringField(_l("Points per check family"), validators=[Length(max=500)],
                                render_kw={"placeholder": _l("empty: the task's own split")})
    hidden_families = StringField(_l("Check families students see only after the deadline"),
                                  validators=[Length(max=500)],
                                  render_kw={"placeholder": _l("empty: every check at once")})
    question_ids = MultiCheckboxField(_l("Questions in this quiz"), choices=[])
    answer_policy = SelectField(_l("How questions may be answered"), choices=options([
        ("single_try", _l("one try per question, feedback (and worked solution) after it")),
        ("penalised_tries", _l("several tries, each wrong try costs a share of the points"))]))
    try_penalty = FloatField(_l("Share of the points each wrong try costs (0.05–1)"),
                             default=1 / 3, validators=[Optional(), NumberRange(min=0.05, max=1)])
    submit = SubmitField(_l("Save settings"))

    def validate(self, extra_validators=None) -> bool:
        ok = super().validate(extra_validators)
        # checks across fields (per-field validators stop at an empty optional field)
        if bool(self.rate_limit_seconds.data) != bool(self.rate_limit_count.data):
            self.rate_limit_seconds.errors = list(self.rate_limit_seconds.errors) + [
                _l("give both the number of submissions and the window, or neither")]
            ok = False
        if self.deadline.data and self.opens_at.data and self.deadline.data <= self.opens_at.data:
            self.deadline.errors = list(self.deadline.errors) + [
                _l("the deadline must come after the opening time")]
            ok = False
        return ok


assert set(LATE_POLICIES) == {"reject", "accept", "penalty"}
assert set(FEEDBACK_LEVELS) == {"full", "score", "after_deadline"}
assert set(ANSWER_POLICIES) == {"single_try", "penalised_tries"}


def _each_item_once(count: int):
    def check(form, _field):
        chosen = [getattr(form, f"pos{i}").data for i in range(count)]
        if all(chosen) and len(set(chosen)) != count:
            raise ValidationError(_l("put each item in exactly one position"))
    return check


def answer_form(question: dict, previous=None, formdata=None) -> FlaskForm:
    """A form for one rendered question (``questions.variants.render``), prefilled with the
    stored answer, or with ``formdata`` (what was typed in a refused try)."""
    from .helpers import render_inline

    kind = question["kind"]

    def labelled(entries):  # option texts are Markdown (`code` and the like)
        return options((e["id"], render_inline(e["text"])) for e in entries)

    class AnswerForm(FlaskForm):
        submit = SubmitField(_l("Check answer") if kind != "free_text" else _l("Save answer"))

    data = {}
    if kind == "single":
        AnswerForm.choice = RadioField(_l("Answer"), choices=labelled(question["options"]),
                                       validators=[InputRequired(_l("choose one option"))])
        data["choice"] = previous
    elif kind == "multiple":
        AnswerForm.choices = MultiCheckboxField(
            _l("Answer"), choices=labelled(question["options"]))
        data["choices"] = previous or []
    elif kind == "numeric" or kind == "matrix" and not question.get("answer_shape"):
        AnswerForm.number = StringField(_l("Answer"), validators=[InputRequired(_l("enter a number"))],
                                        render_kw={"inputmode": "decimal", "autocomplete": "off"})
        data["number"] = previous
    elif kind == "matrix":  # one box per entry, rendered as a grid (quiz/_matrix_input.html)
        rows, cols = question["answer_shape"]
        for r in range(rows):
            for c in range(cols):
                setattr(AnswerForm, f"cell_{r}_{c}", StringField(
                    _l("row %(row)s, column %(col)s", row=r + 1, col=c + 1),
                    validators=[InputRequired(_l("fill in every entry"))],
                    render_kw={"inputmode": "decimal", "autocomplete": "off", "size": 7}))
                try:
                    data[f"cell_{r}_{c}"] = previous[r][c]
                except (TypeError, IndexError, KeyError):
                    data[f"cell_{r}_{c}"] = ""
    elif kind in ("shape", "big_o", "expression"):
        example = {"shape": "(2, 3, 4, 5)", "big_o": "O(n log n)", "expression": "2*a*(1 + b^2)"}[kind]  # formats, never a key
        AnswerForm.expression = StringField(
            _l("Answer"), validators=[InputRequired(_l("enter an answer")), Length(max=200)],
            render_kw={"autocomplete": "off", "spellcheck": "false", "placeholder": example})
        data["expression"] = previous
    elif kind == "ordering":
        # Every position starts empty: pre-filled in the shown order, an unchanged answer would
        # be graded as the student's (and score partial credit for nothing).
        items = [(i["id"], render_inline(i["text"])) for i in question["items"]]
        for index in range(len(items)):
            validators = [InputRequired(message=_l("choose the item for position %(number)s",
                                                  number=index + 1))]
            if index == len(items) - 1:
                validators.append(_each_item_once(len(items)))
            setattr(AnswerForm, f"pos{index}", SelectField(
                f"{index + 1}.", choices=options([("", _l("— choose —"))] + items), validators=validators))
            data[f"pos{index}"] = previous[index] if previous and index < len(previous) else ""
    elif kind == "matching":
        rights = options([("", "—")] + [(r["id"], render_inline(r["text"])) for r in question["right"]])
        for index, left in enumerate(question["left"]):
            setattr(AnswerForm, f"match{index}", SelectField(render_inline(left["text"]), choices=rights,
                                                             validators=[InputRequired()]))
            data[f"match{index}"] = (previous or {}).get(left["id"], "")
    elif kind == "code":
        AnswerForm.code = TextAreaField(_l("Your function"), validators=[InputRequired()],
                                        render_kw={"rows": 12, "spellcheck": "false", "class": "code-input",
                                                   "data-keys-hint": _l("In the editor, Tab indents; press Esc, "
                                                                        "then Tab, to move on.")})
        data["code"] = previous if previous is not None else question.get("template", "")
    else:  # free_text
        AnswerForm.text = TextAreaField(_l("Your answer"), validators=[InputRequired(), Length(max=20000)],
                                        render_kw={"rows": 8})
        data["text"] = previous
    if formdata is not None:
        return AnswerForm(formdata=formdata, prefix=f"q-{question['id']}")
    return AnswerForm(data=data, prefix=f"q-{question['id']}")


def answer_from_form(question: dict, form: FlaskForm):
    """The answer in the shape ``questions.answers.grade_answer`` reads."""
    kind = question["kind"]
    if kind == "single":
        return form.choice.data
    if kind == "multiple":
        return list(form.choices.data or [])
    if kind == "numeric" or kind == "matrix" and not question.get("answer_shape"):
        return form.number.data.strip()
    if kind == "matrix":
        rows, cols = question["answer_shape"]
        return [[getattr(form, f"cell_{r}_{c}").data.strip() for c in range(cols)] for r in range(rows)]
    if kind in ("shape", "big_o", "expression"):
        return form.expression.data.strip()
    if kind == "ordering":
        return [getattr(form, f"pos{i}").data for i in range(len(question["items"]))]
    if kind == "matching":
        return {left["id"]: getattr(form, f"match{i}").data
                for i, left in enumerate(question["left"]) if getattr(form, f"match{i}").data}
    if kind == "code":
        return form.code.data
    return form.text.data
