// The Gemma 4 train engine (gpu/engine/gemma4_train_engine.h) beyond the contract's conformance
// suite: it learns, data-parallel ranks stay bitwise identical and agree with one rank on the
// whole batch, a non-finite loss or gradient is refused naming its tensor, a resumed engine
// continues bitwise as if never stopped, recompute modes change no bit, and the learning rate
// warms up. Built for the CPU here, and a second time into the CUDA test program
// (TANDEM_TESTS_ON_CUDA, CTest label gpu) for the engine on cuda:0, where the cases that need a
// CPU data-parallel group or count host buffers are left out.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <thread>

#include "gpu/comm/local_group.h"
#include "gpu/core/device_query.h"
#include "gpu/core/memory.h"
#include "gpu/engine/gemma4_train_engine.h"
#include "gpu/model/slab_views.h"
#include "gpu/ops/fault_injection.h"
#include "support/checkpoint_fixture.h"
#include "support/micro_batches.h"
#include "support/temp_dir.h"

namespace tg = tandem::gpu;
using tandem::test::checkpoint_builder;
using tandem::test::preset_config;
using tandem::test::temp_dir;

namespace {

#if TANDEM_TESTS_ON_CUDA
const tg::exec_context test_context{tg::device::cuda(0), {}, nullptr};
#else
const tg::exec_context test_context = tg::exec_context::cpu();
#endif

tg::checkpoint model(const temp_dir& t, const std::string& name = "model") {
  checkpoint_builder b(t.path() / name);
  const std::string config = preset_config("tiny-all");
  b.set_config(config);
  if (!std::filesystem::exists(b.dir() / "model.safetensors")) {
    b.add_text_stack(*tg::parse_model_config(config, "config.json"), tg::dtype::float32, 21);
    b.write();
  }
  auto c = tg::open_checkpoint(b.dir(), tg::dtype::float32);
  BOOST_REQUIRE(c.has_value());
  return std::move(*c);
}

std::unique_ptr<tg::gemma4_train_engine> engine(const temp_dir& t, tg::train_engine_options o = {}, tg::communicator* group = nullptr) {
  if (o.adamw.lr == 1e-3) o.adamw.lr = 1e-2;
  auto e = tg::gemma4_train_engine::create(test_context, model(t), o, group);
  BOOST_REQUIRE_MESSAGE(e.has_value(), (e.has_value() ? "" : e.error().message()));
  return std::move(*e);
}

tg::train_micro_batch_data batch(tg::train_engine& e, const tg::packed_sequences& s, float advantage = 1.0f) {
  return tandem::test::on_policy_micro_batch(e, s, advantage);
}

// A slab's bytes, read into host memory from its device.
std::vector<std::byte> bytes(const tg::slab& s) {
  std::vector<std::byte> out(static_cast<std::size_t>(s.bytes()));
  const void* p = s.view_of(0, tg::dtype::float32, std::vector<std::int64_t>{1})->data();
  BOOST_REQUIRE(tg::copy_to_host(s.dev(), out.data(), p, s.bytes()).is_ok());
  return out;
}

// Element `i` of a float32 tensor of a slab, read from its device.
float element(const tg::slab& s, const tg::tensor_entry& e, std::int64_t i) {
  float v = 0;
  const auto* p = static_cast<const float*>(tg::view_in(s, e, tg::dtype::float32)->data()) + i;
  BOOST_REQUIRE(tg::copy_to_host(s.dev(), &v, p, 4).is_ok());
  return v;
}

const tg::packed_sequences seq_a{{3, 17, 29, 4, 88, 61}, {0, 6}}, seq_b{{9, 9, 200, 31, 7}, {0, 5}};
const tg::packed_sequences both{{3, 17, 29, 4, 88, 61, 9, 9, 200, 31, 7}, {0, 6, 11}};

}  // namespace

BOOST_AUTO_TEST_SUITE(gemma4_train_engine)

BOOST_AUTO_TEST_CASE(steps_with_a_positive_advantage_raise_the_logprob_of_the_sequence) {
  temp_dir t;
  auto e = engine(t);
  auto sum = [&] {
    const auto lp = e->logprobs(seq_a, {});
    BOOST_REQUIRE(lp.has_value());
    double s = 0;
    for (float v : lp.value()) s += v;
    return s;
  };
  const double before = sum();
  for (int i = 0; i < 5; ++i) {
    BOOST_REQUIRE(e->train_micro_batch(batch(*e, seq_a), {}, {5, 1}, {}).has_value());
    BOOST_REQUIRE(e->optimizer_step().has_value());
  }
  BOOST_TEST(sum() > before + 0.5, "sum of logprobs " << before << " -> " << sum());
}

