// `tandem help [command]`.
#include "tools/cli/commands.h"

namespace tandem::cli {
namespace {

constexpr const char* overview = R"(tandem: GRPO/DAPO post-training of Gemma 4 models

usage: tandem <command> [arguments]

commands:
  validate RECIPE [key=value ...]    print the resolved configuration, or every error in it
  validate --minimize RECIPE         list keys a recipe sets to the value it already inherits
  validate --schema                  print every recipe key with its default and description
  run RECIPE [key=value ...]         run the RL loop: the controller here, one member process per
                                     device (started here on one node, by a launcher on several)
  run RECIPE [key=value ...] --dry-run
                                     print the placement plan: members, devices, data-parallel
                                     ranks, the controller's endpoints and per-phase memory
  join --controller ADDR --rank R --world W
                                     one member process of a run (started by `tandem run` or a
                                     launcher; settable from TANDEM_CONTROLLER, TANDEM_RANK, ...)
  keys FILE --world N                the run's CurveZMQ keys (mode 0600) for members started by
                                     hand or by a launcher: TANDEM_KEYS=FILE for them and `run`
  inspect --model DIR [--json]       what a checkpoint holds: architecture, resolved config, every
                                     text tensor with its layout offset, what a load skips
  convert --model DIR --out DIR [--dtype T] [--max-shard-size SIZE] [--replace]
                                     load the text stack and save it as a Hugging Face checkpoint
  logprobs --model DIR --tokens FILE [--temperature T --top-k K --top-p P] [--backend B --dtype D]
           [--trace OUT]             per-token logprobs of the sequences in FILE (JSON), as JSON
  loss --model DIR --tokens FILE [--recompute none|selective|full] [--gradients] [--backend B --dtype D]
                                     mean next-token cross-entropy, and every gradient, as JSON
  generate --model DIR --tokens FILE --max-new-tokens N [--greedy | --temperature T --top-k K
           --top-p P --seed S] [--stop ID ...] [--backend B --dtype D]
                                     continue every prompt of FILE, as JSON
  metrics export RUN_DIR [-o FILE]   a run's metrics.jsonl as NeMo-RL JSON: {metric: {step: value}}
  metrics check RUN_DIR EXPR...      metric gates, e.g. 'mean(train/loss) < 0.5'; exit 1 if one fails
  metrics tensorboard RUN_DIR [--out DIR]
                                     a TensorBoard events file of every step (default DIR: RUN_DIR)
  plot RUN_DIR [-o FILE.png] [--metrics NAME,...]
                                     a PNG of the reward, accuracy, loss and error metrics (gnuplot)
  tokenize --model DIR [--special]   stdin's text as token ids (JSON), with DIR's tokenizer.json
                                     (or tokenizer.model)
  tokenize --model DIR --decode [--skip-special]
                                     a JSON list of ids on stdin as text
  tokenize --model DIR --chat [--thinking] [--no-generation-prompt] [--text]
                                     a conversation on stdin in Gemma 4's chat format, as ids
  dataset check FILE                 read a prompt dataset (JSON lines) as a run will; count its
                                     records or name the first bad line
  init --config FILE --out DIR [--seed N] [--tokenizer DIR]
                                     a new checkpoint directory with random weights (Gemma 4's init)
  bench train --model DIR [--tokens N] [--micro-batch B] [--steps N] [--backend cpu|cuda] ...
                                     train steps over random weights beside their GEMM-only ceiling
  bench generate --model DIR [--batch B] [--prompt-len P] [--new-tokens N] [--backend cpu|cuda] ...
                                     sampled generation over random weights beside the decode
                                     step's GEMM-only ceiling and memory roofline
  bench refit [--model DIR | --mb N] [--receivers R] [--bucket-mb M] [--checksums] ...
                                     a refit over the CPU data plane beside a plain broadcast of
                                     the same buckets
  help [command]                     this text, or one command's
  --version                          version and compute backends of this build

Overrides are dotted key paths with YAML values, applied after the recipe and its parents:
  tandem validate configs/recipes/tiny-cpu.yaml grpo.num_prompts_per_step=8 policy.generation.top_k=20

exit status: 0 ok, 1 the recipe or model was refused (errors on stderr), 2 usage error
)";

constexpr const char* inspect_help = R"(usage: tandem inspect --model DIR [--json]

Opens the checkpoint in DIR exactly as a load does, reading no weight: config.json (flat or
per_layer_config form), every safetensors header (model.safetensors, or the shards that
model.safetensors.index.json names, checked against the index), every tensor name, dtype and
shape. Prints the architecture, the resolved config with its per-layer table, every text tensor
(name, dtype on disk, shape, offset in the parameter layout), the unused K/V tensors of KV-shared
layers, the non-text tensors a text-only load skips (vision and audio towers and embedders, by
prefix) and the bytes on disk. --json prints the same as one JSON object. DIR may also be a
preset name or an org/name in the local Hugging Face cache; a directory with only a config.json
prints the layout.

A bad checkpoint (truncated file, impossible header, duplicate or unexpected tensor, wrong dtype
or shape, missing tensor or shard, an index that disagrees with its shards, a bad config) prints
one error naming the file and the tensor or key, and exits 1.

exit status: 0 ok, 1 the checkpoint was refused, 2 usage error
)";

constexpr const char* convert_help = R"(usage: tandem convert --model DIR --out DIR [--dtype bfloat16|float32|float16]
                      [--max-shard-size SIZE] [--replace]

Loads the text stack of the checkpoint in --model (validated as `tandem inspect` does) and saves
it into --out as a drop-in Hugging Face checkpoint: the text tensors under the names they had, in
--dtype (default bfloat16, rounded to nearest even; float32 keeps every bit); every other tensor
(vision and audio parts, unused K/V of KV-shared layers) copied byte for byte; config.json,
generation_config.json, the tokenizer and the other non-weight files copied. Shards hold at most
--max-shard-size bytes (default 5GB; 500MB, 2GiB or a byte count), with an index when there is
more than one.

The save is atomic: it is written into a hidden partial directory beside --out, synced, then
renamed; an --out that exists is refused unless --replace, which swaps it in one rename.

exit status: 0 saved, 1 the checkpoint was refused or the save failed, 2 usage error
)";

