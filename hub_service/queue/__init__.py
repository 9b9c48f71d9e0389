"""The job queue in the database: jobs, their claims and retries, and the task runner.

It knows no handler and no pipeline: the Hub's assembly (hub_service/assembly.py)
registers the task handlers, and the pipeline runs the `pipeline` jobs it claims.
"""
