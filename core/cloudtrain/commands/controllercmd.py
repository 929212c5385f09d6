"""``cloudtrain controller [status|stop]``: the controller that follows every job after submit
(``cloudtrain.orchestrate.controller``): run it in the foreground, show what it follows and what
it will do next, or end it."""
from __future__ import annotations

import json


def add_parser(sub) -> None:
    p = sub.add_parser("controller", help="follows jobs after submit (restarts, budget): run, status, stop")
    p.add_argument("action", nargs="?", choices=("run", "status", "stop"), default="run",
                   help="run (default: in the foreground until stopped), status, stop")
    p.add_argument("--detached", action="store_true", help="end when no job is left to follow (how submit starts it)")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")


def run(args) -> int:
    from ..orchestrate import controller
    if args.action == "stop":
        pid = controller.stop()
        print(f"controller {pid} stopping" if pid else "no controller runs for this home")
        return 0
    if args.action == "status":
        found = controller.describe()
        if args.output == "json":
            print(json.dumps(found, indent=2))
            return 0
        who = found["controller"]
        print(f"controller: pid {who['pid']}" if who else "controller: not running")
        for plan in found["following"]:
            spent = f"{plan['spent']:.2f}" + (f" of {plan['budget']:g} {plan['currency']}" if plan["budget"] else "")
            print(f"{plan['handle']}  {plan['state']}  attempt {plan['attempt']} on {plan['provider']}  "
                  f"spent {spent}  next: {plan['next']}")
        if not found["following"]:
            print("following no job")
        return 0
    from ..api import controller as make_controller
    return make_controller().run(detached=args.detached)