constexpr const char* logprobs_help = R"(usage: tandem logprobs --model DIR --tokens FILE [--temperature T] [--top-k K] [--top-p P]
                       [--backend cpu|cuda] [--dtype fp32|bf16] [--trace OUT]

Runs the model in DIR (a checkpoint directory or preset with weights, validated as `tandem
inspect` does) over the sequences of FILE, a JSON array of token-id arrays,
packed into one batch (no padding; sequences never see each other). Prints a JSON array with one
array per sequence: entry t is the logprob of token t+1 given tokens 0..t (a sequence of n tokens
gives n-1 numbers) under the sampling distribution: temperature T (default 1), then top-k K (0:
none), then top-p P on the renormalised top-k distribution (1: none); null where the masks
exclude the token.
--backend cuda runs it on cuda:0 and --dtype bf16 stores the weights and activations in bfloat16
(CUDA only; the defaults are the CPU and float32): the same numbers within the dtype's rounding,
for checking the GPU against the CPU. --trace OUT (a new file) also writes every activation the
forward names, as float32 safetensors ("embed", "layers.L.layer_out", ..., "final_norm"), for
finding the layer where two implementations part (tools/reference/trace_drift.py); meant for a few
short sequences.

exit status: 0 ok, 1 the model or FILE was refused (one error on stderr), 2 usage error
)";

constexpr const char* generate_help = R"(usage: tandem generate --model DIR --tokens FILE --max-new-tokens N
                       [--greedy | --temperature T --top-k K --top-p P --seed S] [--stop ID ...]
                       [--backend cpu|cuda] [--dtype fp32|bf16]

