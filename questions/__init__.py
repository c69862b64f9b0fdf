"""The chapter's self-check question bank: data files plus loading, validation and grading."""
