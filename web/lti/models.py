"""The LTI 1.3 tables: the tool's key pair, the platforms (LMS registrations) it trusts,
who and what a launch maps to, the grade passback outbox, and pylti1p3's launch state."""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import (JSON, Boolean, DateTime, Float, ForeignKey, Index, Integer, String, Text,
                        UniqueConstraint)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from ..models import Assignment, Base, Course, User, utcnow


class LtiKey(Base):
    """The tool's RSA key pair; the newest active one signs, every row is in the JWKS."""
    __tablename__ = "lti_keys"
    id: Mapped[int] = mapped_column(primary_key=True)
    kid: Mapped[str] = mapped_column(String(64), unique=True)  # RFC 7638 thumbprint
    private_pem: Mapped[str] = mapped_column(Text)
    public_pem: Mapped[str] = mapped_column(Text)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class LtiPlatform(Base):
    """One registration of this tool in an LMS (issuer + client id), mapped to a course."""
    __tablename__ = "lti_platforms"
    __table_args__ = (UniqueConstraint("issuer", "client_id", name="uq_lti_platforms_issuer"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    issuer: Mapped[str] = mapped_column(String(255))
    client_id: Mapped[str] = mapped_column(String(255))
    auth_login_url: Mapped[str] = mapped_column(Text)   # the platform's OIDC authorization URL
    auth_token_url: Mapped[str] = mapped_column(Text)   # its OAuth 2 token URL (services)
    auth_audience: Mapped[str | None] = mapped_column(Text)  # token 'aud' if not the token URL
    key_set_url: Mapped[str] = mapped_column(Text)      # its JWKS
    deployment_ids: Mapped[list] = mapped_column(JSON, default=list)
    course_id: Mapped[int | None] = mapped_column(ForeignKey("courses.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)

    course: Mapped[Course | None] = relationship()


class LtiUser(Base):
    """A person of an LMS (the launch's ``sub``, unique per issuer in LTI) mapped to one of our
    accounts. Keyed by issuer, not by registration: a second registration of the same LMS
    (dynamic registration beside a manual one, another deployment) reaches the same account."""
    __tablename__ = "lti_users"
    __table_args__ = (UniqueConstraint("issuer", "sub", name="uq_lti_users_issuer_sub"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    issuer: Mapped[str] = mapped_column(String(255))
    # the registration that last launched (or listed) the person; kept when it is removed
    platform_id: Mapped[int | None] = mapped_column(
        ForeignKey("lti_platforms.id", ondelete="SET NULL"))
    sub: Mapped[str] = mapped_column(String(255))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # What the LMS says of the person, refreshed at each launch and roster sync (identity.py):
    # Canvas's gradebook CSV matches students by its own user id, SIS user id or login id.
    lms_user_id: Mapped[str | None] = mapped_column(String(64))
    sis_user_id: Mapped[str | None] = mapped_column(String(255))
    login_id: Mapped[str | None] = mapped_column(String(255))
    given_name: Mapped[str | None] = mapped_column(String(200))
    family_name: Mapped[str | None] = mapped_column(String(200))

    platform: Mapped[LtiPlatform | None] = relationship()
    user: Mapped[User] = relationship()


class LtiContext(Base):
    """An LMS course (the launch's context) and where its roster (NRPS) is read from."""
    __tablename__ = "lti_contexts"
    __table_args__ = (UniqueConstraint("platform_id", "context_id",
                                       name="uq_lti_contexts_platform_context"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id", ondelete="CASCADE"))
    context_id: Mapped[str] = mapped_column(String(255))
    title: Mapped[str] = mapped_column(String(255), default="")
    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"))
    memberships_url: Mapped[str | None] = mapped_column(Text)
    roster_synced_at: Mapped[datetime | None] = mapped_column(DateTime)

    platform: Mapped[LtiPlatform] = relationship()
    course: Mapped[Course] = relationship()


class LtiResourceLink(Base):
    """An LMS assignment (resource link) placed on one of our assignments, with its AGS claim."""
    __tablename__ = "lti_resource_links"
    __table_args__ = (UniqueConstraint("platform_id", "resource_link_id",
                                       name="uq_lti_resource_links_platform_link"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id", ondelete="CASCADE"))
    resource_link_id: Mapped[str] = mapped_column(String(255))
    deployment_id: Mapped[str] = mapped_column(String(255))
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignments.id", ondelete="CASCADE"),
                                               index=True)
    context_id: Mapped[int | None] = mapped_column(ForeignKey("lti_contexts.id",
                                                              ondelete="SET NULL"))
    ags: Mapped[dict | None] = mapped_column(JSON)  # the launch's AGS endpoint claim
    # the LMS's own id of the assignment the link sits in (Canvas: $Canvas.assignment.id)
    lms_assignment_id: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)

    platform: Mapped[LtiPlatform] = relationship()
    assignment: Mapped[Assignment] = relationship()


class LtiScoreSync(Base):
    """The passback outbox: the latest best score of a user on a link, until the LMS has it.

    ``version`` counts new best scores, ``sent_version`` the one the platform confirmed;
    ``score_timestamp`` only grows, so a platform drops any older score that arrives late.
    ``claim`` fences senders like ``GradingJob.attempts`` fences graders.
    """
    __tablename__ = "lti_score_syncs"
    __table_args__ = (UniqueConstraint("link_id", "user_id", name="uq_lti_score_syncs_link_user"),
                      Index("ix_lti_score_syncs_due", "next_attempt_at"))
    id: Mapped[int] = mapped_column(primary_key=True)
    link_id: Mapped[int] = mapped_column(ForeignKey("lti_resource_links.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    lti_sub: Mapped[str] = mapped_column(String(255))
    score_given: Mapped[float] = mapped_column(Float)
    score_maximum: Mapped[float] = mapped_column(Float)
    score_timestamp: Mapped[datetime] = mapped_column(DateTime)
    version: Mapped[int] = mapped_column(Integer, default=1)
    sent_version: Mapped[int] = mapped_column(Integer, default=0)
    claim: Mapped[int] = mapped_column(Integer, default=0)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime)
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # failures since the last success
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    last_error: Mapped[str | None] = mapped_column(Text)
    sent_at: Mapped[datetime | None] = mapped_column(DateTime)

    link: Mapped[LtiResourceLink] = relationship()
    user: Mapped[User] = relationship()


class LtiLaunchData(Base):
    """pylti1p3's launch storage (OIDC state, nonces, launches kept for deep linking)."""
    __tablename__ = "lti_launch_data"
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    value: Mapped[object | None] = mapped_column(JSON)
    expires_at: Mapped[datetime] = mapped_column(DateTime, index=True)