Continues every prompt of FILE (a JSON array of token-id arrays) by at most N tokens with the
model in DIR (on the CPU in float32 by default; --backend cuda runs it on cuda:0, and --dtype bf16
stores the weights, activations and KV cache in bfloat16, CUDA only): all prompts in one
continuous batch over a paged KV cache, prompts prefilled once, one token per sequence per step.
Sampling: --greedy (the most likely token), or temperature T (default 1), then top-k K (0: none),
then top-p P (1: none), drawn from
a counter-based stream keyed by --seed S (default: a random seed) and the prompt's index, so the
same seed gives the same output. Generation of a prompt ends after a --stop token (repeatable) is
emitted, or after N tokens. Prints a JSON array with one object per prompt: {"tokens": [the
generated ids], "logprobs": [each token's logprob under the distribution it was sampled from; at
temperature 1 with the masks for --greedy], "finish": "stop" | "length"}. `tandem logprobs` with
the same flags scores the same tokens with the same bits.

exit status: 0 ok, 1 the model or FILE was refused (one error on stderr), 2 usage error
)";

constexpr const char* loss_help = R"(usage: tandem loss --model DIR --tokens FILE [--recompute none|selective|full] [--gradients]
                   [--backend cpu|cuda] [--dtype fp32|bf16]

Runs the model in DIR over the sequences of FILE (a JSON array of token-id
arrays, packed into one batch) and prints {"loss": L, "tokens": N}: L is the mean next-token
cross-entropy over every predicted position of every sequence (N of them), as transformers
computes it for labels=input_ids. With --gradients it also prints "gradients": {NAME: {"shape":
[...], "data": [...]}}, the gradient of L for every trainable tensor under its Hugging Face name
in DIR (a tied head's gradient is in the embedding's; layer_scalar is a buffer and has none),
row-major. --recompute picks what the forward keeps for the backward (none keeps every
activation; selective recomputes the attention core and the MLP activations; full keeps each
layer's input and arguments and reruns the layer); the gradients are bitwise the same in every
mode. --backend cuda runs it on cuda:0 and --dtype bf16 stores the weights and activations in bfloat16
(CUDA only; the defaults are the CPU and float32): the same numbers within the dtype's rounding,
for checking the GPU against the CPU.

exit status: 0 ok, 1 the model or FILE was refused (one error on stderr), 2 usage error
)";

constexpr const char* metrics_help = R"(usage: tandem metrics export RUN_DIR [-o FILE]
       tandem metrics check RUN_DIR EXPR...
       tandem metrics tensorboard RUN_DIR [--out DIR]

Reads RUN_DIR/metrics.jsonl (or RUN_DIR itself when it names a file): one JSON object per step,
with "step" (a whole number >= 1) and numeric fields. A metric is named by its path, nested keys
joined by '/' ({"refit": {"bytes": 5}} is refit/bytes; "train/loss" stays train/loss); strings,
booleans, arrays and null are skipped. A line that is not such an object, a step given twice or a
name given twice in one line is refused, naming FILE:LINE.

export prints NeMo-RL's metrics JSON, {"metric": {"step": value, ...}, ...} with step keys as
strings; -o FILE writes it to FILE instead, whole or not at all.

check evaluates each EXPR (one argument each: quote it) and prints "ok" or "FAILED" with the values
it compared. An EXPR compares two operands with <, <=, >, >= or ==; an operand is a number or
  METRIC[STEP]                  the metric's value at that step
  mean(METRIC)  median(METRIC)  min(METRIC)  max(METRIC)      over every step it has
  ratio_above(METRIC, X)        the fraction of its steps whose value is >= X
A METRIC with characters other than letters, digits and _ / . - @ : is written in double quotes.
A metric or step the file does not have fails that check, naming it. For example:
  tandem metrics check logs/run 'median(train/token_mult_prob_error) == 1'     'train/reward[20] > -1.15' 'mean(train/gen_kl_error) < 0.001' 'max(train/reward) > 0.45'

