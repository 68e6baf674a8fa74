#!/usr/bin/env python3
"""An external reward process for tandem (env.name: external), as a model for your own.

tandem starts it once per scoring worker (env.external.command, run as /bin/sh -c COMMAND) and
writes one JSON object per line to its stdin, one per trajectory:

    {"id": 17, "prompt_index": 4, "sample_index": 1,
     "prompt_tokens": [...], "response_tokens": [...], "finish": "stop" | "length"}

It answers each with one line, {"reward": R} (R a finite number), in the same order; a multi-turn
task may add "done": false and "next_observation": [token ids]. Anything else it prints to stdout
breaks the protocol, so log to stderr (tandem passes it through). An answer that is late (past
env.external.timeout_s), not such an object, or a crash fails the step naming the trajectory and
its prompt.

This one scores the parity task as tandem's built-in parity environment does: 1 when the last
generated token is even, else 0 (and 0 for an empty response), so a run with it gives the built-in
run's metrics bit for bit.

    env:
      name: external
      external:
        command: python3 tools/external_reward_example.py
"""
import json
import sys


def reward(trajectory):
    response = trajectory["response_tokens"]
    return 1.0 if response and response[-1] % 2 == 0 else 0.0


def main():
    for line in sys.stdin:
        trajectory = json.loads(line)
        sys.stdout.write(json.dumps({"reward": reward(trajectory)}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