#if !TANDEM_TESTS_ON_CUDA  // a data-parallel group on the CPU (NCCL comes with the two-GPU work)
BOOST_AUTO_TEST_CASE(two_data_parallel_ranks_stay_bitwise_identical_and_agree_with_one_rank_on_the_whole_batch) {
  temp_dir t;
  auto group = tg::make_local_group(2);
  auto r0 = engine(t, {}, group[0].get()), r1 = engine(t, {}, group[1].get());
  auto single = engine(t);
  for (int step = 0; step < 3; ++step) {
    const tg::global_counts counts{9, 2};
    const auto mb0 = batch(*r0, seq_a), mb1 = batch(*r1, seq_b);
    BOOST_REQUIRE(single->train_micro_batch(batch(*single, seq_a), {}, counts, {}).has_value());
    BOOST_REQUIRE(single->train_micro_batch(batch(*single, seq_b), {}, counts, {}).has_value());
    BOOST_REQUIRE(single->optimizer_step().has_value());
    std::thread other([&] {
      BOOST_REQUIRE(r1->train_micro_batch(mb1, {}, counts, {}).has_value());
      BOOST_REQUIRE(r1->optimizer_step().has_value());
    });
    BOOST_REQUIRE(r0->train_micro_batch(mb0, {}, counts, {}).has_value());
    BOOST_REQUIRE(r0->optimizer_step().has_value());
    other.join();
    BOOST_TEST((bytes(r0->weights()) == bytes(r1->weights())), "ranks differ after step " << step);
  }
  const auto* a = static_cast<const float*>(r0->weights().view_of(0, tg::dtype::float32, std::vector<std::int64_t>{1})->data());
  const auto* b = static_cast<const float*>(single->weights().view_of(0, tg::dtype::float32, std::vector<std::int64_t>{1})->data());
  double worst = 0;
  for (std::int64_t i = 0; i < r0->layout().total_elements; ++i) worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  // Not bitwise: one rank accumulates seq_b's gradient onto seq_a's inside the weight-gradient
  // GEMM, the group adds two finished gradients, so the sums round differently, and AdamW divides
  // each update by its gradient's own size, so a rounding difference in a near-zero gradient moves
  // its weight by a visible fraction of lr (1e-3). Far below lr, the ranks agree with one rank.
  BOOST_TEST(worst < 1e-4, "two ranks vs one: max |difference| " << worst);
}

BOOST_AUTO_TEST_CASE(a_rank_whose_micro_batch_fails_abandons_the_step_so_its_peer_refuses_it_at_once) {
  // Without abandon_step the peer would wait in the gradient all-reduce for the failed rank.
  temp_dir t;
  auto group = tg::make_local_group(2);
  auto r0 = engine(t, {}, group[0].get()), r1 = engine(t, {}, group[1].get());
  const tg::global_counts counts{9, 2};
  const auto before = bytes(r0->weights());
  auto bad = batch(*r1, seq_b);
  bad.mask.pop_back();  // one mask value short: the micro-batch is refused before its backward
  std::string failed_rank_error;
  std::thread other([&] {
    const auto r = r1->train_step({bad}, {}, counts, {});
    BOOST_REQUIRE(!r.has_value());
    failed_rank_error = r.error().message();
  });
  const auto r = r0->train_step({batch(*r0, seq_a)}, {}, counts, {});
  other.join();
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST(r.error().message().find("is not finite (element 0: nan) (after the all-reduce over 2 ranks: a rank whose "
                                      "micro-batch failed abandons the step this way)") != std::string::npos,
             r.error().message());
  BOOST_TEST(failed_rank_error.starts_with("micro-batch 0: "), failed_rank_error);
  BOOST_TEST((bytes(r0->weights()) == before));
  BOOST_TEST((bytes(r1->weights()) == before));
  // Both dropped their gradients: the next step runs on both and keeps them equal.
  std::thread again([&] { BOOST_REQUIRE(r1->train_step({batch(*r1, seq_b)}, {}, counts, {}).has_value()); });
  BOOST_REQUIRE(r0->train_step({batch(*r0, seq_a)}, {}, counts, {}).has_value());
  again.join();
  BOOST_TEST((bytes(r0->weights()) == bytes(r1->weights())));
  BOOST_TEST((bytes(r0->weights()) != before));
}
#endif

