"""The skill-tuning machine: diagnose an agent skill, fix it with backups, verify, report."""
