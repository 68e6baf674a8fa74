#!/usr/bin/env python3
"""A run's final weights are a checkpoint the Python stack reads as it is (no torch).

Runs the default recipe's CI variant (configs/recipes/tiny-cpu-ci.yaml) into a scratch directory
and reads RUN_DIR/final_weights back: the safetensors package finds every tensor of the starting
checkpoint under the same name, shape and dtype (float32), with trained values (not the starting
ones, all finite); optimizer.safetensors holds both AdamW moments of every tensor, and its step
count is the run's optimizer steps; transformers' AutoConfig reads the config; the tokenizer files
are the starting checkpoint's, byte for byte; and `tandem logprobs` runs on the directory.
The run also checkpoints at steps 25 and 50 (checkpointing.save_period 25): a step checkpoint's
weights directory reads back the same way (its optimizer's step count is 25), its manifest lists
every file at its size, and the last one's weights are the final weights, byte for byte.

Usage: final_weights_test.py TANDEM [unittest arguments...]
Exit:  0 every check passed, 1 a check failed, 2 usage error.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import safetensors
import safetensors.numpy as stnp

TANDEM = None
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
START = os.path.join(ROOT, "configs", "models", "tiny-arithmetic")


class FinalWeightsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.scratch = tempfile.mkdtemp(prefix="tandem-final-weights-")
        cls.run_dir = os.path.join(cls.scratch, "run")
        p = subprocess.run([TANDEM, "run", "configs/recipes/tiny-cpu-ci.yaml", "logger.log_dir=" + cls.run_dir,
                            "checkpointing.enabled=true", "checkpointing.save_period=25", "checkpointing.keep_top_k=null"],
                           cwd=ROOT, capture_output=True, text=True)
        if p.returncode != 0:
            raise AssertionError("the run failed (%d):\n%s%s" % (p.returncode, p.stdout, p.stderr))
        cls.output = p.stdout + p.stderr
        cls.final = os.path.join(cls.run_dir, "final_weights")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.scratch, ignore_errors=True)

    def test_the_run_says_where_its_final_weights_are(self):
        self.assertIn("final weights in " + self.final, self.output)

    def test_every_tensor_keeps_its_name_shape_and_dtype_and_holds_trained_values(self):
        start = stnp.load_file(os.path.join(START, "model.safetensors"))
        final = stnp.load_file(os.path.join(self.final, "model.safetensors"))
        self.assertEqual(sorted(final), sorted(start))
        moved = 0
        for name, tensor in start.items():
            self.assertEqual(final[name].shape, tensor.shape, name)
            self.assertEqual(final[name].dtype, np.float32, name)
            self.assertTrue(np.isfinite(final[name]).all(), name)
            moved += not np.array_equal(final[name], tensor)
        self.assertGreater(moved, len(start) // 2, "the final weights are mostly the starting ones")

    def test_the_optimizer_state_holds_both_moments_of_every_tensor_and_the_step_count(self):
        names = sorted(stnp.load_file(os.path.join(START, "model.safetensors")))
        path = os.path.join(self.final, "optimizer.safetensors")
        moments = stnp.load_file(path)
        self.assertEqual(sorted(moments), sorted(["exp_avg." + n for n in names] + ["exp_avg_sq." + n for n in names]))
        self.assertTrue(all((moments["exp_avg_sq." + n] >= 0).all() for n in names))
        with safetensors.safe_open(path, framework="numpy") as f:
            # 40 warm-up steps and 10 GRPO steps, one optimizer step each.
            self.assertEqual(f.metadata()["step"], "50")

    def test_transformers_reads_the_config_and_the_tokenizer_files_are_the_starting_ones(self):
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(self.final)
        with open(os.path.join(START, "config.json")) as f:
            start = json.load(f)
        self.assertEqual(config.hidden_size, start["hidden_size"])
        self.assertEqual(config.num_hidden_layers, start["num_hidden_layers"])
        for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
            with open(os.path.join(START, name), "rb") as a, open(os.path.join(self.final, name), "rb") as b:
                self.assertEqual(a.read(), b.read(), name)

    def test_tandem_scores_sequences_with_the_final_weights(self):
        tokens = os.path.join(self.scratch, "tokens.json")
        with open(tokens, "w") as f:
            json.dump([[2, 5, 6, 7], [2, 8, 9]], f)
        p = subprocess.run([TANDEM, "logprobs", "--model", self.final, "--tokens", tokens], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        lp = json.loads(p.stdout)
        self.assertEqual([len(x) for x in lp], [3, 2])
        self.assertTrue(all(v is not None and v <= 0 for x in lp for v in x))

    def test_a_step_checkpoint_reads_back_with_its_optimizer_state_and_a_manifest_of_every_file(self):
        from transformers import AutoConfig

        step = os.path.join(self.run_dir, "checkpoints", "step_25")
        self.assertIn("checkpoint step_25 (v25) saved in " + step, self.output)
        with open(os.path.join(step, "manifest.json")) as f:
            manifest = json.load(f)
        self.assertEqual(manifest["format"], "tandem-checkpoint")
        self.assertEqual(manifest["step"], 25)
        self.assertEqual(manifest["version"], 25)
        listed = {e["path"]: e["bytes"] for e in manifest["files"]}
        for rel in ("weights/model.safetensors", "weights/optimizer.safetensors", "weights/config.json",
                    "ranks/policy-0.json", "ranks/policy-1.json", "state.json", "metrics.jsonl"):
            self.assertIn(rel, listed)
            self.assertEqual(os.path.getsize(os.path.join(step, rel)), listed[rel], rel)
        start = stnp.load_file(os.path.join(START, "model.safetensors"))
        weights = stnp.load_file(os.path.join(step, "weights", "model.safetensors"))
        self.assertEqual(sorted(weights), sorted(start))
        for name, tensor in start.items():
            self.assertEqual((weights[name].shape, weights[name].dtype), (tensor.shape, np.float32), name)
        with safetensors.safe_open(os.path.join(step, "weights", "optimizer.safetensors"), framework="numpy") as f:
            self.assertEqual(f.metadata()["step"], "25")
        self.assertEqual(AutoConfig.from_pretrained(os.path.join(step, "weights")).hidden_size,
                         AutoConfig.from_pretrained(START).hidden_size)
        with open(os.path.join(step, "state.json")) as f:
            self.assertEqual(json.load(f)["step"], 25)
        with open(os.path.join(self.run_dir, "checkpoints", "step_50", "weights", "model.safetensors"), "rb") as a, \
                open(os.path.join(self.final, "model.safetensors"), "rb") as b:
            self.assertEqual(a.read(), b.read())


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    TANDEM = sys.argv.pop(1)
    sys.exit(0 if unittest.main(exit=False).result.wasSuccessful() else 1)