BOOST_AUTO_TEST_CASE(a_non_finite_gradient_refuses_the_step_naming_the_first_non_finite_tensor) {
  temp_dir t;
  auto e = engine(t);
  BOOST_REQUIRE(e->train_micro_batch(batch(*e, seq_a), {}, {5, 1}, {}).has_value());
  const auto before = bytes(e->weights());
  const tg::tensor_entry* q = e->layout().find("layers.2.self_attn.q_proj.weight");
  const float nan = NAN;
  BOOST_REQUIRE(tg::copy_to_device(e->gradients().dev(), static_cast<float*>(tg::view_in(e->gradients(), *q, tg::dtype::float32)->data()) + 7,
                                   &nan, 4)
                    .is_ok());
  const auto r = e->optimizer_step();
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST(r.error().message().find("the gradient of 'model.layers.2.self_attn.q_proj.weight' is not finite (element 7: nan)") !=
                 std::string::npos,
             r.error().message());
  BOOST_TEST((bytes(e->weights()) == before));
  BOOST_TEST(e->step_count() == 0);
  BOOST_REQUIRE(e->optimizer_step().has_value());  // the gradients were dropped with the refusal
}

BOOST_AUTO_TEST_CASE(an_op_that_fails_mid_backward_is_named_with_its_phase_and_layer_and_the_next_step_trains) {
  temp_dir t;
  auto e = engine(t);
  const auto before = bytes(e->weights());
  const auto mb = batch(*e, seq_a);
  tg::ops::inject_op_failure("rmsnorm_backward", 3);  // the device fault of one kernel
  const auto r = e->train_step({mb}, {}, {5, 1}, {});
  BOOST_REQUIRE(!r.has_value());
  const std::string& m = r.error().message();
  BOOST_TEST((r.error().code() == tg::status_code::device_error), m);
  BOOST_TEST(m.find("micro-batch 0: gemma4_train_engine: train_micro_batch: backward: backward, layer ") == 0, m);
  BOOST_TEST(m.find(": rmsnorm_backward: injected failure (call 3)") != std::string::npos, m);
  BOOST_TEST((bytes(e->weights()) == before), "the failed step changed no weight");
  const auto again = e->train_step({mb}, {}, {5, 1}, {});
  BOOST_REQUIRE_MESSAGE(again.has_value(), (again.has_value() ? "" : again.error().message()));
  BOOST_TEST((bytes(e->weights()) != before));
}

BOOST_AUTO_TEST_CASE(a_non_finite_loss_is_refused_before_any_gradient_accumulates) {
  temp_dir t;
  auto e = engine(t);
  auto mb = batch(*e, seq_a);
  mb.advantages[2] = INFINITY;
  const auto r = e->train_micro_batch(mb, {}, {5, 1}, {});
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST(r.error().message().find("the loss is not finite") != std::string::npos, r.error().message());
  for (std::byte b : bytes(e->gradients())) BOOST_REQUIRE(b == std::byte{0});
}

BOOST_AUTO_TEST_CASE(a_resumed_engine_continues_bitwise_as_if_it_never_stopped) {
  temp_dir t;
  tg::train_engine_options o;
  o.first_moment_dtype = o.second_moment_dtype = tg::dtype::bfloat16;
  auto a = engine(t, o);
  BOOST_REQUIRE(a->train_micro_batch(batch(*a, seq_a), {}, {5, 1}, {}).has_value());
  BOOST_REQUIRE(a->optimizer_step().has_value());
  BOOST_REQUIRE(a->save(t.path() / "step1").is_ok());
  BOOST_REQUIRE(a->train_micro_batch(batch(*a, seq_b), {}, {4, 1}, {}).has_value());
  BOOST_REQUIRE(a->optimizer_step().has_value());

  auto b = engine(t, o);
  BOOST_REQUIRE(b->load(t.path() / "step1").is_ok());
  BOOST_TEST(b->step_count() == 1);
  BOOST_REQUIRE(b->train_micro_batch(batch(*b, seq_b), {}, {4, 1}, {}).has_value());
  BOOST_REQUIRE(b->optimizer_step().has_value());
  BOOST_TEST((bytes(a->weights()) == bytes(b->weights())));
  BOOST_TEST(std::filesystem::exists(t.path() / "step1" / "optimizer.safetensors"));
}

