// The fake engines: deterministic weights and hashes, training steps, data-parallel agreement,
// bucket refits (missing, corrupted, failing), continuous batching, colocated sharing, checkpoints.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gpu/comm/local_group.h"
#include "gpu/core/chunked_hash.h"
#include "gpu/engine/fake/fake_generate_engine.h"
#include "gpu/engine/fake/fake_train_engine.h"
#include "support/temp_dir.h"

using namespace tandem::gpu;

namespace {

fake_model_options small_model(std::uint64_t seed = 1) {
  fake_model_options o;
  o.weight_bytes = 4 * 1000;  // 1000 floats in 3 tensors: 333, 333, 334
  o.tensors = 3;
  o.seed = seed;
  o.vocab = 50;
  o.max_sequence_length = 64;
  return o;
}

fake_generate_options generator_options(const fake_model_options& model, std::int64_t bucket_bytes = 1000) {
  fake_generate_options o;
  o.model = model;
  o.bucket_bytes = bucket_bytes;  // 4000 bytes: 4 buckets, each cutting through tensors
  return o;
}

generation_request request(std::uint64_t id, std::vector<std::int32_t> prompt, std::int32_t max_new_tokens,
                           std::vector<std::int32_t> stop_tokens = {}) {
  generation_request r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.max_new_tokens = max_new_tokens;
  r.stop_tokens = std::move(stop_tokens);
  r.rng.seed = 7;
  r.rng.step = 3;
  r.rng.prompt = static_cast<std::uint32_t>(id);
  return r;
}

/// A micro-batch of the given sequences, on-policy under `trainer` (lp_prev = lp_gen = its
/// logprobs), advantage `advantage` everywhere, every token but the first of each sequence masked in.
train_micro_batch_data micro_batch(fake_train_engine& trainer, const std::vector<std::vector<std::int32_t>>& sequences,
                                   float advantage) {
  train_micro_batch_data mb;
  mb.sequences.offsets.push_back(0);
  for (const auto& s : sequences) {
    mb.sequences.tokens.insert(mb.sequences.tokens.end(), s.begin(), s.end());
    mb.sequences.offsets.push_back(static_cast<std::int32_t>(mb.sequences.tokens.size()));
    for (std::size_t t = 0; t < s.size(); ++t) mb.mask.push_back(t == 0 ? 0.0f : 1.0f);
  }
  mb.advantages.assign(mb.sequences.tokens.size(), advantage);
  auto lp = trainer.logprobs(mb.sequences, {});
  BOOST_REQUIRE(lp.has_value());
  mb.lp_prev = *lp;
  mb.lp_gen = *lp;
  return mb;
}

global_counts counts_of(const train_micro_batch_data& mb) {
  global_counts c;
  for (const float m : mb.mask) c.tokens += m != 0 ? 1 : 0;
  c.sequences = static_cast<std::int64_t>(mb.sequences.offsets.size()) - 1;
  return c;
}

/// One optimizer step on `trainer` over a fixed micro-batch.
void train_once(fake_train_engine& trainer, const std::vector<std::vector<std::int32_t>>& sequences = {{1, 2, 3, 4}}) {
  const auto mb = micro_batch(trainer, sequences, 0.5f);
  BOOST_REQUIRE(trainer.train_micro_batch(mb, {}, counts_of(mb), {}).has_value());
  BOOST_REQUIRE(trainer.optimizer_step().has_value());
}

/// Streams every bucket of the generator's plan from the trainer into the generator (the refit).
status refit(const fake_train_engine& trainer, fake_generate_engine& generator, std::uint64_t version,
             bool with_checksums = false) {
  if (auto s = generator.begin_weight_update(version); !s) return s;
  const bucket_plan& plan = generator.plan();
  std::vector<std::byte> bucket;
  for (std::size_t i = 0; i < plan.bucket_count(); ++i) {
    bucket.resize(static_cast<std::size_t>(plan.bucket_size(i)));
    if (auto s = trainer.export_bucket(plan, i, bucket); !s) {
      generator.abort_weight_update();
      return s;
    }
    const status s = with_checksums ? generator.import_bucket(i, bucket, chunked_xxh3(bucket))
                                    : generator.import_bucket(i, bucket);
    if (!s) return s;
  }
  return generator.commit_weight_update();
}

/// Steps until every sequence finished, checking the running limit after each step.
std::vector<finished_sequence> run_to_completion(fake_generate_engine& generator, std::int64_t max_running) {
  std::vector<finished_sequence> out;
  for (int guard = 0; guard < 10000; ++guard) {
    auto left = generator.step();
    BOOST_REQUIRE(left.has_value());
    BOOST_TEST(generator.running_count() <= max_running);
    for (auto& f : generator.collect()) out.push_back(std::move(f));
    if (*left == 0) break;
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(fake_engines_test)

BOOST_AUTO_TEST_CASE(the_weight_hash_is_the_chunked_xxh3_of_the_weight_stream_over_several_chunks_and_tensors) {
  // 3 MiB + 12 bytes in 5 tensors: tensor and chunk boundaries fall apart, so the shared view's
  // per-tensor stream digest must chunk the concatenation exactly as the one-shot hash does.
  fake_model_options o = small_model();
  o.weight_bytes = 3 * static_cast<std::int64_t>(chunked_hash_chunk_bytes) + 12;
  o.tensors = 5;
  const fake_train_engine trainer(o);
  fake_generate_engine generator(generator_options(o, 1 << 20));
  BOOST_TEST(trainer.weight_hash() == chunked_xxh3(trainer.weight_bytes()));
  BOOST_TEST(trainer.shared_weights().digest() == trainer.weight_hash());
  BOOST_TEST(trainer.weights_digest() == trainer.weight_hash());
  BOOST_TEST(generator.weight_hash() == trainer.weight_hash());
  BOOST_REQUIRE(generator.share_weights(trainer.shared_weights()).is_ok());
  BOOST_TEST(generator.weight_hash() == trainer.weight_hash());
}

BOOST_AUTO_TEST_CASE(the_manifest_lists_float32_tensors_whose_sizes_add_up_to_weight_bytes) {
  const fake_train_engine trainer(small_model());
  const auto& m = trainer.manifest();
  BOOST_REQUIRE(m.size() == 3u);
  BOOST_TEST(m[0].name == "model.layers.0.fake.weight");
  BOOST_TEST(m[2].name == "model.layers.2.fake.weight");
  BOOST_TEST(m[0].bytes() == 333 * 4);
  BOOST_TEST(m[2].bytes() == 334 * 4);  // the last takes the remainder
  std::int64_t total = 0;
  for (const auto& e : m) {
    BOOST_TEST((e.type == dtype::float32));
    total += e.bytes();
  }
  BOOST_TEST(total == 4000);
  BOOST_TEST(trainer.weight_bytes().size() == 4000u);
  BOOST_TEST(check_manifest(m, fake_generate_engine(generator_options(small_model())).manifest()).is_ok());
}

BOOST_AUTO_TEST_CASE(weights_and_their_hash_are_a_pure_function_of_the_seed) {
  const fake_train_engine a(small_model(1)), b(small_model(1)), c(small_model(2));
  BOOST_TEST(a.weight_hash() == b.weight_hash());
  BOOST_TEST(a.weight_hash() != c.weight_hash());
  BOOST_TEST(a.weight_hash() == chunked_xxh3(a.weight_bytes()));
  BOOST_TEST(std::equal(a.weight_bytes().begin(), a.weight_bytes().end(), b.weight_bytes().begin()));
  const fake_generate_engine generator(generator_options(small_model(1)));
  BOOST_TEST(generator.weight_hash() == a.weight_hash());  // version 0 of both sides agree
  BOOST_TEST(generator.weight_version() == 0u);
}

BOOST_AUTO_TEST_CASE(invalid_options_are_refused_by_the_check_and_normalized_by_the_engines) {
  fake_model_options o = small_model();
  o.weight_bytes = 6;
  BOOST_TEST(!check_fake_model_options(o).is_ok());
  BOOST_TEST(check_fake_model_options(o).message().find("weight_bytes") != std::string::npos);
  BOOST_TEST(check_fake_model_options(small_model()).is_ok());
  const fake_train_engine trainer(o);  // 6 -> at least one float per tensor
  BOOST_TEST(trainer.options().weight_bytes == 12);
  BOOST_TEST(trainer.weight_bytes().size() == 12u);
}

BOOST_AUTO_TEST_CASE(logprobs_depend_on_weights_token_and_position_and_the_first_token_gets_zero) {
  fake_train_engine trainer(small_model());
  packed_sequences batch{{5, 6, 7, 5, 6, 7}, {0, 3, 6}};
  auto lp = trainer.logprobs(batch, {});
  BOOST_REQUIRE(lp.has_value());
  BOOST_REQUIRE(lp->size() == 6u);
  BOOST_TEST((*lp)[0] == 0.0f);
  BOOST_TEST((*lp)[3] == 0.0f);
  BOOST_TEST((*lp)[1] == (*lp)[4]);  // same token, same position
  BOOST_TEST((*lp)[1] < 0.0f);
  BOOST_TEST((*lp)[1] == fake_token_logprob(trainer.weight_hash(), 6, 1, 50));
  train_once(trainer);
  auto after = trainer.logprobs(batch, {});
  BOOST_REQUIRE(after.has_value());
  BOOST_TEST((*after)[1] != (*lp)[1]);
  BOOST_TEST(!trainer.logprobs({{5, 60}, {0, 2}}, {}).has_value());  // token outside the vocabulary
  BOOST_TEST(!trainer.logprobs({{5, 6}, {0, 3}}, {}).has_value());   // offsets past the tokens
}

BOOST_AUTO_TEST_CASE(a_train_step_changes_the_hash_and_reports_plausible_metrics) {
  fake_train_engine trainer(small_model());
  const std::uint64_t before = trainer.weight_hash();
  const auto mb = micro_batch(trainer, {{1, 2, 3, 4}, {5, 6, 7}}, 1.0f);
  auto metrics = trainer.train_micro_batch(mb, {}, counts_of(mb), {});
  BOOST_REQUIRE(metrics.has_value());
  BOOST_TEST(metrics->token_count == 5);
  BOOST_TEST(metrics->sequence_count == 2);
  BOOST_TEST(metrics->pg_loss == -1.0, boost::test_tools::tolerance(1e-6));  // ratio 1, advantage 1
  BOOST_TEST(trainer.weight_hash() == before);  // gradients accumulate, weights wait for the step
  auto again = trainer.train_micro_batch(mb, {}, counts_of(mb), {});
  BOOST_REQUIRE(again.has_value());
  BOOST_TEST(again->pg_loss == metrics->pg_loss);
  BOOST_TEST(trainer.accumulated_micro_batches() == 2);
  auto step = trainer.optimizer_step();
  BOOST_REQUIRE(step.has_value());
  BOOST_TEST(step->step == 1);
  BOOST_TEST(step->lr == train_engine_options{}.adamw.lr);
  BOOST_TEST(step->grad_norm > 0.0);
  BOOST_TEST(trainer.step_count() == 1);
  BOOST_TEST(trainer.accumulated_micro_batches() == 0);
  BOOST_TEST(trainer.weight_hash() != before);
  BOOST_TEST(trainer.weight_hash() == chunked_xxh3(trainer.weight_bytes()));
}

BOOST_AUTO_TEST_CASE(the_same_training_on_two_engines_gives_the_same_weights) {
  fake_train_engine a(small_model()), b(small_model());
  train_once(a, {{1, 2, 3}});
  train_once(b, {{1, 2, 3}});
  BOOST_TEST(a.weight_hash() == b.weight_hash());
  fake_train_engine c(small_model());
  train_once(c, {{1, 2, 4}});  // another micro-batch, another gradient
  BOOST_TEST(c.weight_hash() != a.weight_hash());
}

BOOST_AUTO_TEST_CASE(a_rank_whose_micro_batch_fails_abandons_the_step_so_its_peer_refuses_it_at_once) {
  auto group = make_local_group(2);
  fake_train_engine r0(small_model(), {}, group[0].get()), r1(small_model(), {}, group[1].get());
  const auto before = r0.weight_hash();
  const auto micro_batch = [](fake_train_engine& e) {
    train_micro_batch_data mb;
    mb.sequences = {{1, 2, 3, 4}, {0, 4}};
    mb.mask = {0, 1, 1, 1};
    mb.advantages.assign(4, 1.0f);
    mb.lp_prev = mb.lp_gen = *e.logprobs(mb.sequences, {});
    return mb;
  };
  const auto mb0 = micro_batch(r0), mb1 = micro_batch(r1);
  r1.fail_next(fake_train_operation::train_micro_batch);
  std::string failed_rank_error;
  std::thread other([&] {
    const auto r = r1.train_step({mb1}, {}, {6, 2}, {});
    failed_rank_error = r ? "" : r.error().message();
  });
  const auto r = r0.train_step({mb0}, {}, {6, 2}, {});
  other.join();
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST(r.error().message().find("the gradient is not finite (after the all-reduce over 2 ranks") != std::string::npos,
             r.error().message());
  BOOST_TEST(failed_rank_error.find("micro-batch 0: ") == 0u, failed_rank_error);
  BOOST_TEST(r0.weight_hash() == before);
  BOOST_TEST(r1.weight_hash() == before);
  std::thread again([&] { BOOST_TEST(r1.train_step({mb1}, {}, {6, 2}, {}).has_value()); });
  BOOST_TEST(r0.train_step({mb0}, {}, {6, 2}, {}).has_value());
  again.join();
  BOOST_TEST(r0.weight_hash() == r1.weight_hash());
}

BOOST_AUTO_TEST_CASE(two_data_parallel_ranks_training_on_different_micro_batches_end_with_identical_weights) {
  auto group = make_local_group(2);
  const std::vector<std::vector<std::vector<std::int32_t>>> batches = {{{1, 2, 3, 4}}, {{9, 8, 7}, {6, 5}}};
  std::vector<std::uint64_t> hashes(2), first_step(2);
  std::vector<std::vector<std::byte>> weights(2);
  std::vector<int> failures(2, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      const auto i = static_cast<std::size_t>(r);
      fake_train_engine trainer(small_model(), {}, group[i].get());
      for (int step = 0; step < 2; ++step) {
        train_micro_batch_data mb;
        mb.sequences.offsets.push_back(0);
        for (const auto& s : batches[i]) {
          mb.sequences.tokens.insert(mb.sequences.tokens.end(), s.begin(), s.end());
          mb.sequences.offsets.push_back(static_cast<std::int32_t>(mb.sequences.tokens.size()));
          for (std::size_t t = 0; t < s.size(); ++t) mb.mask.push_back(t == 0 ? 0.0f : 1.0f);
        }
        mb.advantages.assign(mb.sequences.tokens.size(), r == 0 ? 1.0f : -1.0f);
        auto lp = trainer.logprobs(mb.sequences, {});
        if (!lp) { ++failures[i]; return; }
        mb.lp_prev = mb.lp_gen = *lp;
        const global_counts counts{3 + 3, 3};  // masked tokens and sequences of both ranks
        if (!trainer.train_micro_batch(mb, {}, counts, {})) ++failures[i];
        if (!trainer.optimizer_step()) ++failures[i];
        if (step == 0) first_step[i] = trainer.weight_hash();
      }
      hashes[i] = trainer.weight_hash();
      weights[i].assign(trainer.weight_bytes().begin(), trainer.weight_bytes().end());
    });
  }
  for (auto& t : threads) t.join();
  BOOST_TEST(failures[0] == 0);
  BOOST_TEST(failures[1] == 0);
  BOOST_TEST(first_step[0] == first_step[1]);
  BOOST_TEST(hashes[0] == hashes[1]);
  BOOST_TEST((weights[0] == weights[1]));
  // Proof the gradients were summed: rank 0 alone, on its own micro-batch, ends elsewhere.
  fake_train_engine alone(small_model());
  train_once(alone, batches[0]);
  BOOST_TEST(alone.weight_hash() != first_step[0]);
}

BOOST_AUTO_TEST_CASE(a_refit_through_several_buckets_reproduces_the_trainers_hash_on_the_generator) {
  fake_train_engine trainer(small_model());
  fake_generate_engine generator(generator_options(small_model()));
  BOOST_TEST(generator.plan().bucket_count() == 4u);
  train_once(trainer);
  BOOST_TEST(generator.weight_hash() != trainer.weight_hash());
  BOOST_REQUIRE(refit(trainer, generator, 1).is_ok());
  BOOST_TEST(generator.weight_version() == 1u);
  BOOST_TEST(generator.weight_hash() == trainer.weight_hash());
  // A second refit reuses the staging copy and still lands exactly.
  train_once(trainer);
  BOOST_REQUIRE(refit(trainer, generator, 2).is_ok());
  BOOST_TEST(generator.weight_hash() == trainer.weight_hash());
  BOOST_TEST(!generator.pending_version().has_value());
}

BOOST_AUTO_TEST_CASE(an_update_missing_a_bucket_cannot_commit_and_the_old_version_stays_live) {
  fake_train_engine trainer(small_model());
  fake_generate_engine generator(generator_options(small_model()));
  const std::uint64_t old_hash = generator.weight_hash();
  train_once(trainer);
  BOOST_REQUIRE(generator.begin_weight_update(1).is_ok());
  const bucket_plan& plan = generator.plan();
  std::vector<std::byte> bucket;
  for (std::size_t i = 0; i < plan.bucket_count(); ++i) {
    if (i == 2) continue;  // lost
    bucket.resize(static_cast<std::size_t>(plan.bucket_size(i)));
    BOOST_REQUIRE(trainer.export_bucket(plan, i, bucket).is_ok());
    BOOST_REQUIRE(generator.import_bucket(i, bucket).is_ok());
  }
  const status s = generator.commit_weight_update();
  BOOST_TEST(!s.is_ok());
  BOOST_TEST(s.message().find("bucket 2") != std::string::npos);
  BOOST_TEST(generator.weight_version() == 0u);
  BOOST_TEST(generator.weight_hash() == old_hash);
  BOOST_TEST(!generator.pending_version().has_value());  // the failed commit aborted the update
  // The live weights still generate: tokens are those of the old hash.
  const auto r = request(1, {3, 4}, 5);
  BOOST_REQUIRE(generator.submit(std::span(&r, 1)).is_ok());
  const auto done = run_to_completion(generator, 8);
  BOOST_REQUIRE(done.size() == 1u);
  BOOST_TEST(done[0].weight_version == 0u);
  BOOST_TEST((done[0].tokens == fake_generate_engine::expected_tokens(old_hash, r, 50)));
}

BOOST_AUTO_TEST_CASE(a_corrupted_bucket_with_checksums_on_is_refused_and_the_old_version_stays_live) {
  fake_train_engine trainer(small_model());
  auto options = generator_options(small_model());
  options.verify_checksums = true;
  fake_generate_engine generator(options);
  const std::uint64_t old_hash = generator.weight_hash();
  train_once(trainer);
  const bucket_plan& plan = generator.plan();
  std::vector<std::byte> bucket(static_cast<std::size_t>(plan.bucket_size(1)));

  BOOST_REQUIRE(generator.begin_weight_update(1).is_ok());
  BOOST_REQUIRE(trainer.export_bucket(plan, 1, bucket).is_ok());
  BOOST_TEST(!generator.import_bucket(1, bucket).is_ok());  // checksums on: one must come along
  BOOST_TEST(!generator.pending_version().has_value());

  BOOST_REQUIRE(generator.begin_weight_update(1).is_ok());
  const std::uint64_t checksum = chunked_xxh3(bucket);
  bucket[17] ^= std::byte{0x40};  // corrupted in transit
  const status s = generator.import_bucket(1, bucket, checksum);
  BOOST_TEST(!s.is_ok());
  BOOST_TEST(s.message().find("corrupted") != std::string::npos);
  BOOST_TEST(!generator.pending_version().has_value());
  BOOST_TEST(!generator.commit_weight_update().is_ok());
  BOOST_TEST(generator.weight_version() == 0u);
  BOOST_TEST(generator.weight_hash() == old_hash);
  // Intact buckets with their checksums go through.
  BOOST_REQUIRE(refit(trainer, generator, 1, true).is_ok());
  BOOST_TEST(generator.weight_hash() == trainer.weight_hash());
}

BOOST_AUTO_TEST_CASE(a_refit_that_fails_midway_leaves_the_previous_version_live) {
  fake_train_engine trainer(small_model());
  fake_generate_engine generator(generator_options(small_model()));
  train_once(trainer);
  BOOST_REQUIRE(refit(trainer, generator, 1).is_ok());
  const std::uint64_t v1 = generator.weight_hash();
  train_once(trainer);
  trainer.fail_next(fake_train_operation::export_bucket);
  BOOST_TEST(!refit(trainer, generator, 2).is_ok());
  BOOST_TEST(generator.weight_version() == 1u);
  BOOST_TEST(generator.weight_hash() == v1);
  generator.fail_next(fake_generate_operation::import_bucket);
  const status s = refit(trainer, generator, 2);
  BOOST_TEST(!s.is_ok());
  BOOST_TEST(s.message().find("injected") != std::string::npos);
  BOOST_TEST(generator.weight_hash() == v1);
  generator.fail_next(fake_generate_operation::commit_weight_update);
  BOOST_TEST(!refit(trainer, generator, 2).is_ok());
  BOOST_TEST(generator.weight_version() == 1u);
  BOOST_TEST(generator.weight_hash() == v1);
  BOOST_REQUIRE(refit(trainer, generator, 2).is_ok());  // the retry lands
  BOOST_TEST(generator.weight_hash() == trainer.weight_hash());
}

BOOST_AUTO_TEST_CASE(begin_weight_update_is_refused_while_sequences_wait_or_run_and_for_versions_not_newer) {
  fake_generate_engine generator(generator_options(small_model()));
  const auto r = request(1, {1, 2}, 4);
  BOOST_REQUIRE(generator.submit(std::span(&r, 1)).is_ok());
  BOOST_TEST(!generator.begin_weight_update(1).is_ok());  // waiting
  BOOST_REQUIRE(generator.step().has_value());
  BOOST_TEST(generator.running_count() == 1);
  BOOST_TEST(!generator.begin_weight_update(1).is_ok());  // running
  run_to_completion(generator, 8);
  BOOST_TEST(!generator.begin_weight_update(0).is_ok());  // not newer than 0
  BOOST_REQUIRE(generator.begin_weight_update(3).is_ok());
  BOOST_TEST(!generator.begin_weight_update(4).is_ok());  // one update at a time
  BOOST_TEST(!generator.submit(std::span(&r, 1)).is_ok());  // no sequence may start mid-update
  generator.abort_weight_update();
  BOOST_TEST(generator.weight_version() == 0u);
  BOOST_TEST(generator.submit(std::span(&r, 1)).is_ok());
}

BOOST_AUTO_TEST_CASE(generation_respects_max_num_sequences_and_every_token_comes_from_the_reported_version) {
  fake_train_engine trainer(small_model());
  auto options = generator_options(small_model());
  options.max_num_sequences = 3;
  fake_generate_engine generator(options);
  std::vector<generation_request> requests;
  for (std::uint64_t id = 0; id < 10; ++id)
    requests.push_back(request(id, {static_cast<std::int32_t>(id), 2, 3}, 3 + static_cast<std::int32_t>(id % 4) * 4,
                               {0, 1, 2, 3, 4}));
  BOOST_REQUIRE(generator.submit(requests).is_ok());
  BOOST_TEST(generator.waiting_count() == 10);
  auto done = run_to_completion(generator, 3);
  BOOST_TEST(generator.peak_running() == 3);
  BOOST_REQUIRE(done.size() == 10u);
  const std::uint64_t hash0 = generator.weight_hash();
  int stopped = 0;
  for (const auto& f : done) {
    const auto& r = requests[f.id];
    BOOST_TEST(f.weight_version == 0u);
    BOOST_TEST((f.tokens == fake_generate_engine::expected_tokens(hash0, r, 50)));
    BOOST_REQUIRE(f.logprobs.size() == f.tokens.size());
    if (f.reason == finish_reason::stop_token) {
      ++stopped;
      BOOST_TEST((std::find(r.stop_tokens.begin(), r.stop_tokens.end(), f.tokens.back()) != r.stop_tokens.end()));
    } else {
      BOOST_TEST(static_cast<std::int32_t>(f.tokens.size()) == r.max_new_tokens);
    }
    // The trainer scores the generated tokens exactly as the generator did (on-policy).
    packed_sequences seq;
    seq.tokens = r.prompt;
    seq.tokens.insert(seq.tokens.end(), f.tokens.begin(), f.tokens.end());
    seq.offsets = {0, static_cast<std::int32_t>(seq.tokens.size())};
    auto lp = trainer.logprobs(seq, {});
    BOOST_REQUIRE(lp.has_value());
    BOOST_TEST((std::vector<float>(lp->begin() + static_cast<std::ptrdiff_t>(r.prompt.size()), lp->end()) == f.logprobs));
  }
  BOOST_TEST(stopped > 0);  // some met a stop token, so lengths vary and slots free up mid-batch
  BOOST_TEST(stopped < 10);

  // After a refit, the same requests give the new version's tokens.
  train_once(trainer);
  BOOST_REQUIRE(refit(trainer, generator, 1).is_ok());
  BOOST_REQUIRE(generator.submit(requests).is_ok());
  done = run_to_completion(generator, 3);
  BOOST_REQUIRE(done.size() == 10u);
  int differ = 0;
  for (const auto& f : done) {
    BOOST_TEST(f.weight_version == 1u);
    BOOST_TEST((f.tokens == fake_generate_engine::expected_tokens(trainer.weight_hash(), requests[f.id], 50)));
    differ += f.tokens != fake_generate_engine::expected_tokens(hash0, requests[f.id], 50) ? 1 : 0;
  }
  BOOST_TEST(differ > 0);
}

BOOST_AUTO_TEST_CASE(submit_refuses_malformed_requests_and_queues_none_of_the_batch) {
  fake_generate_engine generator(generator_options(small_model()));
  const std::vector<generation_request> bad_batches[] = {
      {request(1, {1}, 2), request(2, {}, 2)},           // empty prompt
      {request(1, {1}, 2), request(2, {1}, 64)},         // longer than max_sequence_length
      {request(1, {1}, 2), request(1, {2}, 2)},          // duplicate id
      {request(1, {1}, 2), request(2, {99}, 2)},         // token outside the vocabulary
      {request(1, {1}, 0)},                              // nothing to generate
  };
  for (const auto& batch : bad_batches) {
    BOOST_TEST(!generator.submit(batch).is_ok());
    BOOST_TEST(generator.waiting_count() == 0);
  }
  const auto r = request(1, {1}, 2);
  BOOST_REQUIRE(generator.submit(std::span(&r, 1)).is_ok());
  BOOST_TEST(!generator.submit(std::span(&r, 1)).is_ok());  // id 1 is in flight
}

BOOST_AUTO_TEST_CASE(a_failed_step_drops_running_sequences_and_keeps_waiting_ones) {
  auto options = generator_options(small_model());
  options.max_num_sequences = 1;
  fake_generate_engine generator(options);
  const std::vector<generation_request> requests = {request(1, {1}, 5), request(2, {2}, 5)};
  BOOST_REQUIRE(generator.submit(requests).is_ok());
  BOOST_REQUIRE(generator.step().has_value());
  generator.fail_next(fake_generate_operation::step);
  BOOST_TEST(!generator.step().has_value());
  BOOST_TEST(generator.running_count() == 0);
  BOOST_TEST(generator.waiting_count() == 1);
  const auto done = run_to_completion(generator, 1);
  BOOST_REQUIRE(done.size() == 1u);
  BOOST_TEST(done[0].id == 2u);
}

BOOST_AUTO_TEST_CASE(shared_weights_follow_the_trainer_without_copying_and_a_refit_is_a_version_bump) {
  fake_train_engine trainer(small_model());
  fake_generate_engine generator(generator_options(small_model(9)));  // other initial weights
  BOOST_TEST(generator.weight_hash() != trainer.weight_hash());
  BOOST_REQUIRE(generator.share_weights(trainer.shared_weights()).is_ok());
  BOOST_TEST(generator.shares_weights());
  BOOST_TEST(generator.weight_hash() == trainer.weight_hash());
  train_once(trainer);
  BOOST_TEST(generator.weight_hash() == trainer.weight_hash());  // read in place, nothing copied
  BOOST_TEST(!generator.begin_weight_update(1).is_ok());  // no buckets over shared weights
  BOOST_REQUIRE(generator.bump_weight_version(1).is_ok());
  BOOST_TEST(generator.weight_version() == 1u);
  BOOST_TEST(!generator.bump_weight_version(1).is_ok());  // not newer
  const auto r = request(4, {7, 8, 9}, 6);
  BOOST_REQUIRE(generator.submit(std::span(&r, 1)).is_ok());
  const auto done = run_to_completion(generator, 8);
  BOOST_REQUIRE(done.size() == 1u);
  BOOST_TEST(done[0].weight_version == 1u);
  BOOST_TEST((done[0].tokens == fake_generate_engine::expected_tokens(trainer.weight_hash(), r, 50)));
  weight_source other = trainer.shared_weights();
  other.manifest[0].shape = {2};  // another model
  BOOST_TEST(!generator.share_weights(other).is_ok());
}

BOOST_AUTO_TEST_CASE(a_generator_with_its_own_weights_refuses_a_version_bump) {
  fake_generate_engine generator(generator_options(small_model()));
  const status s = generator.bump_weight_version(1);
  BOOST_TEST((s.code() == status_code::invalid_argument));
  BOOST_TEST(s.message().find("own copy") != std::string::npos);
  BOOST_TEST(generator.weight_version() == 0u);
}

BOOST_AUTO_TEST_CASE(a_released_cache_keeps_requests_queued_until_it_is_restored) {
  fake_generate_engine generator(generator_options(small_model()));
  BOOST_REQUIRE(generator.release_cache().is_ok());
  BOOST_TEST(!generator.cache_resident());
  const auto r = request(1, {3, 4}, 2);
  BOOST_REQUIRE(generator.submit(std::span(&r, 1)).is_ok());
  BOOST_TEST(!generator.step().has_value());
  BOOST_TEST(generator.waiting_count() == 1);
  BOOST_REQUIRE(generator.restore_cache().is_ok());
  BOOST_TEST(run_to_completion(generator, 4).size() == 1u);
  BOOST_REQUIRE(generator.submit(std::span(&r, 1)).is_ok());  // the id is free again
  BOOST_TEST(!generator.release_cache().is_ok());              // work waits
}

BOOST_AUTO_TEST_CASE(save_and_load_round_trip_and_a_folder_whose_hash_does_not_match_is_refused) {
  tandem::test::temp_dir dir;
  fake_train_engine trainer(small_model());
  train_once(trainer);
  const std::uint64_t saved = trainer.weight_hash();
  const auto path = dir.path() / "ckpt";
  BOOST_REQUIRE(trainer.save(path).is_ok());
  BOOST_TEST(std::filesystem::exists(path / "weights.bin"));
  BOOST_REQUIRE(trainer.save(path).is_ok());  // replaces the older save
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
  BOOST_TEST(entries == 1u);  // no temporary or older folder left behind

  train_once(trainer);
  BOOST_REQUIRE(trainer.load(path).is_ok());
  BOOST_TEST(trainer.weight_hash() == saved);
  BOOST_TEST(trainer.step_count() == 1);

  train_once(trainer);
  const std::uint64_t live = trainer.weight_hash();
  {
    std::fstream f(path / "weights.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
  }
  const status s = trainer.load(path);
  BOOST_TEST(!s.is_ok());
  BOOST_TEST(s.message().find("hashes to") != std::string::npos);
  BOOST_TEST(trainer.weight_hash() == live);  // nothing changed
  BOOST_TEST(trainer.step_count() == 2);

  trainer.fail_next(fake_train_operation::save);
  BOOST_TEST(!trainer.save(dir.path() / "other").is_ok());
  BOOST_TEST(!std::filesystem::exists(dir.path() / "other"));
  BOOST_TEST(!trainer.load(dir.path() / "missing").is_ok());
  fake_train_engine bigger([] { auto o = small_model(); o.weight_bytes = 8000; return o; }());
  BOOST_TEST(!bigger.load(path).is_ok());  // another model's size
}

BOOST_AUTO_TEST_CASE(a_failed_optimizer_step_keeps_the_weights_and_drops_the_gradients) {
  fake_train_engine trainer(small_model());
  const std::uint64_t before = trainer.weight_hash();
  const auto mb = micro_batch(trainer, {{1, 2, 3}}, 1.0f);
  BOOST_REQUIRE(trainer.train_micro_batch(mb, {}, counts_of(mb), {}).has_value());
  trainer.fail_next(fake_train_operation::optimizer_step);
  BOOST_TEST(!trainer.optimizer_step().has_value());
  BOOST_TEST(trainer.weight_hash() == before);
  BOOST_TEST(trainer.step_count() == 0);
  BOOST_TEST(trainer.accumulated_micro_batches() == 0);
  trainer.fail_next(fake_train_operation::train_micro_batch);
  BOOST_TEST(!trainer.train_micro_batch(mb, {}, counts_of(mb), {}).has_value());
  trainer.fail_next(fake_train_operation::logprobs);
  BOOST_TEST(!trainer.logprobs(mb.sequences, {}).has_value());
  BOOST_TEST(trainer.logprobs(mb.sequences, {}).has_value());  // armed once only
}

BOOST_AUTO_TEST_CASE(moving_256_mib_of_weights_through_64_mib_buckets_works) {
  fake_model_options big;
  big.weight_bytes = std::int64_t{256} << 20;
  big.tensors = 3;  // tensors and buckets cut at different places
  fake_train_engine trainer(big);
  big.seed = 2;
  fake_generate_engine generator(generator_options(big, std::int64_t{64} << 20));
  BOOST_TEST(generator.plan().bucket_count() == 4u);
  const std::uint64_t old_hash = generator.weight_hash();
  BOOST_REQUIRE(refit(trainer, generator, 1).is_ok());
  const std::uint64_t moved = generator.weight_hash();
  BOOST_TEST(moved != old_hash);
  BOOST_TEST(moved == trainer.weight_hash());
}

BOOST_AUTO_TEST_SUITE_END()
