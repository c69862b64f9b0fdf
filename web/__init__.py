"""The Flask service: pages, JSON API and job dispatch to grading workers."""