tensorboard writes DIR/events.out.tfevents.<seconds>.<host> (DIR: --out, made if missing; default
the directory of the metrics file) holding one event per step with every metric as a scalar, for
`tensorboard --logdir DIR`. A DIR that already holds an events file is refused (TensorBoard would
show each step twice); a write that fails removes the partial file.

exit status: 0 ok (check: every EXPR holds), 1 the file was refused, could not be written, or a
check failed, 2 usage error (check: an EXPR that does not parse)
)";

constexpr const char* plot_help = R"(usage: tandem plot RUN_DIR [-o FILE.png] [--metrics NAME,NAME,...]

Draws metrics of RUN_DIR/metrics.jsonl (or of RUN_DIR itself when it names a file; metrics named
as `tandem metrics` names them) over steps, one panel each, into FILE.png (default: metrics.png
beside the metrics file, replaced whole). Without --metrics it draws every metric whose name holds
reward, accuracy, loss or error, in that order. Needs gnuplot (Debian: gnuplot-nox), with its
pngcairo terminal where it has one, else png.

exit status: 0 drawn, 1 refused (no metrics file, an unknown metric, none to draw, gnuplot missing
or failing; the reason on stderr), 2 usage error
)";

constexpr const char* tokenize_help = R"(usage: tandem tokenize --model DIR [--special]
       tandem tokenize --model DIR --decode [--skip-special]
       tandem tokenize --model DIR --chat [--thinking] [--no-generation-prompt] [--text]

Reads the tokenizer of DIR (a checkpoint directory, or the file itself): its Hugging Face
tokenizer.json, or, when it has none, its SentencePiece tokenizer.model. Encodes all of stdin
(UTF-8) into a JSON list of token ids, or with --decode reads a JSON list of ids from stdin and
prints their text. The ids equal transformers' tokenizer's: added and special tokens are matched
in the text first, then the normalizer, the Split pre-tokenizer and the BPE model (merges by rank,
byte fallback, the unknown token) run. --special wraps the ids in the post-processor's template
(<bos> first for Gemma; for a tokenizer.model, tokenizer_config.json's add_bos_token and
add_eos_token); --skip-special leaves special tokens out of the text. A tokenizer.json component
tandem does not implement is refused by name, never ignored.

--chat reads a conversation instead (a JSON list of {"role": system|user|assistant|model,
"content": text}, or an object with "messages") and prints the ids of its rendering in Gemma 4's
chat format: <bos>, a system turn when the first message is the system's (or with --thinking, which
opens it with <|think|>), <|turn>ROLE\n...<turn|>\n per message (assistant becomes model; a model
turn's <|channel>...<channel|> thoughts are left out), and the generation prompt <|turn>model\n
(with the empty thought channel <|channel>thought\n<channel|> unless --thinking), which
--no-generation-prompt leaves off. --text prints the rendered text instead of the ids. Tool calls
and images are not part of the format. tools/reference/chat_format.py check compares it with a
checkpoint's own chat template through transformers.

exit status: 0 done, 1 refused (no tokenizer, an unsupported component, text that is not UTF-8,
an unknown id, a bad conversation, a tokenizer without Gemma 4's chat tokens; the reason on
stderr), 2 usage error
)";

constexpr const char* dataset_help = R"(usage: tandem dataset check FILE

Reads FILE as a prompt dataset: JSON lines, one record per line, each with exactly one of
"prompt" (text), "messages" (a list of {"role": system|user|assistant|model, "content": text},
ending with the user's turn; a system message only first) or "input_ids" (token ids), and an
"answer" (text). Other keys are allowed and not read; blank lines are skipped. Prints the count of
each form, or the file, line and fault of the first bad record. tools/convert_dataset.py writes
this format from a Hugging Face dataset file (parquet, JSON lines or JSON).

exit status: 0 every record is good, 1 refused (the file, line and fault on stderr), 2 usage error
)";