BOOST_AUTO_TEST_CASE(every_recompute_mode_takes_the_same_step_bit_for_bit) {
  std::vector<std::vector<std::byte>> results;
  for (auto mode : {tg::recompute_mode::none, tg::recompute_mode::selective, tg::recompute_mode::full}) {
    temp_dir t;
    tg::train_engine_options o;
    o.recompute = mode;
    auto e = engine(t, o);
    BOOST_REQUIRE(e->train_micro_batch(batch(*e, both), {}, {9, 2}, {0.8, 20, 0.95}).has_value());
    BOOST_REQUIRE(e->optimizer_step().has_value());
    results.push_back(bytes(e->weights()));
  }
  BOOST_TEST((results[1] == results[0]));
  BOOST_TEST((results[2] == results[0]));
}

BOOST_AUTO_TEST_CASE(supervised_steps_lower_the_cross_entropy) {
  temp_dir t;
  auto e = engine(t);
  const auto first = e->train_cross_entropy(both, 9);
  BOOST_REQUIRE(first.has_value());
  BOOST_REQUIRE(e->optimizer_step().has_value());
  double last = *first;
  for (int i = 0; i < 4; ++i) {
    last = *e->train_cross_entropy(both, 9);
    BOOST_REQUIRE(e->optimizer_step().has_value());
  }
  BOOST_TEST(last < *first - 0.1, "cross-entropy " << *first << " -> " << last);
}

#if !TANDEM_TESTS_ON_CUDA  // counts host buffers; the CUDA engine's memory has its own test
BOOST_AUTO_TEST_CASE(activation_memory_follows_the_micro_batch_not_the_step) {
  temp_dir t;
  auto e = engine(t);
  auto sequences = [](int n) {
    tg::packed_sequences s;
    s.offsets.push_back(0);
    for (int q = 0; q < n; ++q) {
      for (int i = 0; i < 16; ++i) s.tokens.push_back((q * 37 + i * 11) % 256);
      s.offsets.push_back(static_cast<std::int32_t>(s.tokens.size()));
    }
    return s;
  };
  // The peak of the host buffers (activations and scratch) during one step's micro-batches.
  auto peak_of = [&](const std::vector<tg::packed_sequences>& micro_batches) {
    std::vector<tg::train_micro_batch_data> mbs;
    for (const auto& s : micro_batches) mbs.push_back(batch(*e, s));
    const std::int64_t before = tg::host_buffer_live_bytes();
    tg::reset_host_buffer_peak();
    BOOST_REQUIRE(e->train_step(mbs, {}, {1000, 100}, {}).has_value());
    return tg::host_buffer_peak_bytes() - before;
  };
  const std::int64_t one = peak_of({sequences(4)});
  const std::int64_t four_of_them = peak_of({sequences(4), sequences(4), sequences(4), sequences(4)});
  const std::int64_t four_times_larger = peak_of({sequences(16)});
  BOOST_TEST_MESSAGE("activation peak: one micro-batch of 64 tokens " << one << " B, four of them " << four_of_them
                                                                     << " B, one of 256 tokens " << four_times_larger << " B");
  BOOST_TEST(four_of_them < one * 11 / 10, "four micro-batches hold " << four_of_them << " B at peak, one holds " << one);
  BOOST_TEST(four_times_larger > one * 3, "a micro-batch of 4x the tokens holds only " << four_times_larger << " B vs " << one);
}
#endif

BOOST_AUTO_TEST_CASE(layer_scalar_is_a_buffer_that_no_step_changes) {
  temp_dir t;
  tg::train_engine_options o;
  o.adamw.weight_decay = 0.5;
  auto e = engine(t, o);
  const tg::tensor_entry* s = e->layout().find("layers.3.layer_scalar");
  BOOST_REQUIRE(s && !s->trainable);
  const float before = element(e->weights(), *s, 0);
  for (int i = 0; i < 2; ++i) {
    BOOST_REQUIRE(e->train_micro_batch(batch(*e, seq_a), {}, {5, 1}, {}).has_value());
    BOOST_REQUIRE(e->optimizer_step().has_value());
  }
  BOOST_TEST(element(e->weights(), *s, 0) == before);
}

BOOST_AUTO_TEST_CASE(the_learning_rate_warms_up_linearly_then_stays) {
  temp_dir t;
  tg::train_engine_options o;
  o.adamw.lr = 0.1;
  o.warmup_start_factor = 0.25;
  o.warmup_steps = 3;
  auto e = engine(t, o);
  std::vector<double> lrs;
  for (int i = 0; i < 5; ++i) {
    BOOST_REQUIRE(e->train_micro_batch(batch(*e, seq_a), {}, {5, 1}, {}).has_value());
    lrs.push_back(e->optimizer_step()->lr);
  }
  const std::vector<double> want{0.025, 0.05, 0.075, 0.1, 0.1};
  for (std::size_t i = 0; i < want.size(); ++i) BOOST_TEST(lrs[i] == want[i], boost::test_tools::tolerance(1e-12));
}

