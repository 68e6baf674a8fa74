#!/usr/bin/env python3
"""TensorBoard reads the event files of `tandem metrics tensorboard` back.

Writes a run's metrics.jsonl (nested fields, names with '/', strings and booleans, a value beyond
float range), converts it with `tandem metrics tensorboard`, and reads the result with the
tensorboard package (no TensorFlow): its record reader checks every CRC (and drops a record whose
CRC is wrong), the first event holds
file_version "brain.Event:2", each step is one event, and both the scalar accumulator and the
tensor form the TensorBoard UI reads give every metric at every step with its float32 value.

Usage: tensorboard_events_test.py TANDEM [unittest arguments...]
Exit:  0 every check passed, 1 a check failed, 2 usage error.
"""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.backend.event_processing import event_file_loader
from tensorboard.backend.event_processing import plugin_event_accumulator
from tensorboard.util import tensor_util

TANDEM = None  # path of the tandem binary (argv[1])

STEPS = [
    {"step": 1, "train/loss": 0.5, "train/reward": -1.25, "refit": {"bytes": 1024, "mode": "colocated"},
     "ok": True, "digests": ["0x1"]},
    {"step": 2, "train/loss": 0.1, "train/reward": 0.3, "refit": {"bytes": 2048, "mode": "colocated"},
     "ok": False, "timing": {"train": {"generation": 1.5}}},
    {"step": 3, "train/loss": 1e-7, "train/reward": 0.45, "refit": {"bytes": 4096, "mode": "colocated"},
     "huge": 1e300},
]

# The series the conversion must give: flattened names, numbers only, each at its steps.
EXPECTED = {
    "train/loss": {1: 0.5, 2: 0.1, 3: 1e-7},
    "train/reward": {1: -1.25, 2: 0.3, 3: 0.45},
    "refit/bytes": {1: 1024, 2: 2048, 3: 4096},
    "timing/train/generation": {2: 1.5},
    "huge": {3: 1e300},
}


def f32(v):
    """The value as simple_value holds it (a float32; beyond its range, an infinity)."""
    with np.errstate(over="ignore"):
        return float(np.float32(v))


def tandem(*args):
    return subprocess.run([TANDEM, *args], capture_output=True, text=True, timeout=120)


class TensorBoardReadsTandemEvents(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tandem-tb-")
        self.run = os.path.join(self.dir, "run")
        os.makedirs(self.run)
        with open(os.path.join(self.run, "metrics.jsonl"), "w") as f:
            for record in STEPS:
                f.write(json.dumps(record) + "\n")
        self.before = time.time()
        r = tandem("metrics", "tensorboard", self.run)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.files = [n for n in os.listdir(self.run) if n.startswith("events.out.tfevents.")]
        self.assertEqual(len(self.files), 1, os.listdir(self.run))
        self.path = os.path.join(self.run, self.files[0])

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_the_file_is_named_for_the_time_and_the_host(self):
        _, _, _, seconds, host = self.files[0].split(".", 4)
        self.assertLessEqual(abs(int(seconds) - self.before), 5)
        self.assertEqual(host, os.uname().nodename)

    def test_every_record_passes_the_crc_checks_and_the_first_holds_the_file_version(self):
        # The loader stops at the first record whose length or data CRC is wrong (next test).
        events = list(event_file_loader.EventFileLoader(self.path).Load())
        self.assertEqual(len(events), 1 + len(STEPS))
        self.assertEqual(events[0].file_version, "brain.Event:2")
        self.assertEqual([e.step for e in events[1:]], [1, 2, 3])
        for e in events:
            self.assertLessEqual(abs(e.wall_time - self.before), 60)
        tags = [[v.tag for v in e.summary.value] for e in events[1:]]
        self.assertEqual(tags[0], ["refit/bytes", "train/loss", "train/reward"])
        self.assertEqual(tags[1], ["refit/bytes", "timing/train/generation", "train/loss", "train/reward"])
        self.assertEqual(tags[2], ["huge", "refit/bytes", "train/loss", "train/reward"])

    def test_the_reader_really_checks_the_crcs_a_flipped_bit_loses_the_record(self):
        with open(self.path, "rb") as f:
            data = bytearray(f.read())
        data[-1] ^= 1  # the last record's data CRC
        broken = os.path.join(self.dir, "broken.tfevents")
        with open(broken, "wb") as f:
            f.write(data)
        self.assertEqual(len(list(event_file_loader.EventFileLoader(broken).Load())), len(STEPS))

    def test_the_scalar_accumulator_gives_every_metric_at_every_step(self):
        acc = event_accumulator.EventAccumulator(self.run, size_guidance={event_accumulator.SCALARS: 0})
        acc.Reload()
        self.assertEqual(sorted(acc.Tags()["scalars"]), sorted(EXPECTED))
        for tag, values in EXPECTED.items():
            got = {s.step: s.value for s in acc.Scalars(tag)}
            self.assertEqual(sorted(got), sorted(values), tag)
            for step, v in values.items():
                self.assertEqual(got[step], f32(v), f"{tag} at step {step}")
        self.assertTrue(math.isinf(acc.Scalars("huge")[0].value))

    def test_the_tensor_form_the_ui_reads_holds_the_same_values(self):
        acc = plugin_event_accumulator.EventAccumulator(self.run, size_guidance={plugin_event_accumulator.TENSORS: 0})
        acc.Reload()
        self.assertEqual(sorted(acc.Tags()["tensors"]), sorted(EXPECTED))
        for tag, values in EXPECTED.items():
            got = {t.step: float(tensor_util.make_ndarray(t.tensor_proto)) for t in acc.Tensors(tag)}
            self.assertEqual(got, {s: f32(v) for s, v in values.items()}, tag)
            self.assertEqual(acc.SummaryMetadata(tag).plugin_data.plugin_name, "scalars")

    def test_a_second_conversion_into_the_same_directory_is_refused_and_out_names_another(self):
        again = tandem("metrics", "tensorboard", self.run)
        self.assertEqual(again.returncode, 1)
        self.assertIn("already holds TensorBoard events", again.stderr)
        other = os.path.join(self.dir, "tb")
        r = tandem("metrics", "tensorboard", self.run, "--out", other)
        self.assertEqual(r.returncode, 0, r.stderr)
        acc = event_accumulator.EventAccumulator(other)
        acc.Reload()
        self.assertEqual([s.value for s in acc.Scalars("train/reward")], [f32(-1.25), f32(0.3), f32(0.45)])


def main():
    global TANDEM
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    TANDEM = sys.argv[1]
    program = unittest.main(argv=[sys.argv[0], *sys.argv[2:]], exit=False, verbosity=2)
    return 0 if program.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
