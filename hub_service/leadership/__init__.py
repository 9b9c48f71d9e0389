"""One leader among the Hub's processes (issue 37): the periodic duties (crawl, health poll, image
collection) run in the one process that holds a lease in the database, each fenced by the lease's term."""

from hub_service.leadership.fence import Deposed, Fence
from hub_service.leadership.service import DUTY_GROUP, Leadership, run_duty

__all__ = ["DUTY_GROUP", "Deposed", "Fence", "Leadership", "run_duty"]