namespace {

/// True when every float of `s` has zero low 16 bits: a value bfloat16 holds exactly.
bool on_the_bfloat16_grid(const tg::slab& s) {
  const std::vector<std::byte> b = bytes(s);
  for (std::size_t i = 0; i + 4 <= b.size(); i += 4) {
    std::uint32_t v;
    std::memcpy(&v, b.data() + i, 4);
    if ((v & 0xffffu) != 0) return false;
  }
  return true;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_bfloat16_master_keeps_the_weights_on_its_grid_and_resumes_bitwise) {
  temp_dir t;
  tg::train_engine_options o;
  o.master_dtype = tg::dtype::bfloat16;
  auto a = engine(t, o);
  BOOST_TEST(on_the_bfloat16_grid(a->weights()));
  const auto start = bytes(a->weights());
  BOOST_REQUIRE(a->train_micro_batch(batch(*a, seq_a), {}, {5, 1}, {}).has_value());
  BOOST_REQUIRE(a->optimizer_step().has_value());
  BOOST_TEST(on_the_bfloat16_grid(a->weights()));
  BOOST_TEST((bytes(a->weights()) != start));
  BOOST_REQUIRE(a->save(t.path() / "step1").is_ok());
  BOOST_REQUIRE(a->train_micro_batch(batch(*a, seq_b), {}, {4, 1}, {}).has_value());
  BOOST_REQUIRE(a->optimizer_step().has_value());

  auto b = engine(t, o);
  BOOST_REQUIRE(b->load(t.path() / "step1").is_ok());
  BOOST_REQUIRE(b->train_micro_batch(batch(*b, seq_b), {}, {4, 1}, {}).has_value());
  BOOST_REQUIRE(b->optimizer_step().has_value());
  BOOST_TEST((bytes(a->weights()) == bytes(b->weights())));
}

#if !TANDEM_TESTS_ON_CUDA
BOOST_AUTO_TEST_CASE(bad_options_are_refused_by_name_and_a_cuda_context_without_a_device_fails_naming_it) {
  temp_dir t;
  tg::train_engine_options o;
  o.master_dtype = tg::dtype::float16;
  auto bad = tg::gemma4_train_engine::create(tg::exec_context::cpu(), model(t), o);
  BOOST_REQUIRE(!bad.has_value());
  BOOST_TEST(bad.error().message() == "gemma4_train_engine: master_dtype must be float32 or bfloat16, got float16");
  o = {};
  o.logprob_chunk_rows = 0;
  bad = tg::gemma4_train_engine::create(tg::exec_context::cpu(), model(t), o);
  BOOST_REQUIRE(!bad.has_value());
  BOOST_TEST(bad.error().message() == "gemma4_train_engine: logprob_chunk_rows must be > 0, got 0");
  // bfloat16 weights train on CUDA only.
  {
    auto c = tg::open_checkpoint(model(t).directory, tg::dtype::bfloat16);
    BOOST_REQUIRE(c.has_value());
    auto cpu16 = tg::gemma4_train_engine::create(tg::exec_context::cpu(), std::move(*c), {});
    BOOST_REQUIRE(!cpu16.has_value());
    BOOST_TEST(cpu16.error().message() ==
               "gemma4_train_engine: bfloat16 weights train on CUDA; the CPU computes in float32 (open_checkpoint(dir, float32))");
  }
  // The CUDA engine's own tests (label gpu) run where a device is visible; here the engine must
  // fail on its first allocation there, saying where (no GPU, no driver, or no CUDA backend).
  if (!tg::query_backend().devices.empty()) return;
  tg::exec_context cuda;
  cuda.dev = tg::device::cuda(0);
  bad = tg::gemma4_train_engine::create(cuda, model(t), {});
  BOOST_REQUIRE(!bad.has_value());
  const std::string& m = bad.error().message();
  BOOST_TEST(m.starts_with("gemma4_train_engine: create: "), m);
  BOOST_TEST((m.find("cuda:0") != std::string::npos || m.find("no CUDA backend") != std::string::npos), m);
}
#endif

BOOST_AUTO_TEST_SUITE_END()