constexpr const char* init_help = R"(usage: tandem init --config FILE --out DIR [--seed N] [--tokenizer DIR]

Writes a new checkpoint directory DIR for the Gemma 4 config.json FILE (or a directory holding
one), with the random weights a model starts from: every matrix and embedding from
N(0, initializer_range^2) (0.02 when the config has none), every norm scale, layer_scalar and
router scale 1, in float32. The weights are a pure function of the config and --seed (default 1).
DIR gets the config as given, the generation_config.json beside it (else one with its bos, eos
and pad ids) and, with --tokenizer, that directory's tokenizer.json, tokenizer_config.json and
special_tokens_map.json. DIR must not exist; it appears whole or not at all.

exit status: 0 written, 1 refused (DIR exists, a bad config, a write failed), 2 usage error
)";

constexpr const char* bench_help = R"(usage: tandem bench train --model DIR [--tokens N] [--micro-batch B] [--steps N] [--warmup N]
                          [--recompute none|selective|full] [--backend cpu|cuda] [--dtype fp32|bf16]
                          [--optimizer-dtype fp32|bf16]
                          [--seed N] [--logprob-chunk N] [--profile] [--json FILE]

Times training steps of the Gemma 4 train engine on the model of DIR's config.json with the random
initial weights of `tandem init` (DIR's weights, if any, are not read): each step is the forward,
the supervised next-token loss, the backward and AdamW over one micro-batch of B sequences (default
1) of N random tokens (default 4096). After --warmup steps (default 2) it times --steps (default
10) and prints the median and mean step time, tokens/s and model TFLOP/s (2 FLOPs per weight of
every projection per token, the tied head included, plus attention's Q·K and P·V over the keys
each query sees; the backward counted twice), then the GEMM-only ceiling measured in the same run:
every matrix product of the step (forward, input and weight gradients) alone through the same
linear op on the same device, and the step's time as a fraction of it. Memory: what the engine
keeps (weights, gradients, optimizer state) and the most a step adds (activations, scratch); then
memory by phase: the device's memory in use while training, after the training state is offloaded
(optimizer state copied to pinned host memory, gradients and cached activations given back, as a
colocated run does before generating) and after it is restored, with each transition's time and
the loss of one more step. Weights and gradients are stored in --dtype (fp32, or bf16 on CUDA);
--optimizer-dtype bf16 keeps bfloat16 master weights and moments (default fp32: a float32 master
beside bfloat16 weights). --logprob-chunk N: tokens whose vocabulary logits exist at once (default
1024, as policy.logprob_chunk_size). --profile adds the timed steps' time op by op: each op's
start on the device to the next op's, so an op's share includes any wait for the host. --backend
cuda runs on cuda:0. --json FILE writes every figure.

usage: tandem bench generate --model DIR [--batch B] [--prompt-len P] [--new-tokens N]
                             [--backend cpu|cuda] [--dtype fp32|bf16] [--temperature T --top-k K --top-p P]
                             [--prefill-budget R] [--seed N] [--profile] [--profiler-range] [--agreement]
                             [--overlap on|off] [--json FILE]

Times one batch of sampled generations by the Gemma 4 generate engine on the model of DIR's
config.json with the random initial weights of `tandem init`: B prompts (default 256) of P random
tokens (default 128), each continued by exactly N tokens (default 256; no stop token), all in one
continuous batch with at most R prompt rows per step (default 8192), after a warm-up run of the
same batch. Sampling defaults to what transformers' generate() does when it samples (temperature
1, top-k 50, top-p 1). Prints generated tokens/s over the whole run, the prefill steps' time and
the median decode step, then two ceilings of the decode step measured in the same run: the
GEMM-only ceiling (its matrix products at B rows alone through the same linear op, same device
and dtype) and the memory roofline (the bytes it must read, every weight once and each
sequence's visible K/V, at the device's copy bandwidth), with the decode step as a fraction of
each. Weights, activations and the KV cache are stored in --dtype (fp32, or bf16 on CUDA);
--backend cuda runs on cuda:0. Captured decode steps are overlapped: the engine enqueues the next
step before it reads the last one's tokens, so its scheduling runs beside the device; --overlap
off runs them one at a time. --profile times the decode steps op by op, --profiler-range brackets
one replayed decode step for `ncu --profile-from-start off`, --agreement scores a batch sampled at
temperature 0.7, top-k 20, top-p 0.9 with a train engine. --json FILE writes every figure.

exit status: 0 measured, 1 refused (a bad config, no such device, a failed step), 2 usage error

usage: tandem bench refit [--model DIR | --mb N] [--dtype bf16|fp32] [--receivers R] [--bucket-mb M]
                          [--rounds N] [--checksums] [--receive staging|in_place] [--insecure] [--json FILE]

Times a refit of a model's weights (DIR's parameters at --dtype's bytes each, default bf16, as a
GPU refit moves them; or N MiB) from a policy root to R rollout workers (default 1), each a rank
of this process on a thread, over the CPU data plane a run's members use (ZeroMQ on loopback,
CurveZMQ unless --insecure) and the refit stream protocol: buckets of M MiB (default 512, as
policy.refit.bucket_mb), checksummed with --checksums, received into a staging copy or in place
(policy.refit.receive), staged and committed on every worker. Beside it, in the same run, a plain
broadcast of the same buckets over the same group: the transport's ceiling. The weights are the
fake engines', which export and import them with a memory copy, so the figures are the
transport's and the protocol's. Prints the fastest of N rounds (default 3) of each, GB/s and the
refit as a share of the broadcast, and whether every worker's weights hash as the policy's after
it. --json FILE writes every figure.

exit status: 0 measured, 1 refused (a bad model, a group or stream that failed, weights that did
not arrive whole), 2 usage error
)";

constexpr const char* validate_help = R"(usage: tandem validate RECIPE [key=value ...]
       tandem validate --minimize RECIPE
       tandem validate --schema

Resolves RECIPE: its `defaults:` parents (paths relative to the file, merged in order), then the
recipe, then the overrides, over the schema defaults. Prints the result as YAML, each value
commented with the file:line:column (or override) that set it. On errors prints every one as
  FILE:LINE:COLUMN: error: KEY.PATH: MESSAGE
and exits 1 (a report shows the first 50 errors and counts the rest). A well-formed recipe that
asks for something this build cannot run yet (context parallelism, CUDA over several devices,
...) still validates, with one note per such setting on stderr:
  FILE:LINE:COLUMN: note: KEY.PATH: VALUE: what is not built
`tandem run` refuses it with the same list. With runtime.engine: fake, settings only the Gemma 4
engines read are noted as ignored. --minimize prints the recipe's keys whose value equals what it
inherits (exit 1 if any). --schema prints the documented schema.
)";

constexpr const char* run_help = R"(usage: tandem run RECIPE [key=value ...] [--dry-run | --no-spawn] [--fresh]

Resolves and validates RECIPE like `tandem validate` and loads the model's config.json. A recipe
that asks for something this build cannot run yet is refused, listing every such setting where it
was set; --dry-run prints the plan first, then refuses the same way. Dataset files must exist.

--dry-run prints the placement plan: one member process per device, which actors each hosts
(policy_worker, rollout_worker), data-parallel and rollout ranks, the controller's control-plane
endpoint, the step arithmetic, and the memory budget of each phase per device.

Without --dry-run it runs the plan: this process is the controller (driver, refit coordinator,
environments); it starts the members of its own node (`tandem join`, one per device) and waits
for the others, started by a launcher (tools/launch/slurm/), then runs grpo.max_num_steps steps.
--no-spawn starts no member: every rank is started by hand or by a launcher and dials
cluster.controller_host:controller_port.

Every socket of a run speaks CurveZMQ (cluster.secure: true, the default): traffic is encrypted,
and the controller and every data-plane port admit only peers that prove one of the run's keys;
a member is known by its key, never by a name it claims. Members spawned here receive their keys
on an inherited descriptor. Members started elsewhere need the run's keys file: make it with
`tandem keys FILE --world W` and set TANDEM_KEYS=FILE for this command and for those members.
cluster.secure: false (no authentication, no encryption) is accepted only on loopback.
cluster.controller_host names the one interface the controller binds (never a wildcard); the
members' data-plane sockets bind the interface that routes to it (or TANDEM_DATA_HOST); the
first lines of a run say which.
Each step prints one line: on a terminal a compact one (reward, loss, token_mult_prob_error,
gen_kl_error, tokens, time, versions) after a progress bar during generation; in controller.log
and off a terminal a timestamped one with the refit, the control bytes the controller moved and
the policy ranks' weights digest too. Each step appends a record to metrics.jsonl and every
trajectory to generations.jsonl. A member that dies or hangs (no
heartbeat for runtime.heartbeat_timeout_ms) ends the run, naming it.

logger.log_dir is the run's directory: everything the run writes goes there (metrics.jsonl,
generations.jsonl, recipe.yaml: the resolved recipe, controller.log: this command's lines, and at
the end final_weights: policy rank 0's last weights as a checkpoint directory, and metrics.png).
It is made, with its parents, and checked before any member starts: a path that is not a
directory or where no file can be created fails the run, naming the path and the reason. A
directory that holds another run's records (recipe.yaml, metrics.jsonl, generations.jsonl,
controller.log, metrics.png or final_weights) is refused; --fresh leaves it as it is and runs in the first free sibling, LOG_DIR.2, LOG_DIR.3, ...
(the first lines say which). Every record is written whole or not at all: a record that cannot
be written (a full disk, a file-size limit, an I/O error) is cut off the file and fails the run,
naming the file and the reason.

checkpointing.enabled=true saves a checkpoint after every checkpointing.save_period steps, the
last, and the step in flight when SIGINT or SIGTERM stops the run (Slurm's time-limit signal
through tools/launch/slurm/run.sh) into checkpointing.checkpoint_dir (relative: inside the run
directory): step_N/ holds the weights (a Hugging Face directory, optimizer state beside), every
policy rank's part, the controller's state and manifest.json, written last; keep_top_k keeps the
newest and the best K by metric_name. Run the same command again in a directory that holds a complete checkpoint and the
run resumes from the newest (its first lines say so) and continues exactly as if it had not
stopped; a recipe that changed other keys than the run's length, logging, checkpointing and
placement is refused, listing them (--fresh starts a new run instead).

runtime.engine=gemma4 (the default) runs the Gemma 4 engines on cluster.backend cpu (float32;
cuda is not built yet): every member loads the checkpoint policy.model_name resolves to (the
run's recipe names that directory). The prompts are data.train_dataset's records (through the
checkpoint's tokenizer.json or tokenizer.model; "messages" records in Gemma 4's chat format, see
`tandem help tokenize`) or the task's own (env.name parity: synthetic prompts over the vocabulary;
arithmetic: a+b= problems), scored by env.name; sft.max_num_steps > 0 runs a supervised warm-up
on their answers first. The dataset, the tokenizer and the task are checked
before any member starts. runtime.engine=fake runs the whole runtime with deterministic fake
engines (a fake model of runtime.fake_weight_mb MiB, the parity task over its 64 tokens). After
the last step policy rank 0 saves its weights into LOG_DIR/final_weights (with the Gemma 4 engines
a Hugging Face checkpoint directory; a failed save fails the
run), the metrics are plotted into LOG_DIR/metrics.png (gnuplot; a run without it says so), and
the run ends saying where both are.

exit status: 0 every step done, 1 the recipe was refused or the run failed, 2 usage error
)";

constexpr const char* join_help = R"(usage: tandem join --controller ADDR --rank R --world W
                     [--local-members N] [--welcome-timeout-ms MS]

One member process of a run: connects to the controller's control socket at ADDR
(tcp://host:port), says hello as rank R of W members, and waits for the welcome that assigns its
actors (policy, rollout) and ranks. It then exchanges heartbeats with the controller and runs until
the controller shuts it down (exit 0). It exits 1 when no welcome comes within the welcome timeout
(default 60000 ms), when the controller refuses it, or when the controller's heartbeats stop for
the timeout the welcome set (the controller died or hangs).

A local controller starts its members itself; a launcher starts them on every node, each setting from
the environment (a flag wins over its variable):
  TANDEM_CONTROLLER=ADDR  TANDEM_RANK=R  TANDEM_WORLD=W  TANDEM_LOCAL_MEMBERS=N  TANDEM_WELCOME_TIMEOUT_MS=MS
The run's keys: TANDEM_KEYS=FILE (a keys file of `tandem keys`, mode 0600, the same file the
controller reads) or TANDEM_KEYS_FD (set by a controller that spawned the member). Without keys a
member connects only to a controller on loopback that runs with cluster.secure: false.
TANDEM_LOCAL_MEMBERS (default W) is the number of members on this node: each member caps its
threads (CAF scheduler, OpenMP, OpenBLAS) to its share of the node's cores. A member started by a
local controller (TANDEM_PARENT_PID set) dies with it.

Two members by hand, against a controller started with TANDEM_KEYS=run.keys on 127.0.0.1:29650:
  tandem keys run.keys --world 2
  TANDEM_KEYS=run.keys tandem run RECIPE --no-spawn &
  TANDEM_KEYS=run.keys tandem join --controller tcp://127.0.0.1:29650 --rank 0 --world 2 &
  TANDEM_KEYS=run.keys TANDEM_CONTROLLER=tcp://127.0.0.1:29650 TANDEM_RANK=1 TANDEM_WORLD=2 tandem join

exit status: 0 shut down by the controller, 1 failed (the reason on stderr), 2 usage error
)";

constexpr const char* keys_help = R"(usage: tandem keys FILE --world N

Writes the CurveZMQ keys of a run of N members to FILE: the controller's key pair and one per
member rank, as text, with mode 0600. The file appears whole or not at all and an existing FILE is
never replaced. Whoever can read it can join the run: keep it private, in a directory only you
can read (a job's directory on a shared file system).

Give it to the controller and to every member started outside it as TANDEM_KEYS=FILE:
  tandem keys run.keys --world 4
  TANDEM_KEYS=run.keys tandem run RECIPE --no-spawn
  TANDEM_KEYS=run.keys tandem join --controller tcp://HOST:PORT --rank R --world 4
A keys file that anyone but its owner can read or write is refused.

exit status: 0 written, 1 refused (FILE exists, cannot be written), 2 usage error
)";

}  // namespace

int help_command(const args& a, std::ostream& out, std::ostream& err) {
  if (a.empty()) {
    out << overview;
    return exit_ok;
  }
  if (a[0] == "validate") out << validate_help;
  else if (a[0] == "run") out << run_help;
  else if (a[0] == "join") out << join_help;
  else if (a[0] == "keys") out << keys_help;
  else if (a[0] == "inspect") out << inspect_help;
  else if (a[0] == "convert") out << convert_help;
  else if (a[0] == "logprobs") out << logprobs_help;
  else if (a[0] == "generate") out << generate_help;
  else if (a[0] == "loss") out << loss_help;
  else if (a[0] == "metrics") out << metrics_help;
  else if (a[0] == "plot") out << plot_help;
  else if (a[0] == "tokenize") out << tokenize_help;
  else if (a[0] == "dataset") out << dataset_help;
  else if (a[0] == "init") out << init_help;
  else if (a[0] == "bench") out << bench_help;
  else if (a[0] == "help" || a[0] == "version" || a[0] == "--version") out << overview;
  else {
    err << "tandem help: unknown command '" << a[0] << "'\n";
    return exit_usage;
  }
  return exit_ok;
}

}  // namespace tandem::cli
